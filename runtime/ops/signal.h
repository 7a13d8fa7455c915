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



}  // namespace ops
}  // namespace pcc
