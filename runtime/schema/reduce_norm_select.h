// Helpers of the type inference of runtime/schema/reduce_norm_select.cpp that the reference
// kernels of runtime/ops/reduce_norm_select.cpp use too (the functions are defined in
// runtime/schema/reduce_norm_select.cpp).
#pragma once

#include <algorithm>
#include <numeric>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::reduce_norm_select_schema {

// ---- TopK ----------------------------------------------------------------------

/// \returns k, the single value of constant input 1, checked against the axis size.
StatusOr<int64_t> topK(const InferArgs& args, int64_t axisSize);

StatusOr<std::vector<TensorType>> inferTopK(const InferArgs& args);

}  // namespace pcc::ops::reduce_norm_select_schema
