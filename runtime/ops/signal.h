// Shared pieces of the signal op family (signal*.cpp): losses, window
// generators and spectral transforms.
#pragma once

#include <vector>

#include "runtime/ops/op_util.h"

namespace pcc {

// Registration hooks of the family's files; registerSignalOps calls each once.
void registerLossOps(OpRegistry& r);      // signal_loss.cpp: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void registerWindowOps(OpRegistry& r);    // signal_window.cpp: Blackman/Hann/HammingWindow, MelWeightMatrix
void registerSpectralOps(OpRegistry& r);  // signal_spectral.cpp: DFT, STFT

namespace ops {

/// \returns the single integer held by constant input `i` (a scalar or a
/// one-element tensor of i32/i64) named `name` in errors; an invalid-input
/// error saying it "must be a constant" when its value is not known, since
/// the output shape of the op depends on it.
StatusOr<int64_t> constScalarInt(const InferArgs& args, size_t i, const char* name);

/// \returns the output dtype of a generator op from its `output_datatype`
/// attribute (default float32), or an unsupported error for the dtypes pcc's
/// kernels do not produce.
StatusOr<DType> generatorOutputType(const InferArgs& args);

}  // namespace ops
}  // namespace pcc
