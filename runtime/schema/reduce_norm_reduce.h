// Helpers of the type inference of runtime/schema/reduce_norm_reduce.cpp that the reference
// kernels of runtime/ops/reduce_norm_reduce.cpp use too (the functions are defined in
// runtime/schema/reduce_norm_reduce.cpp).
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::reduce_norm_reduce_schema {

enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// ---- ArgMax / ArgMin --------------------------------------------------------

StatusOr<std::vector<TensorType>> inferArg(const InferArgs& args);

}  // namespace pcc::ops::reduce_norm_reduce_schema
