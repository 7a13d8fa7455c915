// The mesh search.
//
// Algorithm:
//  1. Candidates: a mesh forced by --strategy alone; otherwise every
//     pp × dp × tp = d, for d = --gpus and every divisor of it (fewer devices
//     can win when communication costs more than it saves, or when the batch
//     cannot be split). What a mesh cannot use is left out before anything is
//     costed, so that a large --gpus on a small model costs what the model
//     can use, not the devices given: pp at most the node count, tp at most
//     the largest dimension of any tensor (a larger tp has no dim to split
//     that a smaller one has not split to single elements already), and a dp
//     larger than the batch is the mesh of dp = batch (as the partitioner
//     caps it), costed once. With pp > 1, the micro-batch count too: 1, 2, 4, ...
//     while the estimate improves by 1% (fill-drain: the bubble shrinks, the
//     per-micro-batch overheads grow).
//  2. Each candidate partitions and lowers a copy of the graph (data
//     parallelism over the batch, the tp search of tp_search.h for tp, costing
//     with the same model), so what is costed is exactly what would be
//     emitted; a candidate that ends up on the same mesh as an earlier one
//     (the batch caps dp) is dropped. A candidate with tp that does not fit
//     is partitioned again with the tp search saving weight memory first.
//  3. Each rank program is costed (when the batch splits evenly, the first
//     data-parallel replica's programs stand for the others'; they differ
//     only in the samples they read): the cost model's time of every node, plus
//     the alpha-beta time of every collective over its group (the inter-node
//     link when the group spans nodes); weights plus the peak of live
//     activations against the device's memory.
//     One-stage meshes are costed first; a pipeline over dp × tp is costed
//     only if its lower bound, the one-stage time T of that dp × tp times
//     (pp + m − 1) / (m · pp) for the most micro-batches m it may use (T
//     itself when each replica has one sample), beats the best plan so far.
//  4. The plan's time: per stage the slowest rank's time for one micro-batch
//     t_s; fill-drain over m micro-batches takes Σ t_s + (m − 1) · max t_s.
//     Candidates are ranked by the objective, feasible ones first; among those
//     within 1% of the best, the one with the smallest tp, then the smallest
//     pp, then the largest dp, is chosen (moved first).
#include "passes/partition/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "passes/partition/pipeline.h"
#include "passes/partition/tp_search.h"

namespace pcc {

namespace {

int64_t batchOf(const Graph& g) {
  for (Value* in : g.inputs())
    if (in->type().rank() >= 1) return std::max<int64_t>(1, in->type().shape[0]);
  return 1;
}

int64_t bytesOf(const Value* v) { return static_cast<int64_t>(v->type().bytes()); }

/// \returns the largest dimension of any value of `g` (at least 1): the
/// most tensor-parallel ranks any of its tensors can be split over.
int64_t largestDim(const Graph& g) {
  int64_t m = 1;
  auto see = [&](const Value* v) {
    if (v)
      for (int64_t d : v->type().shape) m = std::max(m, d);
  };
  for (const Value* v : g.inputs()) see(v);
  for (const Value* v : g.constants()) see(v);
  for (const Node* n : g.nodes())
    for (const Value* v : n->outputs()) see(v);
  return m;
}

// Peak of live activation bytes in program order: a value is live from its
// definition (graph inputs from the start) to its last reader (graph outputs
// to the end).
int64_t activationPeak(const Graph& g, const std::set<const Value*>& state = {}) {
  std::vector<Node*> nodes = g.nodes();
  std::unordered_map<const Value*, size_t> last;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Value* v : nodes[i]->inputs())
      if (v && !v->isConstant()) last[v] = i;
  for (const Value* v : g.outputs()) last[v] = nodes.size();
  int64_t live = 0, peak = 0;
  for (const Value* v : g.inputs())
    if (!state.count(v)) live += bytesOf(v);
  peak = live;
  std::vector<std::vector<const Value*>> dies(nodes.size() + 1);
  for (const auto& [v, i] : last) dies[i].push_back(v);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const Value* o : nodes[i]->outputs()) {
      if (state.count(o)) continue;  // written in place into the state
      live += bytesOf(o);
      if (!last.count(o)) dies[i].push_back(o);  // never read: freed at once
    }
    peak = std::max(peak, live);
    for (const Value* v : dies[i])
      if (!state.count(v)) live -= bytesOf(v);
  }
  return peak;
}

std::optional<CollectiveKind> collectiveKind(OpKind op) {
  switch (op) {
    case OpKind::AllReduce: return CollectiveKind::kAllReduce;
    case OpKind::AllGather: return CollectiveKind::kAllGather;
    case OpKind::ReduceScatter: return CollectiveKind::kReduceScatter;
    case OpKind::AllToAll: return CollectiveKind::kAllToAll;
    default: return std::nullopt;
  }
}

RankEstimate estimateRank(const RankGraph& rg, const Mesh& mesh, const CostModel& cm,
                          std::vector<const Node*>* comm = nullptr) {
  RankEstimate e;
  e.rank = rg.rank;
  e.stage = mesh.coord(rg.rank, MeshAxis::kPP);
  for (const Node* n : rg.graph->nodes()) {
    if (isCollective(n->op())) {
      e.commSeconds += rankNodeSeconds(*n, rg.rank, mesh, cm);
      if (comm) comm->push_back(n);
      continue;
    }
    e.computeSeconds += cm.nodeTime(*n);
    OpWork w = nodeWork(*n);
    e.flops = w.flops > INT64_MAX - e.flops ? INT64_MAX : e.flops + w.flops;
  }
  for (const Value* c : rg.graph->constants()) e.weightBytes += bytesOf(c);
  std::set<const Value*> state;
  for (const StateBind& sb : rg.states) {
    state.insert(sb.in);
    state.insert(sb.out);
    e.stateBytes += bytesOf(sb.in);
  }
  e.activationBytes = activationPeak(*rg.graph, state);
  return e;
}

std::string gib(int64_t bytes) { return strCat(std::round(bytes / double(1 << 30) * 100) / 100, " GiB"); }

// \returns whether `a` ranks before `b` for `objective`.
bool better(const PlanEstimate& a, const PlanEstimate& b, Objective objective) {
  auto usable = [](const PlanEstimate& e) { return e.error.empty() && e.infeasible.empty(); };
  if (usable(a) != usable(b)) return usable(a);
  if (!a.error.empty() || !b.error.empty()) return a.error.empty() && !b.error.empty();
  double x = objective == Objective::kLatency ? a.seconds : -a.samplesPerSecond;
  double y = objective == Objective::kLatency ? b.seconds : -b.samplesPerSecond;
  if (std::abs(x - y) > 1e-9 * std::max(std::abs(x), std::abs(y))) return x < y;
  if (a.mesh.dp != b.mesh.dp) return a.mesh.dp > b.mesh.dp;
  if (a.mesh.tp != b.mesh.tp) return a.mesh.tp < b.mesh.tp;
  return a.mesh.pp < b.mesh.pp;
}

}  // namespace

const char* objectiveName(Objective o) { return o == Objective::kLatency ? "latency" : "throughput"; }

namespace {

// The peer of Send `send` of the program of `programRank` (-1: `rank`'s own),
// seen from `rank` of the same stage: peers are stages apart at the same
// replica and tp coordinates, so as far from `rank` as from `programRank`.
int peerOf(const Node& send, int rank, int programRank) {
  const int from = programRank < 0 ? rank : programRank;
  return static_cast<int>(send.attrs().getInt("peer", from)) + (rank - from);
}

}  // namespace

double rankNodeSeconds(const Node& n, int rank, const Mesh& mesh, const CostModel& cm, int programRank) {
  if (n.op() == OpKind::Recv) return 0;
  if (n.op() == OpKind::Send) {
    std::vector<int> pair = {rank, peerOf(n, rank, programRank)};
    return cm.collectiveTime(CollectiveKind::kSendRecv, bytesOf(n.input(0)), 2, cm.crossesNodes(pair));
  }
  if (auto kind = collectiveKind(n.op())) {
    MeshAxis axis = meshAxisFromName(n.attrs().getString("axis", "-")).value_or(MeshAxis::kNone);
    std::vector<int> group = mesh.groupOf(rank, axis);
    // The size CostModel::collectiveTime takes: the all-gathered output, the
    // reduce-scatter's input, the all-to-all's input on this rank, the
    // all-reduced tensor.
    const bool byInput = *kind == CollectiveKind::kReduceScatter || *kind == CollectiveKind::kAllToAll;
    int64_t bytes = byInput ? bytesOf(n.input(0)) : bytesOf(n.output());
    return cm.collectiveTime(*kind, bytes, static_cast<int>(group.size()), cm.crossesNodes(group));
  }
  return cm.nodeTime(n);
}

namespace {

// The plan's time and fit from the estimates of its ranks.
PlanEstimate summarize(std::vector<RankEstimate> estimates, const Mesh& mesh, const CostModel& cm, int64_t batch,
                       int microbatches) {
  PlanEstimate p;
  p.mesh = mesh;
  p.microbatches = std::max(1, microbatches);
  p.stageSeconds.assign(mesh.pp, 0);
  p.ranks = std::move(estimates);
  for (const RankEstimate& r : p.ranks) {
    double& t = p.stageSeconds[r.stage];
    t = std::max(t, r.seconds());
  }
  double sum = 0, slowest = 0;
  for (double t : p.stageSeconds) {
    sum += t;
    slowest = std::max(slowest, t);
  }
  p.seconds = sum + (p.microbatches - 1) * slowest;
  p.bubble = p.seconds > 0 ? 1 - p.microbatches * sum / (mesh.pp * p.seconds) : 0;
  p.samplesPerSecond = p.seconds > 0 ? static_cast<double>(batch) / p.seconds : 0;
  for (const RankEstimate& r : p.ranks) {
    if (r.memoryBytes() <= cm.memoryCapacity()) continue;
    p.infeasible = strCat("rank ", r.rank, " needs ", gib(r.memoryBytes()), " (weights ", gib(r.weightBytes),
                          r.stateBytes ? strCat(", KV cache ", gib(r.stateBytes)) : std::string(), ", activations ",
                          gib(r.activationBytes), ") of the ", gib(cm.memoryCapacity()),
                          " one ", cm.spec().name, " offers");
    break;
  }
  return p;
}

// The ranks of `mesh` whose programs differ only in which piece of each
// tensor they hold, not in its shape: those of one tp group (the tp search
// splits only dimensions that divide evenly; tpEven checks it) and, when
// `evenDp`, those of one stage's replicas. \returns the rank whose program
// stands for `rank`.
int leadOf(const Mesh& mesh, int rank, bool evenDp, bool evenTp) {
  return mesh.rankOf(mesh.coord(rank, MeshAxis::kPP), evenDp ? 0 : mesh.coord(rank, MeshAxis::kDP),
                     evenTp ? 0 : mesh.coord(rank, MeshAxis::kTP));
}

// Whether every dimension `g` splits over tp divides evenly, so that all
// ranks of a tp group have the same local shapes.
bool tpEven(const Graph& g, const Partition& p) {
  const int tp = p.mesh.tp;
  if (tp <= 1) return true;
  auto even = [&](const Value* v) {
    if (!v || !v->sharding()) return true;
    const Sharding& s = *v->sharding();
    for (size_t d = 0; d < s.dims.size() && d < v->type().shape.size(); ++d)
      if (s.dims[d] == MeshAxis::kTP && v->type().shape[d] % tp != 0) return false;
    return true;
  };
  for (const Value* v : g.inputs())
    if (!even(v)) return false;
  for (const Node* n : g.nodes()) {
    for (const Value* o : n->outputs())
      if (!even(o)) return false;
  }
  for (const auto& [use, s] : p.inputSharding) {
    const Value* v = use.first->input(use.second);
    for (size_t d = 0; v && d < s.dims.size() && d < v->type().shape.size(); ++d)
      if (s.dims[d] == MeshAxis::kTP && v->type().shape[d] % tp != 0) return false;
  }
  return true;
}

// The most micro-batches searchMesh's cost loop tries for a pipeline of
// `pp` stages over `dp` replicas: 1, 2, 4, ... up to 4 · pp, while each
// replica's batch divides.
int mostMicrobatches(int64_t batch, int dp, int pp) {
  const int64_t replica = batch / dp;
  int m = 1;
  while (2 * m <= 4 * pp && replica % (2 * m) == 0 && batch % (int64_t{dp} * 2 * m) == 0) m *= 2;
  return m;
}

}  // namespace

PlanEstimate estimatePlan(const std::vector<RankGraph>& ranks, const Mesh& mesh, const CostModel& cm,
                          int64_t batch, int microbatches) {
  std::vector<RankEstimate> estimates;
  for (const RankGraph& rg : ranks) estimates.push_back(estimateRank(rg, mesh, cm));
  return summarize(std::move(estimates), mesh, cm, batch, microbatches);
}

StatusOr<SearchResult> searchMesh(const Graph& g, const PartitionOptions& opts, const CostModel& cm,
                                  Objective objective) {
  auto start = std::chrono::steady_clock::now();
  SearchResult r;
  r.objective = objective;
  const int64_t batch = batchOf(g);
  std::vector<PartitionOptions> tries;
  if (opts.dp > 0 || opts.tp > 0 || opts.pp > 1) {
    tries.push_back(opts);
  } else {
    const int64_t maxTp = largestDim(g);
    // (pp, dp as the batch caps it, tp) of the meshes listed: a later d whose
    // capped mesh is the same adds nothing (the earlier one uses more devices).
    std::set<std::tuple<int, int64_t, int>> listed;
    for (int d = opts.gpus; d >= 1; --d) {
      if (opts.gpus % d != 0) continue;
      for (int pp = 1; pp <= d; ++pp) {
        if (d % pp != 0 || (pp > 1 && static_cast<size_t>(pp) > g.numNodes())) continue;
        for (int tp = 1; tp <= d / pp && tp <= maxTp; ++tp) {
          if ((d / pp) % tp != 0) continue;
          const int dp = d / pp / tp;
          if (!listed.emplace(pp, std::min<int64_t>(dp, batch), tp).second) {
            ++r.folded;
            continue;
          }
          PartitionOptions po = opts;
          po.gpus = d;
          po.dp = dp;
          po.tp = tp;
          po.pp = pp;
          tries.push_back(po);
        }
      }
    }
  }
  Status firstError = Status::OK();
  // Partitions, lowers and costs one candidate.
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  std::map<std::string, double>& phases = r.phaseSeconds;
  // Candidates of one dp · micro-batches × tp share their tp search.
  TpSearchCache tpCache;
  StageCostCache stageCache;
  auto costOnce = [&](PartitionOptions po) {
    po.cost = &cm;
    if (!po.pinnedTp) {
      po.tpCache = &tpCache;
      po.stageCache = &stageCache;
    }
    Clock::time_point phase = Clock::now();
    std::unique_ptr<Graph> copy = g.clone();
    StatusOr<Partition> part = partitionGraph(*copy, po);
    if (part.ok()) {
      phases["tp_search"] += part->tpSearchSeconds;
      phases["stage_cut"] += part->stageCutSeconds;
      phases["propagate"] += since(phase) - part->tpSearchSeconds - part->stageCutSeconds;
    }
    PlanEstimate e;
    e.mesh = Mesh{po.pp > 0 ? po.pp : 1, po.dp, po.tp > 0 ? po.tp : 1};
    e.microbatches = std::max(1, po.microbatches);
    e.minimizeWeights = po.minimizeWeights;
    const bool first = po.microbatches <= 1 || opts.microbatches > 0;  // a later count may fail: not an error
    if (!part.ok()) {
      e.error = part.status().message();
      if (first && firstError.ok()) firstError = part.status();
      return e;
    }
    e.mesh = part->mesh;
    // When the batch splits evenly, the replicas' programs differ only in
    // which samples they read, and the ranks of a tp group (every split
    // even) only in which piece they hold: one program a stage is lowered
    // and costed, and stands for the others; only the collectives and sends
    // are costed again for each rank (its groups and peers may cross nodes
    // where the lead's do not).
    const Mesh& mesh = part->mesh;
    // Whether each group of `rank` (dp, tp, pp) and each peer of the sends
    // of the program of `lead` crosses nodes, from `rank`.
    auto crossings = [&](int rank, int lead, const std::vector<const Node*>& comm) {
      std::vector<bool> out;
      for (MeshAxis a : {MeshAxis::kDP, MeshAxis::kTP, MeshAxis::kPP}) out.push_back(cm.crossesNodes(mesh.groupOf(rank, a)));
      for (const Node* n : comm)
        if (n->op() == OpKind::Send) out.push_back(cm.crossesNodes({rank, peerOf(*n, rank, lead)}));
      return out;
    };
    const bool evenDp = batch % (int64_t{mesh.dp} * part->microbatches) == 0;
    const bool evenTp = tpEven(*copy, *part);
    struct Lead {
      RankEstimate estimate;
      std::vector<const Node*> comm;  // its collectives and sends
      std::vector<bool> crossings;    // crossings(lead, lead, comm)
    };
    std::map<int, Lead> leads;
    std::vector<RankGraph> lowered;  // kept alive while the comm nodes are read
    std::vector<RankEstimate> all;
    for (int r = 0; r < mesh.size(); ++r) {
      const int lead = leadOf(mesh, r, evenDp, evenTp);
      auto it = leads.find(lead);
      if (it == leads.end()) {
        phase = Clock::now();
        StatusOr<RankGraph> rg = lowerRank(*copy, *part, lead);
        phases["lower"] += since(phase);
        if (!rg.ok()) {
          e.error = rg.status().message();
          if (first && firstError.ok()) firstError = rg.status();
          return e;
        }
        lowered.push_back(std::move(rg).value());
        Lead l;
        phase = Clock::now();
        l.estimate = estimateRank(lowered.back(), mesh, cm, &l.comm);
        l.crossings = crossings(lead, lead, l.comm);
        phases["cost"] += since(phase);
        it = leads.emplace(lead, std::move(l)).first;
      }
      const Lead& l = it->second;
      RankEstimate est = l.estimate;
      if (r != lead) {
        est.rank = r;
        // Its collectives cost what the lead's do unless one of its groups
        // or peers crosses nodes where the lead's do not (or the reverse).
        if (crossings(r, lead, l.comm) != l.crossings) {
          est.commSeconds = 0;
          for (const Node* n : l.comm) est.commSeconds += rankNodeSeconds(*n, r, mesh, cm, lead);
        }
      }
      all.push_back(est);
    }
    e = summarize(std::move(all), mesh, cm, batch, part->microbatches);
    e.minimizeWeights = po.minimizeWeights;
    e.foldedBlocks = part->tpFoldedBlocks;
    e.blockNodes = part->tpBlockNodes;
    e.repeats = part->tpRepeats;
    phase = Clock::now();
    lowered.clear();
    phases["lower"] += since(phase);  // freeing the programs
    return e;
  };
  // With pipeline stages and no forced count, micro-batches 1, 2, 4, ... up
  // to 4 · pp (and dividing each replica's batch) until the time stops
  // improving by 1%.
  auto cost = [&](PartitionOptions po) {
    PlanEstimate e = costOnce(po);
    if (!e.error.empty() || e.mesh.pp == 1 || po.microbatches > 0) return e;
    const int64_t replica = batch / e.mesh.dp;
    for (int m = 2; m <= 4 * e.mesh.pp && replica % m == 0 && batch % (int64_t{e.mesh.dp} * m) == 0; m *= 2) {
      po.microbatches = m;
      PlanEstimate more = costOnce(po);
      if (!more.error.empty()) break;
      const bool sameFit = more.infeasible.empty() == e.infeasible.empty();
      const bool improves = sameFit ? more.seconds < e.seconds * 0.99 : more.infeasible.empty();
      if (improves) e = std::move(more);
      else if (sameFit) break;  // smaller micro-batches only ever fit better: keep looking while none fits
    }
    return e;
  };
  auto sameMesh = [&](const Mesh& m) {
    return std::any_of(r.candidates.begin(), r.candidates.end(), [&](const PlanEstimate& c) {
      return c.mesh.dp == m.dp && c.mesh.tp == m.tp && c.mesh.pp == m.pp;
    });
  };
  // One-stage meshes first: each bounds the pipelines of its dp × tp.
  std::stable_partition(tries.begin(), tries.end(), [](const PartitionOptions& po) { return po.pp <= 1; });
  // (dp, tp) of a one-stage try -> its time-first estimate.
  std::map<std::pair<int, int>, double> oneStage;
  double bestSoFar = std::numeric_limits<double>::infinity();
  const bool forcedMesh = tries.size() == 1;
  for (const PartitionOptions& po : tries) {
    // A pipeline of pp stages over the mesh dp × tp, with m micro-batches,
    // takes at least (pp + m − 1) / (m · pp) of the one-stage plan's time
    // T: a micro-batch costs at least its share T / m of the batch through
    // all stages together (no term of the cost model shrinks faster than
    // the batch), and fill-drain adds m − 1 times the slowest stage, at
    // least 1/pp of that. The bound falls with m, so the most micro-batches
    // the cost loop may try stand for all; when it is no better than a plan
    // already costed, the pipeline cannot win and is not costed.
    if (po.pp > 1 && !forcedMesh) {
      const int dp = static_cast<int>(std::min<int64_t>(po.dp, batch));  // the batch caps dp (partitioner.cpp)
      auto one = oneStage.find({dp, po.tp});
      if (one != oneStage.end()) {
        const int m = po.microbatches > 0 ? po.microbatches : mostMicrobatches(batch, dp, po.pp);
        const double bound = one->second * (po.pp + m - 1) / (static_cast<double>(m) * po.pp);
        if (bound >= bestSoFar) {
          ++r.pruned;
          continue;
        }
      }
    }
    PlanEstimate e = cost(po);
    // The time-first plan bounds the pipelines, whether it fits or not.
    if (e.error.empty() && po.pp <= 1 && !po.minimizeWeights && e.mesh.pp == 1) {
      auto [it, added] = oneStage.emplace(std::make_pair(e.mesh.dp, e.mesh.tp), e.seconds);
      if (!added) it->second = std::min(it->second, e.seconds);
    }
    if (e.error.empty() && sameMesh(e.mesh)) continue;  // the batch capped dp onto a mesh already costed
    if (e.error.empty() && !e.infeasible.empty() && e.mesh.tp > 1 && !po.minimizeWeights) {
      PartitionOptions saving = po;
      saving.minimizeWeights = true;
      PlanEstimate s = cost(saving);
      if (s.error.empty() && s.infeasible.empty()) e = std::move(s);
    }
    if (e.error.empty() && e.infeasible.empty()) {
      // With the batch fixed, both objectives rank by the time of a batch.
      bestSoFar = std::min(bestSoFar, e.seconds);
    }
    r.candidates.push_back(std::move(e));
  }
  std::stable_sort(r.candidates.begin(), r.candidates.end(),
                   [&](const PlanEstimate& a, const PlanEstimate& b) { return better(a, b, objective); });
  // Within 1% of the fastest, the least tensor parallelism wins, then the
  // most data parallelism: a gain the model cannot resolve does not buy the
  // communication tp adds (the order stays by time otherwise).
  if (!r.candidates.empty() && r.candidates[0].error.empty() && r.candidates[0].infeasible.empty()) {
    const PlanEstimate& fastest = r.candidates[0];
    double bound = objective == Objective::kLatency ? fastest.seconds * 1.01 : fastest.samplesPerSecond / 1.01;
    size_t pick = 0;
    for (size_t i = 1; i < r.candidates.size(); ++i) {
      const PlanEstimate& c = r.candidates[i];
      if (!c.error.empty() || !c.infeasible.empty()) break;
      bool close = objective == Objective::kLatency ? c.seconds <= bound : c.samplesPerSecond >= bound;
      const Mesh& m = r.candidates[pick].mesh;
      bool simpler = c.mesh.tp != m.tp ? c.mesh.tp < m.tp : c.mesh.pp != m.pp ? c.mesh.pp < m.pp : c.mesh.dp > m.dp;
      if (close && simpler) pick = i;
    }
    std::rotate(r.candidates.begin(), r.candidates.begin() + static_cast<long>(pick),
                r.candidates.begin() + static_cast<long>(pick) + 1);
  }
  r.searchSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (r.candidates.empty() || !r.candidates[0].error.empty()) return firstError;
  return r;
}

}  // namespace pcc
