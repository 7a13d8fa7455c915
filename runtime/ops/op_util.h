// Helpers shared by the reference kernels: strides, broadcasting, dtype
// dispatch and the f16/bf16-through-f32 fallback. The helpers of type
// inference (argument checks, axes, shapes) are runtime/schema/infer_util.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/ops/registry.h"
#include "runtime/schema/infer_util.h"

namespace pcc {

// Registration hooks, one per kernel file; registry.cpp calls each once.
void registerElementwiseOps(OpRegistry& r);
void registerLinalgOps(OpRegistry& r);
void registerConvPoolOps(OpRegistry& r);
void registerNormReduceOps(OpRegistry& r);
void registerShapeOps(OpRegistry& r);
void registerDataMovementOps(OpRegistry& r);
void registerCollectiveOps(OpRegistry& r);
void registerMathOps(OpRegistry& r);        // math.cpp: elementwise math and logic
void registerReduceNormOps(OpRegistry& r);  // reduce_norm.cpp: reductions, normalizations, linalg
void registerTensorOps(OpRegistry& r);
void registerSignalOps(OpRegistry& r);      // signal.cpp: losses, windows, DFT/STFT
void registerRnnOps(OpRegistry& r);         // rnn.cpp: RNN, GRU, LSTM
void registerVisionOps(OpRegistry& r);      // vision.cpp: sampling, detection, quantized conv/matmul
void registerTextOps(OpRegistry& r);        // text.cpp: TfIdfVectorizer

namespace ops {


/// \returns row-major strides (in elements) of `shape`.
std::vector<int64_t> stridesOf(const Dims& shape);

/// \returns strides of `in` viewed as broadcast to `out` (0 on broadcast dims);
/// `in` must be broadcast-compatible with `out` and of rank <= out's.
std::vector<int64_t> broadcastStrides(const Dims& in, const Dims& out);

/// Walks the elements of a broadcast output in row-major order while keeping
/// the linear offset of each input in step.
class BroadcastWalker {
 public:
  BroadcastWalker(const Dims& out, const std::vector<Dims>& ins);
  /// Offset into input k of the current output element.
  int64_t offset(size_t k) const { return off_[k]; }
  /// Advances to the next output element.
  void next();

 private:
  Dims out_;
  std::vector<std::vector<int64_t>> strides_;  // [input][dim]
  std::vector<int64_t> idx_, off_;
};

/// Copies the strided view of `src` starting at element `base` with per-dim
/// element strides `strides` (may be 0 or negative) and extent `shape` into the
/// contiguous buffer `dst`; elements are `elemSize` bytes (any dtype).
void copyStrided(const void* src, int64_t base, const std::vector<int64_t>& strides,
                 const Dims& shape, void* dst, size_t elemSize);


/// Output `k` of a kernel registered with kWritesOutputs (see ComputeFn):
/// the caller's planned tensor when `out` holds a defined one of type
/// {dtype, shape} at k (a view, contents undefined, possibly over input 0:
/// the kernel must write every element and may read input 0's element i only
/// before it writes element i), else a new zero-filled tensor put at k
/// (`out` grows as needed). \returns a tensor sharing out[k]'s buffer.
Tensor output(std::vector<Tensor>& out, size_t k, DType dtype, const Dims& shape);
inline Tensor output(std::vector<Tensor>& out, size_t k, const TensorType& t) {
  return output(out, k, t.dtype, t.shape);
}
/// \returns whether `out` holds a planned (caller-given) tensor at k.
inline bool planned(const std::vector<Tensor>& out, size_t k) { return k < out.size() && out[k].defined(); }

/// \returns a f32 copy of a f16/bf16 tensor.
Tensor halfToF32(const Tensor& t);
/// \returns `t` (f32) converted to f16 or bf16.
Tensor f32ToHalf(const Tensor& t, DType to);

/// Runs `fn` with every f16/bf16 input widened to f32 and narrows each f32
/// output back to the dtype of the first half input (into the planned output
/// where `outputs` holds one, see output()). Lets float kernels serve the half
/// types without a template instance per half format.
Status computeViaF32(ComputeFn fn, const std::vector<const Tensor*>& inputs, const AttrMap& attrs,
                     std::vector<Tensor>& outputs);
/// \returns true if any present input is f16/bf16.
bool anyHalf(const std::vector<const Tensor*>& inputs);


/// Dtype dispatch: calls `f.template operator()<T>()` with the C++ type of `t`.
/// Bool maps to uint8_t. f16/bf16 are not dispatched (see computeViaF32), nor
/// are the narrow storage types (float8, float4, 4-bit integers).
template <typename F>
Status visitNumeric(DType t, F&& f) {
  switch (t) {
    case DType::kF32: return f.template operator()<float>();
    case DType::kF64: return f.template operator()<double>();
    case DType::kI32: return f.template operator()<int32_t>();
    case DType::kI64: return f.template operator()<int64_t>();
    case DType::kI8: return f.template operator()<int8_t>();
    case DType::kU8: return f.template operator()<uint8_t>();
    case DType::kI16: return f.template operator()<int16_t>();
    case DType::kU16: return f.template operator()<uint16_t>();
    case DType::kU32: return f.template operator()<uint32_t>();
    case DType::kU64: return f.template operator()<uint64_t>();
    case DType::kBool: return f.template operator()<uint8_t>();
    default: return unsupported("dtype ", dtypeName(t), " not supported by this kernel");
  }
}

/// Same as visitNumeric restricted to f32 and f64.
template <typename F>
Status visitFloat(DType t, F&& f) {
  switch (t) {
    case DType::kF32: return f.template operator()<float>();
    case DType::kF64: return f.template operator()<double>();
    default: return unsupported("dtype ", dtypeName(t), " not supported by this kernel");
  }
}



}  // namespace ops
}  // namespace pcc
