// Helpers shared by the reference kernels: argument checks, axis handling,
// broadcasting, dtype dispatch and the f16/bf16-through-f32 fallback.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/ops/registry.h"

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

/// \returns the node's attributes, or an empty map when it has none.
const AttrMap& attrsOf(const InferArgs& args);

/// Inference of an op on one float input of rank >= 1 along attribute `axis`
/// (default -1) whose output has the input's type (Softmax, Hardmax, ...).
StatusOr<std::vector<TensorType>> inferFloatAlongAxis(const InferArgs& args);

/// \returns an error unless the op got between `minIn` and `maxIn` inputs and
/// every required (first `minIn`) input is present.
Status checkArity(const InferArgs& args, size_t minIn, size_t maxIn);

/// \returns `axis` mapped into [0, rank), or an error naming `what` and the range.
StatusOr<int64_t> normalizeAxis(int64_t axis, int64_t rank, const char* what = "axis");

/// \returns the values of constant input `i` (named `name` in errors) as int64;
/// an invalid-input error when the value is not a known constant.
StatusOr<std::vector<int64_t>> constInts(const InferArgs& args, size_t i, const char* name);

/// \returns the numpy broadcast of the two shapes, or an error showing both.
StatusOr<Dims> broadcastShapes(const Dims& a, const Dims& b);

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

/// \returns the InferArgs describing concrete tensors (all of them constants).
InferArgs argsFromTensors(const std::vector<const Tensor*>& inputs, const AttrMap& attrs);

/// \returns true for f16 and bf16.
inline bool isHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }
/// \returns a f32 copy of a f16/bf16 tensor.
Tensor halfToF32(const Tensor& t);
/// \returns `t` (f32) converted to f16 or bf16.
Tensor f32ToHalf(const Tensor& t, DType to);

/// Runs `fn` with every f16/bf16 input widened to f32 and narrows each f32
/// output back to the dtype of the first half input. Lets float kernels serve
/// the half types without a template instance per half format.
Status computeViaF32(ComputeFn fn, const std::vector<const Tensor*>& inputs, const AttrMap& attrs,
                     std::vector<Tensor>& outputs);
/// \returns true if any present input is f16/bf16.
bool anyHalf(const std::vector<const Tensor*>& inputs);

/// \returns "f32[2,3], i64[2]" for error messages.
std::string typesToString(const std::vector<TensorType>& ts);

/// \returns an error unless `t` is one of the listed dtypes.
Status checkDType(const TensorType& t, std::initializer_list<DType> allowed, const char* what);

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

/// Dtypes accepted by float-only math ops.
inline constexpr std::initializer_list<DType> kFloatTypes = {DType::kF32, DType::kF64, DType::kF16,
                                                             DType::kBF16};
/// Dtypes accepted by arithmetic ops.
inline constexpr std::initializer_list<DType> kNumericTypes = {
    DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64, DType::kI8,
    DType::kU8,  DType::kI16, DType::kU16, DType::kU32,  DType::kU64};

/// One spatial geometry of a sliding-window op (Conv, pools), up to 3 dims.
struct WindowGeometry {
  int64_t spatial = 0;  ///< number of spatial dims
  Dims in, kernel, out, strides, dilations, padBegin, padEnd;
};

/// Computes output sizes and pads of a sliding window from the ONNX attributes
/// kernel (given), strides, dilations, pads, auto_pad and ceil_mode.
/// \returns the geometry, or an error naming the bad attribute.
StatusOr<WindowGeometry> windowGeometry(const Dims& inSpatial, const Dims& kernel,
                                        const AttrMap& attrs, bool allowCeil);

}  // namespace ops
}  // namespace pcc
