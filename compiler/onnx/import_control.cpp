// If, Loop and Scan (see import_control.h for what becomes of them).
//
// A body is imported with the same node importer as the main graph, through a
// child ImportContext:
//   - inline (the default): its nodes go into the enclosing graph, its inputs
//     bound to values of that graph and the names it does not define looked
//     up in the enclosing contexts; constant inputs make its nodes fold as
//     they are imported. If imports the taken branch once; Loop and Scan
//     import their body once per iteration (Scan's slices are Gathers, scan
//     outputs Unsqueeze + Concat).
//   - as a region (a condition or trip count computed at run time, a Loop
//     or Scan too large to unroll, or ImportOptions::keepControlFlow; Scan-8
//     is always unrolled): its nodes go into a Graph of its own, the body of
//     an If / Loop / Scan node. Outer values it reads by name become
//     parameters (captures, passed as the node's trailing inputs); outer
//     constants are copied in instead.
// A Loop whose trip count and condition are constants is unrolled first; when
// its body turns out to compute the condition at run time, or the unrolling
// passes kMaxUnrolledNodes (or the model's kMaxUnrolledIterations, which
// bounds loops nested in loops: without it each outer iteration would unroll
// the inner loop anew, without end for loops that never stop), the nodes it
// added are erased and the Loop is kept as a region. Every output of a region node has a static type, or the node
// is refused: If's branches must agree, and a Loop run at run time has scan
// outputs only when it runs exactly M times.
#include "compiler/onnx/import_control.h"

#include <algorithm>
#include <unordered_set>

#include "compiler/ir/regions.h"

namespace pcc {

namespace {

const onnx::GraphProto* graphAttr(const onnx::NodeProto& n, std::string_view name) {
  for (const auto& a : n.attribute())
    if (a.name() == name && a.has_g()) return &a.g();
  return nullptr;
}

StatusOr<const onnx::GraphProto*> requiredGraph(const ImportContext& ctx, std::string_view name) {
  if (const onnx::GraphProto* g = graphAttr(ctx.node(), name)) return g;
  return ctx.invalid("graph attribute '", name, "' is required");
}

/// \returns the static tensor type `v` declares, or nullopt.
std::optional<TensorType> declaredType(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return std::nullopt;
  const auto& tt = v.type().tensor_type();
  std::optional<DType> dt = dtypeFromOnnx(tt.elem_type());
  if (!dt) return std::nullopt;
  TensorType t{*dt, {}};
  for (const auto& d : tt.shape().dim()) {
    if (!d.has_dim_value()) return std::nullopt;
    t.shape.push_back(d.dim_value());
  }
  return t;
}

/// Loop's iteration number and condition: the body's declared one-element type, else a scalar.
TensorType flagType(const onnx::ValueInfoProto& v, DType dtype) {
  std::optional<TensorType> t = declaredType(v);
  return t && t->dtype == dtype && t->numel() == 1 ? *t : TensorType{dtype, {}};
}

Tensor flagTensor(const TensorType& t, int64_t v) {
  Tensor x = Tensor::zeros(t);
  x.setInt(0, v);
  return x;
}

/// Checks that each name `body` defines is defined once, and that every name
/// it reads from outside resolves in `ctx`.
Status checkFreeNames(const ImportContext& ctx, const onnx::GraphProto& body) {
  // Names defined in the body are defined once, as in the main graph: an
  // initializer may carry an input's name (its default), nothing else repeats.
  std::unordered_set<std::string> inputs, initializers, defined;
  for (const auto& in : body.input()) {
    if (!inputs.insert(in.name()).second)
      return ctx.invalid("body '", body.name(), "' input '", in.name(), "' is declared twice");
    defined.insert(in.name());
  }
  for (const auto& t : body.initializer()) {
    if (!initializers.insert(t.name()).second)
      return ctx.invalid("body '", body.name(), "' initializer '", t.name(), "' is defined twice");
    defined.insert(t.name());
  }
  for (const auto& n : body.node())
    for (const std::string& out : n.output())
      if (!out.empty() && !defined.insert(out).second)
        return ctx.invalid("body '", body.name(), "' value '", out, "' is defined twice (node '", n.name(), "')");
  for (const std::string& name : freeNames(body))
    if (!ctx.lookup(name))
      return ctx.invalid("body '", body.name(), "' reads '", name, "', which is not defined in it or an enclosing graph");
  return Status::OK();
}

/// Defines `body`'s initializers in `sub` as constants of its graph. An error
/// names the node `ctx` imports (the one owning the body): `sub` has begun
/// no node yet.
Status defineInitializers(const ImportContext& ctx, ImportContext& sub, const onnx::GraphProto& body) {
  for (const auto& t : body.initializer()) {
    auto tensor = sub.loadTensor(t);
    if (!tensor.ok()) return ctx.invalid("body '", body.name(), "' initializer: ", tensor.status().message());
    sub.define(t.name(), sub.graph().addConstant(t.name(), std::move(tensor).value()));
  }
  return Status::OK();
}

/// Imports `body`'s nodes through `sub` and \returns the values of its outputs.
StatusOr<std::vector<Value*>> importBodyNodes(const ImportContext& ctx, ImportContext& sub, const onnx::GraphProto& body) {
  RETURN_IF_ERROR(defineInitializers(ctx, sub, body));
  for (int i = 0; i < body.node_size(); ++i) RETURN_IF_ERROR(importOnnxNode(sub, body.node(i), i));
  std::vector<Value*> outs;
  for (const auto& o : body.output()) {
    Value* v = sub.lookup(o.name());
    if (!v) return ctx.invalid("body '", body.name(), "' output '", o.name(), "' is never defined");
    outs.push_back(v);
  }
  return outs;
}

/// Imports `body` inline into ctx's graph with its inputs bound to `args`.
/// \returns the values of its outputs.
StatusOr<std::vector<Value*>> inlineGraph(ImportContext& ctx, const onnx::GraphProto& body, const std::vector<Value*>& args,
                                          const std::string& prefix) {
  if (static_cast<size_t>(body.input_size()) != args.size())
    return ctx.invalid("body '", body.name(), "' has ", body.input_size(), " inputs, expected ", args.size());
  RETURN_IF_ERROR(checkFreeNames(ctx, body));
  ImportContext sub = ctx.child(ctx.graph(), body, /*seesEnclosing=*/true, prefix);
  for (size_t i = 0; i < args.size(); ++i) sub.define(body.input(static_cast<int>(i)).name(), args[i]);
  return importBodyNodes(ctx, sub, body);
}

/// Region bodies and what they capture.
struct Regions {
  std::vector<std::unique_ptr<Graph>> bodies;
  std::vector<Value*> captures;  // outer values, passed as the node's trailing inputs
};

/// Imports `protos` (with their body names) as region bodies taking
/// parameters of `paramTypes`, then one parameter per captured outer value
/// (the same list for every body).
StatusOr<Regions> importRegions(ImportContext& ctx, const std::vector<std::pair<const onnx::GraphProto*, std::string>>& protos,
                                const std::vector<TensorType>& paramTypes) {
  Regions r;
  std::vector<std::string> captureNames;
  std::unordered_set<std::string> seen;
  for (const auto& [proto, name] : protos) {
    RETURN_IF_ERROR(checkFreeNames(ctx, *proto));
    for (const std::string& s : freeNames(*proto)) {
      Value* v = ctx.lookup(s);
      if (v->isConstant() || !seen.insert(s).second) continue;
      captureNames.push_back(s);
      r.captures.push_back(v);
    }
  }
  for (const auto& [proto, name] : protos) {
    if (static_cast<size_t>(proto->input_size()) != paramTypes.size())
      return ctx.invalid("body '", proto->name(), "' has ", proto->input_size(), " inputs, expected ", paramTypes.size());
    auto g = std::make_unique<Graph>();
    g->setName(name);
    ImportContext sub = ctx.child(*g, *proto, /*seesEnclosing=*/false, ctx.nodeName() + "/" + name + "/");
    for (size_t i = 0; i < paramTypes.size(); ++i) {
      const std::string& pname = proto->input(static_cast<int>(i)).name();
      sub.define(pname, g->addInput(pname, paramTypes[i]));
    }
    for (size_t i = 0; i < captureNames.size(); ++i) sub.define(captureNames[i], g->addInput(r.captures[i]->name(), r.captures[i]->type()));
    for (const std::string& s : freeNames(*proto)) {
      Value* v = ctx.lookup(s);
      if (v->isConstant()) sub.define(s, g->addConstant(v->name(), v->constantData()));
    }
    ASSIGN_OR_RETURN(std::vector<Value*> outs, importBodyNodes(ctx, sub, *proto));
    g->setOutputs(std::move(outs));
    r.bodies.push_back(std::move(g));
  }
  return r;
}

/// Adds the region node: `inputs` then the captures, the bodies, outputs of
/// `types` named as the ONNX node's; checks it and defines its outputs.
Status addRegionNode(ImportContext& ctx, OpKind op, std::vector<Value*> inputs, AttrMap attrs, Regions r,
                     std::vector<TensorType> types) {
  if (types.size() < ctx.numOutputs())
    return ctx.invalid("has ", ctx.numOutputs(), " outputs but its ", op == OpKind::If ? "branches give " : "body gives ",
                       types.size());
  if (op != OpKind::If) attrs.set("captures", static_cast<int64_t>(r.captures.size()));
  inputs.insert(inputs.end(), r.captures.begin(), r.captures.end());
  std::vector<std::string> names;
  for (size_t i = 0; i < types.size(); ++i) {
    std::string n = i < ctx.numOutputs() ? ctx.node().output(static_cast<int>(i)) : std::string();
    names.push_back(n.empty() ? ctx.freshName(strCat(ctx.nodeName(), "_out", i)) : n);
  }
  Node* n = ctx.graph().addNode(op, std::move(inputs), std::move(types), std::move(attrs), ctx.nodeName(), names);
  for (auto& b : r.bodies) n->addBody(std::move(b));
  Status st = checkRegionNode(*n, "the region node");
  if (!st.ok()) return ctx.unsupportedHere(st.message());
  for (size_t i = 0; i < n->outputs().size(); ++i) ctx.setOutput(i, n->output(i));
  return Status::OK();
}

/// \returns `parts` (equal types) stacked along a new dimension `axis`.
StatusOr<Value*> stack(ImportContext& ctx, const std::vector<Value*>& parts, int64_t axis) {
  Value* axes = ctx.constI64({axis}, "stack_axes");
  std::vector<Value*> us;
  for (Value* p : parts) {
    // Tags numbered by part: a fresh name is then found without probing.
    ASSIGN_OR_RETURN(std::vector<Value*> u, ctx.emit(OpKind::Unsqueeze, {p, axes}, {}, {}, strCat("stack", us.size())));
    us.push_back(u[0]);
  }
  if (us.size() == 1) return us[0];
  AttrMap a;
  a.set("axis", axis);
  ASSIGN_OR_RETURN(std::vector<Value*> c, ctx.emit(OpKind::Concat, us, a, {}, "stack"));
  return c[0];
}

/// \returns index `i` of `x` along `axis`, that dimension removed; `tag`
/// names the new values.
StatusOr<Value*> takeAt(ImportContext& ctx, Value* x, int64_t axis, int64_t i, const std::string& tag) {
  AttrMap a;
  a.set("axis", axis);
  ASSIGN_OR_RETURN(std::vector<Value*> g,
                   ctx.emit(OpKind::Gather, {x, ctx.constant(Tensor::scalarI64(i), tag + "_index")}, a, {}, tag));
  return g[0];
}

/// Refuses an unrolling that has grown past the limit.
Status checkUnrollSize(ImportContext& ctx, size_t nodesBefore, int64_t iteration, const std::string& of) {
  int64_t added = static_cast<int64_t>(ctx.graph().numNodes() - nodesBefore);
  if (ctx.unrolledIterations() > kMaxUnrolledIterations)
    return ctx.unsupportedHere("unrolling stops at ", kMaxUnrolledIterations,
                               " iterations over the whole model, nested loops included (after ", iteration,
                               " iterations", of, ")");
  if (added <= kMaxUnrolledNodes && iteration < kMaxUnrolledNodes) return Status::OK();
  return ctx.unsupportedHere("unrolling stops at ", kMaxUnrolledNodes, " nodes or iterations: ", added, " nodes after ",
                             iteration, " iterations", of);
}

/// Why an unrolling gave up, leaving the node to run as a region at run time.
enum class Unroll {
  kDone,         // unrolled (or failed with an error of its own)
  kTooBig,       // past kMaxUnrolledNodes nodes or iterations, or the model's kMaxUnrolledIterations
  kDynamicCond,  // a Loop body computes its condition at run time
};

/// \returns true when the unrolling begun at `nodesBefore` has grown past the
/// limit, or the model's unrolling budget is spent.
bool unrollTooBig(ImportContext& ctx, size_t nodesBefore, int64_t iteration) {
  return static_cast<int64_t>(ctx.graph().numNodes() - nodesBefore) > kMaxUnrolledNodes ||
         iteration >= kMaxUnrolledNodes || ctx.unrolledIterations() > kMaxUnrolledIterations;
}

/// Erases the nodes an abandoned unrolling added after the first `nodesBefore`.
void discardUnrolled(ImportContext& ctx, size_t nodesBefore) {
  std::vector<Node*> all = ctx.graph().nodes();
  ctx.graph().eraseNodes(std::vector<Node*>(all.begin() + static_cast<std::ptrdiff_t>(nodesBefore), all.end()));
}

/// Scan of opset 9+ semantics on explicit values. \returns the final states then the scan outputs.
struct ScanSpec {
  std::vector<int64_t> inAxes, outAxes;
  std::vector<bool> inReverse, outReverse;
};

/// With `tooBig`, an unrolling past the limit sets it and \returns an empty
/// list (the caller keeps the node as a region); without, it is an error.
StatusOr<std::vector<Value*>> unrollScan(ImportContext& ctx, const onnx::GraphProto& body, std::vector<Value*> states,
                                         const std::vector<Value*>& scans, const ScanSpec& spec, const std::string& prefix,
                                         bool* tooBig = nullptr) {
  size_t numStates = states.size();
  if (body.output_size() < static_cast<int>(numStates))
    return ctx.invalid("body has ", body.output_size(), " outputs, fewer than its ", numStates, " states");
  size_t numScanOut = static_cast<size_t>(body.output_size()) - numStates;
  int64_t trip = scans[0]->type().shape[static_cast<size_t>(spec.inAxes[0])];
  for (size_t j = 0; j < scans.size(); ++j)
    if (scans[j]->type().shape[static_cast<size_t>(spec.inAxes[j])] != trip)
      return ctx.invalid("scan input ", j, " ", scans[j]->type().str(), " does not have ", trip,
                         " iterations along axis ", spec.inAxes[j], " as scan input 0 has");
  if (trip == 0 && numScanOut > 0) return ctx.unsupportedHere("a Scan of zero iterations (its scan outputs have no known shape)");
  size_t before = ctx.graph().numNodes();
  std::vector<std::vector<Value*>> parts(numScanOut);
  for (int64_t t = 0; t < trip; ++t) {
    if (tooBig && unrollTooBig(ctx, before, t)) {
      *tooBig = true;
      return std::vector<Value*>{};
    }
    RETURN_IF_ERROR(checkUnrollSize(ctx, before, t, strCat(" of ", trip)));
    ctx.countUnrolledIteration();
    std::vector<Value*> args = states;
    for (size_t j = 0; j < scans.size(); ++j) {
      ASSIGN_OR_RETURN(Value* s, takeAt(ctx, scans[j], spec.inAxes[j], spec.inReverse[j] ? trip - 1 - t : t,
                                        strCat(prefix, t, "/slice", j)));
      args.push_back(s);
    }
    ASSIGN_OR_RETURN(std::vector<Value*> outs, inlineGraph(ctx, body, args, strCat(prefix, t, "/")));
    states.assign(outs.begin(), outs.begin() + static_cast<std::ptrdiff_t>(numStates));
    for (size_t k = 0; k < numScanOut; ++k) parts[k].push_back(outs[numStates + k]);
  }
  std::vector<Value*> results = states;
  for (size_t k = 0; k < numScanOut; ++k) {
    if (spec.outReverse[k]) std::reverse(parts[k].begin(), parts[k].end());
    int64_t r = parts[k][0]->type().rank() + 1, ax = spec.outAxes[k];
    if (ax < -r || ax >= r) return ctx.invalid("scan_output_axes[", k, "] = ", ax, " is out of range for rank ", r);
    ASSIGN_OR_RETURN(Value* v, stack(ctx, parts[k], ax < 0 ? ax + r : ax));
    results.push_back(v);
  }
  // The stacking counts too (one Unsqueeze per iteration and scan output).
  if (tooBig && unrollTooBig(ctx, before, 0)) {
    *tooBig = true;
    return std::vector<Value*>{};
  }
  RETURN_IF_ERROR(checkUnrollSize(ctx, before, 0, strCat(" of ", trip)));
  return results;
}

Status importIf(ImportContext& ctx) {
  ASSIGN_OR_RETURN(Value* cond, ctx.requiredInput(0));
  ASSIGN_OR_RETURN(const onnx::GraphProto* thenG, requiredGraph(ctx, "then_branch"));
  ASSIGN_OR_RETURN(const onnx::GraphProto* elseG, requiredGraph(ctx, "else_branch"));
  if (cond->type().dtype != DType::kBool || cond->type().numel() != 1)
    return ctx.invalid("the condition must be a one-element bool tensor");
  if (!ctx.keepControlFlow() && cond->isConstant()) {
    bool taken = cond->constantData().getInt(0) != 0;
    const onnx::GraphProto& branch = taken ? *thenG : *elseG;
    ASSIGN_OR_RETURN(std::vector<Value*> outs,
                     inlineGraph(ctx, branch, {}, strCat(ctx.nodeName(), taken ? "/then/" : "/else/")));
    if (outs.size() < ctx.numOutputs())
      return ctx.invalid("the ", taken ? "then" : "else", " branch has ", outs.size(), " outputs, the node ", ctx.numOutputs());
    for (size_t i = 0; i < ctx.numOutputs(); ++i) ctx.setOutput(i, outs[i]);
    return Status::OK();
  }
  // The condition is computed at run time: the node stays, both branches its bodies.
  ASSIGN_OR_RETURN(Regions r, importRegions(ctx, {{thenG, "then_branch"}, {elseG, "else_branch"}}, {}));
  const std::vector<Value*>& thenOuts = r.bodies[0]->outputs();
  const std::vector<Value*>& elseOuts = r.bodies[1]->outputs();
  if (thenOuts.size() != elseOuts.size())
    return ctx.unsupportedHere("the condition is computed at run time and the then branch has ", thenOuts.size(),
                               " outputs, the else branch ", elseOuts.size());
  std::vector<TensorType> types;
  for (size_t i = 0; i < thenOuts.size(); ++i) {
    if (thenOuts[i]->type() != elseOuts[i]->type())
      return ctx.unsupportedHere("the condition is computed at run time and output ", i, " has no static type: the then "
                                 "branch gives ", thenOuts[i]->type().str(), ", the else branch ", elseOuts[i]->type().str());
    types.push_back(thenOuts[i]->type());
  }
  return addRegionNode(ctx, OpKind::If, {cond}, {}, std::move(r), std::move(types));
}

/// What a Loop node's import needs: its inputs and its body's shape.
struct LoopSpec {
  const onnx::GraphProto* body = nullptr;
  Value* m = nullptr;     // trip count, or null
  Value* cond = nullptr;  // initial condition, or null
  std::vector<Value*> carried;
  size_t numScan = 0;
  TensorType iterType, condType;
};

/// Unrolls a Loop whose trip count and initial condition are constants.
/// \returns kDone (with the outputs defined, or an error), or why the loop
/// must run at run time instead (nothing is defined then).
StatusOr<Unroll> unrollLoop(ImportContext& ctx, const LoopSpec& l) {
  size_t numCarried = l.carried.size();
  int64_t trip = l.m ? std::max<int64_t>(0, l.m->constantData().getInt(0)) : -1;  // -1: no trip count
  bool go = l.cond ? l.cond->constantData().getInt(0) != 0 : true;
  std::vector<Value*> vals = l.carried;
  std::vector<std::vector<Value*>> scans(l.numScan);
  size_t before = ctx.graph().numNodes();
  int64_t it = 0;
  for (; (trip < 0 || it < trip) && go; ++it) {
    if (unrollTooBig(ctx, before, it)) return Unroll::kTooBig;
    ctx.countUnrolledIteration();
    std::vector<Value*> args{ctx.constant(flagTensor(l.iterType, it), strCat(it, "/iter")),
                             ctx.constant(flagTensor(l.condType, 1), strCat(it, "/cond"))};
    args.insert(args.end(), vals.begin(), vals.end());
    ASSIGN_OR_RETURN(std::vector<Value*> outs, inlineGraph(ctx, *l.body, args, strCat(ctx.nodeName(), "/", it, "/")));
    vals.assign(outs.begin() + 1, outs.begin() + 1 + static_cast<std::ptrdiff_t>(numCarried));
    for (size_t k = 0; k < l.numScan; ++k) scans[k].push_back(outs[1 + numCarried + k]);
    bool last = trip >= 0 && it + 1 >= trip;
    if (last) continue;
    if (!outs[0]->isConstant()) return Unroll::kDynamicCond;
    go = outs[0]->constantData().getInt(0) != 0;
  }
  std::vector<Value*> stacked(l.numScan, nullptr);
  for (size_t k = 0; k < l.numScan; ++k)
    if (ctx.outputUsed(numCarried + k) && !scans[k].empty()) {
      ASSIGN_OR_RETURN(stacked[k], stack(ctx, scans[k], 0));
    }
  // The stacking counts too (one Unsqueeze per iteration and scan output).
  if (unrollTooBig(ctx, before, 0)) return Unroll::kTooBig;
  for (size_t i = 0; i < numCarried; ++i) ctx.setOutput(i, vals[i]);
  for (size_t k = 0; k < l.numScan; ++k) {
    if (!ctx.outputUsed(numCarried + k)) continue;
    if (scans[k].empty()) {
      std::optional<TensorType> t = declaredType(l.body->output(static_cast<int>(1 + numCarried + k)));
      if (!t) return ctx.unsupportedHere("a Loop of zero iterations whose scan output ", k, " has no declared static shape");
      t->shape.insert(t->shape.begin(), 0);
      RETURN_IF_ERROR(ctx.constantOutput(numCarried + k, Tensor::zeros(*t)));
      continue;
    }
    ctx.setOutput(numCarried + k, stacked[k]);
  }
  return Unroll::kDone;
}

/// Keeps a Loop as a region node, run at run time. `staticCount`: the loop
/// runs exactly M times (M a constant, the conditions constant true), so its
/// scan outputs have a static shape; otherwise a scan output is refused.
Status loopRegion(ImportContext& ctx, const LoopSpec& l, bool staticCount, const std::string& dynamic) {
  size_t numCarried = l.carried.size();
  if (l.numScan > 0 && !staticCount)
    return ctx.unsupportedHere(dynamic, ": the Loop runs at run time and its scan outputs have no static shape (",
                               l.numScan, " scan output(s), iteration count unknown at compile time)");
  std::vector<TensorType> params{l.iterType, l.condType};
  for (Value* v : l.carried) params.push_back(v->type());
  ASSIGN_OR_RETURN(Regions r, importRegions(ctx, {{l.body, "body"}}, params));
  std::vector<TensorType> types;
  for (size_t i = 0; i < numCarried; ++i) types.push_back(r.bodies[0]->outputs()[1 + i]->type());
  for (size_t k = 0; k < l.numScan; ++k) {
    TensorType t = r.bodies[0]->outputs()[1 + numCarried + k]->type();
    t.shape.insert(t.shape.begin(), std::max<int64_t>(0, l.m->constantData().getInt(0)));
    types.push_back(t);
  }
  std::vector<Value*> inputs{l.m, l.cond};
  inputs.insert(inputs.end(), l.carried.begin(), l.carried.end());
  return addRegionNode(ctx, OpKind::Loop, std::move(inputs), {}, std::move(r), std::move(types));
}

Status importLoop(ImportContext& ctx) {
  LoopSpec l;
  ASSIGN_OR_RETURN(l.body, requiredGraph(ctx, "body"));
  if (ctx.numInputs() < 2) return ctx.invalid("takes at least 2 inputs (M, cond), got ", ctx.numInputs());
  l.m = ctx.input(0);
  l.cond = ctx.input(1);
  size_t numCarried = ctx.numInputs() - 2;
  for (size_t i = 0; i < numCarried; ++i) {
    ASSIGN_OR_RETURN(Value* v, ctx.requiredInput(2 + i));
    l.carried.push_back(v);
  }
  const onnx::GraphProto* body = l.body;
  if (body->input_size() != static_cast<int>(2 + numCarried) || body->output_size() < static_cast<int>(1 + numCarried))
    return ctx.invalid("body has ", body->input_size(), " inputs and ", body->output_size(), " outputs for ", numCarried,
                       " loop-carried values (expected ", 2 + numCarried, " inputs, at least ", 1 + numCarried, " outputs)");
  l.numScan = static_cast<size_t>(body->output_size()) - 1 - numCarried;
  if (l.m && (l.m->type().dtype != DType::kI64 || l.m->type().numel() != 1))
    return ctx.invalid("the trip count M must be a one-element int64 tensor");
  if (l.cond && (l.cond->type().dtype != DType::kBool || l.cond->type().numel() != 1))
    return ctx.invalid("the condition must be a one-element bool tensor");
  if (!l.m && !l.cond) return ctx.unsupportedHere("a Loop without trip count and condition never ends");
  l.iterType = flagType(body->input(0), DType::kI64);
  l.condType = flagType(body->input(1), DType::kBool);
  bool constM = !l.m || l.m->isConstant();
  bool constCond = !l.cond || l.cond->isConstant();
  bool condTrue = !l.cond || (constCond && l.cond->constantData().getInt(0) != 0);

  if (ctx.keepControlFlow())
    return loopRegion(ctx, l, l.m && l.m->isConstant(), "a Loop kept as a region");
  if (!constM || !constCond)
    return loopRegion(ctx, l, false,
                      !constM ? "dynamic trip count: the trip count M is computed at run time"
                              : "dynamic trip count: the initial condition is computed at run time");
  // Both constant: unroll; a body that computes its condition at run time, or
  // an unrolling past the limit, leaves the node to run at run time.
  size_t before = ctx.graph().numNodes();
  ASSIGN_OR_RETURN(Unroll u, unrollLoop(ctx, l));
  if (u == Unroll::kDone) return Status::OK();
  discardUnrolled(ctx, before);
  if (u == Unroll::kDynamicCond)
    return loopRegion(ctx, l, false, "dynamic trip count: the condition the body computes is known only at run time");
  return loopRegion(ctx, l, l.m != nullptr && condTrue,
                    strCat("the Loop is too large to unroll (over ", kMaxUnrolledNodes, " nodes or iterations, or past ",
                           kMaxUnrolledIterations, " iterations unrolled in the model)"));
}

/// \returns attribute `name`, `count` entries (default zeros).
StatusOr<std::vector<int64_t>> intsOr0(const ImportContext& ctx, const std::string& name, size_t count) {
  std::vector<int64_t> v = ctx.attrs().has(name) ? ctx.attrs().getInts(name) : std::vector<int64_t>(count, 0);
  if (v.size() != count) return ctx.invalid("attribute ", name, " has ", v.size(), " entries, expected ", count);
  return v;
}

Status importScan(ImportContext& ctx) {
  ASSIGN_OR_RETURN(const onnx::GraphProto* body, requiredGraph(ctx, "body"));
  if (!ctx.attrs().has("num_scan_inputs")) return ctx.invalid("attribute 'num_scan_inputs' is required");
  int64_t numScanIn = ctx.attrs().getInt("num_scan_inputs", 0);
  bool opset8 = ctx.opset() < 9;  // Scan-8: a batch dim 0 everywhere and an optional sequence_lens input first
  size_t first = opset8 ? 1 : 0;
  if (numScanIn < 1 || static_cast<size_t>(numScanIn) + first > ctx.numInputs())
    return ctx.invalid("num_scan_inputs = ", numScanIn, " does not fit ", ctx.numInputs(), " inputs");
  size_t numStates = ctx.numInputs() - first - static_cast<size_t>(numScanIn);
  std::vector<Value*> states, scans;
  for (size_t i = first; i < ctx.numInputs(); ++i) {
    ASSIGN_OR_RETURN(Value* v, ctx.requiredInput(i));
    (i < first + numStates ? states : scans).push_back(v);
  }
  if (body->input_size() != static_cast<int>(numStates + scans.size()) || body->output_size() < static_cast<int>(numStates))
    return ctx.invalid("body has ", body->input_size(), " inputs and ", body->output_size(), " outputs for ", numStates,
                       " states and ", scans.size(), " scan inputs");
  size_t numScanOut = static_cast<size_t>(body->output_size()) - numStates;
  int64_t minRank = opset8 ? 2 : 1;
  for (Value* x : scans)
    if (x->type().rank() < minRank) return ctx.invalid("scan input ", x->type().str(), " has no scan axis");
  ScanSpec spec;
  if (opset8) {
    ASSIGN_OR_RETURN(std::vector<int64_t> dirs, intsOr0(ctx, "directions", scans.size()));
    for (int64_t d : dirs) spec.inReverse.push_back(d != 0);
    spec.inAxes.assign(scans.size(), 0);  // after the batch dim is taken away
    spec.outAxes.assign(numScanOut, 0);
    spec.outReverse.assign(numScanOut, false);
  } else {
    ASSIGN_OR_RETURN(spec.inAxes, intsOr0(ctx, "scan_input_axes", scans.size()));
    ASSIGN_OR_RETURN(std::vector<int64_t> inDirs, intsOr0(ctx, "scan_input_directions", scans.size()));
    ASSIGN_OR_RETURN(spec.outAxes, intsOr0(ctx, "scan_output_axes", numScanOut));
    ASSIGN_OR_RETURN(std::vector<int64_t> outDirs, intsOr0(ctx, "scan_output_directions", numScanOut));
    for (size_t j = 0; j < scans.size(); ++j) {
      int64_t r = scans[j]->type().rank();
      if (spec.inAxes[j] < -r || spec.inAxes[j] >= r)
        return ctx.invalid("scan_input_axes[", j, "] = ", spec.inAxes[j], " is out of range for rank ", r);
      if (spec.inAxes[j] < 0) spec.inAxes[j] += r;
      spec.inReverse.push_back(inDirs[j] != 0);
    }
    for (int64_t d : outDirs) spec.outReverse.push_back(d != 0);
  }

  // Unrolled unless asked to keep it (or it is too large to unroll): then the
  // node runs at run time, its trip count static all the same.
  size_t before = ctx.graph().numNodes();
  bool tooBig = false;
  std::vector<Value*> results;
  if (!ctx.keepControlFlow() && !opset8) {
    ASSIGN_OR_RETURN(results, unrollScan(ctx, *body, states, scans, spec, ctx.nodeName() + "/", &tooBig));
    if (tooBig) discardUnrolled(ctx, before);
  }
  if ((ctx.keepControlFlow() || tooBig) && !opset8) {
    std::vector<TensorType> params;
    for (Value* v : states) params.push_back(v->type());
    for (size_t j = 0; j < scans.size(); ++j) {
      TensorType t = scans[j]->type();
      t.shape.erase(t.shape.begin() + spec.inAxes[j]);
      params.push_back(t);
    }
    ASSIGN_OR_RETURN(Regions r, importRegions(ctx, {{body, "body"}}, params));
    int64_t trip = scans[0]->type().shape[static_cast<size_t>(spec.inAxes[0])];
    std::vector<TensorType> types;
    for (size_t i = 0; i < numStates; ++i) types.push_back(r.bodies[0]->outputs()[i]->type());
    for (size_t k = 0; k < numScanOut; ++k) {
      TensorType t = r.bodies[0]->outputs()[numStates + k]->type();
      int64_t rank = t.rank() + 1, ax = spec.outAxes[k];
      if (ax < -rank || ax >= rank) return ctx.invalid("scan_output_axes[", k, "] = ", ax, " is out of range for rank ", rank);
      t.shape.insert(t.shape.begin() + (ax < 0 ? ax + rank : ax), trip);
      types.push_back(t);
    }
    AttrMap attrs = ctx.keep({"num_scan_inputs", "scan_input_axes", "scan_input_directions", "scan_output_axes",
                              "scan_output_directions"});
    std::vector<Value*> inputs = states;
    inputs.insert(inputs.end(), scans.begin(), scans.end());
    return addRegionNode(ctx, OpKind::Scan, std::move(inputs), std::move(attrs), std::move(r), std::move(types));
  }

  if (opset8) {
    int64_t batch = (states.empty() ? scans[0] : states[0])->type().shape.empty() ? 0
                    : (states.empty() ? scans[0] : states[0])->type().shape[0];
    int64_t seqLen = scans[0]->type().shape[1];
    if (Value* lens = ctx.input(0)) {
      bool full = lens->isConstant() && lens->type().numel() == batch;
      for (int64_t b = 0; full && b < batch; ++b) full = lens->constantData().getInt(b) == seqLen;
      if (!full)
        return ctx.unsupportedHere("sequence_lens must be a constant equal to the sequence length ", seqLen,
                                   " for every batch entry (pcc does not scan ragged batches)");
    }
    for (Value* v : states)
      if (v->type().shape.empty() || v->type().shape[0] != batch) return ctx.invalid("state ", v->type().str(), " has no batch dim ", batch);
    for (Value* v : scans)
      if (v->type().shape[0] != batch) return ctx.invalid("scan input ", v->type().str(), " has no batch dim ", batch);
    if (batch == 0) return ctx.unsupportedHere("a Scan over an empty batch");
    std::vector<std::vector<Value*>> perBatch(numStates + numScanOut);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Value*> st, sc;
      for (Value* v : states) {
        ASSIGN_OR_RETURN(Value* s, takeAt(ctx, v, 0, b, strCat("batch", b, "_state", st.size())));
        st.push_back(s);
      }
      for (Value* v : scans) {
        ASSIGN_OR_RETURN(Value* s, takeAt(ctx, v, 0, b, strCat("batch", b, "_scan", sc.size())));
        sc.push_back(s);
      }
      ASSIGN_OR_RETURN(std::vector<Value*> r, unrollScan(ctx, *body, st, sc, spec, strCat(ctx.nodeName(), "/", b, "/")));
      for (size_t j = 0; j < r.size(); ++j) perBatch[j].push_back(r[j]);
    }
    for (auto& parts : perBatch) {
      ASSIGN_OR_RETURN(Value* v, stack(ctx, parts, 0));
      results.push_back(v);
    }
  }
  for (size_t i = 0; i < results.size(); ++i) ctx.setOutput(i, results[i]);
  return Status::OK();
}

void collectFree(const onnx::GraphProto& g, std::unordered_set<std::string>& seen, std::vector<std::string>& out) {
  std::unordered_set<std::string> defined;
  for (const auto& in : g.input()) defined.insert(in.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node())
    for (const std::string& s : n.output()) defined.insert(s);
  auto use = [&](const std::string& s) {
    if (!s.empty() && !defined.count(s) && seen.insert(s).second) out.push_back(s);
  };
  for (const auto& n : g.node()) {
    for (const std::string& s : n.input()) use(s);
    for (const auto& a : n.attribute()) {
      if (a.has_g())
        for (const std::string& s : freeNames(a.g())) use(s);
      for (const auto& sub : a.graphs())
        for (const std::string& s : freeNames(sub)) use(s);
    }
  }
  for (const auto& o : g.output()) use(o.name());
}

}  // namespace

std::vector<std::string> freeNames(const onnx::GraphProto& g) {
  std::unordered_set<std::string> seen;
  std::vector<std::string> out;
  collectFree(g, seen, out);
  return out;
}

bool isControlFlowOp(std::string_view opType) { return opType == "If" || opType == "Loop" || opType == "Scan"; }

Status importControlFlow(ImportContext& ctx) {
  const std::string& op = ctx.node().op_type();
  if (op == "If") return importIf(ctx);
  if (op == "Loop") return importLoop(ctx);
  return importScan(ctx);
}

}  // namespace pcc
