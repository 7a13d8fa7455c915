// Evaluation is a single walk over the nodes in topological order:
//  1. check the inputs against the graph's input types;
//  2. bind inputs and constants (constants are shared, not copied);
//  3. for each node: gather its input tensors, run the op's reference kernel,
//     check the results against the node's recorded output types, then drop
//     every input whose last use this was;
//  4. return the graph outputs.

#include "compiler/eval/evaluator.h"

#include <unordered_map>

#include "compiler/ir/text.h"
#include "runtime/ops/registry.h"
#include "runtime/support/random.h"

namespace pcc {

StatusOr<std::vector<Tensor>> evaluateGraph(const Graph& g, const std::vector<Tensor>& inputs) {
  if (inputs.size() != g.inputs().size())
    return invalidInput("graph @", g.name(), " takes ", g.inputs().size(), " inputs, got ", inputs.size());
  std::unordered_map<const Value*, Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = g.inputs()[i];
    if (inputs[i].type() != v->type())
      return invalidInput("input ", i, " ", valueRefText(v->name()), " has type ", inputs[i].type().str(), ", the graph expects ",
                          v->type().str());
    env[v] = inputs[i];
  }
  for (const Value* c : g.constants()) env[c] = c->constantData();

  // Remaining uses per value; graph outputs hold one extra use that is never released.
  std::unordered_map<const Value*, int> uses = g.useCounts();

  for (const Node* n : g.nodes()) {
    std::string what = n->name().empty() ? strCat("node defining ", valueRefText(n->output(0)->name()), " (", n->opName(), ")")
                                         : n->describe();
    if (isCollective(n->op())) return unsupported(what, ": collectives cannot run in the single-device evaluator");
    std::vector<const Tensor*> args;
    for (const Value* v : n->inputs()) {
      if (!v) {
        args.push_back(nullptr);
        continue;
      }
      auto it = env.find(v);
      if (it == env.end()) return internalError(what, ": input ", valueRefText(v->name()), " has no value (graph not topologically ordered?)");
      args.push_back(&it->second);
    }
    auto results = runOp(n->opName(), args, n->attrs());
    if (!results.ok()) return results.status().withContext(what);
    if (results->size() != n->outputs().size())
      return internalError(what, ": kernel returned ", results->size(), " outputs, the node has ", n->outputs().size());
    for (size_t i = 0; i < results->size(); ++i) {
      const Value* o = n->output(i);
      if ((*results)[i].type() != o->type())
        return internalError(what, ": output ", i, " ", valueRefText(o->name()), " computed as ", (*results)[i].type().str(),
                             " but the graph says ", o->type().str());
    }
    // Release inputs at their last use (before binding outputs: a node never reads its own outputs).
    for (const Value* v : n->inputs()) {
      if (!v) continue;
      auto it = uses.find(v);
      if (it != uses.end() && --it->second == 0) env.erase(v);
    }
    for (size_t i = 0; i < results->size(); ++i) {
      const Value* o = n->output(i);
      if (uses.count(o)) env[o] = std::move((*results)[i]);
    }
  }

  std::vector<Tensor> outs;
  for (const Value* v : g.outputs()) {
    auto it = env.find(v);
    if (it == env.end()) return internalError("graph output ", valueRefText(v->name()), " was never computed");
    outs.push_back(it->second);
  }
  return outs;
}

std::vector<Tensor> randomInputs(const Graph& g, uint64_t seed) {
  std::vector<TensorType> types;
  for (const Value* in : g.inputs()) types.push_back(in->type());
  return pseudoRandomTensors(types, seed);
}

}  // namespace pcc
