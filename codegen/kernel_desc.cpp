// describeGroup / describeFused: elementwise ops (a Fused node's body, or a
// run of its body's nodes) -> KernelSpec.
//
// Algorithm:
//  1. Refuse what this kernel form cannot hold: a node that is not Fused, a
//     body op without a scalar form here (anchors, reductions, views), a
//     dtype other than float32, int32, int64 and bool, results of different
//     shapes. The index space is the results' shape.
//  2. Check that every value of the body broadcasts (numpy rules, one way) to
//     the index space, so each can be evaluated at every index.
//  3. Translate the body in order into Exprs: parameters are kInput, scalar
//     constants kConst, each op one or a few Exprs (Swish = x * sigmoid(ax),
//     Clip = min(max(x, lo), hi), ...), operands of another dtype cast first.
//  4. Give each input its strides over the index space (0 where broadcast),
//     then merge adjacent dimensions along which every input's strides chain
//     (stride[d] == stride[d+1] * dims[d+1], or both 0).

#include "codegen/kernel_desc.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

namespace pcc {

namespace {

bool supportedDtype(DType t) {
  return t == DType::kF32 || t == DType::kI32 || t == DType::kI64 || t == DType::kBool;
}

/// \returns whether `shape` broadcasts to `to` one way (right-aligned, each
/// dim equal or 1, no more dims).
bool broadcastsTo(const Dims& shape, const Dims& to) {
  if (shape.size() > to.size()) return false;
  size_t off = to.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && shape[i] != to[off + i]) return false;
  return true;
}

StatusOr<double> scalarOf(const Value& v) {
  const Tensor& t = v.constantData();
  switch (t.dtype()) {
    case DType::kF32: return static_cast<double>(*t.data<float>());
    case DType::kI64: return static_cast<double>(*t.data<int64_t>());
    case DType::kI32: return static_cast<double>(*t.data<int32_t>());
    case DType::kBool: return *t.data<bool>() ? 1.0 : 0.0;
    default: return unsupported("constant '", v.name(), "' of dtype ", dtypeName(t.dtype()));
  }
}

class Describer {
 public:
  explicit Describer(KernelSpec& spec) : spec_(spec) {}

  int add(ScalarOp op, DType t, std::vector<int> args = {}, double value = 0) {
    spec_.exprs.push_back(Expr{op, t, std::move(args), -1, value});
    return static_cast<int>(spec_.exprs.size()) - 1;
  }
  int constant(double v, DType t) { return add(ScalarOp::kConst, t, {}, v); }
  /// \returns expr `e` as dtype `t` (a cast when it differs).
  int as(int e, DType t) { return spec_.exprs[e].dtype == t ? e : add(ScalarOp::kCast, t, {e}); }
  DType typeOf(int e) const { return spec_.exprs[e].dtype; }

  /// Step 3 for one node. \returns the Expr of its output.
  StatusOr<int> translate(const Node& n, const std::vector<int>& a) {
    DType t = n.output(0)->type().dtype;
    bool isFloat = t == DType::kF32;
    auto need = [&](size_t k) -> Status {
      if (a.size() < k) return unsupported(n.opName(), " with ", a.size(), " operands");
      return Status::OK();
    };
    auto unary = [&](ScalarOp op) -> StatusOr<int> {
      RETURN_IF_ERROR(need(1));
      if (!isFloat) return unsupported(n.opName(), " on ", dtypeName(t));
      return add(op, t, {as(a[0], t)});
    };
    auto binary = [&](ScalarOp op, bool floatOnly) -> StatusOr<int> {
      RETURN_IF_ERROR(need(2));
      if (floatOnly && !isFloat) return unsupported(n.opName(), " on ", dtypeName(t));
      if (t == DType::kBool) return unsupported(n.opName(), " on bool");
      int r = as(a[0], t);
      for (size_t k = 1; k < a.size(); ++k) r = add(op, t, {r, as(a[k], t)});
      return r;
    };
    auto compare = [&](ScalarOp op) -> StatusOr<int> {
      RETURN_IF_ERROR(need(2));
      if (typeOf(a[0]) != typeOf(a[1]) || typeOf(a[0]) == DType::kBool)
        return unsupported(n.opName(), " on ", dtypeName(typeOf(a[0])), " and ", dtypeName(typeOf(a[1])));
      return add(op, DType::kBool, {a[0], a[1]});
    };
    auto logic = [&](ScalarOp op) -> StatusOr<int> {
      RETURN_IF_ERROR(need(op == ScalarOp::kNot ? 1 : 2));
      for (int e : a)
        if (typeOf(e) != DType::kBool) return unsupported(n.opName(), " on ", dtypeName(typeOf(e)));
      return add(op, DType::kBool, a);
    };
    const AttrMap& at = n.attrs();
    switch (n.op()) {
      case OpKind::Add: return binary(ScalarOp::kAdd, false);
      case OpKind::Sum: return binary(ScalarOp::kAdd, false);
      case OpKind::Sub: return binary(ScalarOp::kSub, false);
      case OpKind::Mul: return binary(ScalarOp::kMul, false);
      case OpKind::Div: return binary(ScalarOp::kDiv, true);  // integer division by 0 traps
      case OpKind::Pow: return binary(ScalarOp::kPow, true);
      case OpKind::Max: return binary(ScalarOp::kMax, false);
      case OpKind::Min: return binary(ScalarOp::kMin, false);
      case OpKind::Equal: return compare(ScalarOp::kEqual);
      case OpKind::Less: return compare(ScalarOp::kLess);
      case OpKind::LessOrEqual: return compare(ScalarOp::kLessEq);
      case OpKind::Greater: return compare(ScalarOp::kGreater);
      case OpKind::GreaterOrEqual: return compare(ScalarOp::kGreaterEq);
      case OpKind::And: return logic(ScalarOp::kAnd);
      case OpKind::Or: return logic(ScalarOp::kOr);
      case OpKind::Not: return logic(ScalarOp::kNot);
      case OpKind::Neg: return unary(ScalarOp::kNeg);
      case OpKind::Abs: return unary(ScalarOp::kAbs);
      case OpKind::Sqrt: return unary(ScalarOp::kSqrt);
      case OpKind::Exp: return unary(ScalarOp::kExp);
      case OpKind::Log: return unary(ScalarOp::kLog);
      case OpKind::Erf: return unary(ScalarOp::kErf);
      case OpKind::Tanh: return unary(ScalarOp::kTanh);
      case OpKind::Sigmoid: return unary(ScalarOp::kSigmoid);
      case OpKind::Relu: return unary(ScalarOp::kRelu);
      case OpKind::Reciprocal: return unary(ScalarOp::kReciprocal);
      case OpKind::Softplus: return unary(ScalarOp::kSoftplus);
      case OpKind::Gelu: {
        std::string approx = at.getString("approximate", "none");
        if (approx != "none" && approx != "tanh") return unsupported("Gelu approximate='", approx, "'");
        return unary(approx == "tanh" ? ScalarOp::kGeluTanh : ScalarOp::kGeluErf);
      }
      case OpKind::Swish: {  // x * sigmoid(alpha * x)
        RETURN_IF_ERROR(need(1));
        if (!isFloat) return unsupported("Swish on ", dtypeName(t));
        int x = as(a[0], t);
        int ax = add(ScalarOp::kMul, t, {constant(at.getFloat("alpha", 1.0f), t), x});
        return add(ScalarOp::kMul, t, {x, add(ScalarOp::kSigmoid, t, {ax})});
      }
      case OpKind::LeakyRelu: {  // x < 0 ? alpha * x : x
        RETURN_IF_ERROR(need(1));
        if (!isFloat) return unsupported("LeakyRelu on ", dtypeName(t));
        int x = as(a[0], t);
        int neg = add(ScalarOp::kLess, DType::kBool, {x, constant(0, t)});
        int ax = add(ScalarOp::kMul, t, {constant(at.getFloat("alpha", 0.01f), t), x});
        return add(ScalarOp::kSelect, t, {neg, ax, x});
      }
      case OpKind::Where: {
        RETURN_IF_ERROR(need(3));
        if (typeOf(a[0]) != DType::kBool) return unsupported("Where with a ", dtypeName(typeOf(a[0])), " condition");
        return add(ScalarOp::kSelect, t, {a[0], as(a[1], t), as(a[2], t)});
      }
      case OpKind::Cast: {
        RETURN_IF_ERROR(need(1));
        return as(a[0], t);
      }
      case OpKind::Identity: {
        RETURN_IF_ERROR(need(1));
        return a[0];
      }
      default: return unsupported("op ", n.opName(), " has no generated form yet");
    }
  }

 private:
  KernelSpec& spec_;
};

}  // namespace

const char* scalarOpName(ScalarOp op) {
  switch (op) {
    case ScalarOp::kInput: return "input";
    case ScalarOp::kConst: return "const";
    case ScalarOp::kCast: return "cast";
    case ScalarOp::kSelect: return "select";
    case ScalarOp::kAdd: return "add";
    case ScalarOp::kSub: return "sub";
    case ScalarOp::kMul: return "mul";
    case ScalarOp::kDiv: return "div";
    case ScalarOp::kPow: return "pow";
    case ScalarOp::kMax: return "max";
    case ScalarOp::kMin: return "min";
    case ScalarOp::kEqual: return "eq";
    case ScalarOp::kLess: return "lt";
    case ScalarOp::kLessEq: return "le";
    case ScalarOp::kGreater: return "gt";
    case ScalarOp::kGreaterEq: return "ge";
    case ScalarOp::kAnd: return "and";
    case ScalarOp::kOr: return "or";
    case ScalarOp::kNeg: return "neg";
    case ScalarOp::kAbs: return "abs";
    case ScalarOp::kSqrt: return "sqrt";
    case ScalarOp::kExp: return "exp";
    case ScalarOp::kLog: return "log";
    case ScalarOp::kErf: return "erf";
    case ScalarOp::kTanh: return "tanh";
    case ScalarOp::kSigmoid: return "sigmoid";
    case ScalarOp::kRelu: return "relu";
    case ScalarOp::kReciprocal: return "recip";
    case ScalarOp::kNot: return "not";
    case ScalarOp::kGeluErf: return "gelu_erf";
    case ScalarOp::kGeluTanh: return "gelu_tanh";
    case ScalarOp::kSoftplus: return "softplus";
  }
  return "?";
}

int64_t KernelSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

StatusOr<KernelSpec> describeFused(const Node& fused) {
  if (fused.op() != OpKind::Fused || fused.numBodies() != 1) return unsupported("not a Fused node");
  const Graph& body = *fused.body(0);
  if (body.inputs().size() != fused.inputs().size() || body.outputs().size() != fused.outputs().size())
    return unsupported("its body does not match the node's operands");
  for (size_t k = 0; k < fused.inputs().size(); ++k)
    if (!fused.input(k) || fused.input(k)->type() != body.inputs()[k]->type())
      return unsupported("input ", k, " is absent or differs in type from its parameter");
  for (size_t k = 0; k < fused.outputs().size(); ++k)
    if (fused.output(k)->type() != body.outputs()[k]->type())
      return unsupported("output ", k, " differs in type from its body result");
  std::vector<Node*> bodyNodes = body.nodes();  // a copy: nodes() returns by value
  std::vector<const Node*> nodes(bodyNodes.begin(), bodyNodes.end());
  std::vector<const Value*> ins(body.inputs().begin(), body.inputs().end());
  std::vector<const Value*> outs(body.outputs().begin(), body.outputs().end());
  return describeGroup(nodes, ins, outs, fused.name().empty() ? fused.output(0)->name() : fused.name());
}

bool mayBeGenerated(const Node& n) {
  if (n.numBodies() > 0 || n.outputs().size() != 1 || !isElementwiseOp(n.op())) return false;
  if (!supportedDtype(n.output(0)->type().dtype)) return false;
  for (const Value* v : n.inputs())
    if (v && !supportedDtype(v->type().dtype)) return false;
  switch (n.op()) {
    case OpKind::Add: case OpKind::Sum: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Pow:
    case OpKind::Max: case OpKind::Min: case OpKind::Equal: case OpKind::Less: case OpKind::LessOrEqual:
    case OpKind::Greater: case OpKind::GreaterOrEqual: case OpKind::And: case OpKind::Or: case OpKind::Not:
    case OpKind::Neg: case OpKind::Abs: case OpKind::Sqrt: case OpKind::Exp: case OpKind::Log: case OpKind::Erf:
    case OpKind::Tanh: case OpKind::Sigmoid: case OpKind::Relu: case OpKind::Reciprocal: case OpKind::Softplus:
    case OpKind::Gelu: case OpKind::Swish: case OpKind::LeakyRelu: case OpKind::Where: case OpKind::Cast:
    case OpKind::Identity: case OpKind::Clip:
      return true;
    default: return false;
  }
}

StatusOr<KernelSpec> describeGroup(const std::vector<const Node*>& nodes, const std::vector<const Value*>& inputs,
                                   const std::vector<const Value*>& outputs, const std::string& group) {
  KernelSpec spec;
  spec.group = group;
  if (outputs.empty()) return unsupported("the group has no results");

  // Step 1.
  for (const Node* n : nodes) {
    if (n->op() == OpKind::Fused || n->numBodies() > 0) return unsupported("it holds a region (", n->opName(), ")");
    if (!isElementwiseOp(n->op()))
      return unsupported("it holds ", n->opName(), " ('", n->name(), "'), which is not elementwise");
    for (const Value* v : n->outputs())
      if (!supportedDtype(v->type().dtype))
        return unsupported("value '", v->name(), "' is ", dtypeName(v->type().dtype));
  }
  const Dims shape = outputs.front()->type().shape;
  for (const Value* r : outputs)
    if (r->type().shape != shape)
      return unsupported("its results differ in shape (", outputs.front()->type().str(), " and ", r->type().str(), ")");
  for (const Value* v : inputs)
    if (!supportedDtype(v->type().dtype)) return unsupported("input '", v->name(), "' is ", dtypeName(v->type().dtype));

  // Step 2.
  for (const Node* n : nodes)
    for (const Value* v : n->inputs())
      if (v && !broadcastsTo(v->type().shape, shape))
        return unsupported("value '", v->name(), "' ", v->type().str(), " does not broadcast to the group's shape ",
                           outputs.front()->type().str());

  // Step 3.
  Describer d(spec);
  std::unordered_map<const Value*, int> exprOf;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Value* p = inputs[k];
    spec.exprs.push_back(Expr{ScalarOp::kInput, p->type().dtype, {}, static_cast<int>(k), 0});
    exprOf[p] = static_cast<int>(spec.exprs.size()) - 1;
    spec.inputs.push_back(KernelInput{p->type(), {}});
  }
  for (const Node* n : nodes) {
    std::vector<int> args;
    for (const Value* v : n->inputs()) {
      if (!v) {
        if (n->op() == OpKind::Clip) {
          args.push_back(-1);
          continue;
        }
        return unsupported(n->opName(), " with an absent operand");
      }
      auto it = exprOf.find(v);
      if (it == exprOf.end()) {
        if (!v->isConstant() || v->type().numel() != 1)
          return unsupported("value '", v->name(), "' is neither computed in the group nor a scalar constant");
        if (!supportedDtype(v->type().dtype)) return unsupported("constant '", v->name(), "' is ", dtypeName(v->type().dtype));
        ASSIGN_OR_RETURN(double c, scalarOf(*v));
        it = exprOf.emplace(v, d.constant(c, v->type().dtype)).first;
      }
      args.push_back(it->second);
    }
    int e;
    if (n->op() == OpKind::Clip) {  // min(max(x, lo), hi); absent bounds do nothing
      DType t = n->output(0)->type().dtype;
      if (t == DType::kBool || args.empty() || args[0] < 0) return unsupported("Clip on ", dtypeName(t));
      e = d.as(args[0], t);
      if (args.size() > 1 && args[1] >= 0) e = d.add(ScalarOp::kMax, t, {e, d.as(args[1], t)});
      if (args.size() > 2 && args[2] >= 0) e = d.add(ScalarOp::kMin, t, {e, d.as(args[2], t)});
    } else {
      auto r = d.translate(*n, args);
      if (!r.ok()) return unsupported(r.status().message(), " ('", n->name(), "')");
      e = *r;
    }
    e = d.as(e, n->output(0)->type().dtype);
    exprOf[n->output(0)] = e;
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    auto it = exprOf.find(outputs[k]);
    if (it == exprOf.end() || spec.exprs[it->second].op == ScalarOp::kInput)
      return unsupported("result ", k, " is not computed in the group");
    spec.outputs.push_back(KernelOutput{outputs[k]->type(), it->second});
  }

  // Step 4: strides over the full shape, then merge.
  std::vector<std::vector<int64_t>> strides;
  for (const KernelInput& in : spec.inputs) {
    const Dims& s = in.type.shape;
    std::vector<int64_t> st(shape.size(), 0);
    int64_t run = 1;
    for (size_t i = s.size(); i-- > 0;) {
      size_t j = shape.size() - s.size() + i;
      st[j] = s[i] == 1 ? 0 : run;
      run *= s[i];
    }
    strides.push_back(st);
  }
  // Size-1 dims of the index space carry nothing: drop them first.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> kept(strides.size());
  for (size_t j = 0; j < shape.size(); ++j) {
    if (shape[j] == 1) continue;
    dims.push_back(shape[j]);
    for (size_t k = 0; k < strides.size(); ++k) kept[k].push_back(strides[k][j]);
  }
  std::vector<int64_t> mdims;
  std::vector<std::vector<int64_t>> mst(strides.size());
  for (size_t j = 0; j < dims.size(); ++j) {
    bool chain = !mdims.empty();
    for (size_t k = 0; chain && k < kept.size(); ++k) {
      int64_t prev = mst[k].back(), cur = kept[k][j];
      chain = (prev == 0 && cur == 0) || (cur != 0 && prev == cur * dims[j]);
    }
    if (chain) {
      mdims.back() *= dims[j];
      for (size_t k = 0; k < kept.size(); ++k) mst[k].back() = kept[k][j];
    } else {
      mdims.push_back(dims[j]);
      for (size_t k = 0; k < kept.size(); ++k) mst[k].push_back(kept[k][j]);
    }
  }
  spec.dims = mdims;
  for (size_t k = 0; k < spec.inputs.size(); ++k) spec.inputs[k].strides = mst[k];
  return spec;
}

std::string specKey(const KernelSpec& spec) {
  std::string s = "dims";
  for (int64_t d : spec.dims) s += strCat(" ", d);
  for (const KernelInput& in : spec.inputs) {
    s += strCat("\nin ", in.type.str());
    for (int64_t st : in.strides) s += strCat(" ", st);
  }
  for (size_t i = 0; i < spec.exprs.size(); ++i) {
    const Expr& e = spec.exprs[i];
    char v[40];
    std::snprintf(v, sizeof v, "%a", e.value);
    s += strCat("\n", i, " ", scalarOpName(e.op), " ", dtypeName(e.dtype), " ", e.input, " ", v);
    for (int a : e.args) s += strCat(" ", a);
  }
  for (const KernelOutput& o : spec.outputs) s += strCat("\nout ", o.type.str(), " ", o.expr);
  return s;
}

std::string hashHex(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace pcc
