// Helpers of the type inference of runtime/schema/math_unary.cpp that the reference
// kernels of runtime/ops/math_unary.cpp use too (the functions are defined in
// runtime/schema/math_unary.cpp).
#pragma once

#include <cfenv>
#include <cmath>
#include <limits>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::math_unary_schema {

// ---- Abs, Neg, Sign: every numeric type --------------------------------------

enum class SignFn { kAbs, kNeg, kSign };

}  // namespace pcc::ops::math_unary_schema
