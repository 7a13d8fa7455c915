// The tensor-parallel sharding search.
//
// Algorithm:
//  1. The data-parallel layouts come first (partitioner.cpp propagates the
//     batch split); the tp axis is then chosen per node. A node may replicate
//     its op over the tp ranks, split one output dimension (every input
//     dimension its dim map links to it is split too; weights are sliced
//     offline), or split one contraction (its output becomes a partial sum).
//     Each choice fixes the layout of the node's outputs and the layout it
//     needs of each input.
//  2. The cost of an assignment is what the rank-0 program of the lowered plan
//     costs: every node at its local shapes (CostModel::opTime), plus every
//     resharding step lowering emits (reshard.h: all-reduce, reduce-scatter,
//     all-gather, all-to-all, local slice), each paid once per value and
//     layout since lowering caches them (a layout reached already that
//     slices to the target is sliced from, as lowering does), plus the
//     steps that make the graph outputs whole. Weight bytes count each
//     distinct slice of a weight once.
//  3. Dynamic programming over the topological order. A state is the layout
//     of every live value (produced, and still to be read) with the set of
//     layouts already materialized for it; the cost of a state is the least
//     cost of the nodes so far that reaches it. Each node extends each state
//     by each of its choices; states that agree are merged, keeping the
//     cheaper, and a state is dropped where another with the same layouts,
//     at least its materialized ones and no more cost dominates it (a value
//     every layer reads, such as a rotary table, would otherwise multiply
//     the frontier by the sets of layouts made of it). The live values are
//     the same for every state of a step, so the frontier stays small on the
//     graphs models make (the residual stream and the branch being computed).
//  4. A pass capped at 64 states first gives the cost of one assignment; the
//     exact pass then drops every state that cannot beat it: more weight
//     bytes already (when they count first), or time so far plus the least
//     time of the nodes left above it (a lower bound, so the optimum is never
//     dropped). The frontier is capped at
//     `beam` states, the cheapest kept; the result is exact when no step was
//     capped (TpSearchResult::exact).
//  5. Back-pointers give each node its choice.
//  6. Repeated blocks (a model's layers) are searched once they reach a
//     steady state, not again. Every step gets a signature of everything
//     its transition depends on (its choices, their times, the layouts and
//     kinds of the values they read and write, which live values survive it);
//     a run of steps whose signatures repeat with period P is a run of
//     blocks of P nodes (the most frequent distances between equal
//     signatures are tried as P). At each block boundary of a run the
//     frontier is compared with the frontier a block earlier: when both hold
//     the same states in the same order with the same layouts, and every
//     state's cost grew by the same amount, each later block of the run maps
//     the frontier the same way (the same transition on the same states,
//     shifted), so the search skips to the run's last whole block: each
//     skipped node takes the back-pointers of the node a period before, every
//     state's cost grows by the skipped blocks' increment, and the entries
//     are moved to the corresponding values (the outputs of the nodes
//     R · P later; shared values, such as a rotary table, stay themselves).
//     The result is the one the full search finds (up to the rounding of
//     summed times); a frontier that never repeats (the exact pass's bound
//     keeps dropping states) is searched whole. The search time then grows
//     with the distinct blocks, not with the depth.
// The objective is time, or, when asked to save memory (a forced tp, or a
// model that does not fit otherwise), the bytes of the weight matrices (the
// constants a contraction reads, and embedding tables) first and then time;
// biases and norm scales are left to time, so that a few bytes saved never
// buy a collective.
#include "passes/partition/tp_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "compiler/ir/regions.h"
#include "passes/partition/dim_map.h"
#include "passes/partition/reshard.h"

namespace pcc {

namespace {

// Layout ids at or above this are never counted as materialized (the
// cost then counts their conversion again: an overestimate, never a miss).
constexpr int kMaxCached = 56;

// States with the same layouts compared pair by pair for dominance at most
// (dropDominated).
constexpr size_t kMaxDominanceGroup = 512;

struct Layouts {
  std::vector<std::optional<Sharding>> req;  // per input; nullopt: absent
  std::vector<Sharding> out;
};

// The layouts choice `c` gives node `n`; false when `c` is not valid for it.
bool layoutsFor(const Node& n, const Partition& dp, const OpDimMap& map, const TpChoice& c, Layouts& l) {
  const int tp = dp.mesh.tp;
  l.req.assign(n.inputs().size(), std::nullopt);
  l.out.clear();
  for (size_t i = 0; i < n.inputs().size(); ++i)
    if (n.input(i)) l.req[i] = dp.inputSharding.at({&n, i});
  for (const Value* o : n.outputs()) l.out.push_back(*o->sharding());
  if (c.kind == TpChoice::kReplicate) return true;
  if (tp <= 1 || isRegionOp(n.op()) || n.outputs().empty()) return false;
  if (c.kind == TpChoice::kSplitOutput) {
    const int k = c.index;
    // Every output splits the same dimension: they must agree on what it is
    // (Split's pieces do; Attention's Y and present key/value do not).
    for (size_t o = 1; o < n.outputs().size(); ++o)
      if (n.output(o)->type().rank() != n.output(0)->type().rank()) return false;
    for (size_t o = 0; o < n.outputs().size(); ++o) {
      const Dims& shape = n.output(o)->type().shape;
      if (k < 0 || static_cast<size_t>(k) >= shape.size() || l.out[o].dims[k] != MeshAxis::kNone ||
          shape[k] < tp || shape[k] % tp != 0)
        return false;
    }
    bool linked = false;
    for (size_t i = 0; i < n.inputs().size() && i < map.links.size(); ++i) {
      if (!n.input(i)) continue;
      const Dims& in = n.input(i)->type().shape;
      for (size_t d = 0; d < map.links[i].size() && d < in.size(); ++d) {
        const DimLink& link = map.links[i][d];
        if (link.outDim != k) continue;
        if ((in[d] / link.granule) % tp != 0 || l.req[i]->dims[d] != MeshAxis::kNone) return false;
        l.req[i]->dims[d] = MeshAxis::kTP;
        linked = true;
      }
    }
    if (!linked) return false;
    for (Sharding& s : l.out) s.dims[k] = MeshAxis::kTP;
    return true;
  }
  // kContract
  if (c.index < 0 || static_cast<size_t>(c.index) >= map.contractions.size() || n.outputs().size() != 1) return false;
  const OpDimMap::Contraction& con = map.contractions[c.index];
  const Value* a = n.input(con.inA);
  const Value* b = n.input(con.inB);
  if (!a || !b || l.out[0].partial != MeshAxis::kNone) return false;
  int64_t extent = a->type().shape[con.dimA];
  if (extent < tp || extent % tp != 0 || b->type().shape[con.dimB] != extent) return false;
  if (l.req[con.inA]->dims[con.dimA] != MeshAxis::kNone || l.req[con.inB]->dims[con.dimB] != MeshAxis::kNone)
    return false;
  l.req[con.inA]->dims[con.dimA] = MeshAxis::kTP;
  l.req[con.inB]->dims[con.dimB] = MeshAxis::kTP;
  l.out[0].partial = MeshAxis::kTP;
  return true;
}

std::vector<TpChoice> candidates(const Node& n, const OpDimMap& map) {
  std::vector<TpChoice> c = {TpChoice{}};
  if (n.outputs().empty()) return c;
  for (size_t k = 0; k < n.output()->type().shape.size(); ++k)
    c.push_back({TpChoice::kSplitOutput, static_cast<int>(k)});
  for (size_t j = 0; j < map.contractions.size(); ++j) c.push_back({TpChoice::kContract, static_cast<int>(j)});
  return c;
}

// What a graph output is made into before it is written (lower.cpp, bindOutputs).
Sharding outputLayout(Sharding s) {
  s.partial = MeshAxis::kNone;
  bool kept = false;
  for (MeshAxis& a : s.dims) {
    if (a == MeshAxis::kNone) continue;
    if (kept) a = MeshAxis::kNone;
    kept = true;
  }
  return s;
}

class Search {
 public:
  Search(const Graph& g, const Partition& dp, const CostModel& cm,
         const std::vector<std::pair<std::string, std::string>>& states = {})
      : g_(g), dp_(dp), cm_(cm) {
    for (const auto& [in, out] : states) {
      if (const Value* v = g.findValue(in)) persistent_.insert(v);
      if (const Value* v = g.findValue(out)) stateOutputs_.insert(v);
    }
  }

  // Step 1 for every node, and liveness. `forced`: one choice per node;
  // `pinned`: the choice of the nodes it names.
  Status prepare(const std::vector<TpChoice>* forced, const std::map<std::string, TpChoice>* pinned = nullptr) {
    nodes_ = g_.nodes();
    if (forced && forced->size() != nodes_.size())
      return internalError("tp choices: ", forced->size(), " for ", nodes_.size(), " nodes");
    steps_.resize(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const Node& n = *nodes_[i];
      OpDimMap map = dimMapFor(n);
      // Weight matrices: constants a contraction reads, and embedding tables.
      for (const OpDimMap::Contraction& c : map.contractions)
        for (int in : {c.inA, c.inB})
          if (n.input(in) && n.input(in)->isConstant()) matrices_.insert(n.input(in));
      if (n.op() == OpKind::Gather && n.input(0) && n.input(0)->isConstant()) matrices_.insert(n.input(0));
      std::vector<TpChoice> cands = forced ? std::vector<TpChoice>{(*forced)[i]} : candidates(n, map);
      const bool pin = !forced && pinned && pinned->count(partitionKey(n));
      if (pin) cands = {pinned->at(partitionKey(n))};
      for (const TpChoice& c : cands) {
        Layouts l;
        if (!layoutsFor(n, dp_, map, c, l)) {
          if (forced || pin)
            return invalidInput(n.describe(), ": tp choice '", tpChoiceName(c), "' is not valid for it",
                                pin ? strCat(" at ", n.output()->type().str(),
                                             " (the choice it has in the plan it follows)")
                                    : "");
          continue;
        }
        Option opt;
        opt.choice = c;
        std::vector<TensorType> ins, outs;
        for (size_t j = 0; j < n.inputs().size(); ++j) {
          const Value* v = n.input(j);
          if (!v) {
            ins.push_back(TensorType{});
            continue;
          }
          ins.push_back({v->type().dtype, localShape(v->type().shape, *l.req[j], dp_.shapeMesh(), 0)});
          opt.reqs.push_back({valueIndex(v), layoutId(valueIndex(v), *l.req[j])});
        }
        for (size_t k = 0; k < n.outputs().size(); ++k) {
          const Value* o = n.output(k);
          outs.push_back({o->type().dtype, localShape(o->type().shape, l.out[k], dp_.shapeMesh(), 0)});
          opt.outs.push_back({valueIndex(o), layoutId(valueIndex(o), l.out[k])});
        }
        opt.seconds = n.numBodies() > 0 ? cm_.nodeTime(n) : cm_.opTime(n, ins, outs);
        steps_[i].options.push_back(std::move(opt));
      }
    }
    // Liveness: last reader of each value; graph outputs live to the end.
    last_.assign(values_.size(), -1);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (const Value* v : nodes_[i]->inputs())
        if (v) last_[valueIndex(v)] = static_cast<int>(i);
      for (const Value* o : nodes_[i]->outputs()) {
        int vi = valueIndex(o);
        last_[vi] = std::max(last_[vi], static_cast<int>(i));
      }
    }
    const int end = static_cast<int>(nodes_.size());
    for (const Value* o : g_.outputs()) {
      // A written state stays where its writer put it: nothing converts it
      // at the end, so it is live only until its last reader (kept live to
      // the end, each layer's cache would multiply the states).
      if (stateOutputs_.count(o)) continue;
      last_[valueIndex(o)] = end;
      outputs_.push_back(valueIndex(o));
    }
    // The frontier of each step.
    std::vector<int> live;
    std::vector<bool> seen(values_.size(), false);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      Step& st = steps_[i];
      st.liveBefore = live;
      std::map<int, int> pos;  // value -> index into the working entries
      for (size_t k = 0; k < live.size(); ++k) pos[live[k]] = static_cast<int>(k);
      int extra = 0;
      for (const Value* v : nodes_[i]->inputs()) {
        if (!v) continue;
        int vi = valueIndex(v);
        if (pos.count(vi)) continue;
        if (seen[vi]) return internalError("tp search: value '", v->name(), "' read after its last use");
        pos[vi] = static_cast<int>(live.size()) + extra++;
        st.fresh.push_back(vi);
        seen[vi] = true;
      }
      for (const Value* o : nodes_[i]->outputs()) seen[valueIndex(o)] = true;
      for (Option& opt : st.options)
        for (Req& r : opt.reqs) r.slot = pos.at(r.value);
      std::vector<int> next;
      for (int vi : live)
        if (last_[vi] > static_cast<int>(i)) next.push_back(vi), st.from.push_back(pos.at(vi));
      for (int vi : st.fresh)
        if (last_[vi] > static_cast<int>(i)) next.push_back(vi), st.from.push_back(pos.at(vi));
      for (size_t k = 0; k < nodes_[i]->outputs().size(); ++k) {
        int vi = valueIndex(nodes_[i]->output(k));
        if (last_[vi] > static_cast<int>(i)) next.push_back(vi), st.from.push_back(-1 - static_cast<int>(k));
      }
      live = std::move(next);
    }
    finalLive_ = live;
    for (size_t i = 0; i < nodes_.size(); ++i) position_[nodes_[i]] = static_cast<int>(i);
    if (!forced) findRuns();
    return Status::OK();
  }

  void setFold(bool fold) { fold_ = fold; }

  /// `bound`: the cost of a known assignment; states that cannot finish
  /// better are dropped (admissible: the rest of the graph costs at least
  /// each remaining node's cheapest choice, and weight bytes only grow).
  StatusOr<TpSearchResult> run(size_t beam, bool minimizeWeights, const TpCost* bound = nullptr) {
    minimizeWeights_ = minimizeWeights;
    TpSearchResult result;
    std::vector<double> rest(nodes_.size() + 1, 0);  // least seconds of nodes i.. (no resharding)
    for (size_t i = nodes_.size(); i-- > 0;) {
      double least = -1;
      for (const Option& o : steps_[i].options) least = least < 0 ? o.seconds : std::min(least, o.seconds);
      rest[i] = rest[i + 1] + std::max(0.0, least);
    }
    auto hopeless = [&](const State& n, size_t i) {
      if (!bound) return false;
      // Moving a state only ever gets added: such a state never beats a bound
      // that moves none, and every state that moves none beats one that does.
      if (n.movesState != bound->movesState) return n.movesState;
      const bool late = n.seconds + rest[i + 1] > bound->seconds * (1 + 1e-9);
      if (!minimizeWeights) return late;
      return n.matrixBytes > bound->matrixBytes || (n.matrixBytes == bound->matrixBytes && late);
    };
    std::vector<State> states = {State{}};
    std::vector<std::vector<std::pair<int, int>>> back(nodes_.size());  // (parent, option) per kept state
    // Step 6: the frontier at the last block boundary of a run.
    std::vector<State> snapshot;
    size_t snapshotAt = SIZE_MAX;
    for (const Run& r : runs_) result.repeats = std::max(result.repeats, (r.end - r.start) / r.period);
    if (!runs_.empty()) result.blockNodes = runs_.front().period;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (fold_) {
        if (const Run* r = boundaryOf(i)) {
          const size_t period = static_cast<size_t>(r->period);
          if (snapshotAt + period == i && steady(snapshot, states)) {
            const size_t blocks = (static_cast<size_t>(r->end) - i) / period;
            const size_t to = i + blocks * period;
            if (blocks > 0 && skip(states, snapshot, back, i, to, period)) {
              result.foldedBlocks += static_cast<int>(blocks);
              snapshotAt = SIZE_MAX;
              i = to - 1;  // the loop's ++i: node `to` is searched next
              continue;
            }
          }
          snapshot = states;
          snapshotAt = i;
        }
      }
      const Step& st = steps_[i];
      if (st.options.empty()) return internalError("tp search: ", nodes_[i]->describe(), " has no valid choice");
      std::vector<State> next;
      std::vector<std::pair<int, int>> origin;
      std::unordered_map<std::string, int> index;
      for (size_t s = 0; s < states.size(); ++s) {
        for (size_t o = 0; o < st.options.size(); ++o) {
          State n = extend(states[s], st, st.options[o]);
          if (hopeless(n, i)) continue;
          std::string key(reinterpret_cast<const char*>(n.entries.data()), n.entries.size() * sizeof(uint64_t));
          auto it = index.find(key);
          if (it == index.end()) {
            index.emplace(std::move(key), static_cast<int>(next.size()));
            next.push_back(std::move(n));
            origin.push_back({static_cast<int>(s), static_cast<int>(o)});
          } else if (better(n, next[it->second])) {
            next[it->second] = std::move(n);
            origin[it->second] = {static_cast<int>(s), static_cast<int>(o)};
          }
        }
      }
      if (next.empty()) return internalError("tp search: every state was dropped at ", nodes_[i]->describe());
      dropDominated(next, origin);
      result.maxStates = std::max(result.maxStates, next.size());
      if (next.size() > beam) {
        result.exact = false;
        std::vector<int> order(next.size());
        for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
        std::nth_element(order.begin(), order.begin() + static_cast<long>(beam), order.end(),
                         [&](int a, int b) { return better(next[a], next[b]); });
        order.resize(beam);
        std::sort(order.begin(), order.end());
        std::vector<State> kept;
        std::vector<std::pair<int, int>> keptOrigin;
        for (int k : order) {
          kept.push_back(std::move(next[k]));
          keptOrigin.push_back(origin[k]);
        }
        next = std::move(kept);
        origin = std::move(keptOrigin);
      }
      back[i] = std::move(origin);
      states = std::move(next);
    }
    // The graph outputs are made whole (but for one split dimension).
    int best = -1;
    for (size_t s = 0; s < states.size(); ++s) {
      State& st = states[s];
      for (int vi : outputs_) {
        if (stateOutputs_.count(values_[vi])) continue;  // kept where it is written
        auto at = std::find(finalLive_.begin(), finalLive_.end(), vi);
        if (at == finalLive_.end()) continue;  // a graph input or constant returned as is
        uint64_t& e = st.entries[at - finalLive_.begin()];
        Req want{vi, layoutId(vi, outputLayout(layouts_[vi][layoutOf(e)])), 0};
        convert(st, e, want);
      }
      if (best < 0 || better(st, states[best])) best = static_cast<int>(s);
    }
    result.cost = {states[best].seconds, states[best].bytes, states[best].matrixBytes, states[best].movesState};
    result.choices.resize(nodes_.size());
    for (size_t i = nodes_.size(); i-- > 0;) {
      const auto& [parent, option] = back[i][best];
      result.choices[i] = steps_[i].options[option].choice;
      best = parent;
    }
    return result;
  }

 private:
  struct Req {
    int value = 0, layout = 0;
    int slot = 0;  // index into the working entries of the step
  };
  struct Option {
    TpChoice choice;
    std::vector<Req> reqs;   // present inputs, in order
    std::vector<Req> outs;   // outputs, in order (slot unused)
    double seconds = 0;
  };
  struct Step {
    std::vector<Option> options;
    std::vector<int> liveBefore;
    std::vector<int> fresh;  // values first read here (graph inputs, constants)
    // For each value live after the step: its working-entry index, or -1-k for output k.
    std::vector<int> from;
  };
  // Entry per live value: the layout id it has (low 8 bits) and the mask of
  // layouts materialized for it (the rest).
  struct State {
    std::vector<uint64_t> entries;
    double seconds = 0;
    int64_t bytes = 0;
    int64_t matrixBytes = 0;  // of the weight matrices: what minimizeWeights saves
    bool movesState = false;  // a collective reads a session state (ranked last)
  };
  struct Hop {
    int layout;
    double seconds;
    bool local;  // a slice, no collective
  };

  static uint64_t bit(int layout) { return layout < kMaxCached ? uint64_t{1} << (8 + layout) : 0; }

  /// Whether `a` is at least as good as `b` for every way the search may
  /// go on: the same layouts, at least the materialized ones of `b` (every
  /// later conversion costs `a` no more: convert takes the cheapest source),
  /// and no more of anything so far.
  // Step 6.
  struct Run {
    int start = 0, period = 0, end = 0;  // blocks of `period` nodes from `start`; steps start+period .. end-1 repeat
  };

  static void mix(uint64_t& h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  }
  static void mixString(uint64_t& h, const std::string& s) { mix(h, std::hash<std::string>{}(s)); }

  // What the transition of a step reads of value `vi`, but its identity.
  void mixValue(uint64_t& h, int vi) const {
    const Value* v = values_[vi];
    mix(h, (v->isConstant() ? 1 : 0) | (persistent_.count(v) ? 2 : 0) | (stateOutputs_.count(v) ? 4 : 0) |
               (matrices_.count(v) ? 8 : 0));
    mix(h, static_cast<uint64_t>(v->type().dtype));
    for (int64_t d : v->type().shape) mix(h, static_cast<uint64_t>(d));
  }

  // The signature of step i: equal signatures, equal transitions.
  uint64_t signature(size_t i) const {
    const Step& st = steps_[i];
    uint64_t h = 0;
    mix(h, st.options.size());
    for (const Option& o : st.options) {
      mix(h, static_cast<uint64_t>(o.choice.kind) * 1000003ULL + static_cast<uint64_t>(o.choice.index + 1));
      uint64_t bits = 0;
      std::memcpy(&bits, &o.seconds, sizeof bits);
      mix(h, bits);
      for (const Req& r : o.reqs) {
        mix(h, static_cast<uint64_t>(r.slot));
        mixValue(h, r.value);
        mixString(h, layouts_[r.value][r.layout].str());
      }
      for (const Req& r : o.outs) {
        mixValue(h, r.value);
        mixString(h, layouts_[r.value][r.layout].str());
      }
    }
    mix(h, st.fresh.size());
    for (int vi : st.fresh) mixValue(h, vi);
    mix(h, st.from.size());
    for (int f : st.from) mix(h, static_cast<uint64_t>(static_cast<int64_t>(f)));
    return h;
  }

  // Finds the runs of repeated steps: for the most frequent distances
  // between equal signatures, the maximal stretches of steps equal to the
  // step that distance before, three blocks long at least; the longest
  // first, then the longest that do not overlap the ones kept.
  void findRuns() {
    const int n = static_cast<int>(nodes_.size());
    std::vector<uint64_t> sig(nodes_.size());
    for (int i = 0; i < n; ++i) sig[i] = signature(static_cast<size_t>(i));
    std::unordered_map<uint64_t, int> lastAt;
    std::map<int, int> gaps;
    for (int i = 0; i < n; ++i) {
      auto [it, fresh] = lastAt.emplace(sig[i], i);
      if (!fresh) {
        ++gaps[i - it->second];
        it->second = i;
      }
    }
    std::vector<std::pair<int, int>> byCount;  // (count, period)
    for (const auto& [gap, count] : gaps)
      if (gap >= 2 && count >= 2) byCount.emplace_back(count, gap);
    std::sort(byCount.begin(), byCount.end(), std::greater<>());
    std::vector<Run> found;
    for (size_t c = 0; c < byCount.size() && c < 4; ++c) {
      const int period = byCount[c].second;
      for (int i = period; i < n;) {
        if (sig[i] != sig[i - period]) {
          ++i;
          continue;
        }
        int e = i;
        while (e < n && sig[e] == sig[e - period]) ++e;
        // Steps [i, e) repeat the step a period before: blocks from i - period.
        if (e - (i - period) >= 3 * period) found.push_back(Run{i - period, period, e});
        i = e;
      }
    }
    std::sort(found.begin(), found.end(),
              [](const Run& a, const Run& b) { return a.end - a.start > b.end - b.start; });
    for (const Run& r : found) {
      const bool overlaps = std::any_of(runs_.begin(), runs_.end(),
                                        [&](const Run& k) { return r.start < k.end && k.start < r.end; });
      if (!overlaps) runs_.push_back(r);
    }
  }

  // \returns the run whose block boundary (past its first block) step i is.
  const Run* boundaryOf(size_t i) const {
    for (const Run& r : runs_) {
      const int k = static_cast<int>(i);
      if (k >= r.start + r.period && k < r.end && (k - r.start) % r.period == 0) return &r;
    }
    return nullptr;
  }

  // Whether `now` is `before` with every cost grown by the same amount.
  static bool steady(const std::vector<State>& before, const std::vector<State>& now) {
    if (before.size() != now.size() || now.empty()) return false;
    const double ds = now[0].seconds - before[0].seconds;
    const int64_t db = now[0].bytes - before[0].bytes, dm = now[0].matrixBytes - before[0].matrixBytes;
    for (size_t k = 0; k < now.size(); ++k) {
      const State& a = before[k];
      const State& b = now[k];
      if (a.entries != b.entries || a.movesState != b.movesState || b.bytes - a.bytes != db ||
          b.matrixBytes - a.matrixBytes != dm)
        return false;
      if (std::abs((b.seconds - a.seconds) - ds) > 1e-9 * std::max(std::abs(b.seconds), 1e-12)) return false;
    }
    return true;
  }

  // The live values before step i (after the last step at the end).
  const std::vector<int>& liveAt(size_t i) const { return i < steps_.size() ? steps_[i].liveBefore : finalLive_; }

  // Step 6's skip from boundary `from` to `to` (whole blocks of `period`):
  // \returns false, changing nothing, when the live values there do not
  // correspond.
  bool skip(std::vector<State>& states, const std::vector<State>& before,
            std::vector<std::vector<std::pair<int, int>>>& back, size_t from, size_t to, size_t period) {
    const std::vector<int>& a = liveAt(from);
    const std::vector<int>& b = liveAt(to);
    if (a.size() != b.size()) return false;
    const int shift = static_cast<int>(to - from);
    for (size_t k = 0; k < a.size(); ++k) {
      if (a[k] == b[k]) continue;
      const Value* u = values_[a[k]];
      const Value* w = values_[b[k]];
      if (!u->producer() || !w->producer()) return false;
      if (position_.at(w->producer()) != position_.at(u->producer()) + shift) return false;
      const auto& uo = u->producer()->outputs();
      const auto& wo = w->producer()->outputs();
      if (std::find(uo.begin(), uo.end(), u) - uo.begin() != std::find(wo.begin(), wo.end(), w) - wo.begin())
        return false;
    }
    const size_t blocks = (to - from) / period;
    const double ds = states[0].seconds - before[0].seconds;
    const int64_t db = states[0].bytes - before[0].bytes, dm = states[0].matrixBytes - before[0].matrixBytes;
    for (size_t j = from; j < to; ++j) back[j] = back[j - period];
    for (State& st : states) {
      st.seconds += static_cast<double>(blocks) * ds;
      st.bytes += static_cast<int64_t>(blocks) * db;
      st.matrixBytes += static_cast<int64_t>(blocks) * dm;
      for (size_t k = 0; k < a.size(); ++k)
        if (a[k] != b[k]) st.entries[k] = translate(st.entries[k], a[k], b[k]);
    }
    return true;
  }

  // Entry `e` of value `u`, as the same layouts of value `w`.
  uint64_t translate(uint64_t e, int u, int w) {
    uint64_t out = static_cast<uint64_t>(layoutId(w, layouts_[u][layoutOf(e)]));
    for (int k = 0; k < kMaxCached && k < static_cast<int>(layouts_[u].size()); ++k)
      if (e & bit(k)) out |= bit(layoutId(w, layouts_[u][k]));
    return out;
  }

  static bool dominates(const State& a, const State& b) {
    if (a.movesState > b.movesState || a.seconds > b.seconds || a.bytes > b.bytes || a.matrixBytes > b.matrixBytes)
      return false;
    for (size_t k = 0; k < a.entries.size(); ++k)
      if ((b.entries[k] & ~a.entries[k]) != 0) return false;  // layouts equal (grouped), masks a ⊇ b
    return true;
  }

  /// Drops the states another dominates (step 3's merge, for states whose
  /// layouts agree but whose materialized layouts differ): a value read by
  /// every layer (a rotary table) otherwise multiplies the frontier by the
  /// sets of layouts made of it.
  static void dropDominated(std::vector<State>& states, std::vector<std::pair<int, int>>& origin) {
    std::unordered_map<std::string, std::vector<int>> groups;
    for (size_t k = 0; k < states.size(); ++k) {
      std::string key;
      key.reserve(states[k].entries.size());
      for (uint64_t e : states[k].entries) key.push_back(static_cast<char>(e & 0xff));
      groups[key].push_back(static_cast<int>(k));
    }
    if (groups.size() == states.size()) return;
    std::vector<bool> drop(states.size(), false);
    for (auto& [key, members] : groups) {
      // Keeping a state is always right; a large group is left whole rather
      // than compared pair by pair.
      if (members.size() < 2 || members.size() > kMaxDominanceGroup) continue;
      for (int a : members)
        for (int b : members)
          if (a != b && !drop[a] && !drop[b] && dominates(states[a], states[b])) drop[b] = true;
    }
    size_t w = 0;
    for (size_t k = 0; k < states.size(); ++k)
      if (!drop[k]) {
        if (w != k) {
          states[w] = std::move(states[k]);
          origin[w] = origin[k];
        }
        ++w;
      }
    states.resize(w);
    origin.resize(w);
  }
  static int layoutOf(uint64_t e) { return static_cast<int>(e & 0xff); }

  bool better(const State& a, const State& b) const {
    if (a.movesState != b.movesState) return !a.movesState;
    if (minimizeWeights_ && a.matrixBytes != b.matrixBytes) return a.matrixBytes < b.matrixBytes;
    if (a.seconds != b.seconds) return a.seconds < b.seconds;
    return a.bytes < b.bytes;
  }

  int valueIndex(const Value* v) {
    auto it = index_.find(v);
    if (it != index_.end()) return it->second;
    index_.emplace(v, static_cast<int>(values_.size()));
    values_.push_back(v);
    layouts_.emplace_back();
    const Sharding& own = v->sharding() ? *v->sharding() : Sharding{std::vector<MeshAxis>(v->type().rank(), MeshAxis::kNone)};
    layouts_.back().push_back(own);  // id 0: the layout the value starts in
    return static_cast<int>(values_.size()) - 1;
  }

  int layoutId(int vi, const Sharding& s) {
    std::vector<Sharding>& ls = layouts_[vi];
    for (size_t k = 0; k < ls.size(); ++k)
      if (ls[k] == s) return static_cast<int>(k);
    ls.push_back(s);
    return static_cast<int>(ls.size()) - 1;
  }

  // The resharding steps of value `vi` from layout `from` to `to`: the
  // layout each step reaches and its seconds.
  const std::vector<Hop>& hops(int vi, int from, int to) {
    // Layout ids stay far below 2^16 (a value has a few layouts).
    const uint64_t key = (static_cast<uint64_t>(vi) << 32) | (static_cast<uint64_t>(from) << 16) |
                         static_cast<uint64_t>(to);
    auto it = hops_.find(key);
    if (it != hops_.end()) return it->second;
    std::vector<Hop> out;
    const Value* v = values_[vi];
    const Mesh mesh = dp_.shapeMesh();
    Sharding prev = layouts_[vi][from];
    for (const ReshardStep& s : reshardSteps(prev, layouts_[vi][to])) {
      TensorType before{v->type().dtype, localShape(v->type().shape, prev, mesh, 0)};
      TensorType after{v->type().dtype, localShape(v->type().shape, s.result, mesh, 0)};
      double t = 0;
      if (s.kind == ReshardStep::kSlice) {
        TensorType index{DType::kI64, {1}};
        t = cm_.computeTime(opWork("Slice", {before, index, index, index}, {after}, AttrMap{}), before.dtype);
      } else {
        // CostModel::collectiveTime's size: the whole tensor of an
        // all-reduce, the gathered one, the scattered input, the input an
        // all-to-all exchanges on one device.
        CollectiveKind kind = CollectiveKind::kAllGather;
        int64_t bytes = static_cast<int64_t>(after.bytes());
        switch (s.kind) {
          case ReshardStep::kAllReduce: kind = CollectiveKind::kAllReduce; break;
          case ReshardStep::kReduceScatter:
            kind = CollectiveKind::kReduceScatter, bytes = static_cast<int64_t>(before.bytes());
            break;
          case ReshardStep::kAllToAll:
            kind = CollectiveKind::kAllToAll, bytes = static_cast<int64_t>(before.bytes());
            break;
          default: break;
        }
        std::vector<int> group = mesh.groupOf(0, s.axis);
        t = cm_.collectiveTime(kind, bytes, static_cast<int>(group.size()), cm_.crossesNodes(group));
      }
      out.push_back({layoutId(vi, s.result), t, s.kind == ReshardStep::kSlice});
      prev = s.result;
    }
    return hops_.emplace(key, std::move(out)).first->second;
  }

  // Brings working entry `e` of value r.value to layout r.layout, paying what
  // is not materialized yet.
  void convert(State& st, uint64_t& e, const Req& r) {
    const Value* v = values_[r.value];
    if (v->isConstant() || persistent_.count(v)) {
      if (!(e & bit(r.layout)) || r.layout >= kMaxCached) {
        const Sharding& s = layouts_[r.value][r.layout];
        auto bytes = static_cast<int64_t>(TensorType{v->type().dtype, localShape(v->type().shape, s, dp_.shapeMesh(), 0)}.bytes());
        st.bytes += bytes;
        if (matrices_.count(v) || persistent_.count(v)) st.matrixBytes += bytes;
        e |= bit(r.layout);
      }
      return;
    }
    int from = layoutOf(e);
    // As lowering does: a layout materialized already that reaches the
    // target by slices alone is sliced from; of several, the cheapest (and
    // the value's own layout when its path costs less, which a collective
    // never does against slices): so more layouts materialized never cost
    // more (dropDominated relies on it).
    auto local = [&](int k) {
      for (const Hop& h : hops(r.value, k, r.layout))
        if (!h.local) return false;
      return true;
    };
    auto cost = [&](int k) {
      double t = 0;
      for (const Hop& h : hops(r.value, k, r.layout))
        if (!(e & bit(h.layout))) t += h.seconds;
      return t;
    };
    if (!local(from)) {
      double best = cost(from);
      for (int k = 0; k < kMaxCached && k < static_cast<int>(layouts_[r.value].size()); ++k)
        if ((e & bit(k)) && k != from && local(k) && cost(k) < best) {
          best = cost(k);
          from = k;
        }
    }
    for (const Hop& h : hops(r.value, from, r.layout)) {
      if (e & bit(h.layout)) continue;
      st.seconds += h.seconds;
      if (!h.local && stateOutputs_.count(v)) st.movesState = true;
      e |= bit(h.layout);
    }
  }

  State extend(const State& s, const Step& st, const Option& opt) {
    State n;
    n.seconds = s.seconds + opt.seconds;
    n.bytes = s.bytes;
    n.matrixBytes = s.matrixBytes;
    n.movesState = s.movesState;
    std::vector<uint64_t> work = s.entries;
    for (int vi : st.fresh) {
      int own = 0;  // graph inputs start materialized in their layout; constants have nothing yet
      const Value* v = values_[vi];
      work.push_back(v->isConstant() || persistent_.count(v) ? 0 : (static_cast<uint64_t>(own) | bit(own)));
    }
    for (const Req& r : opt.reqs) convert(n, work[r.slot], r);
    n.entries.reserve(st.from.size());
    for (int f : st.from) {
      if (f >= 0) {
        n.entries.push_back(work[f]);
      } else {
        int layout = opt.outs[-1 - f].layout;
        n.entries.push_back(static_cast<uint64_t>(layout) | bit(layout));
      }
    }
    return n;
  }

  const Graph& g_;
  const Partition& dp_;
  const CostModel& cm_;
  bool minimizeWeights_ = false;
  std::vector<Node*> nodes_;
  std::vector<Step> steps_;
  std::unordered_map<const Value*, int> index_;
  std::vector<const Value*> values_;
  std::vector<std::vector<Sharding>> layouts_;
  std::vector<int> last_;
  std::vector<int> finalLive_;
  std::vector<int> outputs_;  // the graph outputs' values
  std::set<const Value*> matrices_;
  std::set<const Value*> persistent_;    // session state inputs (TpSearchOptions::states)
  std::set<const Value*> stateOutputs_;  // their written values
  std::unordered_map<uint64_t, std::vector<Hop>> hops_;  // by value, from layout, to layout
  std::unordered_map<const Node*, int> position_;         // node -> its index in nodes_
  std::vector<Run> runs_;                                  // step 6
  bool fold_ = true;
};

}  // namespace

std::string tpChoiceName(const TpChoice& c) {
  switch (c.kind) {
    case TpChoice::kReplicate: return "replicate";
    case TpChoice::kSplitOutput: return strCat("split dim ", c.index);
    case TpChoice::kContract: return "split contraction (partial sum)";
  }
  return "?";
}

std::vector<TpChoice> tpChoicesFor(const Node& n, const Partition& dpOnly) {
  OpDimMap map = dimMapFor(n);
  std::vector<TpChoice> out;
  for (const TpChoice& c : candidates(n, map)) {
    Layouts l;
    if (layoutsFor(n, dpOnly, map, c, l)) out.push_back(c);
  }
  return out;
}

StatusOr<TpSearchResult> searchTensorParallel(const Graph& g, const Partition& dpOnly, const TpSearchOptions& opts) {
  if (!opts.cost) return internalError("tp search: no cost model");
  if (g.numNodes() == 0) return TpSearchResult{};  // nothing to split (every node folded away)
  Search s(g, dpOnly, *opts.cost, opts.states);
  RETURN_IF_ERROR(s.prepare(nullptr, opts.pinned));
  s.setFold(opts.fold);
  // A narrow pass first gives a bound that lets the exact pass drop every
  // state that cannot beat it.
  if (opts.beam > 64) {
    ASSIGN_OR_RETURN(TpSearchResult quick, s.run(64, opts.minimizeWeights));
    if (quick.exact) return quick;
    return s.run(opts.beam, opts.minimizeWeights, &quick.cost);
  }
  return s.run(std::max<size_t>(1, opts.beam), opts.minimizeWeights);
}

StatusOr<TpCost> evaluateTpChoices(const Graph& g, const Partition& dpOnly, const std::vector<TpChoice>& choices,
                                   const CostModel& cost) {
  Search s(g, dpOnly, cost);
  RETURN_IF_ERROR(s.prepare(&choices));
  ASSIGN_OR_RETURN(TpSearchResult r, s.run(1, false));
  return r.cost;
}

void applyTpChoices(Graph& g, Partition& p, const std::vector<TpChoice>& choices) {
  std::vector<Node*> nodes = g.nodes();
  std::vector<Layouts> all(nodes.size());
  // Compute every layout from the data-parallel annotations before changing any.
  for (size_t i = 0; i < nodes.size() && i < choices.size(); ++i) {
    OpDimMap map = dimMapFor(*nodes[i]);
    if (!layoutsFor(*nodes[i], p, map, choices[i], all[i])) layoutsFor(*nodes[i], p, map, TpChoice{}, all[i]);
  }
  for (size_t i = 0; i < nodes.size() && i < choices.size(); ++i) {
    Node* n = nodes[i];
    for (size_t j = 0; j < n->inputs().size(); ++j)
      if (all[i].req[j]) p.inputSharding[{n, j}] = *all[i].req[j];
    for (size_t k = 0; k < n->outputs().size(); ++k) n->output(k)->setSharding(all[i].out[k]);
  }
}

}  // namespace pcc
