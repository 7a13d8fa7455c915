// Overlap scheduling (schedule.h).
//
// Algorithm:
//  1. Cut the node list at barriers (schedule.h); each segment between two
//     barriers is scheduled on its own and the barriers stay where they were.
//  2. In a segment, a node depends on the producers of its inputs in the
//     segment, and each collective on the collective before it.
//  3. List scheduling, the ready nodes kept by original position:
//     a. a ready collective is issued at once (it is in flight until a node
//        reading its output is issued);
//     b. else the lowest ready node r is issued unless it reads a collective
//        in flight; then the lowest ready node that reads none and lies at
//        most `window` positions after r goes first, if there is one;
//     c. else r (the executor waits for the collective there).
//  Every choice depends on positions and edges only: deterministic.
#include "passes/schedule.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace pcc {

bool isOverlappableCollective(OpKind op) {
  return op == OpKind::AllReduce || op == OpKind::AllGather || op == OpKind::ReduceScatter ||
         op == OpKind::AllToAll;
}

namespace {

/// \returns whether `op` is control flow (If, Loop, Scan; isRegionOp also counts Fused).
bool isControlFlow(OpKind op) { return op == OpKind::If || op == OpKind::Loop || op == OpKind::Scan; }

/// \returns whether `g` holds a node with an effect or a collective (looked for in bodies too).
bool holdsEffects(const Graph& g) {
  for (const Node* n : g.nodes()) {
    if (isCollective(n->op()) || isControlFlow(n->op()) || n->outputs().empty()) return true;
    for (const auto& b : n->bodies())
      if (holdsEffects(*b)) return true;
  }
  return false;
}

bool isBarrier(const Node& n) {
  if (n.op() == OpKind::Send || n.op() == OpKind::Recv || isControlFlow(n.op()) || n.outputs().empty()) return true;
  for (const auto& b : n.bodies())
    if (holdsEffects(*b)) return true;
  return false;
}

/// Schedules nodes[s, e) (no barrier among them), appending to `out`.
void scheduleSegment(const std::vector<Node*>& nodes, size_t s, size_t e, size_t window, std::vector<Node*>& out) {
  std::unordered_map<const Node*, size_t> pos;
  for (size_t i = s; i < e; ++i) pos[nodes[i]] = i;
  std::vector<std::vector<size_t>> succs(e - s);
  std::vector<int> waiting(e - s, 0);
  auto edge = [&](size_t from, size_t to) {
    std::vector<size_t>& v = succs[from - s];
    if (std::find(v.begin(), v.end(), to) != v.end()) return;
    v.push_back(to);
    ++waiting[to - s];
  };
  size_t lastCollective = e;
  for (size_t i = s; i < e; ++i) {
    for (const Value* v : nodes[i]->inputs()) {
      if (!v || !v->producer()) continue;
      auto it = pos.find(v->producer());
      if (it != pos.end()) edge(it->second, i);
    }
    if (isOverlappableCollective(nodes[i]->op())) {
      if (lastCollective != e) edge(lastCollective, i);
      lastCollective = i;
    }
  }
  std::set<size_t> ready;
  for (size_t i = s; i < e; ++i)
    if (waiting[i - s] == 0) ready.insert(i);
  std::unordered_set<const Node*> inFlight;
  auto readsInFlight = [&](size_t i) {
    for (const Value* v : nodes[i]->inputs())
      if (v && v->producer() && inFlight.count(v->producer())) return true;
    return false;
  };
  while (!ready.empty()) {
    size_t pick = *ready.begin();
    auto coll = std::find_if(ready.begin(), ready.end(),
                             [&](size_t i) { return isOverlappableCollective(nodes[i]->op()); });
    if (coll != ready.end()) {
      pick = *coll;
    } else if (!inFlight.empty() && readsInFlight(pick)) {
      for (size_t i : ready) {
        if (i > pick + window) break;
        if (!readsInFlight(i)) {
          pick = i;
          break;
        }
      }
    }
    ready.erase(pick);
    Node* n = nodes[pick];
    for (const Value* v : n->inputs())
      if (v && v->producer()) inFlight.erase(v->producer());
    if (isOverlappableCollective(n->op())) inFlight.insert(n);
    out.push_back(n);
    for (size_t t : succs[pick - s])
      if (--waiting[t - s] == 0) ready.insert(t);
  }
}

}  // namespace

int64_t nodesBeforeFirstReaders(const std::vector<Node*>& order) {
  int64_t total = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (!isOverlappableCollective(order[i]->op())) continue;
    size_t j = i + 1;
    for (; j < order.size(); ++j) {
      const auto& ins = order[j]->inputs();
      if (std::find(ins.begin(), ins.end(), order[i]->output(0)) != ins.end()) break;
    }
    total += static_cast<int64_t>(j - i - 1);
  }
  return total;
}

std::vector<Node*> overlapOrder(const Graph& g, const OverlapScheduleOptions& opts, OverlapScheduleStats* stats) {
  std::vector<Node*> nodes = g.nodes();
  std::vector<Node*> out;
  out.reserve(nodes.size());
  size_t s = 0;
  for (size_t i = 0; i <= nodes.size(); ++i) {
    if (i < nodes.size() && !isBarrier(*nodes[i])) continue;
    scheduleSegment(nodes, s, i, opts.window, out);
    if (i < nodes.size()) out.push_back(nodes[i]);
    s = i + 1;
  }
  if (stats) {
    *stats = {};
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (isOverlappableCollective(nodes[i]->op())) ++stats->collectives;
      if (out[i] != nodes[i]) ++stats->moved;
    }
    stats->overlapBefore = nodesBeforeFirstReaders(nodes);
    stats->overlapAfter = nodesBeforeFirstReaders(out);
  }
  return out;
}

StatusOr<OverlapScheduleStats> scheduleOverlap(Graph& g, const OverlapScheduleOptions& opts) {
  OverlapScheduleStats stats;
  std::vector<Node*> order = overlapOrder(g, opts, &stats);
  if (!g.reorderNodes(order)) return internalError("overlap scheduling of graph '", g.name(), "' broke a dependence");
  return stats;
}

}  // namespace pcc
