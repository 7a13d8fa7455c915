// The cuda backend: runs a rank program on one NVIDIA GPU through the driver
// API (loaded at run time, runtime/cuda/cuda_api.h). See docs/runtime.md,
// "CUDA backend". Nothing here has run on a GPU yet.
#pragma once

#include <string>

#include "runtime/backend.h"

namespace pcc::cuda {

/// How the cuda backend runs one instruction.
enum class Placement {
  kGenerated,    ///< a LAUNCH of the plan's CUDA image (cuModuleLoadData + cuLaunchKernel)
  kCublasLt,     ///< MatMul / Gemm on cuBLASLt (Gemm's bias as its epilogue)
  kCudnn,        ///< Conv on cuDNN (cudnnConvolutionForward, the bias by cudnnAddTensor)
  kCpuFallback,  ///< inputs to the host, the cpu backend's kernel, outputs back
};

/// \returns "generated", "cublaslt", "cudnn" or "cpu fallback".
const char* placementName(Placement p);

/// Where `k` runs and, for the CPU fallback, why (the reason shown with
/// `pcc-run --profile` for ops a library would otherwise run). Pure: decided
/// from the op, its types and attributes, and whether a LAUNCH's kernel has
/// CUDA images (`hasCudaImages`). Whether cuDNN loads is not known here: a
/// Conv placed on cuDNN falls back when it does not (prepareKernel).
struct PlacementChoice {
  Placement where = Placement::kCpuFallback;
  std::string reason;
};
PlacementChoice placementOf(const KernelDesc& k, bool hasCudaImages);

/// \returns ok when this machine can run the cuda backend (the driver loads,
/// cuInit succeeds, a device is there, cuBLASLt loads), else an environment
/// error saying what is missing.
Status probeCudaBackend();

/// Registers the backend "cuda" (makeBackend) with probeCudaBackend as its
/// probe (resolveBackend).
void registerCudaBackend();

}  // namespace pcc::cuda
