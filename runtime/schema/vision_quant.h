// Helpers of the type inference of runtime/schema/vision_quant.cpp that the reference
// kernels of runtime/ops/vision_quant.cpp use too (the functions are defined in
// runtime/schema/vision_quant.cpp).
#pragma once

#include <algorithm>
#include <cmath>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::vision_quant_schema {

constexpr std::initializer_list<DType> kQuantTypes = {DType::kI8, DType::kU8};

Status checkScale(const TensorType& s, const char* what, int64_t perCount);

Status checkZeroPoint(const InferArgs& args, size_t i, DType want, const char* what, int64_t perCount);

// ---- QLinearMatMul ---------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferQLinearMatMul(const InferArgs& args);

// ---- ConvInteger and QLinearConv --------------------------------------------------

/// \returns the Conv attributes of a quantized convolution.
AttrMap convAttrs(const AttrMap& attrs);

/// \returns the output shape of Conv on `x` and `w` with `attrs` (types f64).
StatusOr<Dims> convShape(const TensorType& x, const TensorType& w, const AttrMap* attrs);

StatusOr<std::vector<TensorType>> inferConvInteger(const InferArgs& args);

StatusOr<std::vector<TensorType>> inferQLinearConv(const InferArgs& args);

}  // namespace pcc::ops::vision_quant_schema
