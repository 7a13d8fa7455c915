// Pipeline stage cutting.
//
// Algorithm:
//  1. Lower the program of rank 0 with every node in stage 0: the whole model
//     at one micro-batch's local shapes, with every resharding collective;
//     RankGraph::nodeStarts says which local nodes each global node became.
//  2. For each global node i: its time (its local nodes, collectives over
//     their groups), the weight bytes it reads first, and the peak of live
//     activation bytes while it runs (values live across it included). For
//     each cut position k: the bytes of the values computed before k and read
//     at or after it (what crosses; graph inputs are read by each stage
//     itself and do not cross).
//  3. Dynamic programming over (stages used, nodes covered): best[j][k] is
//     the least possible slowest-stage time when the first k nodes form j
//     stages; a stage [a, k) costs its nodes' time plus sending what crosses
//     k to the next stage (over the inter-node link when the two stages'
//     ranks are on different nodes), and is allowed only when its weights
//     plus its activation peak fit one device. O(pp · n²) at worst; a
//     stage only grows as its start moves back, so the scan of starts stops
//     once the stage alone is no faster than the best found or does not fit
//     (about O(pp · n · n/pp) when the stages balance).
//  4. If no cut fits, step 3 runs again without the memory bound (the search
//     will report the plan infeasible, with the memory it needs).
//  5. Every node gets its stage; Partition::stages records each stage.
#include "passes/partition/pipeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "passes/partition/search.h"

namespace pcc {

namespace {

using NodeCosts = StageCosts;

int64_t bytesOf(const Value* v) { return static_cast<int64_t>(v->type().bytes()); }

// Steps 1 and 2.
StatusOr<NodeCosts> measure(const Graph& g, const Partition& p, const CostModel& cm) {
  ASSIGN_OR_RETURN(RankGraph rg, lowerRank(g, p, 0));
  const size_t n = g.numNodes();
  if (rg.nodeStarts.size() != n + 1) return internalError("stage cutting: lowering did not record every node");
  std::vector<Node*> local = rg.graph->nodes();
  std::vector<size_t> owner(local.size(), 0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = rg.nodeStarts[i]; j < rg.nodeStarts[i + 1]; ++j) owner[j] = i;
  NodeCosts c;
  c.seconds.assign(n, 0);
  c.weights.assign(n, 0);
  c.activation.assign(n, 0);
  c.crossing.assign(n + 1, 0);
  std::unordered_set<const Value*> seen;
  std::unordered_map<const Value*, size_t> last;  // local node index of the last reader
  for (size_t j = 0; j < local.size(); ++j) {
    const Node* ln = local[j];
    c.seconds[owner[j]] += rankNodeSeconds(*ln, rg.rank, p.mesh, cm);
    for (const Value* v : ln->inputs()) {
      if (!v) continue;
      if (v->isConstant()) {
        if (seen.insert(v).second) c.weights[owner[j]] += bytesOf(v);
      } else {
        last[v] = j;
      }
    }
  }
  const std::unordered_map<const Value*, size_t> lastRead = last;  // graph outputs aside
  for (const Value* v : rg.graph->outputs()) last[v] = local.size();
  // Live bytes in program order, as search.cpp's activation peak counts them.
  int64_t live = 0;
  for (const Value* v : rg.graph->inputs()) live += bytesOf(v);
  std::vector<std::vector<const Value*>> dies(local.size() + 1);
  for (const auto& [v, j] : last) dies[j].push_back(v);
  for (size_t j = 0; j < local.size(); ++j) {
    for (const Value* o : local[j]->outputs()) {
      live += bytesOf(o);
      if (!last.count(o)) dies[j].push_back(o);
    }
    c.activation[owner[j]] = std::max(c.activation[owner[j]], live);
    for (const Value* v : dies[j]) live -= bytesOf(v);
  }
  // Crossing bytes: a value computed in node a and last read in node b
  // crosses every cut a+1 .. b (a difference array over cut positions).
  std::vector<int64_t> diff(n + 2, 0);
  for (size_t j = 0; j < local.size(); ++j) {
    for (const Value* o : local[j]->outputs()) {
      auto it = lastRead.find(o);
      if (it == lastRead.end()) continue;
      const size_t a = owner[j], b = owner[it->second];
      if (b <= a) continue;
      diff[a + 1] += bytesOf(o);
      diff[b + 1] -= bytesOf(o);
    }
  }
  int64_t run = 0;
  for (size_t k = 0; k <= n; ++k) {
    run += diff[k];
    c.crossing[k] = run;
  }
  c.crossing[0] = c.crossing[n] = 0;
  return c;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Cut {
  std::vector<size_t> begin;  // pp + 1 positions
  bool fits = true;
};

// Steps 3 and 4: \returns the cut, or an empty one when none exists.
Cut bestCut(const NodeCosts& c, const Partition& p, const CostModel& cm, bool boundMemory) {
  const size_t n = c.seconds.size();
  const int pp = p.mesh.pp;
  std::vector<double> prefix(n + 1, 0);
  std::vector<int64_t> wprefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    prefix[i + 1] = prefix[i] + c.seconds[i];
    wprefix[i + 1] = wprefix[i] + c.weights[i];
  }
  auto sendSeconds = [&](int stage, size_t k) {
    if (k >= n || c.crossing[k] == 0) return 0.0;
    std::vector<int> pair = {p.mesh.rankOf(stage, 0, 0), p.mesh.rankOf(stage + 1, 0, 0)};
    return cm.collectiveTime(CollectiveKind::kSendRecv, c.crossing[k], 2, cm.crossesNodes(pair));
  };
  const int64_t cap = cm.memoryCapacity();
  std::vector<std::vector<double>> best(pp + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<size_t>> from(pp + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (int j = 1; j <= pp; ++j) {
    for (size_t k = static_cast<size_t>(j); k + static_cast<size_t>(pp - j) <= n; ++k) {
      const double send = sendSeconds(j - 1, k);
      int64_t peak = 0;
      for (size_t a = k; a-- > static_cast<size_t>(j - 1);) {
        peak = std::max(peak, c.activation[a]);
        // A stage [a, k) only grows (in time, weights and peak) as a goes
        // down: once it no longer fits, or alone takes as long as the best
        // found for k, no earlier a can do better.
        if (boundMemory && wprefix[k] - wprefix[a] + peak > cap) break;
        double stage = prefix[k] - prefix[a] + send;
        if (stage >= best[j][k]) break;
        if (best[j - 1][a] == kInf) continue;
        double worst = std::max(best[j - 1][a], stage);
        if (worst < best[j][k]) {
          best[j][k] = worst;
          from[j][k] = a;
        }
      }
    }
  }
  Cut cut;
  if (best[pp][n] == kInf) return cut;
  cut.begin.assign(pp + 1, n);
  size_t k = n;
  for (int j = pp; j >= 1; --j) {
    cut.begin[j] = k;
    k = from[j][k];
  }
  cut.begin[0] = 0;
  return cut;
}

std::string ms(double s) { return strCat(std::round(s * 1e6) / 1e3, " ms"); }

}  // namespace

namespace {

/// Sets the nodes' stages and p.stages from `cut`, with the costs `c`.
void applyCut(Graph& g, Partition& p, const CostModel& cm, const NodeCosts& c, const Cut& cut, const char* how) {
  std::vector<Node*> nodes = g.nodes();
  const int pp = p.mesh.pp;
  p.stages.clear();
  std::string sizes, times;
  for (int s = 0; s < pp; ++s) {
    StageInfo info;
    info.firstNode = cut.begin[s];
    info.numNodes = cut.begin[s + 1] - cut.begin[s];
    for (size_t i = cut.begin[s]; i < cut.begin[s + 1]; ++i) {
      nodes[i]->setStage(s);
      info.seconds += c.seconds[i];
      info.weightBytes += c.weights[i];
      info.activationBytes = std::max(info.activationBytes, c.activation[i]);
    }
    if (s + 1 < pp) {
      info.sendBytes = c.crossing[cut.begin[s + 1]];
      std::vector<int> pair = {p.mesh.rankOf(s, 0, 0), p.mesh.rankOf(s + 1, 0, 0)};
      if (info.sendBytes > 0)
        info.seconds += cm.collectiveTime(CollectiveKind::kSendRecv, info.sendBytes, 2, cm.crossesNodes(pair));
    }
    sizes += strCat(s ? ", " : "", info.numNodes);
    times += strCat(s ? ", " : "", ms(info.seconds));
    p.stages.push_back(info);
  }
  p.notes.push_back(strCat("pp=", pp, ": stages of ", sizes, " nodes", how, ", estimated ", times,
                           " per micro-batch (", p.microbatches, " micro-batch", p.microbatches == 1 ? "" : "es", ")",
                           cut.fits ? "" : "; no cut fits one device's memory"));
}

}  // namespace

Status cutStages(Graph& g, Partition& p, const CostModel& cm, StageCostCache* cache, std::tuple<int, int, bool> key) {
  const size_t n = g.numNodes();
  const int pp = p.mesh.pp;
  if (n < static_cast<size_t>(pp))
    return invalidInput("pp=", pp, " needs at least ", pp, " nodes; the graph has ", n);
  for (Node* node : g.nodes()) node->setStage(0);
  // Measured with every node in stage 0 on rank 0, whose groups are the same
  // whatever pp: the same for every pp of one key.
  NodeCosts c;
  if (auto it = cache ? cache->costs.find(key) : decltype(cache->costs)::iterator{};
      cache && it != cache->costs.end() && it->second.seconds.size() == n) {
    c = it->second;
  } else {
    ASSIGN_OR_RETURN(c, measure(g, p, cm));
    if (cache) cache->costs[key] = c;
  }
  Cut cut = bestCut(c, p, cm, /*boundMemory=*/true);
  if (cut.begin.empty()) {
    cut = bestCut(c, p, cm, /*boundMemory=*/false);
    cut.fits = false;
    if (cut.begin.empty()) return internalError("stage cutting found no cut of ", n, " nodes into ", pp, " stages");
  }
  applyCut(g, p, cm, c, cut, "");
  return Status::OK();
}

Status followStages(Graph& g, Partition& p, const CostModel& cm, const std::map<std::string, int>& stages) {
  const std::vector<Node*> nodes = g.nodes();
  const int pp = p.mesh.pp;
  Cut cut;
  cut.begin.assign(pp + 1, nodes.size());
  cut.begin[0] = 0;
  int stage = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto it = stages.find(partitionKey(*nodes[i]));
    if (it == stages.end()) continue;
    if (it->second < stage || it->second >= pp)
      return invalidInput(nodes[i]->describe(), ": its stage ", it->second, " in the plan it follows comes after stage ",
                          stage, " in graph order");
    while (stage < it->second) cut.begin[++stage] = i;
  }
  for (int s = 0; s < pp; ++s)
    if (cut.begin[s + 1] <= cut.begin[s])
      return invalidInput("stage ", s, " of the plan it follows has none of this graph's nodes");
  for (Node* node : nodes) node->setStage(0);
  ASSIGN_OR_RETURN(NodeCosts c, measure(g, p, cm));
  applyCut(g, p, cm, c, cut, " (as the plan it follows)");
  return Status::OK();
}

}  // namespace pcc
