// Helpers of type inference shared by the op families of runtime/schema (and,
// through runtime/ops/op_util.h, by the reference kernels): argument checks,
// axis handling, broadcast shapes, dtype sets, sliding-window geometry.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/schema/schema.h"

namespace pcc::ops {

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

/// \returns the InferArgs describing concrete tensors (all of them constants).
InferArgs argsFromTensors(const std::vector<const Tensor*>& inputs, const AttrMap& attrs);

/// \returns true for f16 and bf16.
inline bool isHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

/// \returns "f32[2,3], i64[2]" for error messages.
std::string typesToString(const std::vector<TensorType>& ts);

/// \returns an error unless `t` is one of the listed dtypes.
Status checkDType(const TensorType& t, std::initializer_list<DType> allowed, const char* what);

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

/// Dtypes of the integer (and bitwise) ops pcc supports.
inline constexpr std::initializer_list<DType> kIntTypes = {
    DType::kI8, DType::kU8, DType::kI16, DType::kU16, DType::kI32, DType::kU32, DType::kI64, DType::kU64};

/// Every dtype pcc has, the narrow storage types included: ops that only move
/// or convert elements accept all of them.
inline constexpr std::initializer_list<DType> kAllTypes = {
    DType::kF32,        DType::kF64,     DType::kF16,    DType::kBF16,      DType::kI8,
    DType::kU8,         DType::kI16,     DType::kU16,    DType::kI32,       DType::kU32,
    DType::kI64,        DType::kU64,     DType::kBool,   DType::kF8E4M3FN,  DType::kF8E4M3FNUZ,
    DType::kF8E5M2,     DType::kF8E5M2FNUZ, DType::kF8E8M0, DType::kF4E2M1, DType::kI4,
    DType::kU4};

/// \returns an error unless every present input has the dtype of input 0.
Status checkSameDType(const InferArgs& args);

/// \returns which dims of input 0 a Reduce* node reduces, from its constant
/// `axes` input 1 (or an `axes` attribute): all dims when axes are absent or
/// empty, and an empty vector for "none" (empty axes with noop_with_empty_axes).
StatusOr<std::vector<bool>> reducedDims(const InferArgs& args);

/// \returns `in` without the dims flagged in `red` (kept as 1 when `keep`);
/// `in` itself when `red` is empty.
Dims reducedShape(const Dims& in, const std::vector<bool>& red, bool keep);

/// \returns the single integer held by constant input `i` (a scalar or a
/// one-element tensor of i32/i64) named `name` in errors; an invalid-input
/// error saying it "must be a constant" when its value is not known, since
/// the output shape of the op depends on it.
StatusOr<int64_t> constScalarInt(const InferArgs& args, size_t i, const char* name);

/// \returns the output dtype of a generator op from its `output_datatype`
/// attribute (default float32), or an unsupported error for the dtypes pcc's
/// kernels do not produce.
StatusOr<DType> generatorOutputType(const InferArgs& args);

/// \returns the node's attributes, or an empty map when there are none.
const AttrMap& attrsOrEmpty(const InferArgs& args);

/// \returns `i` mapped into [0, dim) (negative indices count from the end), or
/// an error naming `what`, the index and the dim.
StatusOr<int64_t> normalizeIndex(int64_t i, int64_t dim, const char* what);

/// \returns an error unless `t` is an i32 or i64 index tensor named `what`.
Status checkIndexType(const TensorType& t, const char* what);

/// \returns the message an InferFn gives for an input whose value decides the
/// output shape but is not known at compile time.
Status notConstant(const char* op, const char* what);

/// \returns every element of `t` converted to double, in row-major order.
std::vector<double> toDoubles(const Tensor& t);

/// \returns the present input `i` of a kernel call, or nullptr when absent.
inline const Tensor* optionalInput(const std::vector<const Tensor*>& in, size_t i) {
  return i < in.size() && in[i] && in[i]->defined() ? in[i] : nullptr;
}

}  // namespace pcc::ops
