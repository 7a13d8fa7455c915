// recognize: rewrites what exporters decompose back into ONNX's own ops, so
// the IR stays standard and later passes see one node per block.
//
// Algorithm (patterns of passes/rewrite/pattern.h, applied to a fixpoint;
// every constant is checked by value within a relative tolerance of 1e-5, and
// every matched intermediate value must be read only inside the block):
//  1. LayerNormalization core, rooted at the Div (or Mul by a Reciprocal):
//     d = x - ReduceMean(x), n = d / Sqrt(ReduceMean(d^2) + eps), d^2 as
//     Pow(d, 2) or Mul(d, d), both means over the same last k axes (kept
//     dims) -> LayerNormalization(x, ones, axis = rank - k, epsilon = eps).
//  2. RMSNormalization core, rooted at the Mul (or Div): x * Reciprocal(s),
//     x * (1 / s) or x / s, with s = Sqrt(ReduceMean(x^2) + eps) over the
//     last k axes -> RMSNormalization(x, ones, axis, epsilon).
//  3. Scale and bias: Mul(norm, c) with a constant c that broadcasts to the
//     normalized dims becomes the norm's scale when it is all ones (and a
//     LayerNormalization has no bias); Add(LayerNormalization, c) becomes
//     its bias when it has none. The norm must have no other reader.
//  4. Gelu, rooted at the last Mul: the product (over single-use Muls, any
//     grouping) of 0.5, x and 1 + Erf(x / sqrt 2) (or x * 1/sqrt 2) ->
//     Gelu(x); of 0.5, x and 1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))
//     -> Gelu(x, approximate = "tanh"), x^3 as Pow(x, 3) or x * x * x.
//  5. Swish: x * Sigmoid(x) -> Swish(x).
//  6. HardSwish: x * HardSigmoid(x) (alpha 1/6, beta 0.5), or the product of
//     x, Clip(x + 3, 0, 6) and 1/6 (or divided by 6) -> HardSwish(x).
// Steps 1, 2, 4, 5 and 6 count in PassContext::stats under the op's name.

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_set>

#include "passes/registry.h"
#include "passes/rewrite/pattern.h"

namespace pcc {

namespace {

constexpr double kTol = 1e-5;

bool isFloatValue(const Value* v) { return v && isFloat(v->type().dtype); }

/// \returns the input of `n` that is not a constant splat near `c`, when the
/// other one is; else nullptr.
Value* operandBesides(const Node* n, double c) {
  if (!n || n->inputs().size() != 2) return nullptr;
  if (isSplat(n->input(1), c, kTol)) return n->input(0);
  if (isSplat(n->input(0), c, kTol)) return n->input(1);
  return nullptr;
}

/// \returns whether the splat constant `c` of a binary node leaves the other
/// operand's type unchanged (no broadcast to a larger shape).
bool keepsType(const Node* n) { return n->inputs().size() == 2 && n->input(0) && n->input(1) &&
                                       (n->output()->type() == n->input(0)->type() ||
                                        n->output()->type() == n->input(1)->type()); }

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

/// Step 1.
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

/// Step 2.
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

/// Step 3: absorbs Mul (scale) or Add (bias) by a constant into `norm`.
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

/// \returns the leaves of the product rooted at Mul `n`: the operands of `n`,
/// with each operand produced by a single-use Mul expanded in turn.
std::vector<Value*> productLeaves(const Graph& g, const Node& n, int depth = 3) {
  std::vector<Value*> leaves;
  for (Value* v : n.inputs()) {
    Node* p = producerOf(v, OpKind::Mul);
    if (p && depth > 0 && hasOneUse(g, v)) {
      for (Value* l : productLeaves(g, *p, depth - 1)) leaves.push_back(l);
    } else {
      leaves.push_back(v);
    }
  }
  return leaves;
}

/// Removes from `leaves` one constant splat near `c`. \returns whether there was one.
bool takeConstant(std::vector<Value*>& leaves, double c) {
  for (auto it = leaves.begin(); it != leaves.end(); ++it)
    if (isSplat(*it, c, kTol)) {
      leaves.erase(it);
      return true;
    }
  return false;
}

/// \returns the non-constant operand of a single-use Add(v, 1) leaf produced by `op`'s output,
/// i.e. the input of `op` when leaf = 1 + op(input).
Value* onePlus(const Graph& g, Value* leaf, OpKind op) {
  Node* add = producerOf(leaf, OpKind::Add);
  if (!add || !hasOneUse(g, leaf)) return nullptr;
  Value* t = operandBesides(add, 1.0);
  Node* f = producerOf(t, op);
  if (!f || !hasOneUse(g, t) || add->output()->type() != t->type()) return nullptr;
  return f->input(0);
}

/// Step 4.
class GeluPattern : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::Mul; }
  std::string_view name() const override { return "Gelu"; }
  bool countsAsStat() const override { return true; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    const Graph& g = rw.graph();
    std::vector<Value*> leaves = productLeaves(g, n);
    if (leaves.size() != 3 || !takeConstant(leaves, 0.5)) return false;
    for (size_t i = 0; i < 2; ++i) {
      Value* x = leaves[1 - i];
      if (!isFloatValue(x) || x->type() != n.output()->type()) continue;
      if (Value* z = onePlus(g, leaves[i], OpKind::Erf); z && isScaledBy(g, z, x, std::sqrt(0.5))) {
        ASSIGN_OR_RETURN(Node * ge, rw.create(OpKind::Gelu, {x}));
        rw.replace(n.output(), ge->output());
        return true;
      }
      if (Value* w = onePlus(g, leaves[i], OpKind::Tanh); w && isTanhArgument(g, w, x)) {
        AttrMap a;
        a.set("approximate", std::string("tanh"));
        ASSIGN_OR_RETURN(Node * ge, rw.create(OpKind::Gelu, {x}, std::move(a)));
        rw.replace(n.output(), ge->output());
        return true;
      }
    }
    return false;
  }

 private:
  /// \returns whether `z` is x * c or x / (1/c), single use, of x's type.
  static bool isScaledBy(const Graph& g, Value* z, const Value* x, double c) {
    if (!hasOneUse(g, z) || z->type() != x->type()) return false;
    if (Node* m = producerOf(z, OpKind::Mul)) return operandBesides(m, c) == x;
    if (Node* d = producerOf(z, OpKind::Div)) return d->input(0) == x && isSplat(d->input(1), 1.0 / c, kTol);
    return false;
  }

  /// \returns whether `w` is sqrt(2/pi) * (x + 0.044715 * x^3).
  static bool isTanhArgument(const Graph& g, Value* w, const Value* x) {
    if (!hasOneUse(g, w) || w->type() != x->type()) return false;
    Value* inner = operandBesides(producerOf(w, OpKind::Mul), std::sqrt(2.0 / M_PI));
    Node* add = producerOf(inner, OpKind::Add);
    if (!add || !hasOneUse(g, inner)) return false;
    for (size_t i = 0; i < 2; ++i) {
      Node* cube = producerOf(add->input(1 - i), OpKind::Mul);
      if (add->input(i) != x || !cube || !hasOneUse(g, add->input(1 - i))) continue;
      std::vector<Value*> leaves = productLeaves(g, *cube);
      if (!takeConstant(leaves, 0.044715)) continue;
      if (leaves.size() == 3 && leaves[0] == x && leaves[1] == x && leaves[2] == x) return true;
      if (leaves.size() != 1) continue;
      Node* pow = producerOf(leaves[0], OpKind::Pow);
      if (pow && hasOneUse(g, leaves[0]) && pow->input(0) == x && isSplat(pow->input(1), 3.0, 0.0)) return true;
    }
    return false;
  }
};

/// Step 5.
class SwishPattern : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::Mul; }
  std::string_view name() const override { return "Swish"; }
  bool countsAsStat() const override { return true; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    for (size_t i = 0; i < 2; ++i) {
      Node* s = producerOf(n.input(i), OpKind::Sigmoid);
      Value* x = n.input(1 - i);
      if (!s || s->input(0) != x || !hasOneUse(rw.graph(), n.input(i)) || x->type() != n.output()->type()) continue;
      ASSIGN_OR_RETURN(Node * sw, rw.create(OpKind::Swish, {x}));
      rw.replace(n.output(), sw->output());
      return true;
    }
    return false;
  }
};

/// Step 6.
class HardSwishPattern : public RewritePattern {
 public:
  explicit HardSwishPattern(OpKind root) : root_(root) {}
  OpKind rootOp() const override { return root_; }
  std::string_view name() const override { return "HardSwish"; }
  bool countsAsStat() const override { return true; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    const Graph& g = rw.graph();
    std::vector<Value*> leaves;
    bool scaled = false;  // divided by 6 (or times 1/6) somewhere
    if (root_ == OpKind::Div) {
      Node* m = producerOf(n.input(0), OpKind::Mul);
      if (!m || !hasOneUse(g, n.input(0)) || !isSplat(n.input(1), 6.0, kTol) || !keepsType(&n)) return false;
      leaves = productLeaves(g, *m);
      scaled = true;
    } else {
      leaves = productLeaves(g, n);
      scaled = takeConstant(leaves, 1.0 / 6.0);
    }
    if (leaves.size() != 2) return false;
    for (size_t i = 0; i < 2; ++i) {
      Value* x = leaves[1 - i];
      Value* gate = leaves[i];
      if (!isFloatValue(x) || x->type() != n.output()->type() || !hasOneUse(g, gate)) continue;
      bool gateScaled = scaled;
      if (Node* d = producerOf(gate, OpKind::Div); d && !gateScaled && isSplat(d->input(1), 6.0, kTol)) {
        gate = d->input(0);
        gateScaled = true;
        if (!hasOneUse(g, gate)) continue;
      }
      bool match = false;
      if (Node* hs = producerOf(gate, OpKind::HardSigmoid); hs && !gateScaled) {
        match = hs->input(0) == x && std::abs(hs->attrs().getFloat("alpha", 0.2f) - 1.0 / 6.0) <= kTol &&
                std::abs(hs->attrs().getFloat("beta", 0.5f) - 0.5) <= kTol;
      } else if (Node* clip = producerOf(gate, OpKind::Clip); clip && gateScaled) {
        Node* add = producerOf(clip->input(0), OpKind::Add);
        match = add && hasOneUse(g, clip->input(0)) && operandBesides(add, 3.0) == x && keepsType(add) &&
                isSplat(clip->input(1), 0.0, 0.0) && isSplat(clip->input(2), 6.0, 0.0);
      }
      if (!match) continue;
      ASSIGN_OR_RETURN(Node * h, rw.create(OpKind::HardSwish, {x}));
      rw.replace(n.output(), h->output());
      return true;
    }
    return false;
  }

 private:
  OpKind root_;
};

class RecognizePass : public Pass {
 public:
  RecognizePass() {
    for (OpKind root : {OpKind::Div, OpKind::Mul}) patterns_.push_back(std::make_unique<LayerNormCore>(root));
    for (OpKind root : {OpKind::Div, OpKind::Mul}) patterns_.push_back(std::make_unique<RmsNormCore>(root));
    patterns_.push_back(std::make_unique<AbsorbNormParam>(OpKind::Mul, OpKind::LayerNormalization));
    patterns_.push_back(std::make_unique<AbsorbNormParam>(OpKind::Add, OpKind::LayerNormalization));
    patterns_.push_back(std::make_unique<AbsorbNormParam>(OpKind::Mul, OpKind::RMSNormalization));
    patterns_.push_back(std::make_unique<GeluPattern>());
    patterns_.push_back(std::make_unique<SwishPattern>());
    patterns_.push_back(std::make_unique<HardSwishPattern>(OpKind::Mul));
    patterns_.push_back(std::make_unique<HardSwishPattern>(OpKind::Div));
  }
  std::string_view name() const override { return "recognize"; }
  StatusOr<bool> run(Graph& g, PassContext& ctx) override { return applyPatterns(g, patterns_, ctx); }

 private:
  PatternList patterns_;
};

}  // namespace

std::unique_ptr<Pass> createRecognizePass() { return std::make_unique<RecognizePass>(); }

}  // namespace pcc
