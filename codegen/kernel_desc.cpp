// describeGroup / describeFused: elementwise ops and reductions over trailing
// axes (a Fused node's body, or a run of its body's nodes) -> KernelSpec.
//
// Algorithm:
//  1. Refuse what this kernel form cannot hold: a node that is not Fused, a
//     body op without a scalar form here (anchors, views, other reductions),
//     a dtype other than float32, float16, bfloat16, int32, int64 and bool
//     (the three float types only for a reduction), a reduction over axes
//     that are not trailing, reductions over different shapes or axes. The
//     index space is the reductions' input shape, else the results' shape;
//     results must lie over the whole index space or, with a reduction, over
//     its rows (keepdims or not).
//  2. Check that every value of the body broadcasts (numpy rules, one way) to
//     the index space, so each can be evaluated at every index; a reduction's
//     result without its axes (keepdims = 0) may only leave the group.
//  3. Translate the body in order into Exprs: parameters are kInput, scalar
//     constants kConst, each op one or a few Exprs (Swish = x * sigmoid(ax),
//     Clip = min(max(x, lo), hi), LayerNormalization = two-pass mean and
//     variance, Softmax = max, exp, sum, divide, ...), operands of another
//     dtype cast first.
//  4. Give each input its strides over the index space (0 where broadcast),
//     then merge adjacent dimensions along which every input's strides chain
//     (stride[d] == stride[d+1] * dims[d+1], or both 0). With a reduction the
//     reduced axes merge into one last dimension (every input must chain
//     across them) and the others merge among themselves.
//  5. With a reduction: check that each result over the rows is the row's
//     value, and refuse a first result over the rows that the memory planner
//     could put over an input 0 read along the row (a LAUNCH may run in
//     place, docs/kernels.md).

#include "codegen/kernel_desc.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "codegen/attention_kernel.h"

namespace pcc {

namespace {

bool supportedDtype(DType t) {
  return isFloatValue(t) || t == DType::kI32 || t == DType::kI64 || t == DType::kBool;
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
    case DType::kF16:
    case DType::kBF16: return t.getDouble(0);  // exact: every float16/bfloat16 value is a float
    case DType::kI64: return static_cast<double>(*t.data<int64_t>());
    case DType::kI32: return static_cast<double>(*t.data<int32_t>());
    case DType::kBool: return *t.data<bool>() ? 1.0 : 0.0;
    default: return unsupported("constant '", v.name(), "' of dtype ", dtypeName(t.dtype()));
  }
}

/// \returns the node's name for messages: its own, else its output's.
std::string label(const Node& n) { return n.name().empty() && n.output(0) ? n.output(0)->name() : n.name(); }

std::string shapeStr(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += strCat(i ? "," : "", d[i]);
  return s + "]";
}

/// \returns for reduction `n` how many trailing dims of its input 0 it
/// reduces; an unsupported error when its axes are not trailing (or absent).
StatusOr<size_t> trailingAxes(const Node& n) {
  const TensorType& x = n.input(0)->type();
  const int64_t rank = x.rank();
  auto where = [&] { return strCat(" ('", label(n), "')"); };
  if (rank == 0) return unsupported(n.opName(), where(), " on a scalar");
  std::vector<bool> red(rank, false);
  auto norm = [&](int64_t a) -> StatusOr<int64_t> {
    if (a < -rank || a >= rank) return unsupported(n.opName(), where(), " axis ", a, " out of range for ", x.str());
    return a < 0 ? a + rank : a;
  };
  const AttrMap& at = n.attrs();
  switch (n.op()) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      ASSIGN_OR_RETURN(int64_t a, norm(at.getInt("axis", -1)));
      if (a != rank - 1)
        return unsupported(n.opName(), where(), " over axis ", a, " of ", x.str(), ", not the last");
      red[a] = true;
      break;
    }
    case OpKind::LayerNormalization:
    case OpKind::RMSNormalization: {
      ASSIGN_OR_RETURN(int64_t a, norm(at.getInt("axis", -1)));
      for (int64_t d = a; d < rank; ++d) red[d] = true;
      break;
    }
    case OpKind::GlobalAveragePool:  // the spatial dims of N x C x ...
      if (rank < 3) return unsupported(n.opName(), where(), " on ", x.str());
      for (int64_t d = 2; d < rank; ++d) red[d] = true;
      break;
    default: {  // Reduce*: axes from the constant operand 1 or the attribute
      std::vector<int64_t> axes;
      if (n.inputs().size() > 1 && n.input(1)) {
        const Value* ax = n.input(1);
        if (!ax->isConstant() || ax->type().dtype != DType::kI64)
          return unsupported(n.opName(), where(), " with axes that are not a constant");
        const Tensor& t = ax->constantData();
        axes.assign(t.data<int64_t>(), t.data<int64_t>() + t.numel());
      } else {
        axes = at.getInts("axes");
      }
      if (axes.empty()) {
        if (at.getInt("noop_with_empty_axes", 0) != 0) return unsupported(n.opName(), where(), " that reduces nothing");
        red.assign(rank, true);
      }
      for (int64_t a : axes) {
        ASSIGN_OR_RETURN(int64_t b, norm(a));
        red[b] = true;
      }
    }
  }
  size_t first = 0;
  while (first < red.size() && !red[first]) ++first;
  for (size_t d = first; d < red.size(); ++d)
    if (!red[d]) {
      std::string axes;
      for (size_t e = 0; e < red.size(); ++e)
        if (red[e]) axes += strCat(axes.empty() ? "" : ", ", e);
      return unsupported(n.opName(), where(), " reduces axes [", axes, "] of ", x.str(), ", not trailing ones");
    }
  return red.size() - first;
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
    bool isFloat = isFloatValue(t);
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

  /// Step 3 for reduction `n` over rows of `len` points; `a` its operands'
  /// Exprs (kernelOperands). \returns the Expr of its output.
  StatusOr<int> reduction(const Node& n, const std::vector<int>& operands, int64_t len) {
    const DType f = DType::kF32;
    if (operands.empty()) return unsupported(n.opName(), " without operands");
    // float16 and bfloat16 operands are read as float32: the math and the
    // sums are float32, the result is rounded once when stored or cast.
    std::vector<int> a = operands;
    for (int& e : a) {
      if (e >= 0 && !isFloatValue(typeOf(e))) return unsupported(n.opName(), " on ", dtypeName(typeOf(e)));
      if (e >= 0) e = as(e, f);
    }
    int x = a[0];
    auto bin = [&](ScalarOp op, int l, int r) { return add(op, f, {l, r}); };
    auto un = [&](ScalarOp op, int v) { return add(op, f, {v}); };
    int count = constant(static_cast<double>(len), f);
    const AttrMap& at = n.attrs();
    switch (n.op()) {
      case OpKind::Softmax:
      case OpKind::LogSoftmax: {  // e = exp(x - max); e / sum(e), or x - max - log(sum(e))
        int d = bin(ScalarOp::kSub, x, un(ScalarOp::kReduceMax, x));
        int e = un(ScalarOp::kExp, d);
        int sum = un(ScalarOp::kReduceSum, e);
        if (n.op() == OpKind::Softmax) return bin(ScalarOp::kDiv, e, sum);
        return bin(ScalarOp::kSub, d, un(ScalarOp::kLog, sum));
      }
      case OpKind::LayerNormalization:
      case OpKind::RMSNormalization: {
        // Two passes, as the reference: mean, then the mean of squared
        // deviations; (x - mean) * (1 / sqrt(var + eps)) * scale (+ bias).
        if (a.size() < 2 || a[1] < 0) return unsupported(n.opName(), " without a scale");
        int d = x;
        if (n.op() == OpKind::LayerNormalization) d = bin(ScalarOp::kSub, x, bin(ScalarOp::kDiv, un(ScalarOp::kReduceSum, x), count));
        int var = bin(ScalarOp::kDiv, un(ScalarOp::kReduceSum, bin(ScalarOp::kMul, d, d)), count);
        int eps = constant(at.getFloat("epsilon", 1e-5f), f);
        int inv = un(ScalarOp::kReciprocal, un(ScalarOp::kSqrt, bin(ScalarOp::kAdd, var, eps)));
        int y = bin(ScalarOp::kMul, bin(ScalarOp::kMul, d, inv), a[1]);
        if (n.op() == OpKind::LayerNormalization && a.size() > 2 && a[2] >= 0) y = bin(ScalarOp::kAdd, y, a[2]);
        return y;
      }
      case OpKind::ReduceSum: return un(ScalarOp::kReduceSum, x);
      case OpKind::ReduceMean:
      case OpKind::GlobalAveragePool: return bin(ScalarOp::kDiv, un(ScalarOp::kReduceSum, x), count);
      case OpKind::ReduceMax: return un(ScalarOp::kReduceMax, x);
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
    case ScalarOp::kReduceSum: return "reduce_sum";
    case ScalarOp::kReduceMax: return "reduce_max";
  }
  return "?";
}

int64_t KernelSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t KernelSpec::rowLength() const { return dims.empty() ? 1 : dims.back(); }

int64_t KernelSpec::rows() const {
  int64_t c = rowLength();
  return c == 0 ? 0 : numel() / c;
}

std::vector<bool> KernelSpec::variesAlongRow() const {
  std::vector<bool> v(exprs.size(), false);
  for (size_t i = 0; i < exprs.size(); ++i) {
    const Expr& e = exprs[i];
    if (e.op == ScalarOp::kInput) {
      v[i] = !dims.empty() && inputs[e.input].strides.back() != 0;
    } else if (!isReduceOp(e.op)) {
      for (int a : e.args) v[i] = v[i] || v[a];
    }
  }
  return v;
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

bool isGeneratedReduction(const Node& n) {
  switch (n.op()) {
    case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::LayerNormalization: case OpKind::RMSNormalization:
    case OpKind::ReduceSum: case OpKind::ReduceMean: case OpKind::ReduceMax: case OpKind::GlobalAveragePool:
      return true;
    default: return false;
  }
}

std::vector<const Value*> kernelOperands(const Node& n) {
  std::vector<const Value*> v(n.inputs().begin(), n.inputs().end());
  if (isGeneratedReduction(n) && n.op() != OpKind::LayerNormalization && n.op() != OpKind::RMSNormalization)
    v.resize(std::min<size_t>(v.size(), 1));
  return v;
}

bool mayBeGenerated(const Node& n) {
  if (n.numBodies() > 0 || n.outputs().size() != 1) return false;
  if (isGeneratedReduction(n)) {
    for (const Value* v : kernelOperands(n))
      if (v && !isFloatValue(v->type().dtype)) return false;
    return isFloatValue(n.output(0)->type().dtype);
  }
  if (!isElementwiseOp(n.op())) return false;
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
  const Node* red = nullptr;  // a reduction of the group; all share its input shape and axes
  size_t axes = 0;
  for (const Node* n : nodes) {
    if (n->op() == OpKind::Fused || n->numBodies() > 0) return unsupported("it holds a region (", n->opName(), ")");
    bool isRed = isGeneratedReduction(*n);
    if (!isElementwiseOp(n->op()) && !isRed)
      return unsupported("it holds ", n->opName(), " ('", label(*n), "'), which is not elementwise",
                         opClass(n->op()) == OpClass::kReduction ? " nor a generated reduction" : "");
    for (const Value* v : n->outputs())
      if (!supportedDtype(v->type().dtype))
        return unsupported("value '", v->name(), "' is ", dtypeName(v->type().dtype));
    if (!isRed) continue;
    if (!n->input(0)) return unsupported(n->opName(), " ('", label(*n), "') without its data operand");
    for (const Value* v : kernelOperands(*n))
      if (v && !isFloatValue(v->type().dtype))
        return unsupported(n->opName(), " ('", label(*n), "') on ", dtypeName(v->type().dtype),
                           ": reductions are generated on float32, float16 and bfloat16 only");
    ASSIGN_OR_RETURN(size_t k, trailingAxes(*n));
    if (red && (k != axes || n->input(0)->type().shape != red->input(0)->type().shape))
      return unsupported("it holds reductions over different rows ('", label(*red), "' and '", label(*n), "')");
    red = n;
    axes = k;
  }
  const Dims shape = red ? red->input(0)->type().shape : outputs.front()->type().shape;
  // A reduction over no elements still writes its identity (0, or -inf for a
  // maximum) to every output element; a kernel that loops over the rows
  // would write none, so the reference kernels take it.
  if (red && std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end())
    return unsupported(red->opName(), " ('", label(*red), "') reduces an empty tensor");
  // With a reduction: the shape of its rows, with the axes kept as 1 and dropped.
  Dims keepShape(shape.begin(), shape.end() - static_cast<std::ptrdiff_t>(axes)), dropShape = keepShape;
  keepShape.resize(shape.size(), 1);
  auto shapeError = [&](const Value* r) {
    return unsupported("its results differ in shape (", red ? red->input(0)->type().str() : outputs.front()->type().str(),
                       " and ", r->type().str(), ")");
  };
  for (const Value* r : outputs)
    if (r->type().shape != shape && !(red && (r->type().shape == keepShape || r->type().shape == dropShape)))
      return shapeError(r);
  for (const Value* v : inputs)
    if (!supportedDtype(v->type().dtype)) return unsupported("input '", v->name(), "' is ", dtypeName(v->type().dtype));

  // Step 2.
  std::unordered_set<const Value*> dropped;  // reduction results without their axes
  for (const Node* n : nodes) {
    for (const Value* v : kernelOperands(*n)) {
      if (v && dropped.count(v))
        return unsupported("the reduced value '", v->name(), "' (keepdims = 0) is read inside the group");
      if (v && !broadcastsTo(v->type().shape, shape))
        return unsupported("value '", v->name(), "' ", v->type().str(), " does not broadcast to the group's shape ",
                           shapeStr(shape));
    }
    if (isGeneratedReduction(*n) && n->output(0)->type().shape != shape && n->output(0)->type().shape != keepShape)
      dropped.insert(n->output(0));
  }
  for (const Value* v : inputs)
    if (!broadcastsTo(v->type().shape, shape))
      return unsupported("input '", v->name(), "' ", v->type().str(), " does not broadcast to the group's shape");

  // Step 3.
  int64_t rowLen = 1;
  for (size_t j = shape.size() - axes; j < shape.size(); ++j) rowLen *= shape[j];
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
    for (const Value* v : kernelOperands(*n)) {
      if (!v) {
        if (n->op() == OpKind::Clip || isGeneratedReduction(*n)) {
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
      auto r = isGeneratedReduction(*n) ? d.reduction(*n, args, rowLen) : d.translate(*n, args);
      if (!r.ok()) return unsupported(r.status().message(), " ('", label(*n), "')");
      e = *r;
    }
    e = d.as(e, n->output(0)->type().dtype);
    exprOf[n->output(0)] = e;
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    auto it = exprOf.find(outputs[k]);
    if (it == exprOf.end() || spec.exprs[it->second].op == ScalarOp::kInput)
      return unsupported("result ", k, " is not computed in the group");
    spec.outputs.push_back(KernelOutput{outputs[k]->type(), it->second, outputs[k]->type().shape != shape});
  }

  // Step 4: strides over the full shape, then merge (the reduced axes apart).
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
  const size_t outerDims = shape.size() - axes;
  // Size-1 dims of the index space carry nothing: drop them first.
  auto merge = [&](size_t from, size_t to, std::vector<int64_t>& mdims, std::vector<std::vector<int64_t>>& mst) {
    size_t start = mdims.size();
    for (size_t j = from; j < to; ++j) {
      if (shape[j] == 1) continue;
      bool chain = mdims.size() > start;
      for (size_t k = 0; chain && k < strides.size(); ++k) {
        int64_t prev = mst[k].back(), cur = strides[k][j];
        chain = (prev == 0 && cur == 0) || (cur != 0 && prev == cur * shape[j]);
      }
      if (chain) {
        mdims.back() *= shape[j];
        for (size_t k = 0; k < strides.size(); ++k) mst[k].back() = strides[k][j];
      } else {
        mdims.push_back(shape[j]);
        for (size_t k = 0; k < strides.size(); ++k) mst[k].push_back(strides[k][j]);
      }
    }
    return mdims.size() - start;
  };
  std::vector<int64_t> mdims;
  std::vector<std::vector<int64_t>> mst(strides.size());
  merge(0, outerDims, mdims, mst);
  if (red) {
    // The reduced axes as one last dimension: every input must chain across them.
    size_t made = merge(outerDims, shape.size(), mdims, mst);
    if (made == 0) {  // a row of one point
      mdims.push_back(1);
      for (auto& m : mst) m.push_back(0);
    } else if (made > 1) {
      // Some input's strides do not chain across the axes (had all chained,
      // the axes would be one dimension): name the first such input.
      auto chains = [&](const std::vector<int64_t>& m) {
        for (size_t j = m.size() - made + 1; j < m.size(); ++j)
          if (!((m[j - 1] == 0 && m[j] == 0) || (m[j] != 0 && m[j - 1] == m[j] * mdims[j]))) return false;
        return true;
      };
      size_t k = 0;
      while (k + 1 < mst.size() && chains(mst[k])) ++k;
      return unsupported("input '", inputs[k]->name(), "' ", inputs[k]->type().str(),
                         " is not contiguous along the reduced axes of ", shapeStr(shape));
    }
    spec.reduces = true;
  }
  spec.dims = mdims;
  for (size_t k = 0; k < spec.inputs.size(); ++k) spec.inputs[k].strides = mst[k];

  // Step 5.
  if (spec.reduces) {
    std::vector<bool> varies = spec.variesAlongRow();
    for (size_t k = 0; k < spec.outputs.size(); ++k)
      if (spec.outputs[k].perRow && varies[spec.outputs[k].expr])
        return unsupported("result ", k, " ", outputs[k]->type().str(), " varies along the reduced axes");
    if (spec.outputs[0].perRow && !spec.inputs.empty() && spec.inputs[0].type.bytes() == spec.outputs[0].type.bytes() &&
        spec.inputs[0].strides.back() != 0)
      return unsupported("its first result ", outputs[0]->type().str(), " may be planned over input 0 ",
                         inputs[0]->type().str(), ", which it reads along the rows");
  }
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
  for (const KernelOutput& o : spec.outputs) s += strCat("\nout ", o.type.str(), " ", o.expr, o.perRow ? " row" : "");
  if (spec.reduces) s += "\nreduces";
  if (spec.attention) s += "\n" + attentionKey(*spec.attention);
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
