// The normalization patterns of the recognize pass: steps 1-3 of the
// algorithm in passes/recognize.cpp.
#include <algorithm>
#include <cmath>
#include <memory>

#include "passes/rewrite/recognize_patterns.h"

namespace pcc {

namespace {

/// \returns whether every use of `v` is by a node of `inside`, and v is no graph output.
bool usedOnlyBy(const Graph& g, const Value* v, std::initializer_list<const Node*> inside) {
  if (isGraphOutput(g, v)) return false;
  for (const Node* u : v->uses())
    if (std::find(inside.begin(), inside.end(), u) == inside.end()) return false;
  return true;
}

/// \returns the number k of trailing axes a keepdims ReduceMean `n` reduces
/// (its axes must be exactly the last k), or 0 when they are not.
int64_t trailingReducedAxes(const Node* n) {
  if (!n || n->op() != OpKind::ReduceMean || !n->input(0) || n->attrs().getInt("keepdims", 1) != 1) return 0;
  int64_t rank = n->input(0)->type().rank();
  std::vector<int64_t> axes;
  if (n->input(1)) {
    if (!n->input(1)->isConstant()) return 0;
    axes = n->input(1)->constantData().toInts();
  } else {
    axes = n->attrs().getInts("axes");
  }
  if (axes.empty()) {
    if (n->attrs().getInt("noop_with_empty_axes", 0) != 0) return 0;
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return 0;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  int64_t k = static_cast<int64_t>(axes.size());
  for (int64_t i = 0; i < k; ++i)
    if (axes[i] != rank - k + i) return 0;
  return k;
}

/// \returns whether `sq` is the square of `x`: Pow(x, 2) or Mul(x, x).
bool isSquareOf(const Node* sq, const Value* x) {
  if (!sq) return false;
  if (sq->op() == OpKind::Pow) return sq->input(0) == x && isSplat(sq->input(1), 2.0, 0.0);
  return sq->op() == OpKind::Mul && sq->input(0) == x && sq->input(1) == x;
}

/// What a matched Sqrt(ReduceMean(square) + eps) holds.
struct RootMeanSquare {
  Node* sqrt = nullptr;
  Node* add = nullptr;
  Node* mean = nullptr;
  Node* square = nullptr;
  Value* of = nullptr;  ///< the value squared
  double eps = 0;
  int64_t axes = 0;     ///< k: the last k axes
};

/// Matches s = Sqrt(ReduceMean(Pow(v, 2) | Mul(v, v)) + eps) with single-use
/// intermediates. \returns false if it does not match.
bool matchRootMeanSquare(const Graph& g, Value* s, RootMeanSquare& m) {
  m.sqrt = producerOf(s, OpKind::Sqrt);
  if (!m.sqrt || !hasOneUse(g, s)) return false;
  m.add = producerOf(m.sqrt->input(0), OpKind::Add);
  if (!m.add || !hasOneUse(g, m.add->output()) || !keepsType(m.add)) return false;
  Value* var = nullptr;
  for (size_t i = 0; i < 2; ++i) {
    auto eps = splatValue(m.add->input(1 - i));
    Node* mean = producerOf(m.add->input(i), OpKind::ReduceMean);
    if (eps && *eps >= 0 && mean && m.add->output()->type() == m.add->input(i)->type()) {
      m.eps = *eps;
      var = m.add->input(i);
      m.mean = mean;
    }
  }
  if (!var || !hasOneUse(g, var)) return false;
  m.axes = trailingReducedAxes(m.mean);
  if (m.axes == 0) return false;
  Value* sq = m.mean->input(0);
  m.square = sq->producer();
  if (!m.square || !hasOneUse(g, sq)) return false;
  m.of = m.square->input(0);
  return isSquareOf(m.square, m.of);
}

/// \returns a constant of ones over the last `k` dims of `x`.
Value* onesFor(PatternRewriter& rw, const Value* x, int64_t k, const std::string& base) {
  const Dims& s = x->type().shape;
  Dims norm(s.end() - k, s.end());
  Tensor t = Tensor::zeros(x->type().dtype, norm);
  for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, 1.0);
  return rw.constant(base, std::move(t));
}

AttrMap normAttrs(const Value* x, int64_t k, double eps) {
  AttrMap a;
  a.set("axis", x->type().rank() - k);
  a.set("epsilon", static_cast<float>(eps));
  return a;
}

/// \returns s when `v` is 1 / s as Reciprocal(s) or Div(1, s), else nullptr.
Value* reciprocalOf(const Graph& g, Value* v) {
  if (!hasOneUse(g, v)) return nullptr;
  if (Node* r = producerOf(v, OpKind::Reciprocal)) return r->input(0);
  if (Node* d = producerOf(v, OpKind::Div); d && isSplat(d->input(0), 1.0, 0.0) && keepsType(d)) return d->input(1);
  return nullptr;
}

/// \returns (numerator, denominator) of root `n`: Div(a, s), or Mul(a, 1/s) in
/// either order; the denominator must be a root-mean-square (checked by the caller).
std::vector<std::pair<Value*, Value*>> quotients(const Graph& g, Node& n) {
  std::vector<std::pair<Value*, Value*>> out;
  if (n.op() == OpKind::Div) {
    out.push_back({n.input(0), n.input(1)});
  } else if (n.op() == OpKind::Mul) {
    for (size_t i = 0; i < 2; ++i)
      if (Value* s = reciprocalOf(g, n.input(1 - i))) out.push_back({n.input(i), s});
  }
  return out;
}

/// Step 1 of recognize.
class LayerNormCore : public RewritePattern {
 public:
  explicit LayerNormCore(OpKind root) : root_(root) {}
  OpKind rootOp() const override { return root_; }
  std::string_view name() const override { return "LayerNormalization"; }
  bool countsAsStat() const override { return true; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    const Graph& g = rw.graph();
    for (auto [d, s] : quotients(g, n)) {
      Node* sub = producerOf(d, OpKind::Sub);
      RootMeanSquare rms;
      if (!sub || !isFloatValue(d) || !matchRootMeanSquare(g, s, rms) || rms.of != d) continue;
      Value* x = sub->input(0);
      Node* mean = producerOf(sub->input(1), OpKind::ReduceMean);
      if (!mean || mean->input(0) != x || !hasOneUse(g, sub->input(1))) continue;
      if (trailingReducedAxes(mean) != rms.axes || x->type() != n.output()->type()) continue;
      if (!usedOnlyBy(g, d, {rms.square, &n})) continue;
      Value* ones = onesFor(rw, x, rms.axes, n.output()->name() + "_scale");
      ASSIGN_OR_RETURN(Node * ln, rw.create(OpKind::LayerNormalization, {x, ones}, normAttrs(x, rms.axes, rms.eps)));
      rw.replace(n.output(), ln->output());
      return true;
    }
    return false;
  }

 private:
  OpKind root_;
};

/// Step 2 of recognize.
class RmsNormCore : public RewritePattern {
 public:
  explicit RmsNormCore(OpKind root) : root_(root) {}
  OpKind rootOp() const override { return root_; }
  std::string_view name() const override { return "RMSNormalization"; }
  bool countsAsStat() const override { return true; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    const Graph& g = rw.graph();
    for (auto [x, s] : quotients(g, n)) {
      RootMeanSquare rms;
      if (!isFloatValue(x) || !matchRootMeanSquare(g, s, rms) || rms.of != x || x->type() != n.output()->type())
        continue;
      Value* ones = onesFor(rw, x, rms.axes, n.output()->name() + "_scale");
      ASSIGN_OR_RETURN(Node * r, rw.create(OpKind::RMSNormalization, {x, ones}, normAttrs(x, rms.axes, rms.eps)));
      rw.replace(n.output(), r->output());
      return true;
    }
    return false;
  }

 private:
  OpKind root_;
};

/// \returns `c` as a constant over the normalized dims of `norm`'s input
/// (leading size-1 dims dropped) when it broadcasts to them only, else nullopt.
std::optional<Tensor> asNormParam(const Node* norm, const Value* c) {
  if (!c || !c->isConstant() || c->type().dtype != norm->output()->type().dtype) return std::nullopt;
  const Dims& xs = norm->input(0)->type().shape;
  int64_t rank = static_cast<int64_t>(xs.size());
  int64_t axis = norm->attrs().getInt("axis", -1);
  if (axis < 0) axis += rank;
  int64_t k = rank - axis;
  const Dims& cs = c->type().shape;
  int64_t cr = static_cast<int64_t>(cs.size());
  if (cr > rank) return std::nullopt;
  for (int64_t i = 0; i < cr - k; ++i)
    if (cs[i] != 1) return std::nullopt;
  Dims kept(cs.begin() + std::max<int64_t>(0, cr - k), cs.end());
  for (size_t i = 0; i < kept.size(); ++i)
    if (kept[i] != 1 && kept[i] != xs[xs.size() - kept.size() + i]) return std::nullopt;
  return c->constantData().reshaped(kept);
}

/// Step 3 of recognize: absorbs Mul (scale) or Add (bias) by a constant into `norm`.
class AbsorbNormParam : public RewritePattern {
 public:
  AbsorbNormParam(OpKind root, OpKind norm) : root_(root), norm_(norm) {}
  OpKind rootOp() const override { return root_; }
  std::string_view name() const override { return "norm-parameter"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    for (size_t i = 0; i < 2; ++i) {
      Node* norm = producerOf(n.input(i), norm_);
      if (!norm || !hasOneUse(rw.graph(), n.input(i)) || n.output()->type() != n.input(i)->type()) continue;
      bool hasBias = norm->input(2) != nullptr && !isSplat(norm->input(2), 0.0, 0.0);
      bool isScale = root_ == OpKind::Mul;
      if (isScale ? (hasBias || !isSplat(norm->input(1), 1.0, 0.0)) : norm->input(2) != nullptr) continue;
      auto param = asNormParam(norm, n.input(1 - i));
      if (!param) continue;
      std::vector<Value*> ins = {norm->input(0), norm->input(1)};
      Value* p = rw.constant(n.input(1 - i)->name() + (isScale ? "_scale" : "_bias"), std::move(*param));
      if (isScale) ins[1] = p;
      else ins.push_back(p);
      ASSIGN_OR_RETURN(Node * out, rw.create(norm_, std::move(ins), norm->attrs()));
      rw.replace(n.output(), out->output());
      return true;
    }
    return false;
  }

 private:
  OpKind root_, norm_;
};

}  // namespace

void addNormPatterns(PatternList& out) {
  for (OpKind root : {OpKind::Div, OpKind::Mul}) out.push_back(std::make_unique<LayerNormCore>(root));
  for (OpKind root : {OpKind::Div, OpKind::Mul}) out.push_back(std::make_unique<RmsNormCore>(root));
  out.push_back(std::make_unique<AbsorbNormParam>(OpKind::Mul, OpKind::LayerNormalization));
  out.push_back(std::make_unique<AbsorbNormParam>(OpKind::Add, OpKind::LayerNormalization));
  out.push_back(std::make_unique<AbsorbNormParam>(OpKind::Mul, OpKind::RMSNormalization));
}

}  // namespace pcc
