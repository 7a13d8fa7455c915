// The attention patterns of the recognize pass: steps 7 and 8 of the
// algorithm in passes/recognize.cpp.
#include <cmath>
#include <memory>

#include "passes/rewrite/recognize_patterns.h"

namespace pcc {

namespace {

/// \returns `v` with the single-use Mul or Div by a constant splat that
/// produce it peeled off (each keeps its operand's type), multiplying `scale`
/// by their factors.
Value* peelScale(const Graph& g, Value* v, double& scale) {
  for (;;) {
    if (!hasOneUse(g, v)) return v;
    if (Node* m = producerOf(v, OpKind::Mul); m && m->inputs().size() == 2) {
      bool peeled = false;
      for (size_t i = 0; i < 2 && !peeled; ++i) {
        auto c = splatValue(m->input(1 - i));
        if (!c || !m->input(i) || m->input(i)->type() != v->type()) continue;
        scale *= *c;
        v = m->input(i);
        peeled = true;
      }
      if (peeled) continue;
    }
    if (Node* d = producerOf(v, OpKind::Div); d && d->inputs().size() == 2) {
      auto c = splatValue(d->input(1));
      if (c && *c != 0.0 && d->input(0) && d->input(0)->type() == v->type()) {
        scale /= *c;
        v = d->input(0);
        continue;
      }
    }
    return v;
  }
}

/// \returns the permutation of Transpose `n` (its default reverses the dims).
std::vector<int64_t> permOf(const Node& n) {
  std::vector<int64_t> perm = n.attrs().getInts("perm");
  if (perm.empty() && n.input(0))
    for (int64_t i = n.input(0)->type().rank() - 1; i >= 0; --i) perm.push_back(i);
  return perm;
}

bool isIdentityPerm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

/// \returns K as [B, H, T, D] given Kᵀ = `kt` ([B, H, D, T]): the input of a
/// Transpose that swaps the last two dims, a new Transpose of that input
/// composed with the swap, or else a new Transpose of `kt`.
StatusOr<Value*> untransposeKey(PatternRewriter& rw, Value* kt) {
  AttrMap a;
  if (Node* t = producerOf(kt, OpKind::Transpose); t && t->input(0) && t->input(0)->type().rank() == 4) {
    std::vector<int64_t> q = permOf(*t);
    std::swap(q[2], q[3]);
    if (isIdentityPerm(q)) return t->input(0);
    a.set("perm", q);
    ASSIGN_OR_RETURN(Node * n, rw.create(OpKind::Transpose, {t->input(0)}, std::move(a)));
    return n->output();
  }
  a.set("perm", std::vector<int64_t>{0, 1, 3, 2});
  ASSIGN_OR_RETURN(Node * n, rw.create(OpKind::Transpose, {kt}, std::move(a)));
  return n->output();
}

/// \returns x [B, Hk, T, D] when `v` [B, Hk * n, T, D] repeats each of its
/// heads n times as exporters write LLaMA's repeat_kv: Reshape(Expand(x5)),
/// x5 = Unsqueeze(x, 2) or Reshape(x) of shape [B, Hk, 1, T, D], expanded to
/// [B, Hk, n, T, D]; else nullptr. `n` receives the repeat.
Value* repeatedHeads(const Graph& g, Value* v, int64_t& n) {
  Node* r = producerOf(v, OpKind::Reshape);
  if (!r || !hasOneUse(g, r->input(0))) return nullptr;
  Node* e = producerOf(r->input(0), OpKind::Expand);
  if (!e) e = producerOf(r->input(0), OpKind::Tile);  // the same repeat by Tile [1, 1, n, 1, 1]
  if (!e || !e->input(0) || !hasOneUse(g, e->input(0))) return nullptr;
  Node* u = producerOf(e->input(0), OpKind::Unsqueeze);
  if (!u) u = producerOf(e->input(0), OpKind::Reshape);
  if (!u || !u->input(0)) return nullptr;
  Value* x = u->input(0);
  const Dims& xs = x->type().shape;
  const Dims& us = e->input(0)->type().shape;
  const Dims& es = r->input(0)->type().shape;
  const Dims& vs = v->type().shape;
  if (xs.size() != 4 || us != Dims{xs[0], xs[1], 1, xs[2], xs[3]} || es.size() != 5 || es[0] != xs[0] ||
      es[1] != xs[1] || es[3] != xs[2] || es[4] != xs[3] || vs != Dims{xs[0], xs[1] * es[2], xs[2], xs[3]})
    return nullptr;
  n = es[2];
  return x;
}

/// \returns whether mask shape `m` is one Attention takes for scores
/// [B, H, S, T]: rank at most 4, last dim T, broadcasting to the scores.
bool maskFits(const Dims& m, const Dims& scores) {
  if (m.empty() || m.size() > 4 || m.back() != scores[3]) return false;
  size_t off = 4 - m.size();
  for (size_t d = 0; d < m.size(); ++d)
    if (m[d] != 1 && m[d] != scores[d + off]) return false;
  return true;
}

/// The largest finite constant a Where mask may put on masked scores: the
/// weight of a masked key, exp(c - max score), is then 0 in float32 unless the
/// scores themselves reach about c + 100.
constexpr double kLargeNegative = -1e4;

/// \returns whether bool mask `m` is a constant with a true in every row of
/// its last dim.
bool keepsAKeyPerRow(const Value* m) {
  if (!m->isConstant() || m->type().shape.empty()) return false;
  const Tensor& t = m->constantData();
  int64_t row = m->type().shape.back();
  if (row == 0) return false;
  for (int64_t r = 0; r < t.numel() / row; ++r) {
    bool any = false;
    for (int64_t j = 0; j < row && !any; ++j) any = t.data<uint8_t>()[r * row + j] != 0;
    if (!any) return false;
  }
  return true;
}

/// Step 7 of recognize, rooted at the MatMul P·V.
class AttentionPattern : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::MatMul; }
  std::string_view name() const override { return "Attention"; }
  bool countsAsStat() const override { return true; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    const Graph& g = rw.graph();
    Value* p = n.input(0);
    Value* v = n.input(1);
    if (!p || !v || p->type().rank() != 4 || v->type().rank() != 4 || !isFloatValue(p)) return false;
    // The NaN guard Where(IsNaN(P), 0, P).
    if (Node* w = producerOf(p, OpKind::Where); w && hasOneUse(g, p)) {
      Node* isnan = producerOf(w->input(0), OpKind::IsNaN);
      if (!isnan || isnan->input(0) != w->input(2) || !hasOneUse(g, w->input(0)) ||
          !isSplat(w->input(1), 0.0, 0.0) || w->input(2)->uses().size() != 2 || isGraphOutput(g, w->input(2)) ||
          w->input(2)->type() != p->type())
        return false;
      p = w->input(2);
    } else if (!hasOneUse(g, p)) {
      return false;
    }
    Node* sm = producerOf(p, OpKind::Softmax);
    if (!sm || (sm->attrs().getInt("axis", -1) != -1 && sm->attrs().getInt("axis", -1) != 3)) return false;
    Value* s = sm->input(0);
    const Dims scores = s->type().shape;
    Value* mask = nullptr;
    Value* dropMask = nullptr;  // a mask of the keys to drop, to negate
    if (Node* add = producerOf(s, OpKind::Add); add && hasOneUse(g, s) && add->output()->type() == s->type()) {
      for (size_t i = 0; i < 2 && !mask; ++i) {
        Value* m = add->input(1 - i);
        double unused = 1.0;
        if (!producerOf(peelScale(g, add->input(i), unused), OpKind::MatMul) || !m ||
            m->type().dtype != s->type().dtype || !maskFits(m->type().shape, scores))
          continue;
        mask = m;
        s = add->input(i);
      }
      if (!mask) return false;
    } else if (Node* w = producerOf(s, OpKind::Where); w && hasOneUse(g, s) && w->output()->type() == s->type()) {
      // A boolean mask: Where(keep, scores, c), c = -inf, or c <= -1e4 with a
      // constant mask that keeps a key in every row (no row is all c); or the
      // branches the other way round, Where(drop, -inf, scores), which keeps
      // Not(drop) (drop = Not(keep) gives keep back).
      Value* m = w->input(0);
      if (m->type().dtype != DType::kBool || !maskFits(m->type().shape, scores)) return false;
      auto c = splatValue(w->input(2));
      auto swapped = splatValue(w->input(1));
      if (c && w->input(1)->type() == s->type() && (*c == -INFINITY || (*c <= kLargeNegative && keepsAKeyPerRow(m)))) {
        mask = m;
        s = w->input(1);
      } else if (swapped && *swapped == -INFINITY && w->input(2)->type() == s->type()) {
        Node* no = producerOf(m, OpKind::Not);
        if (no) mask = no->input(0);
        else dropMask = m;  // negated once the match is certain
        s = w->input(2);
      } else {
        return false;
      }
    }
    double scale = 1.0;
    s = peelScale(g, s, scale);
    Node* qk = producerOf(s, OpKind::MatMul);
    if (!qk || !hasOneUse(g, s)) return false;
    Value* q = peelScale(g, qk->input(0), scale);
    Value* kt = peelScale(g, qk->input(1), scale);
    const Dims &qs = q->type().shape, &kts = kt->type().shape, &vs = v->type().shape;
    if (qs.size() != 4 || kts.size() != 4 || q->type().dtype != v->type().dtype ||
        kt->type().dtype != v->type().dtype)
      return false;
    // Q [B, H, S, D], Kᵀ [B, Hk, D, T], V [B, Hk, T, Dv]: no broadcast over the
    // batch; the kv heads are the query heads or one (MatMul's broadcast).
    int64_t b = qs[0], h = qs[1], hk = kts[1];
    if (kts[0] != b || vs[0] != b || kts[2] != qs[3] || vs[2] != kts[3] || vs[1] != hk || (hk != h && hk != 1) ||
        scores != Dims{b, h, qs[2], kts[3]})
      return false;
    ASSIGN_OR_RETURN(Value * k, untransposeKey(rw, kt));
    int64_t rk = 0, rv = 0;
    Value* k0 = repeatedHeads(g, k, rk);
    Value* v0 = repeatedHeads(g, v, rv);
    if (k0 && v0 && rk == rv) {
      k = k0;
      v = v0;
    }
    if (dropMask) {
      ASSIGN_OR_RETURN(Node * keep, rw.create(OpKind::Not, {dropMask}, AttrMap{}));
      mask = keep->output();
    }
    std::vector<Value*> ins = {q, k, v};
    if (mask) ins.push_back(mask);
    AttrMap a;
    a.set("scale", static_cast<float>(scale));
    a.set("num_outputs", static_cast<int64_t>(1));
    ASSIGN_OR_RETURN(Node * at, rw.create(OpKind::Attention, std::move(ins), std::move(a)));
    rw.replace(n.output(), at->output());
    return true;
  }
};

/// \returns x [B, S, H * D] when `v` [B, H, S, D] is Transpose(Reshape(x),
/// perm [0, 2, 1, 3]) with the Reshape splitting x's last dim into [H, D].
Value* headsOf3d(Value* v) {
  Node* t = producerOf(v, OpKind::Transpose);
  if (!t || permOf(*t) != std::vector<int64_t>{0, 2, 1, 3}) return nullptr;
  Node* r = producerOf(t->input(0), OpKind::Reshape);
  if (!r || !r->input(0)) return nullptr;
  const Dims& xs = r->input(0)->type().shape;
  const Dims& rs = r->output()->type().shape;
  if (xs.size() != 3 || rs.size() != 4 || rs[0] != xs[0] || rs[1] != xs[1] || rs[2] * rs[3] != xs[2]) return nullptr;
  return r->input(0);
}

/// Step 8 of recognize, rooted at a 4-D Attention of step 7.
class Attention3dPattern : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::Attention; }
  std::string_view name() const override { return "attention-3d"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    const Graph& g = rw.graph();
    if (n.inputs().size() < 3 || n.inputs().size() > 4 || n.outputs().size() != 1 ||
        n.input(0)->type().rank() != 4 || n.attrs().getInt("is_causal", 0) != 0 ||
        n.attrs().getFloat("softcap", 0.0f) != 0.0f || !hasOneUse(g, n.output()))
      return false;
    Value* q = headsOf3d(n.input(0));
    Value* k = headsOf3d(n.input(1));
    Value* v = headsOf3d(n.input(2));
    if (!q || !k || !v) return false;
    // Y [B, H, S, Dv] -> Transpose [0, 2, 1, 3] -> Reshape (any shape; a
    // 3-D Attention's Y is [B, S, H * Dv]).
    Value* y = n.output();
    Node* t = y->uses().front();
    if (t->op() != OpKind::Transpose || permOf(*t) != std::vector<int64_t>{0, 2, 1, 3} || !hasOneUse(g, t->output()))
      return false;
    Node* r = t->output()->uses().front();
    if (r->op() != OpKind::Reshape || r->input(0) != t->output()) return false;
    AttrMap a = n.attrs();
    a.set("q_num_heads", n.input(0)->type().shape[1]);
    a.set("kv_num_heads", n.input(1)->type().shape[1]);
    std::vector<Value*> ins = {q, k, v};
    if (n.inputs().size() == 4) ins.push_back(n.input(3));
    ASSIGN_OR_RETURN(Node * at, rw.create(OpKind::Attention, std::move(ins), std::move(a)));
    Value* out = at->output();
    const TensorType& want = r->output()->type();
    if (out->type() != want) {
      if (out->type().numel() != want.numel()) return internalError("3-D Attention does not cover its Reshape");
      Value* shape = rw.constant(r->output()->name() + "_shape",
                                 Tensor::fromVector<int64_t>(DType::kI64, {want.rank()}, want.shape));
      ASSIGN_OR_RETURN(Node * re, rw.create(OpKind::Reshape, {out, shape}));
      out = re->output();
    }
    if (!rw.canReplace(r->output(), out)) return false;
    rw.replace(r->output(), out);
    return true;
  }
};

}  // namespace

void addAttentionPatterns(PatternList& out) {
  out.push_back(std::make_unique<AttentionPattern>());
  out.push_back(std::make_unique<Attention3dPattern>());
}

}  // namespace pcc
