// fold-constants: evaluates at compile time every node whose inputs are all
// constants.
//
// Algorithm:
//  1. Walk the nodes in topological order; skip collectives and the nodes
//     that shouldFold (compiler/ir/fold_policy.h, the importer's policy too)
//     refuses: a non-constant input, or outputs over the size limits (folding
//     must not turn a small graph into large weights).
//  2. Run the node (runNode of compiler/eval: the kernel entry the evaluator
//     and the runtime share) on the constant inputs. A kernel that fails
//     leaves the node alone (reported to ctx.log): the graph still computes
//     the same thing at run time. A result whose type differs from the
//     node's is an error, as in the evaluator.
//  3. Add one constant per output (named after it, keeping its sharding) and
//     redirect every use to it, so later nodes of the same walk see constants
//     and chains fold in one pass.
//  4. Collect the folded nodes; erase them after the walk, then drop the
//     constants that became unused.
// Region nodes: an If whose condition is a constant is replaced, before the
// walk, by a copy of the branch it takes (inlineBody), whose nodes the walk
// then folds. Other region nodes are not evaluated here; steps 1-4 run inside
// each of their bodies, a graph of its own.

#include <memory>

#include "compiler/eval/evaluator.h"
#include "compiler/ir/fold_policy.h"
#include "compiler/ir/regions.h"
#include "passes/registry.h"

namespace pcc {

namespace {

class FoldConstantsPass : public Pass {
 public:
  explicit FoldConstantsPass(FoldLimits limits) : limits_(limits) {}
  std::string_view name() const override { return "fold-constants"; }

  StatusOr<bool> run(Graph& g, PassContext& ctx) override { return foldGraph(g, ctx); }

 private:
  /// Replaces each If of `g` whose condition is a constant by the branch it
  /// takes. \returns true if any was.
  StatusOr<bool> inlineConstantIfs(Graph& g) {
    std::vector<Node*> inlined;
    for (Node* n : g.nodes()) {
      if (n->op() != OpKind::If || !n->input(0) || !n->input(0)->isConstant()) continue;
      size_t taken = n->input(0)->constantData().getInt(0) != 0 ? 0 : 1;
      std::vector<Value*> caps(n->inputs().begin() + 1, n->inputs().end());
      ASSIGN_OR_RETURN(std::vector<Value*> results, inlineBody(g, n, taken, caps));
      for (size_t i = 0; i < results.size(); ++i) g.replaceAllUsesWith(n->output(i), results[i]);
      inlined.push_back(n);
    }
    if (inlined.empty()) return false;
    g.eraseNodes(inlined);
    return true;
  }

  StatusOr<bool> foldGraph(Graph& g, PassContext& ctx) {
    ASSIGN_OR_RETURN(bool changed, inlineConstantIfs(g));
    std::vector<Node*> folded;
    for (Node* n : g.nodes()) {
      for (const auto& b : n->bodies()) {
        ASSIGN_OR_RETURN(bool bodyChanged, foldGraph(*b, ctx));
        changed |= bodyChanged;
      }
      if (isCollective(n->op()) || isRegionOp(n->op())) continue;
      std::vector<TensorType> outTypes;
      for (const Value* o : n->outputs()) outTypes.push_back(o->type());
      if (!shouldFold(n->inputs(), outTypes, limits_)) continue;

      std::vector<const Tensor*> args;
      for (const Value* v : n->inputs()) args.push_back(v ? &v->constantData() : nullptr);
      // runNode checks the results against the node's types (a mismatch is
      // an internal error, returned; a kernel refusing its inputs is not).
      auto results = runNode(*n, args);
      if (!results.ok() && results.status().code() == StatusCode::kInternal) return results.status();
      if (!results.ok()) {
        if (ctx.log) *ctx.log << "fold-constants: left " << n->describe() << " alone: " << results.status().message() << "\n";
        continue;
      }
      for (size_t i = 0; i < results->size(); ++i) {
        Value* o = n->output(i);
        Value* c = g.addConstant(g.uniqueName(o->name() + "_folded"), std::move((*results)[i]));
        c->setSharding(o->sharding());
        g.replaceAllUsesWith(o, c);
      }
      folded.push_back(n);
    }
    if (folded.empty()) {
      if (changed) g.eraseUnusedConstants();
      return changed;
    }
    g.eraseNodes(folded);
    g.eraseUnusedConstants();
    return true;
  }

  FoldLimits limits_;
};

}  // namespace

std::unique_ptr<Pass> createFoldConstantsPass(FoldLimits limits) {
  return std::make_unique<FoldConstantsPass>(limits);
}

}  // namespace pcc
