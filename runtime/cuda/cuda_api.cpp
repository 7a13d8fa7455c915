// Loading the CUDA libraries at run time (see cuda_api.h).
//
// Algorithm:
//  1. dlopen the library by name (RTLD_NOW | RTLD_LOCAL); failure names it
//     with dlerror's text.
//  2. dlsym every entry point of the table, by the name cuda.h's macros give
//     it (cuMemAlloc -> "cuMemAlloc_v2"); a missing one names the library
//     and the symbol.
//  3. The driver only: cuInit(0), its error named ("cuInit failed: ...").
//  4. Each process-wide table is loaded once and its outcome kept.
#include "runtime/cuda/cuda_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace pcc::cuda {

#define PCC_CUDA_STR2(x) #x
#define PCC_CUDA_STR(x) PCC_CUDA_STR2(x)

StatusOr<std::shared_ptr<DynLib>> DynLib::open(const std::string& name) {
  // Step 1.
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    return environmentError("cannot load ", name, " (", e ? e : "unknown error", ")");
  }
  return std::shared_ptr<DynLib>(new DynLib(h, name));
}

DynLib::~DynLib() {
  if (handle_) dlclose(handle_);
}

StatusOr<void*> DynLib::symbol(const char* symbol) const {
  dlerror();
  void* p = dlsym(handle_, symbol);
  if (!p) return environmentError(name_, " has no entry point ", symbol);
  return p;
}

namespace {

std::string envOr(const char* var, const char* fallback) {
  const char* v = std::getenv(var);
  return v && *v ? std::string(v) : std::string(fallback);
}

// Step 2: one lookup per table member.
#define PCC_CUDA_RESOLVE(fn)                                         \
  {                                                                  \
    ASSIGN_OR_RETURN(void* p, t->lib->symbol(PCC_CUDA_STR(fn)));     \
    t->fn = reinterpret_cast<decltype(t->fn)>(p);                    \
  }

Status resolveProbe(DriverApi* t) {
  PCC_CUDA_DRIVER_PROBE_FNS(PCC_CUDA_RESOLVE)
  return Status::OK();
}

Status resolveRest(DriverApi* t) {
  PCC_CUDA_DRIVER_FNS(PCC_CUDA_RESOLVE)
  return Status::OK();
}

/// Steps 1-3 up to the probe entry points and cuInit.
StatusOr<std::shared_ptr<DriverApi>> openDriver(const std::string& lib) {
  auto t = std::make_shared<DriverApi>();
  ASSIGN_OR_RETURN(t->lib, DynLib::open(lib));
  RETURN_IF_ERROR(resolveProbe(t.get()));
  // Step 3.
  CUresult r = t->cuInit(0);
  if (r != CUDA_SUCCESS) return environmentError("cuInit failed: ", t->errorText(r));
  return t;
}

}  // namespace

std::string DriverApi::errorText(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &text);
  return strCat(name ? name : "CUDA error", " ", static_cast<int>(r), text ? strCat(" (", text, ")") : std::string());
}

std::string driverLibraryName() { return envOr("PCC_CUDA_DRIVER_LIB", "libcuda.so.1"); }

StatusOr<std::shared_ptr<const DriverApi>> loadDriverApi(const std::string& lib) {
  ASSIGN_OR_RETURN(std::shared_ptr<DriverApi> t, openDriver(lib));
  RETURN_IF_ERROR(resolveRest(t.get()));
  return std::shared_ptr<const DriverApi>(std::move(t));
}

StatusOr<std::shared_ptr<const DriverApi>> driverApi() {
  // Step 4.
  static std::once_flag once;
  static StatusOr<std::shared_ptr<const DriverApi>>* loaded = nullptr;
  std::call_once(once, [] { loaded = new StatusOr<std::shared_ptr<const DriverApi>>(loadDriverApi(driverLibraryName())); });
  return *loaded;
}

StatusOr<CudaProbe> probeCuda(const std::string& lib) {
  ASSIGN_OR_RETURN(std::shared_ptr<DriverApi> t, openDriver(lib));
  CudaProbe p;
  CUresult r = t->cuDriverGetVersion(&p.driverVersion);
  if (r != CUDA_SUCCESS) return environmentError("cuDriverGetVersion failed: ", t->errorText(r));
  r = t->cuDeviceGetCount(&p.devices);
  if (r != CUDA_SUCCESS) return environmentError("cuDeviceGetCount failed: ", t->errorText(r));
  if (p.devices < 1) return environmentError("no CUDA device (the driver ", lib, " sees none)");
  CUdevice d = 0;
  if ((r = t->cuDeviceGet(&d, 0)) != CUDA_SUCCESS) return environmentError("cuDeviceGet(0) failed: ", t->errorText(r));
  char name[256] = {};
  if ((r = t->cuDeviceGetName(name, sizeof name - 1, d)) == CUDA_SUCCESS) p.device0 = name;
  t->cuDeviceGetAttribute(&p.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
  t->cuDeviceGetAttribute(&p.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
  // The rest of the table must be there too, or the backend could not start.
  RETURN_IF_ERROR(resolveRest(t.get()));
  return p;
}

StatusOr<std::shared_ptr<const CublasLtApi>> cublasLtApi() {
  static std::once_flag once;
  static StatusOr<std::shared_ptr<const CublasLtApi>>* loaded = nullptr;
  std::call_once(once, [] {
    auto load = []() -> StatusOr<std::shared_ptr<const CublasLtApi>> {
      auto t = std::make_shared<CublasLtApi>();
      ASSIGN_OR_RETURN(t->lib, DynLib::open(envOr("PCC_CUBLASLT_LIB", "libcublasLt.so.13")));
      PCC_CUBLASLT_FNS(PCC_CUDA_RESOLVE)
      return std::shared_ptr<const CublasLtApi>(std::move(t));
    };
    loaded = new StatusOr<std::shared_ptr<const CublasLtApi>>(load());
  });
  return *loaded;
}

std::string cudnnLibraryName() { return envOr("PCC_CUDNN_LIB", "libcudnn.so.9"); }

StatusOr<std::shared_ptr<const CudnnApi>> cudnnApi() {
  static std::once_flag once;
  static StatusOr<std::shared_ptr<const CudnnApi>>* loaded = nullptr;
  std::call_once(once, [] {
    auto load = []() -> StatusOr<std::shared_ptr<const CudnnApi>> {
      auto t = std::make_shared<CudnnApi>();
      ASSIGN_OR_RETURN(t->lib, DynLib::open(cudnnLibraryName()));
      PCC_CUDNN_FNS(PCC_CUDA_RESOLVE)
      return std::shared_ptr<const CudnnApi>(std::move(t));
    };
    loaded = new StatusOr<std::shared_ptr<const CudnnApi>>(load());
  });
  return *loaded;
}

StatusOr<std::shared_ptr<const NcclApi>> ncclApi() {
  static std::once_flag once;
  static StatusOr<std::shared_ptr<const NcclApi>>* loaded = nullptr;
  std::call_once(once, [] {
    auto load = []() -> StatusOr<std::shared_ptr<const NcclApi>> {
      auto t = std::make_shared<NcclApi>();
      ASSIGN_OR_RETURN(t->lib, DynLib::open(envOr("PCC_NCCL_LIB", "libnccl.so.2")));
      PCC_NCCL_FNS(PCC_CUDA_RESOLVE)
      return std::shared_ptr<const NcclApi>(std::move(t));
    };
    loaded = new StatusOr<std::shared_ptr<const NcclApi>>(load());
  });
  return *loaded;
}

}  // namespace pcc::cuda
