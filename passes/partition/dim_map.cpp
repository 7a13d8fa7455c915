#include "passes/partition/dim_map.h"

#include <algorithm>

namespace pcc {

namespace {

std::vector<DimLink> none(size_t rank) { return std::vector<DimLink>(rank); }

// Numpy broadcasting: input dims align to the right of the output.
std::vector<DimLink> broadcastLinks(const Dims& in, const Dims& out) {
  std::vector<DimLink> l = none(in.size());
  size_t off = out.size() - std::min(out.size(), in.size());
  for (size_t d = 0; d < in.size() && d + off < out.size(); ++d)
    if (in[d] == out[d + off] && in[d] != 1) l[d].outDim = static_cast<int>(d + off);
  return l;
}

std::vector<DimLink> identityExcept(size_t rank, const std::vector<int64_t>& excluded) {
  std::vector<DimLink> l = none(rank);
  for (size_t d = 0; d < rank; ++d)
    if (std::find(excluded.begin(), excluded.end(), static_cast<int64_t>(d)) == excluded.end())
      l[d].outDim = static_cast<int>(d);
  return l;
}

int64_t normAxis(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }

const Dims& shapeOf(const Node& n, size_t i) { return n.input(i)->type().shape; }

void matmulMap(const Node& n, OpDimMap& m) {
  const Dims& a = shapeOf(n, 0);
  const Dims& b = shapeOf(n, 1);
  const Dims& out = n.output()->type().shape;
  if (a.size() < 2 || b.size() < 2) return;  // vector operands: nothing splits
  int ro = static_cast<int>(out.size());
  // Batch dims broadcast like elementwise; rows of A and columns of B map to the last two.
  m.links[0] = broadcastLinks(Dims(a.begin(), a.end() - 2), Dims(out.begin(), out.end() - 2));
  m.links[0].push_back({ro - 2, false});
  m.links[0].push_back({-1, false});
  m.links[1] = broadcastLinks(Dims(b.begin(), b.end() - 2), Dims(out.begin(), out.end() - 2));
  m.links[1].push_back({-1, false});
  m.links[1].push_back({ro - 1, false});
  m.contractions.push_back({0, static_cast<int>(a.size()) - 1, 1, static_cast<int>(b.size()) - 2});
}

// MatMulNBits: A's leading dims are the output's, and the weight's columns
// (B, scales, zero points and bias along N) its last. K is not split: a
// split K would have to keep whole quantization blocks on each rank, with
// the scales and packed zero points cut alike (not done yet).
void matmulNBitsMap(const Node& n, OpDimMap& m) {
  const int last = static_cast<int>(shapeOf(n, 0).size()) - 1;
  for (int d = 0; d < last; ++d) m.links[0][static_cast<size_t>(d)].outDim = d;
  for (size_t i = 1; i < n.inputs().size(); ++i)
    if (n.input(i)) m.links[i][0].outDim = last;
}

void gemmMap(const Node& n, OpDimMap& m) {
  bool ta = n.attrs().getInt("transA", 0) != 0, tb = n.attrs().getInt("transB", 0) != 0;
  int aM = ta ? 1 : 0, aK = ta ? 0 : 1, bK = tb ? 1 : 0, bN = tb ? 0 : 1;
  m.links[0][aM].outDim = 0;
  m.links[1][bN].outDim = 1;
  m.contractions.push_back({0, aK, 1, bK});
  if (n.input(2)) {
    m.links[2] = broadcastLinks(shapeOf(n, 2), n.output()->type().shape);
    m.biasInput = 2;
  }
}

void sliceMap(const Node& n, OpDimMap& m) {
  const Dims& in = shapeOf(n, 0);
  const Dims& out = n.output()->type().shape;
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] == out[d]) m.links[0][d].outDim = static_cast<int>(d);
  // A dimension sliced to its full extent may still be reversed or strided.
  if (n.input(4) && n.input(4)->isConstant()) {
    auto steps = n.input(4)->constantData().toInts();
    std::vector<int64_t> axes;
    if (n.input(3) && n.input(3)->isConstant()) axes = n.input(3)->constantData().toInts();
    else for (size_t i = 0; i < steps.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    for (size_t i = 0; i < axes.size() && i < steps.size(); ++i)
      if (steps[i] != 1) m.links[0][normAxis(axes[i], in.size())].outDim = -1;
  } else if (n.input(4)) {
    m.links[0] = none(in.size());
  }
}

// Tile: a dimension repeated once is the input's own; the repeats are a
// shape operand (constant repeats only).
void tileMap(const Node& n, OpDimMap& m) {
  if (!n.input(1) || !n.input(1)->isConstant()) return;
  const std::vector<int64_t> repeats = n.input(1)->constantData().toInts();
  const Dims& in = shapeOf(n, 0);
  for (size_t d = 0; d < in.size() && d < repeats.size(); ++d)
    if (repeats[d] == 1) m.links[0][d].outDim = static_cast<int>(d);
}

// RotaryEmbedding on [B, heads, S, d]: batch, heads and positions are the
// output's own; position_ids [B, S] (and cos/sin given per [B, S]) follow the
// batch and the positions. The 3-D form [B, S, heads * d] links nothing (its
// num_heads would change with a split).
void rotaryMap(const Node& n, OpDimMap& m) {
  if (shapeOf(n, 0).size() != 4) return;
  for (int d = 0; d < 3; ++d) m.links[0][d].outDim = d;
  for (size_t i : {size_t{1}, size_t{2}, size_t{3}}) {
    if (!n.input(i) || n.input(i)->type().rank() < 2) continue;
    if (i < 3 && n.input(3)) continue;  // a table [max positions, d / 2] read through position_ids
    m.links[i][0].outDim = 0;
    m.links[i][1].outDim = 2;
  }
}

void gatherMap(const Node& n, OpDimMap& m) {
  const Dims& data = shapeOf(n, 0);
  const Dims& idx = shapeOf(n, 1);
  int64_t axis = normAxis(n.attrs().getInt("axis", 0), data.size());
  for (int64_t d = 0; d < static_cast<int64_t>(data.size()); ++d) {
    if (d < axis) m.links[0][d].outDim = static_cast<int>(d);
    if (d > axis) m.links[0][d].outDim = static_cast<int>(d + static_cast<int64_t>(idx.size()) - 1);
  }
  for (size_t k = 0; k < idx.size(); ++k) m.links[1][k].outDim = static_cast<int>(axis + static_cast<int64_t>(k));
}

// Elementwise ops and Expand: inputs broadcast to the output; shape
// operands (Expand's shape) link to nothing.
void broadcastMap(const Node& n, OpDimMap& m) {
  const Dims& out = n.output()->type().shape;
  for (size_t i = 0; i < n.inputs().size(); ++i)
    if (n.input(i) && !isShapeOperand(n.op(), i)) m.links[i] = broadcastLinks(shapeOf(n, i), out);
}

void convMap(const Node& n, OpDimMap& m) { m.links[0][0].outDim = 0; }

void poolMap(const Node& n, OpDimMap& m) {
  // MaxPool's Indices are positions in the whole input: no split through it.
  if (n.op() == OpKind::MaxPool && n.attrs().getInt("num_outputs", 1) == 2) return;
  m.links[0][0].outDim = 0;
  m.links[0][1].outDim = 1;
}

void batchNormMap(const Node& n, OpDimMap& m) {
  m.links[0][0].outDim = 0;
  m.links[0][1].outDim = 1;
  for (size_t i = 1; i < 5; ++i) m.links[i][0].outDim = 1;
}

void softmaxMap(const Node& n, OpDimMap& m) {
  size_t r = n.output()->type().shape.size();
  m.links[0] = identityExcept(r, {normAxis(n.attrs().getInt("axis", -1), r)});
}

void layerNormMap(const Node& n, OpDimMap& m) {
  size_t r = n.output()->type().shape.size();
  int64_t axis = normAxis(n.attrs().getInt("axis", -1), r);
  std::vector<int64_t> normalized;
  for (int64_t d = axis; d < static_cast<int64_t>(r); ++d) normalized.push_back(d);
  m.links[0] = identityExcept(r, normalized);
}

void reduceMap(const Node& n, OpDimMap& m) {
  const AttrMap& at = n.attrs();
  size_t r = shapeOf(n, 0).size();
  std::vector<int64_t> axes;
  if (n.input(1) && !n.input(1)->isConstant()) return;  // axes known at run time: nothing links
  if (n.input(1))
    for (int64_t a : n.input(1)->constantData().toInts()) axes.push_back(normAxis(a, r));
  if (axes.empty() && !at.getInt("noop_with_empty_axes", 0))  // no axes: every one
    for (size_t d = 0; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
  bool keep = at.getInt("keepdims", 1) != 0;
  int o = 0;
  for (size_t d = 0; d < r; ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    if (!reduced) m.links[0][d].outDim = keep ? static_cast<int>(d) : o;
    if (!reduced || keep) ++o;
  }
}

void reshapeMap(const Node& n, OpDimMap& m) { m.links[0] = reshapeLinks(shapeOf(n, 0), n.output()->type().shape); }

void transposeMap(const Node& n, OpDimMap& m) {
  size_t r = n.output()->type().shape.size();
  std::vector<int64_t> perm = n.attrs().getInts("perm");
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  for (size_t o = 0; o < r && o < perm.size(); ++o) m.links[0][perm[o]].outDim = static_cast<int>(o);
}

void concatMap(const Node& n, OpDimMap& m) {
  size_t r = n.output()->type().shape.size();
  int64_t axis = normAxis(n.attrs().getInt("axis", 0), r);
  for (size_t i = 0; i < n.inputs().size(); ++i) m.links[i] = identityExcept(r, {axis});
}

void splitMap(const Node& n, OpDimMap& m) {
  size_t r = n.output()->type().shape.size();
  m.links[0] = identityExcept(r, {normAxis(n.attrs().getInt("axis", 0), r)});
}

// GatherElements: the indices have the output's shape, every dimension
// linked; a data dimension but the gathered axis is the output's where the
// two extents agree (a smaller index extent reads a prefix, which a split
// would misalign). The gathered axis of the data stays whole.
void gatherElementsMap(const Node& n, OpDimMap& m) {
  const Dims& data = shapeOf(n, 0);
  const Dims& out = n.output()->type().shape;
  const int64_t axis = normAxis(n.attrs().getInt("axis", 0), data.size());
  for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d) {
    m.links[1][static_cast<size_t>(d)].outDim = static_cast<int>(d);
    if (d != axis && data[static_cast<size_t>(d)] == out[static_cast<size_t>(d)])
      m.links[0][static_cast<size_t>(d)].outDim = static_cast<int>(d);
  }
}

// TensorScatter (a KV cache written at each sequence's position): the cache,
// the update and the output share every dimension but the written axis; the
// write positions follow the batch.
void tensorScatterMap(const Node& n, OpDimMap& m) {
  const int64_t rank = static_cast<int64_t>(shapeOf(n, 0).size());
  int64_t axis = n.attrs().getInt("axis", -2);
  if (axis < 0) axis += rank;
  for (size_t i : {0, 1})
    for (int64_t d = 0; d < rank && d < static_cast<int64_t>(m.links[i].size()); ++d)
      if (d != axis) m.links[i][static_cast<size_t>(d)].outDim = static_cast<int>(d);
  if (n.input(2) && !m.links[2].empty()) m.links[2][0].outDim = 0;
}

// Attention (opset 23): Q, K, V, attn_mask, past_key, past_value,
// nonpad_kv_seqlen. Every output (Y, present_key, present_value, qk) has the
// batch first; with 4-D Q, K, V the heads come second (q heads in Y and qk,
// kv heads in the presents). The batch always splits; the heads split when
// every head count divides by the parts (a factor link), which keeps each
// group of q heads with its kv head. With 3-D inputs the heads are packed in
// the hidden dimension: with one output (Y, [batch, seq, q heads * width]) and
// no past key/value, the hidden dims of Q, K and V link to Y's in whole heads
// (granule = the head width), and lowering gives the local node its local
// head counts.
void attentionMap(const Node& n, OpDimMap& m) {
  const Dims& q = shapeOf(n, 0);
  bool heads = q.size() == 4 && shapeOf(n, 1).size() == 4 && shapeOf(n, 2).size() == 4;
  for (size_t i : {0, 1, 2, 4, 5}) {
    if (!n.input(i) || m.links[i].empty()) continue;
    m.links[i][0].outDim = 0;
    if (heads && m.links[i].size() == 4) m.links[i][1] = {1, true};
  }
  const int64_t qHeads = n.attrs().getInt("q_num_heads", 0), kvHeads = n.attrs().getInt("kv_num_heads", 0);
  bool packed = q.size() == 3 && shapeOf(n, 1).size() == 3 && shapeOf(n, 2).size() == 3 && n.outputs().size() == 1 &&
                qHeads > 0 && kvHeads > 0 && !(n.inputs().size() > 4 && n.input(4)) &&
                !(n.inputs().size() > 5 && n.input(5));
  if (packed) {
    const int64_t kHidden = shapeOf(n, 1)[2], vHidden = shapeOf(n, 2)[2];
    if (q[2] % qHeads == 0 && kHidden % kvHeads == 0 && vHidden % kvHeads == 0) {
      m.links[0][2] = {2, true, q[2] / qHeads};
      m.links[1][2] = {2, true, kHidden / kvHeads};
      m.links[2][2] = {2, true, vHidden / kvHeads};
    }
  }
  // The mask broadcasts to [batch, q heads, q seq, kv seq]: only its batch and
  // head dims (where not broadcast) follow a split.
  if (n.input(3)) {
    const Dims& mask = shapeOf(n, 3);
    size_t off = 4 - std::min<size_t>(4, mask.size());
    for (size_t d = 0; d < mask.size(); ++d) {
      size_t full = d + off;
      if (full == 0 && mask[d] == q[0] && mask[d] != 1) m.links[3][d].outDim = 0;
      if (full == 1 && heads && mask[d] == q[1] && mask[d] != 1) m.links[3][d] = {1, true};
      if (full == 1 && packed && mask[d] == qHeads && mask[d] != 1) m.links[3][d] = {2, true};
    }
  }
  if (n.input(6) && !m.links[6].empty()) m.links[6][0].outDim = 0;  // nonpad_kv_seqlen: [batch]
}

}  // namespace

std::vector<DimLink> reshapeLinks(const Dims& in, const Dims& out) {
  std::vector<DimLink> l = none(in.size());
  // An empty tensor has nothing to split (and a zero dim divides nothing).
  if (std::count(in.begin(), in.end(), 0) || std::count(out.begin(), out.end(), 0)) return l;
  int64_t pin = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == 1) continue;  // nothing to split (and linking it would tie another dim's split to it)
    int64_t pout = 1;
    for (size_t j = 0; j < out.size(); pout *= out[j], ++j) {
      if (pout != pin || out[j] == 1) continue;
      if (in[i] == out[j]) {
        l[i] = {static_cast<int>(j), false};
        break;
      }
      if (in[i] % out[j] == 0 || out[j] % in[i] == 0) {
        l[i] = {static_cast<int>(j), true};  // leading factor of a split or merge
        break;
      }
    }
    pin *= in[i];
  }
  return l;
}

DimMapRule dimMapRule(OpKind op) {
  if (isElementwiseOp(op)) return &broadcastMap;
  switch (op) {
    case OpKind::MatMul: return &matmulMap;
    case OpKind::Gemm: return &gemmMap;
    case OpKind::MatMulNBits: return &matmulNBitsMap;
    case OpKind::Expand: return &broadcastMap;
    case OpKind::Conv: return &convMap;
    case OpKind::MaxPool: case OpKind::AveragePool: case OpKind::GlobalAveragePool: return &poolMap;
    case OpKind::BatchNormalization: return &batchNormMap;
    case OpKind::Softmax: return &softmaxMap;
    case OpKind::LayerNormalization: case OpKind::RMSNormalization: return &layerNormMap;
    case OpKind::ReduceMean: case OpKind::ReduceSum: case OpKind::ReduceMax: case OpKind::ReduceMin:
    case OpKind::ReduceProd: case OpKind::ReduceL1: case OpKind::ReduceL2: case OpKind::ReduceLogSum:
    case OpKind::ReduceLogSumExp: case OpKind::ReduceSumSquare: return &reduceMap;
    case OpKind::Reshape: case OpKind::Flatten: case OpKind::Squeeze: case OpKind::Unsqueeze: return &reshapeMap;
    case OpKind::Transpose: return &transposeMap;
    case OpKind::Concat: return &concatMap;
    case OpKind::Split: return &splitMap;
    case OpKind::Slice: return &sliceMap;
    case OpKind::Gather: return &gatherMap;
    case OpKind::GatherElements: return &gatherElementsMap;
    case OpKind::Tile: return &tileMap;
    case OpKind::RotaryEmbedding: return &rotaryMap;
    case OpKind::Attention: return &attentionMap;
    case OpKind::TensorScatter: return &tensorScatterMap;
    default: return nullptr;  // marked Replicate in Ops.def (ops_table_test checks both agree)
  }
}

/// \returns true when `v` is present and has a zero-size dimension.
static bool isEmptyTensor(const Value* v) {
  return v && std::count(v->type().shape.begin(), v->type().shape.end(), 0) > 0;
}

OpDimMap dimMapFor(const Node& n) {
  OpDimMap m;
  for (Value* v : n.inputs()) m.links.push_back(none(v ? v->type().shape.size() : 0));
  if (opInfo(n.op()).shard == ShardRule::kReplicate) return m;
  // A node reading or writing an empty tensor maps trivially (links nothing):
  // there are no elements to split, and the rules' size arithmetic (factors
  // of a reshape, chunks of a split) would divide by the zero dimension.
  if (std::any_of(n.inputs().begin(), n.inputs().end(), isEmptyTensor) ||
      std::any_of(n.outputs().begin(), n.outputs().end(), isEmptyTensor))
    return m;
  if (DimMapRule rule = dimMapRule(n.op())) rule(n, m);
  return m;
}

}  // namespace pcc
