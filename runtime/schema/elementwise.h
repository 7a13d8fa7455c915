// Helpers of the type inference of runtime/schema/elementwise.cpp that the reference
// kernels of runtime/ops/elementwise.cpp use too (the functions are defined in
// runtime/schema/elementwise.cpp).
#pragma once

#include <cmath>
#include <cstring>
#include <type_traits>

#include "runtime/schema/infer_util.h"
#include "runtime/support/float_formats.h"

namespace pcc::ops::elementwise_schema {

// ---- Cast ------------------------------------------------------------------

StatusOr<DType> castTarget(const AttrMap* attrs);

}  // namespace pcc::ops::elementwise_schema
