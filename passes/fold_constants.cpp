// fold-constants: evaluates at compile time every node whose inputs are all
// constants.
//
// Algorithm:
//  1. Walk the nodes in topological order; skip collectives and the nodes
//     that shouldFold (compiler/ir/fold_policy.h, the importer's policy too)
//     refuses: a non-constant input, or outputs over the size limits (folding
//     must not turn a small graph into large weights).
//  2. Run the node's reference kernel (runOp) on the constant inputs. A
//     kernel that fails leaves the node alone (reported to ctx.log): the
//     graph still computes the same thing at run time.
//  3. Add one constant per output (named after it, keeping its sharding) and
//     redirect every use to it, so later nodes of the same walk see constants
//     and chains fold in one pass.
//  4. Collect the folded nodes; erase them after the walk, then drop the
//     constants that became unused.

#include <memory>

#include "compiler/ir/fold_policy.h"
#include "passes/registry.h"
#include "runtime/ops/registry.h"

namespace pcc {

namespace {

class FoldConstantsPass : public Pass {
 public:
  explicit FoldConstantsPass(FoldLimits limits) : limits_(limits) {}
  std::string_view name() const override { return "fold-constants"; }

  StatusOr<bool> run(Graph& g, PassContext& ctx) override {
    std::vector<Node*> folded;
    for (Node* n : g.nodes()) {
      if (isCollective(n->op())) continue;
      std::vector<TensorType> outTypes;
      for (const Value* o : n->outputs()) outTypes.push_back(o->type());
      if (!shouldFold(n->inputs(), outTypes, limits_)) continue;

      std::vector<const Tensor*> args;
      for (const Value* v : n->inputs()) args.push_back(v ? &v->constantData() : nullptr);
      auto results = runOp(n->opName(), args, n->attrs());
      if (!results.ok()) {
        if (ctx.log) *ctx.log << "fold-constants: left " << n->describe() << " alone: " << results.status().message() << "\n";
        continue;
      }
      if (results->size() != n->outputs().size())
        return internalError(n->describe(), ": kernel returned ", results->size(), " outputs, the node has ",
                             n->outputs().size());
      for (size_t i = 0; i < results->size(); ++i) {
        Value* o = n->output(i);
        if ((*results)[i].type() != o->type())
          return internalError(n->describe(), ": folded output ", i, " is ", (*results)[i].type().str(),
                               " but the node says ", o->type().str());
        Value* c = g.addConstant(g.uniqueName(o->name() + "_folded"), std::move((*results)[i]));
        c->setSharding(o->sharding());
        g.replaceAllUsesWith(o, c);
      }
      folded.push_back(n);
    }
    if (folded.empty()) return false;
    g.eraseNodes(folded);
    g.eraseUnusedConstants();
    return true;
  }

 private:
  FoldLimits limits_;
};

}  // namespace

std::unique_ptr<Pass> createFoldConstantsPass(FoldLimits limits) {
  return std::make_unique<FoldConstantsPass>(limits);
}

}  // namespace pcc
