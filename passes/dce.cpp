// dce: removes nodes whose results nothing needs, and unused constants.
//
// Algorithm:
//  1. Mark the graph outputs live.
//  2. Walk the nodes in reverse topological order: a node with a live output,
//     or with no output at all (Send, kept for its effect), is live and marks
//     its inputs live; any other node is dead (every other op is free of side
//     effects).
//  3. Collect the dead nodes and erase them together after the walk.
//  4. Erase the constants that no node and no output reads. Graph inputs stay:
//     they are the graph's interface.
//  5. Bodies of the remaining region nodes (If, Loop, Scan) get steps 1-4 of
//     their own: their results are live, their parameters stay.

#include <memory>
#include <unordered_set>

#include "passes/registry.h"

namespace pcc {

namespace {

/// Steps 1-5 on `g`. \returns true if it changed.
bool dceGraph(Graph& g) {
  std::unordered_set<const Value*> live(g.outputs().begin(), g.outputs().end());
  std::vector<Node*> nodes = g.nodes();
  std::vector<Node*> dead;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    bool isLive = n->outputs().empty();
    for (const Value* o : n->outputs()) isLive |= live.count(o) != 0;
    if (!isLive) {
      dead.push_back(n);
      continue;
    }
    for (const Value* v : n->inputs())
      if (v) live.insert(v);
  }
  size_t constantsBefore = g.constants().size();
  if (!dead.empty()) g.eraseNodes(dead);
  g.eraseUnusedConstants();
  bool changed = !dead.empty() || g.constants().size() != constantsBefore;
  for (Node* n : g.nodes())
    for (const auto& b : n->bodies()) changed |= dceGraph(*b);
  return changed;
}

class DcePass : public Pass {
 public:
  std::string_view name() const override { return "dce"; }

  StatusOr<bool> run(Graph& g, PassContext& ctx) override { return dceGraph(g); }
};

}  // namespace

std::unique_ptr<Pass> createDcePass() { return std::make_unique<DcePass>(); }

}  // namespace pcc
