// The epilogue form of a generated kernel (runtime/support/epilogue.h): when
// a kernel is a chain of elementwise steps on one of its inputs, the plan
// says so (Kernel.epilogue), so that a backend may compute it as the epilogue
// of the GEMM or convolution producing that input (docs/kernels.md
// "Epilogues").
#pragma once

#include "codegen/kernel_desc.h"
#include "runtime/plan.pb.h"

namespace pcc {

/// Fills `k`'s epilogue and epilogue_input when `spec` is such a chain: not a
/// reduction or Attention, one float32 output of the type of input X, computed
/// from X (read exactly once, along the chain) by steps each of which is a
/// unary op of the chain's value (relu, sigmoid, tanh, the two Gelus, abs,
/// sqrt, exp, log, neg; LeakyRelu's and Swish's expansions) or a binary op
/// (add, sub, mul, div, max, min) of it and a float32 input other than X or a
/// constant. \returns whether it is; `k` is left alone when not.
bool describeEpilogue(const KernelSpec& spec, plan::Kernel* k);

}  // namespace pcc
