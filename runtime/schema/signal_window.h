// Helpers of the type inference of runtime/schema/signal_window.cpp that the reference
// kernels of runtime/ops/signal_window.cpp use too (the functions are defined in
// runtime/schema/signal_window.cpp).
#pragma once

#include <cmath>
#include <numbers>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::signal_window_schema {

StatusOr<std::vector<TensorType>> inferWindow(const InferArgs& args);

// ---- MelWeightMatrix -----------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferMel(const InferArgs& args);

}  // namespace pcc::ops::signal_window_schema
