// Helpers of the type inference of runtime/schema/reduce_norm_norms.cpp that the reference
// kernels of runtime/ops/reduce_norm_norms.cpp use too (the functions are defined in
// runtime/schema/reduce_norm_norms.cpp).
#pragma once

#include <algorithm>
#include <cmath>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::reduce_norm_norms_schema {

// ---- MeanVarianceNormalization -------------------------------------------------

/// \returns the reduced dims of MVN: its `axes` attribute, [0, 2, 3] by default.
StatusOr<std::vector<bool>> mvnDims(const InferArgs& args);

}  // namespace pcc::ops::reduce_norm_norms_schema
