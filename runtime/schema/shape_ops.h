// Helpers of the type inference of runtime/schema/shape_ops.cpp that the reference
// kernels of runtime/ops/shape_ops.cpp use too (the functions are defined in
// runtime/schema/shape_ops.cpp).
#pragma once

#include <algorithm>
#include <cstring>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::shape_ops_schema {

// ---- Reshape -----------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferReshape(const InferArgs& args);

// ---- Flatten -----------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferFlatten(const InferArgs& args);

// ---- Squeeze / Unsqueeze ---------------------------------------------------------

StatusOr<std::vector<TensorType>> inferSqueeze(const InferArgs& args);

StatusOr<std::vector<TensorType>> inferUnsqueeze(const InferArgs& args);

// ---- Transpose ---------------------------------------------------------------

StatusOr<std::vector<int64_t>> transposePerm(const TensorType& x, const AttrMap& attrs);

// ---- Shape -------------------------------------------------------------------

/// \returns the [start, end) range of dims Shape reports (opset-15 clamping).
std::pair<int64_t, int64_t> shapeRange(int64_t rank, const AttrMap& attrs);

// ---- ConstantOfShape -------------------------------------------------------------

StatusOr<Tensor> fillValue(const AttrMap& attrs);

}  // namespace pcc::ops::shape_ops_schema
