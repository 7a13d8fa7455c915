// NVRTC driver: compiles one generated CUDA kernel to PTX and cubin for a set
// of GPU architectures. Only NVRTC is used: no GPU and no driver library are
// needed to compile, so plans for GPUs can be built on any machine.
#pragma once

#include <string>
#include <vector>

#include "runtime/support/status.h"

namespace pcc::cuda {

/// Everything that changes the code NVRTC produces (and so the cache key).
struct CudaCompileOptions {
  /// Real architectures to build for, "sm_XX"; one PTX + cubin pair each.
  std::vector<std::string> arches = {"sm_80", "sm_90"};
  /// Passes --use_fast_math (approximate division, sqrt, exp; flush to zero).
  bool fastMath = false;
  /// Further NVRTC options, passed last and verbatim (e.g. "-DTILE=64").
  std::vector<std::string> extraFlags;
};

/// One kernel built for one architecture.
struct CompiledKernel {
  std::string name;         ///< the kernel's entry name (extern "C")
  std::string arch;         ///< "sm_XX"
  std::string ptx;          ///< PTX text, `.target sm_XX`; JIT-able by newer GPUs
  std::vector<char> cubin;  ///< ELF binary for exactly `arch`
  std::string log;          ///< NVRTC's log (warnings), often empty
};

/// Compiles `source`, which must define `extern "C" __global__ void
/// <kernelName>(...)`, for every arch of `opts`, the arches in parallel.
/// The CUDA toolkit's include directory is on the include path (cuda_fp16.h,
/// cuda_bf16.h).
/// \returns one CompiledKernel per arch, in the order of `opts.arches`; an
/// invalid-input error for a malformed arch name; an internal error when
/// NVRTC fails (generated code that does not compile is a compiler bug), with
/// the kernel name, the arch and the first lines of NVRTC's log.
StatusOr<std::vector<CompiledKernel>> compileCuda(const std::string& source, const std::string& kernelName,
                                                  const CudaCompileOptions& opts);

/// \returns the NVRTC options used for `arch` under `opts`, in order; part of
/// the kernel cache's key.
std::vector<std::string> nvrtcOptions(const std::string& arch, const CudaCompileOptions& opts);

/// \returns NVRTC's version as "major.minor", or an internal error.
StatusOr<std::string> nvrtcVersionString();

/// \returns true when `s` parses as sm_<digits>[a|f]?.
bool isValidArch(const std::string& s);

}  // namespace pcc::cuda
