// Evaluation is a single walk over the nodes in topological order:
//  1. check the inputs against the graph's input types;
//  2. bind inputs and constants (constants are shared, not copied);
//  3. for each node: gather its input tensors, run it (runNode: the kernel
//     entry of runtime/ops shared with the folder and the runtime, or the
//     node's bodies), check the results against the node's recorded output
//     types, then drop every input whose last use this was;
//  4. return the graph outputs.
// Region nodes (If, Loop, Scan) run their bodies with this same function:
// If the taken branch, Loop and Scan their body once per iteration, slicing
// Scan's inputs and stacking the scan outputs along their axes.

#include "compiler/eval/evaluator.h"

#include <algorithm>
#include <unordered_map>

#include "compiler/ir/regions.h"
#include "compiler/ir/text.h"
#include "runtime/ops/kernel_call.h"
#include "runtime/support/random.h"
#include "runtime/support/tensor_block.h"

namespace pcc {

namespace {

/// Loops without a trip count stop when their condition does; a body that
/// never says stop is cut at this many iterations (an error, not a hang).
constexpr int64_t kMaxLoopIterations = int64_t{1} << 24;

Tensor flag(const TensorType& t, int64_t v) {
  Tensor x = Tensor::zeros(t);
  x.setInt(0, v);
  return x;
}

StatusOr<std::vector<Tensor>> runBody(const Graph& body, std::vector<Tensor> args, const std::string& what) {
  auto r = evaluateGraph(body, args);
  if (!r.ok()) return r.status().withContext(strCat(what, ": body @", body.name()));
  return r;
}

StatusOr<std::vector<Tensor>> runIf(const Node& n, const std::vector<const Tensor*>& args, const std::string& what) {
  std::vector<Tensor> caps;
  for (size_t i = 1; i < args.size(); ++i) caps.push_back(*args[i]);
  return runBody(*n.body(args[0]->getInt(0) != 0 ? 0 : 1), std::move(caps), what);
}

StatusOr<std::vector<Tensor>> runLoop(const Node& n, const std::vector<const Tensor*>& args, const std::string& what) {
  const Graph& body = *n.body(0);
  size_t caps = static_cast<size_t>(numCaptures(n));
  size_t carriedCount = args.size() - 2 - caps;
  int64_t trip = args[0] ? std::max<int64_t>(0, args[0]->getInt(0)) : -1;  // -1: no trip count
  bool cond = args[1] ? args[1]->getInt(0) != 0 : true;
  std::vector<Tensor> carried;
  for (size_t i = 0; i < carriedCount; ++i) carried.push_back(*args[2 + i]);
  size_t scanCount = body.outputs().size() - 1 - carriedCount;
  std::vector<std::vector<Tensor>> scans(scanCount);
  for (int64_t it = 0; (trip < 0 || it < trip) && cond; ++it) {
    if (it >= kMaxLoopIterations)
      return unsupported(what, ": ran ", kMaxLoopIterations, " iterations without its condition turning false");
    std::vector<Tensor> in{flag(body.inputs()[0]->type(), it), flag(body.inputs()[1]->type(), 1)};
    for (Tensor& t : carried) in.push_back(std::move(t));
    for (size_t i = 0; i < caps; ++i) in.push_back(*args[2 + carriedCount + i]);
    ASSIGN_OR_RETURN(std::vector<Tensor> out, runBody(body, std::move(in), what));
    cond = out[0].getInt(0) != 0;
    carried.assign(out.begin() + 1, out.begin() + 1 + static_cast<std::ptrdiff_t>(carriedCount));
    for (size_t k = 0; k < scanCount; ++k) scans[k].push_back(std::move(out[1 + carriedCount + k]));
  }
  std::vector<Tensor> results = std::move(carried);
  for (size_t k = 0; k < scanCount; ++k) {
    const TensorType& declared = n.output(carriedCount + k)->type();
    if (static_cast<int64_t>(scans[k].size()) != declared.shape[0])
      return invalidInput(what, ": ran ", scans[k].size(), " iterations but scan output ", k, " is declared as ",
                          declared.str());
    results.push_back(stackAlong(scans[k], body.outputs()[1 + carriedCount + k]->type(), 0));
  }
  return results;
}

StatusOr<std::vector<Tensor>> runScan(const Node& n, const std::vector<const Tensor*>& args, const std::string& what) {
  const Graph& body = *n.body(0);
  size_t caps = static_cast<size_t>(numCaptures(n));
  size_t m = static_cast<size_t>(n.attrs().getInt("num_scan_inputs", 0));
  size_t states = args.size() - m - caps;
  size_t scanCount = body.outputs().size() - states;
  auto axesOr = scanAxes(n, scanCount);
  if (!axesOr.ok()) return axesOr.status().withContext(what);
  ScanAxes axes = *axesOr;
  auto tripOr = scanTripCount(n);
  if (!tripOr.ok()) return tripOr.status().withContext(what);
  int64_t trip = *tripOr;
  std::vector<Tensor> state;
  for (size_t i = 0; i < states; ++i) state.push_back(*args[i]);
  std::vector<std::vector<Tensor>> scans(scanCount);
  for (int64_t t = 0; t < trip; ++t) {
    std::vector<Tensor> in = std::move(state);
    for (size_t j = 0; j < m; ++j)
      in.push_back(takeAlong(*args[states + j], static_cast<size_t>(axes.inputAxes[j]), axes.inputReverse[j] ? trip - 1 - t : t));
    for (size_t i = 0; i < caps; ++i) in.push_back(*args[states + m + i]);
    ASSIGN_OR_RETURN(std::vector<Tensor> out, runBody(body, std::move(in), what));
    state.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(states));
    for (size_t k = 0; k < scanCount; ++k) scans[k].push_back(std::move(out[states + k]));
  }
  std::vector<Tensor> results = std::move(state);
  for (size_t k = 0; k < scanCount; ++k) {
    if (axes.outputReverse[k]) std::reverse(scans[k].begin(), scans[k].end());
    const TensorType& part = body.outputs()[states + k]->type();
    int64_t r = part.rank() + 1, ax = axes.outputAxes[k];
    results.push_back(stackAlong(scans[k], part, static_cast<size_t>(ax < 0 ? ax + r : ax)));
  }
  return results;
}

/// Runs region node `n` on `args` (its inputs; absent ones nullptr).
StatusOr<std::vector<Tensor>> runRegion(const Node& n, const std::vector<const Tensor*>& args, const std::string& what) {
  RETURN_IF_ERROR(checkRegionNode(n, what));
  switch (n.op()) {
    case OpKind::If: return runIf(n, args, what);
    case OpKind::Loop: return runLoop(n, args, what);
    case OpKind::Scan: return runScan(n, args, what);
    case OpKind::Fused: {
      std::vector<Tensor> in;
      for (const Tensor* t : args) in.push_back(t ? *t : Tensor{});
      return runBody(*n.body(0), std::move(in), what);
    }
    default: return internalError(what, ": not a region op");
  }
}

}  // namespace

std::string nodeWhere(const Node& n) {
  return n.name().empty() ? strCat("node defining ", valueRefText(n.output(0)->name()), " (", n.opName(), ")")
                          : n.describe();
}

StatusOr<std::vector<Tensor>> runNode(const Node& n, const std::vector<const Tensor*>& args) {
  std::string what = nodeWhere(n);
  if (isCollective(n.op())) return unsupported(what, ": collectives cannot run in the single-device evaluator");
  std::vector<TensorType> declared;
  for (const Value* o : n.outputs()) declared.push_back(o->type());
  StatusOr<std::vector<Tensor>> results = std::vector<Tensor>{};
  if (isRegionOp(n.op())) {
    results = runRegion(n, args, what);
  } else {
    std::vector<TensorType> types;
    std::vector<const Tensor*> known;
    for (const Tensor* t : args) {
      types.push_back(t && t->defined() ? t->type() : TensorType{});
      known.push_back(t && t->defined() ? t : nullptr);
    }
    ASSIGN_OR_RETURN(OpKernel k, OpKernel::prepare(n.op(), n.attrs(), std::move(types), std::move(known), what));
    RETURN_IF_ERROR(k.checkDeclared(declared, StatusCode::kInternal, [&](size_t i) {
      return strCat(valueRefText(n.output(i)->name()), " in the graph");
    }));
    results = k.run(args);
  }
  if (!results.ok()) return results.status();
  if (results->size() != declared.size())
    return internalError(what, ": kernel returned ", results->size(), " outputs, the node has ", declared.size());
  for (size_t i = 0; i < results->size(); ++i)
    if ((*results)[i].type() != declared[i])
      return internalError(what, ": output ", i, " ", valueRefText(n.output(i)->name()), " computed as ",
                           (*results)[i].type().str(), " but the graph says ", declared[i].str());
  return results;
}

StatusOr<std::vector<Tensor>> evaluateGraph(const Graph& g, const std::vector<Tensor>& inputs) {
  return evaluateGraphObserved(g, inputs, nullptr);
}

StatusOr<std::vector<Tensor>> evaluateGraphObserved(const Graph& g, const std::vector<Tensor>& inputs,
                                                    const NodeObserver& observe) {
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
    std::vector<const Tensor*> args;
    for (const Value* v : n->inputs()) {
      if (!v) {
        args.push_back(nullptr);
        continue;
      }
      auto it = env.find(v);
      if (it == env.end())
        return internalError(nodeWhere(*n), ": input ", valueRefText(v->name()),
                             " has no value (graph not topologically ordered?)");
      args.push_back(&it->second);
    }
    ASSIGN_OR_RETURN(std::vector<Tensor> results, runNode(*n, args));
    if (observe) observe(*n, results);
    // Release inputs at their last use (before binding outputs: a node never reads its own outputs).
    for (const Value* v : n->inputs()) {
      if (!v) continue;
      auto it = uses.find(v);
      if (it != uses.end() && --it->second == 0) env.erase(v);
    }
    for (size_t i = 0; i < results.size(); ++i) {
      const Value* o = n->output(i);
      if (uses.count(o)) env[o] = std::move(results[i]);
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
