#include "compiler/ir/regions.h"

#include <unordered_map>

#include "compiler/ir/text.h"

namespace pcc {

namespace {

std::string typesOf(const std::vector<Value*>& vs, size_t from, size_t count) {
  std::string s = "(";
  for (size_t i = 0; i < count; ++i) s += strCat(i ? ", " : "", vs[from + i] ? vs[from + i]->type().str() : "none");
  return s + ")";
}

/// \returns OK when `v` is a one-element tensor of `dtype` (Loop's counters and conditions).
bool isFlag(const TensorType& t, DType dtype) { return t.dtype == dtype && t.numel() == 1; }

/// Checks that body `b` takes `count` parameters whose types equal those of
/// `n`'s inputs from `from` on, starting at parameter `paramFrom`.
Status checkParams(const Node& n, const Graph& b, size_t paramFrom, size_t from, size_t count, const std::string& what,
                   const char* role) {
  for (size_t i = 0; i < count; ++i) {
    const Value* in = n.input(from + i);
    const Value* p = b.inputs()[paramFrom + i];
    if (!in) return invalidInput(what, ": ", role, " input ", from + i, " is absent");
    if (in->type() != p->type())
      return invalidInput(what, ": body @", b.name(), " parameter ", paramFrom + i, " ", valueRefText(p->name()), " has type ",
                          p->type().str(), " but the node passes ", valueRefText(in->name()), ": ", in->type().str());
  }
  return Status::OK();
}

Status checkIf(const Node& n, const std::string& what) {
  const Value* cond = n.input(0);
  if (!cond || !isFlag(cond->type(), DType::kBool))
    return invalidInput(what, ": the condition must be a one-element bool tensor, found ",
                        cond ? cond->type().str() : std::string("none"));
  size_t caps = n.inputs().size() - 1;
  for (size_t b = 0; b < 2; ++b) {
    const Graph& body = *n.body(b);
    if (body.inputs().size() != caps)
      return invalidInput(what, ": body @", body.name(), " has ", body.inputs().size(), " parameters but the node passes ",
                          caps, " captured values ", typesOf(n.inputs(), 1, caps));
    RETURN_IF_ERROR(checkParams(n, body, 0, 1, caps, what, "captured"));
    if (body.outputs().size() != n.outputs().size())
      return invalidInput(what, ": body @", body.name(), " has ", body.outputs().size(), " results but the node has ",
                          n.outputs().size(), " outputs");
    for (size_t i = 0; i < n.outputs().size(); ++i)
      if (body.outputs()[i]->type() != n.output(i)->type())
        return invalidInput(what, ": body @", body.name(), " result ", i, " is ", body.outputs()[i]->type().str(),
                            " but output ", i, " ", valueRefText(n.output(i)->name()), " is ", n.output(i)->type().str());
  }
  return Status::OK();
}

Status checkLoop(const Node& n, const std::string& what) {
  int64_t caps = numCaptures(n);
  int64_t numIn = static_cast<int64_t>(n.inputs().size());
  if (numIn < 2) return invalidInput(what, ": has ", numIn, " inputs, expected the trip count and the condition (or '_') first");
  if (caps < 0 || caps > numIn - 2)
    return invalidInput(what, ": attribute captures = ", caps, " does not fit its ", numIn, " inputs");
  size_t carried = static_cast<size_t>(numIn - 2 - caps);
  if (const Value* m = n.input(0); m && !isFlag(m->type(), DType::kI64))
    return invalidInput(what, ": the trip count must be a one-element i64 tensor, found ", m->type().str());
  if (const Value* c = n.input(1); c && !isFlag(c->type(), DType::kBool))
    return invalidInput(what, ": the condition must be a one-element bool tensor, found ", c->type().str());
  const Graph& body = *n.body(0);
  size_t params = 2 + carried + static_cast<size_t>(caps);
  if (body.inputs().size() != params)
    return invalidInput(what, ": body @", body.name(), " has ", body.inputs().size(), " parameters, expected ", params,
                        " (iteration, condition, ", carried, " loop-carried, ", caps, " captured)");
  if (!isFlag(body.inputs()[0]->type(), DType::kI64) || !isFlag(body.inputs()[1]->type(), DType::kBool))
    return invalidInput(what, ": body @", body.name(), " must take a one-element i64 iteration and bool condition first, found ",
                        body.inputs()[0]->type().str(), " and ", body.inputs()[1]->type().str());
  RETURN_IF_ERROR(checkParams(n, body, 2, 2, carried + static_cast<size_t>(caps), what, "loop"));
  if (body.outputs().size() < 1 + carried)
    return invalidInput(what, ": body @", body.name(), " has ", body.outputs().size(), " results, expected at least ",
                        1 + carried, " (condition and loop-carried values)");
  if (!isFlag(body.outputs()[0]->type(), DType::kBool))
    return invalidInput(what, ": body @", body.name(), " result 0 (the condition) must be a one-element bool tensor, found ",
                        body.outputs()[0]->type().str());
  size_t scans = body.outputs().size() - 1 - carried;
  if (n.outputs().size() != carried + scans)
    return invalidInput(what, ": has ", n.outputs().size(), " outputs, expected ", carried + scans, " (", carried,
                        " loop-carried, ", scans, " scan outputs)");
  for (size_t i = 0; i < carried; ++i) {
    const TensorType& t = n.input(2 + i)->type();
    if (body.outputs()[1 + i]->type() != t || n.output(i)->type() != t)
      return invalidInput(what, ": loop-carried value ", i, " enters as ", t.str(), ", leaves the body as ",
                          body.outputs()[1 + i]->type().str(), " and the node as ", n.output(i)->type().str(),
                          " (its type must not change)");
  }
  for (size_t k = 0; k < scans; ++k) {
    const TensorType& r = body.outputs()[1 + carried + k]->type();
    const TensorType& o = n.output(carried + k)->type();
    Dims tail(o.shape.begin() + (o.shape.empty() ? 0 : 1), o.shape.end());
    if (o.dtype != r.dtype || o.shape.empty() || tail != r.shape)
      return invalidInput(what, ": scan output ", k, " ", valueRefText(n.output(carried + k)->name()), " is ", o.str(),
                          ", expected [iterations] followed by the body's ", r.str());
  }
  return Status::OK();
}

Status checkScan(const Node& n, const std::string& what) {
  int64_t caps = numCaptures(n);
  int64_t m = n.attrs().getInt("num_scan_inputs", -1);
  int64_t numIn = static_cast<int64_t>(n.inputs().size());
  if (m < 1 || caps < 0 || m + caps > numIn)
    return invalidInput(what, ": attributes num_scan_inputs = ", m, " and captures = ", caps, " do not fit its ", numIn,
                        " inputs");
  size_t states = static_cast<size_t>(numIn - m - caps);
  const Graph& body = *n.body(0);
  if (body.inputs().size() != static_cast<size_t>(numIn))
    return invalidInput(what, ": body @", body.name(), " has ", body.inputs().size(), " parameters, expected ", numIn, " (",
                        states, " states, ", m, " scan slices, ", caps, " captured)");
  if (body.outputs().size() < states || n.outputs().size() != body.outputs().size())
    return invalidInput(what, ": has ", n.outputs().size(), " outputs and its body ", body.outputs().size(),
                        " results; both must be ", states, " states followed by the scan outputs");
  size_t scanOuts = body.outputs().size() - states;
  auto axesOr = scanAxes(n, scanOuts);
  if (!axesOr.ok()) return axesOr.status().withContext(what);
  const ScanAxes& axes = *axesOr;
  auto tripOr = scanTripCount(n);
  if (!tripOr.ok()) return tripOr.status().withContext(what);
  int64_t trip = *tripOr;
  RETURN_IF_ERROR(checkParams(n, body, 0, 0, states, what, "state"));
  RETURN_IF_ERROR(checkParams(n, body, states + static_cast<size_t>(m), states + static_cast<size_t>(m),
                              static_cast<size_t>(caps), what, "captured"));
  for (size_t j = 0; j < static_cast<size_t>(m); ++j) {
    const Value* x = n.input(states + j);
    if (!x) return invalidInput(what, ": scan input ", j, " is absent");
    TensorType slice = x->type();
    if (slice.shape[static_cast<size_t>(axes.inputAxes[j])] != trip)
      return invalidInput(what, ": scan input ", j, " ", x->type().str(), " has ", slice.shape[static_cast<size_t>(axes.inputAxes[j])],
                          " iterations along axis ", axes.inputAxes[j], ", scan input 0 has ", trip);
    slice.shape.erase(slice.shape.begin() + axes.inputAxes[j]);
    const Value* p = body.inputs()[states + j];
    if (p->type() != slice)
      return invalidInput(what, ": body @", body.name(), " parameter ", states + j, " ", valueRefText(p->name()), " is ",
                          p->type().str(), " but a slice of scan input ", j, " is ", slice.str());
  }
  for (size_t i = 0; i < states; ++i)
    if (body.outputs()[i]->type() != n.input(i)->type() || n.output(i)->type() != n.input(i)->type())
      return invalidInput(what, ": state ", i, " enters as ", n.input(i)->type().str(), ", leaves the body as ",
                          body.outputs()[i]->type().str(), " and the node as ", n.output(i)->type().str());
  for (size_t k = 0; k < scanOuts; ++k) {
    TensorType want = body.outputs()[states + k]->type();
    int64_t r = want.rank() + 1, ax = axes.outputAxes[k];
    if (ax < -r || ax >= r) return invalidInput(what, ": scan_output_axes[", k, "] = ", ax, " is out of range for rank ", r);
    want.shape.insert(want.shape.begin() + (ax < 0 ? ax + r : ax), trip);
    if (n.output(states + k)->type() != want)
      return invalidInput(what, ": scan output ", k, " ", valueRefText(n.output(states + k)->name()), " is ",
                          n.output(states + k)->type().str(), ", expected ", want.str());
  }
  return Status::OK();
}

/// A fused node passes its inputs, in order, as its body's parameters and
/// returns the body's results as its outputs (passes/fuse.cpp).
Status checkFused(const Node& n, const std::string& what) {
  const Graph& body = *n.body(0);
  if (body.inputs().size() != n.inputs().size())
    return invalidInput(what, ": body @", body.name(), " has ", body.inputs().size(), " parameters but the node has ",
                        n.inputs().size(), " inputs");
  RETURN_IF_ERROR(checkParams(n, body, 0, 0, n.inputs().size(), what, "fused"));
  if (body.outputs().size() != n.outputs().size() || n.outputs().empty())
    return invalidInput(what, ": body @", body.name(), " has ", body.outputs().size(), " results but the node has ",
                        n.outputs().size(), " outputs (at least one)");
  for (size_t i = 0; i < n.outputs().size(); ++i)
    if (body.outputs()[i]->type() != n.output(i)->type())
      return invalidInput(what, ": body @", body.name(), " result ", i, " is ", body.outputs()[i]->type().str(),
                          " but output ", i, " ", valueRefText(n.output(i)->name()), " is ", n.output(i)->type().str());
  std::string kind = n.attrs().getString("kind", "");
  if (kind != "epilogue" && kind != "elementwise")
    return invalidInput(what, ": attribute kind must be \"epilogue\" or \"elementwise\", found \"", kind, "\"");
  return Status::OK();
}

}  // namespace

bool isRegionOp(OpKind op) {
  return op == OpKind::If || op == OpKind::Loop || op == OpKind::Scan || op == OpKind::Fused;
}

size_t numBodiesOf(OpKind op) {
  if (op == OpKind::If) return 2;
  return isRegionOp(op) ? 1 : 0;
}

int64_t numCaptures(const Node& n) {
  if (n.op() == OpKind::Fused) return static_cast<int64_t>(n.inputs().size());
  if (n.op() == OpKind::If) return static_cast<int64_t>(n.inputs().size()) - 1;
  return n.attrs().getInt("captures", 0);
}

StatusOr<ScanAxes> scanAxes(const Node& n, size_t numScanOutputs) {
  ScanAxes a;
  int64_t m = n.attrs().getInt("num_scan_inputs", 0);
  size_t states = n.inputs().size() - static_cast<size_t>(m + numCaptures(n));
  auto read = [&](const char* name, size_t count, std::vector<int64_t>& out) -> Status {
    out = n.attrs().has(name) ? n.attrs().getInts(name) : std::vector<int64_t>(count, 0);
    if (out.size() != count) return invalidInput("attribute ", name, " has ", out.size(), " entries, expected ", count);
    return Status::OK();
  };
  std::vector<int64_t> inDirs, outDirs;
  RETURN_IF_ERROR(read("scan_input_axes", static_cast<size_t>(m), a.inputAxes));
  RETURN_IF_ERROR(read("scan_input_directions", static_cast<size_t>(m), inDirs));
  RETURN_IF_ERROR(read("scan_output_axes", numScanOutputs, a.outputAxes));
  RETURN_IF_ERROR(read("scan_output_directions", numScanOutputs, outDirs));
  for (size_t j = 0; j < a.inputAxes.size(); ++j) {
    const Value* x = n.input(states + j);
    int64_t r = x ? x->type().rank() : 0;
    int64_t& ax = a.inputAxes[j];
    if (ax < -r || ax >= r) return invalidInput("scan_input_axes[", j, "] = ", ax, " is out of range for rank ", r);
    if (ax < 0) ax += r;
  }
  for (int64_t d : inDirs) a.inputReverse.push_back(d != 0);
  for (int64_t d : outDirs) a.outputReverse.push_back(d != 0);
  return a;
}

StatusOr<int64_t> scanTripCount(const Node& n) {
  int64_t m = n.attrs().getInt("num_scan_inputs", 0);
  int64_t states = static_cast<int64_t>(n.inputs().size()) - m - numCaptures(n);
  if (m < 1 || states < 0) return invalidInput("a Scan needs num_scan_inputs >= 1 (found ", m, ")");
  const Value* x = n.input(static_cast<size_t>(states));
  if (!x || x->type().rank() == 0) return invalidInput("scan input 0 must have a scan axis");
  int64_t ax = n.attrs().has("scan_input_axes") && !n.attrs().getInts("scan_input_axes").empty()
                   ? n.attrs().getInts("scan_input_axes")[0]
                   : 0;
  int64_t r = x->type().rank();
  if (ax < -r || ax >= r) return invalidInput("scan_input_axes[0] = ", ax, " is out of range for rank ", r);
  return x->type().shape[static_cast<size_t>(ax < 0 ? ax + r : ax)];
}

Status checkRegionNode(const Node& n, const std::string& what) {
  if (n.numBodies() != numBodiesOf(n.op()))
    return invalidInput(what, ": has ", n.numBodies(), " bodies, expected ", numBodiesOf(n.op()));
  switch (n.op()) {
    case OpKind::If: return checkIf(n, what);
    case OpKind::Loop: return checkLoop(n, what);
    case OpKind::Scan: return checkScan(n, what);
    case OpKind::Fused: return checkFused(n, what);
    default: return Status::OK();
  }
}

StatusOr<std::vector<Value*>> inlineBody(Graph& g, const Node* n, size_t bodyIndex, const std::vector<Value*>& args) {
  const Graph& body = *n->body(bodyIndex);
  if (args.size() != body.inputs().size())
    return internalError(n->describe(), ": inlining body @", body.name(), " with ", args.size(), " arguments for ",
                         body.inputs().size(), " parameters");
  std::unordered_map<const Value*, Value*> map;
  for (size_t i = 0; i < args.size(); ++i) map[body.inputs()[i]] = args[i];
  for (Value* c : body.constants()) {
    Value* nc = g.addConstant(g.uniqueName(c->name()), c->constantData());
    nc->setSharding(c->sharding());
    map[c] = nc;
  }
  size_t pos = g.indexOf(n);
  std::string prefix = n->name().empty() ? std::string() : n->name() + "/";
  for (const Node* bn : body.nodes()) {
    std::vector<Value*> ins;
    for (Value* v : bn->inputs()) {
      if (!v) {
        ins.push_back(nullptr);
        continue;
      }
      auto it = map.find(v);
      if (it == map.end())
        return internalError(n->describe(), ": body @", body.name(), " reads ", valueRefText(v->name()),
                             ", which it does not define");
      ins.push_back(it->second);
    }
    std::vector<TensorType> types;
    std::vector<std::string> names;
    for (const Value* o : bn->outputs()) {
      types.push_back(o->type());
      names.push_back(o->name());
    }
    Node* nn = g.addNode(bn->op(), std::move(ins), std::move(types), bn->attrs(),
                         bn->name().empty() ? std::string() : prefix + bn->name(), std::move(names), pos++);
    nn->setStage(n->stage());
    for (const auto& b : bn->bodies()) nn->addBody(b->clone());
    for (size_t i = 0; i < bn->outputs().size(); ++i) {
      nn->output(i)->setSharding(bn->output(i)->sharding());
      map[bn->output(i)] = nn->output(i);
    }
  }
  std::vector<Value*> results;
  for (const Value* r : body.outputs()) {
    auto it = map.find(r);
    if (it == map.end()) return internalError(n->describe(), ": body @", body.name(), " returns an undefined value");
    results.push_back(it->second);
  }
  return results;
}

}  // namespace pcc
