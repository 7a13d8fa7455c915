// Helpers of the type inference of runtime/schema/math_activation.cpp that the reference
// kernels of runtime/ops/math_activation.cpp use too (the functions are defined in
// runtime/schema/math_activation.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::math_activation_schema {

enum class Act { kLeakyRelu, kElu, kSelu, kCelu, kHardSigmoid, kHardSwish, kMish, kThresholdedRelu, kShrink };

}  // namespace pcc::ops::math_activation_schema
