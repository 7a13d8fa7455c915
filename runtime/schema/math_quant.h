// Helpers of the type inference of runtime/schema/math_quant.cpp that the reference
// kernels of runtime/ops/math_quant.cpp use too (the functions are defined in
// runtime/schema/math_quant.cpp).
#pragma once

#include <algorithm>
#include <cmath>

#include "runtime/schema/infer_util.h"
#include "runtime/support/float_formats.h"

namespace pcc::ops::math_quant_schema {

/// How a scale (and zero point) tensor maps onto the elements of x.
struct QuantLayout {
  enum Mode { kPerTensor, kPerAxis, kBlocked } mode = kPerTensor;
  int64_t axis = 0, blockSize = 0;
  int64_t outer = 1, extent = 1, inner = 1;  ///< x split at the axis
  int64_t scaleExtent = 1;                   ///< scale.shape[axis] when blocked

  /// \returns the scale index of x's element (a, k, b) (split at the axis).
  int64_t scaleIndex(int64_t a, int64_t k, int64_t b) const {
    switch (mode) {
      case kPerTensor: return 0;
      case kPerAxis: return k;
      case kBlocked: return (a * scaleExtent + k / blockSize) * inner + b;
    }
    return 0;
  }
};

/// \returns the layout of `scale` against `x` under attributes axis and
/// block_size, or an error naming the mismatch.
StatusOr<QuantLayout> quantLayout(const TensorType& x, const TensorType& scale, const AttrMap* attrs);

/// \returns the dtype of an ONNX dtype attribute, or an unsupported error.
StatusOr<DType> attrDType(const AttrMap* attrs, const char* name);

// ---- QuantizeLinear ------------------------------------------------------------

constexpr std::initializer_list<DType> kQuantTypes = {
    DType::kU8,      DType::kI8,        DType::kU16,    DType::kI16,        DType::kU4,
    DType::kI4,      DType::kF8E4M3FN,  DType::kF8E4M3FNUZ, DType::kF8E5M2, DType::kF8E5M2FNUZ,
    DType::kF4E2M1};

bool isQuantType(DType t);

/// \returns the output dtype: the zero point's, else output_dtype, else uint8.
StatusOr<DType> quantizedType(const InferArgs& args);

}  // namespace pcc::ops::math_quant_schema
