#include "runtime/schema/op_cost.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>

namespace pcc {

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t satAdd(int64_t a, int64_t b) { return a > kMax - b ? kMax : a + b; }

int64_t satMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kMax / b ? kMax : a * b;
}

// Ops that move or view data and compute nothing.
bool movesOnly(std::string_view op) {
  static const std::unordered_set<std::string_view> kOps = {
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Concat", "Split", "Slice",
      "Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Expand", "Tile", "Pad", "Shape",
      "Size", "ConstantOfShape", "DepthToSpace", "SpaceToDepth", "Compress", "ReverseSequence", "Trilu",
      "AllGather", "TensorScatter", "CenterCropPad", "Col2Im"};
  return kOps.count(op) != 0;
}

int64_t lastDim(const TensorType& t) { return t.shape.empty() ? 1 : t.shape.back(); }

// 2 x multiply-adds of a contraction whose output has `outElems` elements, each
// a sum over `k` products.
int64_t contraction(int64_t outElems, int64_t k) { return satMul(2, satMul(outElems, k)); }

// Filter elements one output channel sums over: the weight's elements per
// output channel (dim 0), for Conv-like weights [Cout, Cin/group, k...].
int64_t perOutputChannel(const TensorType& w) {
  return w.shape.empty() || w.shape[0] == 0 ? 0 : w.numel() / w.shape[0];
}

int64_t matrixFlops(std::string_view op, const std::vector<TensorType>& in, const std::vector<TensorType>& out,
                    const AttrMap& attrs, bool& isMatrix) {
  isMatrix = true;
  auto has = [&](size_t i) { return i < in.size() && in[i].dtype != DType::kUndefined; };
  const int64_t outElems = out.empty() ? 0 : out[0].numel();
  if (op == "MatMul" || op == "MatMulInteger" || op == "QLinearMatMul" || op == "MatMulNBits") {
    if (!has(0)) return 0;
    return contraction(outElems, lastDim(in[0]));
  }
  if (op == "Gemm") {
    if (!has(0) || in[0].rank() != 2) return 0;
    return contraction(outElems, attrs.getInt("transA", 0) ? in[0].shape[0] : in[0].shape[1]);
  }
  if (op == "Conv" || op == "ConvInteger" || op == "DeformConv") {
    if (!has(1)) return 0;
    return contraction(outElems, perOutputChannel(in[1]));
  }
  if (op == "QLinearConv") {  // x, x_scale, x_zero_point, w, ...
    if (!has(3)) return 0;
    return contraction(outElems, perOutputChannel(in[3]));
  }
  if (op == "ConvTranspose") {  // each input element scatters into Cout/group x kernel outputs
    if (!has(0) || !has(1)) return 0;
    return contraction(in[0].numel(), perOutputChannel(in[1]));
  }
  if (op == "Attention") {
    // Q·Kᵀ: every query element meets every key position; ·V: every output
    // element sums over the key positions. Key positions: K's dim -2 (4-D) or
    // dim 1 (3-D), after any past key it is concatenated with.
    if (!has(0) || !has(1) || in[1].rank() < 3 || out.empty()) return 0;
    int64_t kv = in[1].rank() == 4 ? in[1].shape[2] : in[1].shape[1];
    if (has(4) && in[4].rank() >= 3) kv = satAdd(kv, in[4].rank() == 4 ? in[4].shape[2] : in[4].shape[1]);
    return satAdd(contraction(in[0].numel(), kv), contraction(outElems, kv));
  }
  if (op == "LSTM" || op == "GRU" || op == "RNN") {
    // Per time step and batch row, every direction's gates read X (W) and the
    // previous hidden state (R): 2 x (W + R) elements per (step, row).
    if (!has(0) || !has(1) || !has(2) || lastDim(in[0]) == 0) return 0;
    int64_t rows = in[0].numel() / lastDim(in[0]);
    return contraction(rows, satAdd(in[1].numel(), in[2].numel()));
  }
  isMatrix = false;
  return 0;
}

}  // namespace

OpWork opWork(std::string_view op, const std::vector<TensorType>& inputs, const std::vector<TensorType>& outputs,
              const AttrMap& attrs) {
  OpWork w;
  for (const TensorType& t : inputs)
    if (t.dtype != DType::kUndefined) w.bytes = satAdd(w.bytes, static_cast<int64_t>(t.bytes()));
  for (const TensorType& t : outputs) w.bytes = satAdd(w.bytes, static_cast<int64_t>(t.bytes()));

  bool isMatrix = false;
  int64_t flops = matrixFlops(op, inputs, outputs, attrs, isMatrix);
  if (isMatrix) {
    w.flops = flops;
    w.unit = WorkUnit::kMatrix;
    return w;
  }
  if (movesOnly(op)) return w;
  // Elementwise ops, reductions and normalizations: one operation per element
  // of the larger of the first input and the first output (a reduction reads
  // more than it writes, a broadcast writes more than it reads).
  int64_t elems = outputs.empty() ? 0 : outputs[0].numel();
  if (!inputs.empty() && inputs[0].dtype != DType::kUndefined) elems = std::max(elems, inputs[0].numel());
  w.flops = elems;
  return w;
}

}  // namespace pcc
