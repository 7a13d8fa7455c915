// Helpers of the type inference of runtime/schema/signal_spectral.cpp that the reference
// kernels of runtime/ops/signal_spectral.cpp use too (the functions are defined in
// runtime/schema/signal_spectral.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <numbers>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::signal_spectral_schema {

/// \returns an error unless `x` is a float signal of rank >= `minRank` whose
/// last dim is 1 (real) or 2 (complex).
Status checkSignal(const TensorType& x, int64_t minRank, const char* what);

// ---- DFT -------------------------------------------------------------------------

struct DftShape {
  int64_t axis = 0, n = 0;
  TensorType out;
};

StatusOr<DftShape> dftShape(const InferArgs& args);

// ---- STFT ------------------------------------------------------------------------

struct StftShape {
  int64_t step = 0, frameLength = 0, frames = 0;
  TensorType out;
};

StatusOr<StftShape> stftShape(const InferArgs& args);

}  // namespace pcc::ops::signal_spectral_schema
