// The activation patterns of the recognize pass: steps 4-6 of the algorithm
// in passes/recognize.cpp.
#include <cmath>
#include <memory>

#include "passes/rewrite/recognize_patterns.h"

namespace pcc {

namespace {

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
    if (isSplat(*it, c, kMatchTolerance)) {
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

/// Step 4 of recognize.
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
    if (Node* d = producerOf(z, OpKind::Div)) return d->input(0) == x && isSplat(d->input(1), 1.0 / c, kMatchTolerance);
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

/// Step 5 of recognize.
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

/// Step 6 of recognize.
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
      if (!m || !hasOneUse(g, n.input(0)) || !isSplat(n.input(1), 6.0, kMatchTolerance) || !keepsType(&n)) return false;
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
      if (Node* d = producerOf(gate, OpKind::Div); d && !gateScaled && isSplat(d->input(1), 6.0, kMatchTolerance)) {
        gate = d->input(0);
        gateScaled = true;
        if (!hasOneUse(g, gate)) continue;
      }
      bool match = false;
      if (Node* hs = producerOf(gate, OpKind::HardSigmoid); hs && !gateScaled) {
        match = hs->input(0) == x && std::abs(hs->attrs().getFloat("alpha", 0.2f) - 1.0 / 6.0) <= kMatchTolerance &&
                std::abs(hs->attrs().getFloat("beta", 0.5f) - 0.5) <= kMatchTolerance;
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

}  // namespace

void addActivationPatterns(PatternList& out) {
  out.push_back(std::make_unique<GeluPattern>());
  out.push_back(std::make_unique<SwishPattern>());
  out.push_back(std::make_unique<HardSwishPattern>(OpKind::Mul));
  out.push_back(std::make_unique<HardSwishPattern>(OpKind::Div));
}

}  // namespace pcc
