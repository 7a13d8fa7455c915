// cse: merges nodes that compute the same thing, and duplicate small constants.
//
// Algorithm:
//  1. Constants: key each constant of at most kMaxConstElements elements by
//     its type and bytes; every later constant with the key of an earlier one
//     has its uses redirected to the earlier one.
//  2. Nodes, in topological order: key each node by op, inputs (after the
//     redirections so far), attributes, stage and output types and shardings. A node
//     whose key was seen has each output's uses redirected to the first node's
//     matching output and is collected; otherwise its key is recorded.
//     Because inputs are rewritten as the walk goes, whole duplicated chains
//     merge in one pass.
//  3. Erase the collected nodes after the walk, then the constants step 1 left
//     unused.
// Bodies of region nodes (If, Loop, Scan) are graphs of their own: steps 1-3
// run inside each body, with keys of its own (a body's node never merges with
// one of the enclosing graph or of another body), before the region node is
// keyed; a region node's key includes its bodies' full text, so two region
// nodes merge only when their bodies are identical.

#include <memory>
#include <string>
#include <unordered_map>

#include "compiler/ir/text.h"
#include "passes/registry.h"

namespace pcc {

namespace {

/// Larger constants are weights; comparing them byte by byte costs more than
/// merging them could save in this pass.
constexpr int64_t kMaxConstElements = 1024;

std::string shardingKey(const Value* v) { return v->sharding() ? v->sharding()->str() : std::string("none"); }

/// \returns a string equal for two nodes iff they compute the same values.
std::string nodeKey(const Node* n) {
  std::string key = strCat(static_cast<int>(n->op()), "|", n->stage(), "|");
  for (const Value* v : n->inputs()) key += strCat(v ? v->id() : -1, ",");
  key += "|";
  // The variant index keeps an empty int list apart from an empty float list.
  for (const auto& [name, a] : n->attrs().all()) key += strCat(name, "=", a.index(), ":", attributeToString(a), ";");
  key += "|";
  for (const Value* o : n->outputs()) key += o->type().str() + " " + shardingKey(o) + ";";
  PrintOptions full;
  full.maxConstElements = -1;
  for (const auto& b : n->bodies()) key += "|" + printGraph(*b, full);
  return key;
}

/// Steps 1-3 on `g` and, first, on the bodies of its nodes. \returns true if it changed.
bool cseGraph(Graph& g) {
  bool bodiesChanged = false;
  for (Node* n : g.nodes())
    for (const auto& b : n->bodies()) bodiesChanged |= cseGraph(*b);
  bool mergedConstants = false;
  std::unordered_map<std::string, Value*> constants;
  for (Value* c : g.constants()) {
    if (c->type().numel() > kMaxConstElements) continue;  // decided by the type: large weights are not read
    const Tensor& t = c->constantData();
    std::string key = t.type().str() + "|" + shardingKey(c) + "|" +
                      std::string(static_cast<const char*>(t.raw()), t.nbytes());
    auto [it, inserted] = constants.emplace(std::move(key), c);
    if (inserted) continue;
    g.replaceAllUsesWith(c, it->second);
    mergedConstants = true;
  }

  std::unordered_map<std::string, Node*> seen;
  std::vector<Node*> dead;
  for (Node* n : g.nodes()) {
    auto [it, inserted] = seen.emplace(nodeKey(n), n);
    if (inserted) continue;
    Node* first = it->second;
    for (size_t i = 0; i < n->outputs().size(); ++i) g.replaceAllUsesWith(n->output(i), first->output(i));
    dead.push_back(n);
  }
  if (!dead.empty()) g.eraseNodes(dead);
  if (mergedConstants) g.eraseUnusedConstants();
  return bodiesChanged || mergedConstants || !dead.empty();
}

class CsePass : public Pass {
 public:
  std::string_view name() const override { return "cse"; }

  StatusOr<bool> run(Graph& g, PassContext& ctx) override { return cseGraph(g); }
};

}  // namespace

std::unique_ptr<Pass> createCsePass() { return std::make_unique<CsePass>(); }

}  // namespace pcc
