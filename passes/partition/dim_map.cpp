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

}  // namespace

bool isElementwiseOp(OpKind k) {
  switch (k) {
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Pow:
    case OpKind::Equal: case OpKind::Where: case OpKind::Sqrt: case OpKind::Erf: case OpKind::Tanh:
    case OpKind::Sigmoid: case OpKind::Relu: case OpKind::Gelu: case OpKind::Cast: case OpKind::Identity:
    case OpKind::Abs: case OpKind::Neg: case OpKind::Exp: case OpKind::Log: case OpKind::Reciprocal:
    case OpKind::Floor: case OpKind::Ceil: case OpKind::Round: case OpKind::Sign: case OpKind::Sin:
    case OpKind::Cos: case OpKind::Tan: case OpKind::Asin: case OpKind::Acos: case OpKind::Atan:
    case OpKind::Sinh: case OpKind::Cosh: case OpKind::Asinh: case OpKind::Acosh: case OpKind::Atanh:
    case OpKind::Softplus: case OpKind::Softsign: case OpKind::Not: case OpKind::IsNaN: case OpKind::IsInf:
    case OpKind::BitwiseNot: case OpKind::LeakyRelu: case OpKind::Elu: case OpKind::Selu: case OpKind::Celu:
    case OpKind::HardSigmoid: case OpKind::HardSwish: case OpKind::Mish: case OpKind::ThresholdedRelu:
    case OpKind::Shrink: case OpKind::Clip: case OpKind::And: case OpKind::Or: case OpKind::Xor:
    case OpKind::Less: case OpKind::LessOrEqual: case OpKind::Greater: case OpKind::GreaterOrEqual:
    case OpKind::Mod: case OpKind::BitShift: case OpKind::BitwiseAnd: case OpKind::BitwiseOr:
    case OpKind::BitwiseXor: case OpKind::Min: case OpKind::Max: case OpKind::Sum: case OpKind::Mean:
    case OpKind::CastLike: case OpKind::PRelu:
      return true;
    default: return false;
  }
}

std::vector<DimLink> reshapeLinks(const Dims& in, const Dims& out) {
  std::vector<DimLink> l = none(in.size());
  int64_t pin = 1;
  for (size_t i = 0; i < in.size(); ++i) {
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

OpDimMap dimMapFor(const Node& n) {
  OpDimMap m;
  for (Value* v : n.inputs()) m.links.push_back(none(v ? v->type().shape.size() : 0));
  const Dims& out = n.output()->type().shape;
  const AttrMap& at = n.attrs();
  OpKind k = n.op();
  if (isElementwiseOp(k)) {
    for (size_t i = 0; i < n.inputs().size(); ++i)
      if (n.input(i)) m.links[i] = broadcastLinks(shapeOf(n, i), out);
    return m;
  }
  switch (k) {
    case OpKind::MatMul: matmulMap(n, m); break;
    case OpKind::Gemm: gemmMap(n, m); break;
    case OpKind::Expand: m.links[0] = broadcastLinks(shapeOf(n, 0), out); break;
    case OpKind::Conv:
      m.links[0][0].outDim = 0;
      break;
    case OpKind::MaxPool: case OpKind::AveragePool: case OpKind::GlobalAveragePool:
      // MaxPool's Indices are positions in the whole input: no split through it.
      if (n.op() == OpKind::MaxPool && n.attrs().getInt("num_outputs", 1) == 2) break;
      m.links[0][0].outDim = 0;
      m.links[0][1].outDim = 1;
      break;
    case OpKind::BatchNormalization:
      m.links[0][0].outDim = 0;
      m.links[0][1].outDim = 1;
      for (size_t i = 1; i < 5; ++i) m.links[i][0].outDim = 1;
      break;
    case OpKind::Softmax:
      m.links[0] = identityExcept(out.size(), {normAxis(at.getInt("axis", -1), out.size())});
      break;
    case OpKind::LayerNormalization: {
      size_t r = out.size();
      int64_t axis = normAxis(at.getInt("axis", -1), r);
      std::vector<int64_t> normalized;
      for (int64_t d = axis; d < static_cast<int64_t>(r); ++d) normalized.push_back(d);
      m.links[0] = identityExcept(r, normalized);
      break;
    }
    case OpKind::ReduceMean: {
      size_t r = shapeOf(n, 0).size();
      std::vector<int64_t> axes;
      if (n.input(1) && n.input(1)->isConstant()) {
        for (int64_t a : n.input(1)->constantData().toInts()) axes.push_back(normAxis(a, r));
      } else if (!n.input(1) && !at.getInt("noop_with_empty_axes", 0)) {
        for (size_t d = 0; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
      }
      bool keep = at.getInt("keepdims", 1) != 0;
      int o = 0;
      for (size_t d = 0; d < r; ++d) {
        bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
        if (!reduced) m.links[0][d].outDim = keep ? static_cast<int>(d) : o;
        if (!reduced || keep) ++o;
      }
      break;
    }
    case OpKind::Reshape: case OpKind::Flatten: case OpKind::Squeeze: case OpKind::Unsqueeze:
      m.links[0] = reshapeLinks(shapeOf(n, 0), out);
      break;
    case OpKind::Transpose: {
      size_t r = out.size();
      std::vector<int64_t> perm = at.getInts("perm");
      if (perm.empty())
        for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
      for (size_t o = 0; o < r && o < perm.size(); ++o) m.links[0][perm[o]].outDim = static_cast<int>(o);
      break;
    }
    case OpKind::Concat: {
      int64_t axis = normAxis(at.getInt("axis", 0), out.size());
      for (size_t i = 0; i < n.inputs().size(); ++i) m.links[i] = identityExcept(out.size(), {axis});
      break;
    }
    case OpKind::Split: {
      int64_t axis = normAxis(at.getInt("axis", 0), out.size());
      m.links[0] = identityExcept(out.size(), {axis});
      break;
    }
    case OpKind::Slice: sliceMap(n, m); break;
    case OpKind::Gather: gatherMap(n, m); break;
    default: break;  // Shape, ConstantOfShape, collectives: nothing is split through them
  }
  return m;
}

}  // namespace pcc
