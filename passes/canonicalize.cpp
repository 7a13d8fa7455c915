// canonicalize: rewrites the graph into a simpler equivalent form that later
// passes (recognize, fuse, the partitioner) see fewer shapes of.
//
// Algorithm (patterns of passes/rewrite/pattern.h, applied to a fixpoint):
//  1. Identity(x) -> x.
//  2. A Reshape, Squeeze, Unsqueeze or Flatten whose data input is produced
//     by one of those four becomes one Reshape of the chain's source to its
//     own static shape; one whose output type equals its input's goes.
//  3. Transpose(Transpose(x, p1), p2) -> Transpose(x, p1∘p2); a Transpose with
//     the identity permutation goes.
//     A Transpose of a Reshape that only merges neighbouring dims (each
//     dim of its output a product of a run of its input's dims), read only
//     by reshapes, becomes Reshape(Transpose(x, the permutation of x's dims)),
//     which step 2 then collapses into those reshapes; and the new Transpose
//     composes with one before it (the head transposes exporters write as
//     Reshape -> 3-D Transpose -> Reshape become one 4-D Transpose).
//  4. A 2-D Transpose feeding Gemm's A or B flips transA/transB instead; a
//     MatMul of 2-D operands whose B is a 2-D Transpose becomes Gemm with
//     transB = 1 (the same products and sums, so it is exact).
//  5. Cast(Cast(x: A) -> B) -> A goes when B holds every value of A exactly
//     (f32 -> f64 -> f32, not f32 -> f16 -> f32); a Cast to its input's type goes.
//  6. x*1, 1*x, x+0, 0+x, x-0 and x/1 go, with the 1 or 0 a constant of
//     equal elements, when the result has x's shape and dtype (the
//     broadcast changes nothing).
// A value that is a graph output is only forwarded where the value replacing
// it can take over its name (PatternRewriter::canReplace).
//
// unit-transposes, run on each rank program after fusion (compiler/driver.cpp):
// a Transpose that moves only dims of size 1 (the others keep their order:
// the elements stay where they are, [B,1,H,D] -> [B,H,1,D] of a decode step's
// one position) becomes a Reshape to its output shape, which the memory plan
// makes a view; with step 2 the Reshapes around it collapse into one. It runs
// on rank programs only, after partitioning: the partitioner's dim maps see
// the exporter's Transposes, whose dims it splits by name.

#include <memory>
#include <numeric>

#include "passes/registry.h"
#include "passes/rewrite/pattern.h"

namespace pcc {

namespace {

/// Step 1.
class RemoveIdentity : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::Identity; }
  std::string_view name() const override { return "identity"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    Value* x = n.input(0);
    if (!x || x->type() != n.output()->type() || !rw.canReplace(n.output(), x)) return false;
    rw.replace(n.output(), x);
    return true;
  }
};

bool isReshapeLike(OpKind op) {
  return op == OpKind::Reshape || op == OpKind::Squeeze || op == OpKind::Unsqueeze || op == OpKind::Flatten;
}

/// Step 2, rooted at each of the four ops.
class CollapseReshapes : public RewritePattern {
 public:
  explicit CollapseReshapes(OpKind op) : op_(op) {}
  OpKind rootOp() const override { return op_; }
  std::string_view name() const override { return "reshape-chain"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    Value* in = n.input(0);
    const TensorType& out = n.output()->type();
    if (!in) return false;
    if (in->type() == out) {
      if (!rw.canReplace(n.output(), in)) return false;
      rw.replace(n.output(), in);
      return true;
    }
    Node* p = in->producer();
    if (!p || !isReshapeLike(p->op()) || !p->input(0)) return false;
    // Zero-sized dims would read as "copy the input dim" in a Reshape shape.
    for (int64_t d : out.shape)
      if (d <= 0) return false;
    Value* src = p->input(0);
    if (src->type() == out) {
      if (!rw.canReplace(n.output(), src)) return false;
      rw.replace(n.output(), src);
      return true;
    }
    Value* shape = rw.constant(n.output()->name() + "_shape",
                               Tensor::fromVector<int64_t>(DType::kI64, {out.rank()}, out.shape));
    ASSIGN_OR_RETURN(Node * r, rw.create(OpKind::Reshape, {src, shape}));
    rw.replace(n.output(), r->output());
    return true;
  }

 private:
  OpKind op_;
};

/// \returns the permutation of Transpose `n` (its default reverses the dims).
std::vector<int64_t> permOf(const Node& n) {
  std::vector<int64_t> perm = n.attrs().getInts("perm");
  if (perm.empty() && n.input(0)) {
    perm.resize(static_cast<size_t>(n.input(0)->type().rank()));
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  return perm;
}

bool isIdentityPerm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

/// Step 3.
class ComposeTransposes : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::Transpose; }
  std::string_view name() const override { return "transpose-chain"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    Value* in = n.input(0);
    if (!in) return false;
    std::vector<int64_t> p2 = permOf(n);
    if (isIdentityPerm(p2)) {
      if (!rw.canReplace(n.output(), in)) return false;
      rw.replace(n.output(), in);
      return true;
    }
    Node* first = producerOf(in, OpKind::Transpose);
    if (!first || !first->input(0)) return false;
    std::vector<int64_t> p1 = permOf(*first);
    if (p1.size() != p2.size()) return false;
    // out[j] = mid[p2[j]] = x[p1[p2[j]]].
    std::vector<int64_t> c(p2.size());
    for (size_t j = 0; j < p2.size(); ++j) c[j] = p1[static_cast<size_t>(p2[j])];
    Value* x = first->input(0);
    if (isIdentityPerm(c)) {
      if (!rw.canReplace(n.output(), x)) return false;
      rw.replace(n.output(), x);
      return true;
    }
    AttrMap a;
    a.set("perm", c);
    ASSIGN_OR_RETURN(Node * t, rw.create(OpKind::Transpose, {x}, std::move(a)));
    rw.replace(n.output(), t->output());
    return true;
  }
};

/// Step 3, a Transpose moved above a Reshape that merges dims.
class TransposeThroughMerge : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::Transpose; }
  std::string_view name() const override { return "transpose-through-merge"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    const Graph& g = rw.graph();
    Value* y = n.input(0);
    Node* r = y ? y->producer() : nullptr;
    if (!r || !isReshapeLike(r->op()) || !r->input(0) || !hasOneUse(g, y)) return false;
    // Only where the Reshape made here collapses into the readers.
    const Value* out = n.output();
    if (out->uses().empty() || isGraphOutput(g, out)) return false;
    for (const Node* u : out->uses())
      if (!isReshapeLike(u->op()) || u->input(0) != out) return false;
    Value* x = r->input(0);
    const Dims& xs = x->type().shape;
    const Dims& ys = y->type().shape;
    // groups[j]: the run of x's dims whose product is y's dim j (no 0 or 1
    // dims, which would make the runs ambiguous).
    std::vector<std::pair<size_t, size_t>> groups;
    size_t i = 0;
    for (int64_t d : ys) {
      if (d <= 1) return false;
      size_t start = i;
      int64_t prod = 1;
      while (i < xs.size() && prod < d) {
        if (xs[i] <= 1) return false;
        prod *= xs[i++];
      }
      if (prod != d) return false;
      groups.emplace_back(start, i);
    }
    if (i != xs.size() || groups.size() == xs.size()) return false;
    std::vector<int64_t> q;
    for (int64_t j : permOf(n))
      for (size_t k = groups[static_cast<size_t>(j)].first; k < groups[static_cast<size_t>(j)].second; ++k)
        q.push_back(static_cast<int64_t>(k));
    AttrMap a;
    a.set("perm", q);
    ASSIGN_OR_RETURN(Node * t, rw.create(OpKind::Transpose, {x}, std::move(a)));
    const TensorType& ot = out->type();
    Value* shape = rw.constant(out->name() + "_shape", Tensor::fromVector<int64_t>(DType::kI64, {ot.rank()}, ot.shape));
    ASSIGN_OR_RETURN(Node * re, rw.create(OpKind::Reshape, {t->output(), shape}));
    if (re->output()->type() != ot) return internalError("reshape typed ", re->output()->type().str(), ", not ", ot.str());
    rw.replace(n.output(), re->output());
    return true;
  }
};

/// A Transpose that only moves dims of size 1 (unit-transposes).
class UnitDimTranspose : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::Transpose; }
  std::string_view name() const override { return "unit-transpose"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    Value* x = n.input(0);
    if (!x) return false;
    const Dims& xs = x->type().shape;
    const std::vector<int64_t> perm = permOf(n);
    if (perm.size() != xs.size()) return false;
    // The dims above 1, in the order the output takes them, must be in
    // ascending input order; a 0-sized dim leaves nothing to move.
    int64_t last = -1;
    for (int64_t j : perm) {
      if (j < 0 || j >= static_cast<int64_t>(xs.size())) return false;
      const int64_t d = xs[static_cast<size_t>(j)];
      if (d <= 0) return false;
      if (d == 1) continue;
      if (j < last) return false;
      last = j;
    }
    const TensorType& ot = n.output()->type();
    Value* shape = rw.constant(n.output()->name() + "_shape",
                               Tensor::fromVector<int64_t>(DType::kI64, {ot.rank()}, ot.shape));
    ASSIGN_OR_RETURN(Node * r, rw.create(OpKind::Reshape, {x, shape}));
    if (r->output()->type() != ot) return internalError("reshape typed ", r->output()->type().str(), ", not ", ot.str());
    rw.replace(n.output(), r->output());
    return true;
  }
};

/// \returns the input of `v`'s producer if it is a Transpose swapping the two
/// dims of a 2-D tensor, else nullptr.
Value* transposed2d(const Value* v) {
  Node* t = producerOf(v, OpKind::Transpose);
  if (!t || !t->input(0) || t->input(0)->type().rank() != 2) return nullptr;
  return permOf(*t) == std::vector<int64_t>{1, 0} ? t->input(0) : nullptr;
}

/// Step 4, Gemm.
class TransposeIntoGemm : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::Gemm; }
  std::string_view name() const override { return "transpose-into-gemm"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    Value* a = transposed2d(n.input(0));
    Value* b = transposed2d(n.input(1));
    if (!a && !b) return false;
    AttrMap attrs = n.attrs();
    std::vector<Value*> ins = n.inputs();
    if (a) {
      ins[0] = a;
      attrs.set("transA", int64_t{1 - n.attrs().getInt("transA", 0)});
    }
    if (b) {
      ins[1] = b;
      attrs.set("transB", int64_t{1 - n.attrs().getInt("transB", 0)});
    }
    ASSIGN_OR_RETURN(Node * g, rw.create(OpKind::Gemm, std::move(ins), std::move(attrs)));
    if (g->output()->type() != n.output()->type()) return internalError("Gemm type changed to ", g->output()->type().str());
    rw.replace(n.output(), g->output());
    return true;
  }
};

/// Step 4, MatMul.
class TransposeIntoMatMul : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::MatMul; }
  std::string_view name() const override { return "transpose-into-matmul"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    Value* a = n.input(0);
    Value* b = transposed2d(n.input(1));
    if (!a || !b || a->type().rank() != 2 || !isFloat(a->type().dtype)) return false;
    AttrMap attrs;
    attrs.set("transB", int64_t{1});
    ASSIGN_OR_RETURN(Node * g, rw.create(OpKind::Gemm, {a, b}, std::move(attrs)));
    if (g->output()->type() != n.output()->type()) return internalError("Gemm type changed to ", g->output()->type().str());
    rw.replace(n.output(), g->output());
    return true;
  }
};

/// \returns whether every value of `a` converts to `b` and back unchanged.
bool roundTripsExactly(DType a, DType b) {
  if (a == b) return true;
  switch (a) {
    case DType::kBool: return isInteger(b) || isFloat(b);
    case DType::kF16:
    case DType::kBF16: return b == DType::kF32 || b == DType::kF64;
    case DType::kF32: return b == DType::kF64;
    case DType::kI8: return b == DType::kI16 || b == DType::kI32 || b == DType::kI64 || b == DType::kF16 || b == DType::kF32 || b == DType::kF64;
    case DType::kU8: return b == DType::kI16 || b == DType::kU16 || b == DType::kI32 || b == DType::kU32 || b == DType::kI64 || b == DType::kU64 || b == DType::kF32 || b == DType::kF64;
    case DType::kI16: return b == DType::kI32 || b == DType::kI64 || b == DType::kF32 || b == DType::kF64;
    case DType::kU16: return b == DType::kI32 || b == DType::kU32 || b == DType::kI64 || b == DType::kU64 || b == DType::kF32 || b == DType::kF64;
    case DType::kI32: return b == DType::kI64 || b == DType::kF64;
    case DType::kU32: return b == DType::kI64 || b == DType::kU64 || b == DType::kF64;
    default: return false;
  }
}

/// Step 5.
class RemoveCastRoundTrip : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::Cast; }
  std::string_view name() const override { return "cast-chain"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    Value* in = n.input(0);
    if (!in) return false;
    Value* src = in;
    if (in->type() != n.output()->type()) {
      Node* first = producerOf(in, OpKind::Cast);
      if (!first || !first->input(0)) return false;
      src = first->input(0);
      if (src->type() != n.output()->type() || !roundTripsExactly(src->type().dtype, in->type().dtype)) return false;
    }
    if (!rw.canReplace(n.output(), src)) return false;
    rw.replace(n.output(), src);
    return true;
  }
};

/// Step 6: `op` with neutral element `neutral`; `commutes`: the constant may
/// be either operand.
class RemoveNeutral : public RewritePattern {
 public:
  RemoveNeutral(OpKind op, double neutral, bool commutes) : op_(op), neutral_(neutral), commutes_(commutes) {}
  OpKind rootOp() const override { return op_; }
  std::string_view name() const override { return "neutral-element"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    for (size_t c = commutes_ ? 0 : 1; c < 2; ++c) {
      Value* k = n.input(c);
      Value* x = n.input(1 - c);
      if (!k || !x || x->type() != n.output()->type()) continue;
      // Exactly the neutral element: a value within a tolerance would change x.
      if (!isSplat(k, neutral_, 0.0) || !rw.canReplace(n.output(), x)) continue;
      rw.replace(n.output(), x);
      return true;
    }
    return false;
  }

 private:
  OpKind op_;
  double neutral_;
  bool commutes_;
};

class CanonicalizePass : public Pass {
 public:
  CanonicalizePass() {
    patterns_.push_back(std::make_unique<RemoveIdentity>());
    for (OpKind op : {OpKind::Reshape, OpKind::Squeeze, OpKind::Unsqueeze, OpKind::Flatten})
      patterns_.push_back(std::make_unique<CollapseReshapes>(op));
    patterns_.push_back(std::make_unique<ComposeTransposes>());
    patterns_.push_back(std::make_unique<TransposeThroughMerge>());
    patterns_.push_back(std::make_unique<TransposeIntoGemm>());
    patterns_.push_back(std::make_unique<TransposeIntoMatMul>());
    patterns_.push_back(std::make_unique<RemoveCastRoundTrip>());
    patterns_.push_back(std::make_unique<RemoveNeutral>(OpKind::Mul, 1.0, true));
    patterns_.push_back(std::make_unique<RemoveNeutral>(OpKind::Add, 0.0, true));
    patterns_.push_back(std::make_unique<RemoveNeutral>(OpKind::Sub, 0.0, false));
    patterns_.push_back(std::make_unique<RemoveNeutral>(OpKind::Div, 1.0, false));
  }
  std::string_view name() const override { return "canonicalize"; }
  StatusOr<bool> run(Graph& g, PassContext& ctx) override { return applyPatterns(g, patterns_, ctx); }

 private:
  PatternList patterns_;
};

class UnitTransposesPass : public Pass {
 public:
  UnitTransposesPass() {
    for (OpKind op : {OpKind::Reshape, OpKind::Squeeze, OpKind::Unsqueeze, OpKind::Flatten})
      patterns_.push_back(std::make_unique<CollapseReshapes>(op));
    patterns_.push_back(std::make_unique<UnitDimTranspose>());
  }
  std::string_view name() const override { return "unit-transposes"; }
  StatusOr<bool> run(Graph& g, PassContext& ctx) override { return applyPatterns(g, patterns_, ctx); }

 private:
  PatternList patterns_;
};

}  // namespace

std::unique_ptr<Pass> createCanonicalizePass() { return std::make_unique<CanonicalizePass>(); }
std::unique_ptr<Pass> createUnitTransposesPass() { return std::make_unique<UnitTransposesPass>(); }

}  // namespace pcc
