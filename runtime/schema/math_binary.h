// Helpers of the type inference of runtime/schema/math_binary.cpp that the reference
// kernels of runtime/ops/math_binary.cpp use too (the functions are defined in
// runtime/schema/math_binary.cpp).
#pragma once

#include <cmath>
#include <type_traits>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::math_binary_schema {

// ---- And, Or, Xor ----------------------------------------------------------

enum class Logic { kAnd, kOr, kXor };

// ---- Comparisons -----------------------------------------------------------

enum class Cmp { kLess, kLessOrEqual, kGreater, kGreaterOrEqual };

// ---- Bitwise ops -----------------------------------------------------------

enum class Bit { kAnd, kOr, kXor, kShift };

// ---- Min, Max, Sum, Mean (variadic) ----------------------------------------

enum class Fold { kMin, kMax, kSum, kMean };

}  // namespace pcc::ops::math_binary_schema
