// Helpers of the type inference of runtime/schema/math_generate.cpp that the reference
// kernels of runtime/ops/math_generate.cpp use too (the functions are defined in
// runtime/schema/math_generate.cpp).
#pragma once

#include <cmath>
#include <cstring>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::math_generate_schema {

// ---- Range -------------------------------------------------------------------

/// \returns the number of elements of Range(start, limit, delta).
StatusOr<int64_t> rangeCount(double start, double limit, double delta);

// ---- EyeLike -----------------------------------------------------------------

StatusOr<DType> eyeLikeType(const AttrMap* attrs, DType input);

}  // namespace pcc::ops::math_generate_schema
