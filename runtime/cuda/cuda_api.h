// The CUDA libraries, loaded at run time: the driver API (libcuda.so.1),
// cuBLASLt, cuDNN and NCCL are opened with dlopen and their entry points looked up
// with dlsym into tables of typed function pointers. Nothing of CUDA is a
// link dependency of pcc or pcc-run, so both start on machines without a GPU
// or without the CUDA libraries; a missing library or entry point becomes one
// Status naming it. The pointer types come from the toolkit's headers
// (decltype of the declared function), so a wrong signature does not compile.
//
// Names follow cuda.h's macros: `cuMemAlloc` is `cuMemAlloc_v2` both as the
// table member and as the symbol looked up, as a program linked with libcuda
// would call it.
#pragma once

#include <cuda.h>
#include <cublasLt.h>
#include <cudnn.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "runtime/support/status.h"

namespace pcc::cuda {

/// A shared library opened with dlopen (closed when the last owner goes).
class DynLib {
 public:
  /// \returns the library `name` (a file name dlopen searches for, or a
  /// path), or an environment error "cannot load NAME (dlerror)".
  static StatusOr<std::shared_ptr<DynLib>> open(const std::string& name);
  ~DynLib();
  /// \returns the address of `symbol`, or an environment error naming the
  /// library and the symbol.
  StatusOr<void*> symbol(const char* symbol) const;
  const std::string& name() const { return name_; }

 private:
  DynLib(void* h, std::string name) : handle_(h), name_(std::move(name)) {}
  void* handle_;
  std::string name_;
};

#define PCC_CUDA_DRIVER_PROBE_FNS(X) \
  X(cuInit)                          \
  X(cuDriverGetVersion)              \
  X(cuDeviceGetCount)                \
  X(cuDeviceGet)                     \
  X(cuDeviceGetName)                 \
  X(cuDeviceGetAttribute)            \
  X(cuGetErrorName)                  \
  X(cuGetErrorString)

#define PCC_CUDA_DRIVER_FNS(X)  \
  X(cuDevicePrimaryCtxRetain)   \
  X(cuDevicePrimaryCtxRelease)  \
  X(cuCtxSetCurrent)            \
  X(cuMemAlloc)                 \
  X(cuMemFree)                  \
  X(cuMemAllocHost)             \
  X(cuMemFreeHost)              \
  X(cuMemsetD8Async)            \
  X(cuMemcpyHtoDAsync)          \
  X(cuMemcpyDtoHAsync)          \
  X(cuMemcpyDtoDAsync)          \
  X(cuMemcpy2DAsync)            \
  X(cuPointerGetAttribute)      \
  X(cuStreamCreate)             \
  X(cuStreamDestroy)            \
  X(cuStreamSynchronize)        \
  X(cuStreamQuery)              \
  X(cuStreamWaitEvent)          \
  X(cuEventCreate)              \
  X(cuEventDestroy)             \
  X(cuEventRecord)              \
  X(cuEventQuery)               \
  X(cuModuleLoadData)           \
  X(cuModuleUnload)             \
  X(cuModuleGetFunction)        \
  X(cuLaunchKernel)

#define PCC_CUDA_DECLARE_FN(fn) decltype(&::fn) fn = nullptr;

/// The driver API entry points pcc uses.
struct DriverApi {
  std::shared_ptr<DynLib> lib;
  PCC_CUDA_DRIVER_PROBE_FNS(PCC_CUDA_DECLARE_FN)
  PCC_CUDA_DRIVER_FNS(PCC_CUDA_DECLARE_FN)
  /// \returns "CUDA_ERROR_X (text)" for `r`.
  std::string errorText(CUresult r) const;
};

/// What a machine offers for the cuda backend (probeCuda).
struct CudaProbe {
  int driverVersion = 0;  ///< e.g. 13000
  int devices = 0;
  std::string device0;    ///< name of device 0
  int major = 0, minor = 0;  ///< compute capability of device 0
};

/// \returns the name of the driver library to load: $PCC_CUDA_DRIVER_LIB
/// when set (tests point it at a library that is not there), else "libcuda.so.1".
std::string driverLibraryName();

/// Loads the driver library `lib` and every entry point of DriverApi, then
/// calls cuInit(0). \returns the table, or an environment error saying what
/// is missing: "cannot load libcuda.so.1 (...)", "libcuda.so.1 has no
/// cuMemAlloc_v2", "cuInit failed: CUDA_ERROR_NO_DEVICE (...)".
StatusOr<std::shared_ptr<const DriverApi>> loadDriverApi(const std::string& lib);

/// \returns the process's driver table, loaded from driverLibraryName() on
/// first use (the outcome, success or error, is kept).
StatusOr<std::shared_ptr<const DriverApi>> driverApi();

/// Loads the driver (the probe entry points only, so that a partial library
/// still gets a precise message), calls cuInit and counts the devices.
/// \returns what it found, or an environment error naming what is missing
/// (the library, cuInit's error, "no CUDA device").
StatusOr<CudaProbe> probeCuda(const std::string& lib);

#define PCC_CUBLASLT_FNS(X)                 \
  X(cublasLtCreate)                         \
  X(cublasLtDestroy)                        \
  X(cublasLtMatmulDescCreate)               \
  X(cublasLtMatmulDescDestroy)              \
  X(cublasLtMatmulDescSetAttribute)         \
  X(cublasLtMatrixLayoutCreate)             \
  X(cublasLtMatrixLayoutDestroy)            \
  X(cublasLtMatrixLayoutSetAttribute)       \
  X(cublasLtMatmulPreferenceCreate)         \
  X(cublasLtMatmulPreferenceDestroy)        \
  X(cublasLtMatmulPreferenceSetAttribute)   \
  X(cublasLtMatmulAlgoGetHeuristic)         \
  X(cublasLtMatmul)

/// cuBLASLt (libcublasLt.so.13, or $PCC_CUBLASLT_LIB).
struct CublasLtApi {
  std::shared_ptr<DynLib> lib;
  PCC_CUBLASLT_FNS(PCC_CUDA_DECLARE_FN)
};
/// \returns the process's cuBLASLt table, loaded on first use, or an
/// environment error naming the library or entry point that is missing.
StatusOr<std::shared_ptr<const CublasLtApi>> cublasLtApi();

#define PCC_CUDNN_FNS(X)                     \
  X(cudnnGetErrorString)                     \
  X(cudnnCreate)                             \
  X(cudnnDestroy)                            \
  X(cudnnSetStream)                          \
  X(cudnnCreateTensorDescriptor)             \
  X(cudnnSetTensorNdDescriptor)              \
  X(cudnnDestroyTensorDescriptor)            \
  X(cudnnCreateFilterDescriptor)             \
  X(cudnnSetFilterNdDescriptor)              \
  X(cudnnDestroyFilterDescriptor)            \
  X(cudnnCreateConvolutionDescriptor)        \
  X(cudnnSetConvolutionNdDescriptor)         \
  X(cudnnSetConvolutionGroupCount)           \
  X(cudnnSetConvolutionMathType)             \
  X(cudnnDestroyConvolutionDescriptor)       \
  X(cudnnGetConvolutionNdForwardOutputDim)   \
  X(cudnnGetConvolutionForwardAlgorithm_v7)  \
  X(cudnnGetConvolutionForwardWorkspaceSize) \
  X(cudnnConvolutionForward)                 \
  X(cudnnAddTensor)

/// cuDNN 9's legacy convolution API (libcudnn.so.9, or $PCC_CUDNN_LIB).
struct CudnnApi {
  std::shared_ptr<DynLib> lib;
  PCC_CUDNN_FNS(PCC_CUDA_DECLARE_FN)
};
/// \returns the name of the cuDNN library to load: $PCC_CUDNN_LIB when set,
/// else "libcudnn.so.9".
std::string cudnnLibraryName();
/// \returns the process's cuDNN table, loaded on first use, or an environment
/// error naming the library or entry point that is missing. cuDNN is
/// optional: without it the backend runs Conv on its CPU fallback.
StatusOr<std::shared_ptr<const CudnnApi>> cudnnApi();

#define PCC_NCCL_FNS(X)      \
  X(ncclGetUniqueId)         \
  X(ncclCommInitRank)        \
  X(ncclCommDestroy)         \
  X(ncclCommAbort)           \
  X(ncclCommGetAsyncError)   \
  X(ncclGetErrorString)      \
  X(ncclAllReduce)           \
  X(ncclAllGather)           \
  X(ncclReduceScatter)       \
  X(ncclSend)                \
  X(ncclRecv)                \
  X(ncclGroupStart)          \
  X(ncclGroupEnd)

/// NCCL (libnccl.so.2, or $PCC_NCCL_LIB).
struct NcclApi {
  std::shared_ptr<DynLib> lib;
  PCC_NCCL_FNS(PCC_CUDA_DECLARE_FN)
};
/// \returns the process's NCCL table, loaded on first use, or an environment
/// error naming the library or entry point that is missing.
StatusOr<std::shared_ptr<const NcclApi>> ncclApi();

}  // namespace pcc::cuda
