// Helpers of the type inference of runtime/schema/data_movement.cpp that the reference
// kernels of runtime/ops/data_movement.cpp use too (the functions are defined in
// runtime/schema/data_movement.cpp).
#pragma once

#include <algorithm>
#include <cstring>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::data_movement_schema {

// ---- Concat ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferConcat(const InferArgs& args);

// ---- Split -------------------------------------------------------------------

/// \returns the size of each output along the split axis.
StatusOr<std::vector<int64_t>> splitSizes(const InferArgs& args, int64_t axis);

StatusOr<std::vector<TensorType>> inferSplit(const InferArgs& args);

// ---- Slice -------------------------------------------------------------------

/// Per output dim: first input index, step and extent.
struct SlicePlan {
  Dims start, step, size;
};

StatusOr<SlicePlan> slicePlan(const InferArgs& args);

// ---- Gather ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferGather(const InferArgs& args);

}  // namespace pcc::ops::data_movement_schema
