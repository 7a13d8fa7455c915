// Splitting fused projections.
//
// Algorithm, for each Split node s in order:
//  1. s splits the last dimension of its input v. v is the output of a MatMul
//     or Gemm p, or of a Reshape r (keeping the last dimension) of p's output;
//     each value on the way has exactly one reader and is not a graph output.
//  2. p reads a non-constant A and a constant 2-D weight B whose output
//     features are the split dimension (B's columns, or its rows for a Gemm
//     with transB); a Gemm's bias C is constant, and either has the features
//     as its last dimension or broadcasts along them (extent 1, or absent).
//  3. For piece i (the features [o_i, o_i + n_i) of s's output i): a copy of
//     p reading B's slice of those features and C's slice when C has them
//     (blocks of the weights, not copies: addConstantSlice reads no weight),
//     then, when r was there, a Reshape to output i's shape; output i's
//     readers take the new value. The new nodes go where s was.
//  4. s, r and p are erased, and the constants nothing reads any more.
// The partitioner runs it before sharding when tp > 1: a Split has no map
// from its input's features to its pieces' (the pieces of rank k would be
// interleaved), while separate products each split their own features.
#include "passes/partition/split_projections.h"

#include "passes/partition/partitioner.h"

namespace pcc {

namespace {

bool onlyReader(const Graph& g, const Value* v, const Node* reader) {
  for (const Value* o : g.outputs())
    if (o == v) return false;
  return v->uses().size() == 1 && v->uses()[0] == reader;
}

Value* i64Const(Graph& g, const std::string& base, const Dims& dims) {
  std::vector<int64_t> v(dims.begin(), dims.end());
  return g.addConstant(g.uniqueName(base), Tensor::fromVector<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v));
}

// Step 3 for one Split; \returns whether it was rewritten.
StatusOr<bool> rewrite(Graph& g, Node* s) {
  // Step 1.
  Value* v = s->input(0);
  if (!v || v->type().rank() < 1 || s->outputs().size() < 2) return false;
  int64_t rank = v->type().rank();
  int64_t axis = s->attrs().getInt("axis", 0);
  if (axis < 0) axis += rank;
  if (axis != rank - 1 || !onlyReader(g, v, s)) return false;
  Node* r = nullptr;
  Node* p = v->producer();
  if (p && p->op() == OpKind::Reshape) {
    r = p;
    Value* in = r->input(0);
    p = in ? in->producer() : nullptr;
    if (!p || in->type().rank() < 1 || in->type().shape.back() != v->type().shape.back() || !onlyReader(g, in, r))
      return false;
  }
  if (!p || (p->op() != OpKind::MatMul && p->op() != OpKind::Gemm) || p->outputs().size() != 1) return false;
  // Step 2.
  Value* a = p->input(0);
  Value* b = p->input(1);
  if (!a || a->isConstant() || !b || !b->isConstant() || b->type().rank() != 2) return false;
  const bool gemm = p->op() == OpKind::Gemm;
  const int featureDim = gemm && p->attrs().getInt("transB", 0) ? 0 : 1;
  const int64_t features = b->type().shape[featureDim];
  if (features != v->type().shape.back()) return false;
  Value* c = gemm && p->inputs().size() > 2 ? p->input(2) : nullptr;
  bool cHasFeatures = false;
  if (c) {
    if (!c->isConstant() || c->type().rank() < 1) return false;
    int64_t last = c->type().shape.back();
    if (last == features && features != 1) cHasFeatures = true;
    else if (last != 1) return false;
  }
  // Step 3.
  size_t at = g.indexOf(s);
  int64_t offset = 0;
  std::vector<std::pair<Value*, Value*>> replace;
  for (size_t i = 0; i < s->outputs().size(); ++i) {
    Value* piece = s->output(i);
    const int64_t n = piece->type().shape.back();
    Dims start(2, 0), extent = b->type().shape;
    start[featureDim] = offset;
    extent[featureDim] = n;
    ASSIGN_OR_RETURN(Value* bi, addConstantSlice(g, g.uniqueName(strCat(b->name(), ".", i)), b, start, extent));
    std::vector<Value*> ins = {a, bi};
    if (c) {
      if (cHasFeatures) {
        Dims cs(c->type().rank(), 0), ce = c->type().shape;
        cs.back() = offset;
        ce.back() = n;
        ASSIGN_OR_RETURN(Value* ci, addConstantSlice(g, g.uniqueName(strCat(c->name(), ".", i)), c, cs, ce));
        ins.push_back(ci);
      } else {
        ins.push_back(c);
      }
    }
    std::string name = strCat(p->name().empty() ? p->output()->name() : p->name(), ".", i);
    ASSIGN_OR_RETURN(auto types, inferOutputTypes(p->op(), ins, p->attrs(), name));
    Node* pi = g.addNode(p->op(), ins, types, p->attrs(), g.uniqueName(name), {g.uniqueName(name)}, at++);
    Value* out = pi->output();
    if (r) {
      std::vector<Value*> rins = {out, i64Const(g, strCat(piece->name(), ".shape"), piece->type().shape)};
      std::string rname = strCat(r->name().empty() ? v->name() : r->name(), ".", i);
      ASSIGN_OR_RETURN(auto rtypes, inferOutputTypes(OpKind::Reshape, rins, {}, rname));
      out = g.addNode(OpKind::Reshape, rins, rtypes, {}, g.uniqueName(rname), {g.uniqueName(rname)}, at++)->output();
    }
    if (out->type() != piece->type())
      return internalError("splitting projection ", p->describe(), ": piece ", i, " is ", out->type().str(),
                           ", the Split gave ", piece->type().str());
    replace.emplace_back(piece, out);
    offset += n;
  }
  if (offset != features)
    return internalError("splitting projection ", p->describe(), ": the pieces cover ", offset, " of ", features,
                         " features");
  for (auto& [from, to] : replace) g.replaceAllUsesWith(from, to);
  // Step 4.
  std::vector<Node*> dead = {s};
  if (r) dead.push_back(r);
  dead.push_back(p);
  g.eraseNodes(dead);
  return true;
}

}  // namespace

StatusOr<int> splitFusedProjections(Graph& g) {
  std::vector<Node*> splits;
  for (Node* n : g.nodes())
    if (n->op() == OpKind::Split) splits.push_back(n);
  int count = 0;
  for (Node* s : splits) {
    ASSIGN_OR_RETURN(bool done, rewrite(g, s));
    count += done;
  }
  if (count > 0) g.eraseUnusedConstants();
  return count;
}

}  // namespace pcc
