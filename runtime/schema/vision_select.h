// Helpers of the type inference of runtime/schema/vision_select.cpp that the reference
// kernels of runtime/ops/vision_select.cpp use too (the functions are defined in
// runtime/schema/vision_select.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::vision_select_schema {

// ---- NonMaxSuppression -----------------------------------------------------------

/// \returns the selected [batch, class, box] triples, in output order.
StatusOr<std::vector<std::array<int64_t, 3>>> nmsSelect(const std::vector<const Tensor*>& in,
                                                       const AttrMap& attrs);

Status checkNmsInputs(const InferArgs& args);

// ---- Unique ----------------------------------------------------------------------

/// Unique's result: the kept slices (as indices of their first occurrence, in
/// output order), the output index of every input slice, and counts.
struct UniqueResult {
  int64_t axis = -1;  ///< -1: the flattened input
  std::vector<int64_t> first, inverse, counts;
};

StatusOr<UniqueResult> uniqueOf(const Tensor& x, const AttrMap& attrs);

std::vector<TensorType> uniqueTypes(const TensorType& x, const UniqueResult& u, int64_t numOutputs);

StatusOr<int64_t> uniqueOutputs(const AttrMap& attrs);

// ---- CenterCropPad -----------------------------------------------------------------

/// \returns, per axis of `x`, the input index of each output index (-1 = padding).
StatusOr<std::vector<std::vector<int64_t>>> centerCropPadMaps(const TensorType& x, const std::vector<int64_t>& shape,
                                                              const AttrMap& attrs);

// ---- MaxUnpool -------------------------------------------------------------------

/// \returns the output shape MaxUnpool's attributes give (before output_shape).
StatusOr<Dims> unpoolShape(const TensorType& x, const AttrMap& attrs);

StatusOr<std::vector<TensorType>> inferMaxUnpool(const InferArgs& args);

// ---- Col2Im ----------------------------------------------------------------------

struct Col2ImGeometry {
  Dims image, block, dil, pads, strides, blocks;  ///< blocks: sliding positions per dim
};

StatusOr<Col2ImGeometry> col2imGeometry(const InferArgs& args);

StatusOr<std::vector<TensorType>> inferCol2Im(const InferArgs& args);

// ---- TensorScatter ---------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferTensorScatter(const InferArgs& args);

// ---- Det and Swish ---------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferDet(const InferArgs& args);

StatusOr<std::vector<TensorType>> inferSwish(const InferArgs& args);

}  // namespace pcc::ops::vision_select_schema
