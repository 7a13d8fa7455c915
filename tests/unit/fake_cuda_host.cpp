// A host-memory stand-in for the CUDA driver and cuBLASLt, so that the cuda
// backend's own code (device memory, copies, streams and events, the CPU
// fallback, the cuBLASLt descriptions and calls) runs end to end on a machine
// without a GPU: "device" memory is host memory the stand-in tracks, copies
// are memcpy, streams and events do nothing (every call completes at once),
// modules cannot be loaded, and cublasLtMatmul is a column-major GEMM that
// reads its descriptors as cuBLASLt documents them. It proves the plumbing,
// not anything about a GPU. The entry points are defined with cuda.h's and
// cublasLt.h's own declarations, so their names (cuMemAlloc_v2, ...) and
// signatures are the real ones.
#include <cuda.h>
#include <cublasLt.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace {
std::mutex mu;
std::map<uintptr_t, size_t>& allocations() {
  static auto* m = new std::map<uintptr_t, size_t>;
  return *m;
}
bool isDevice(uintptr_t p) {
  std::lock_guard<std::mutex> lock(mu);
  auto& m = allocations();
  auto it = m.upper_bound(p);
  if (it == m.begin()) return false;
  --it;
  return p < it->first + it->second;
}
}  // namespace

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice* d, int o) {
  *d = o;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  std::strncpy(name, "Host stand-in", static_cast<size_t>(len));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  *v = a == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult, const char** s) {
  *s = "CUDA_ERROR_NOT_SUPPORTED";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult, const char** s) {
  *s = "not supported by the host stand-in";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) {
  *c = reinterpret_cast<CUcontext>(uintptr_t{1});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t n) {
  void* q = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (!q) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(mu);
  allocations()[reinterpret_cast<uintptr_t>(q)] = n;
  *p = reinterpret_cast<CUdeviceptr>(q);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(mu);
  if (!allocations().erase(static_cast<uintptr_t>(p))) return CUDA_ERROR_INVALID_VALUE;
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAllocHost(void** p, size_t n) {
  *p = std::malloc(n ? n : 1);
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFreeHost(void* p) {
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream) {
  if (!isDevice(p)) return CUDA_ERROR_INVALID_VALUE;
  std::memset(reinterpret_cast<void*>(p), v, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream) {
  if (!isDevice(d) || isDevice(reinterpret_cast<uintptr_t>(s))) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream) {
  if (!isDevice(s) || isDevice(reinterpret_cast<uintptr_t>(d))) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(d, reinterpret_cast<const void*>(s), n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
  if (!isDevice(d) || !isDevice(s)) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D* c, CUstream) {
  for (size_t r = 0; r < c->Height; ++r)
    std::memmove(reinterpret_cast<void*>(c->dstDevice + r * c->dstPitch),
                 reinterpret_cast<const void*>(c->srcDevice + r * c->srcPitch), c->WidthInBytes);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr p) {
  if (a != CU_POINTER_ATTRIBUTE_MEMORY_TYPE || !isDevice(p)) return CUDA_ERROR_INVALID_VALUE;
  *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  *s = reinterpret_cast<CUstream>(new int(0));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  delete reinterpret_cast<int*>(s);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamQuery(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamWaitEvent(CUstream, CUevent, unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) {
  *e = reinterpret_cast<CUevent>(new int(0));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent e) {
  delete reinterpret_cast<int*>(e);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleLoadData(CUmodule*, const void*) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleGetFunction(CUfunction*, CUmodule, const char*) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                CUstream, void**, void**) {
  return CUDA_ERROR_NOT_SUPPORTED;
}

// --- cuBLASLt: descriptors in the opaque structs' words.
// Layout words: rows, cols, ld, batch, stride, type. Desc words: transa,
// transb, epilogue, bias pointer, bias type.
static_assert(sizeof(cublasLtMatrixLayoutOpaque_t) >= 6 * sizeof(uint64_t));
static_assert(sizeof(cublasLtMatmulDescOpaque_t) >= 5 * sizeof(uint64_t));

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* h) {
  *h = reinterpret_cast<cublasLtHandle_t>(new int(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t h) {
  delete reinterpret_cast<int*>(h);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t c, cudaDataType_t s) {
  if (c != CUBLAS_COMPUTE_32F || s != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  *d = new cublasLtMatmulDescOpaque_t{};
  (*d)->data[2] = CUBLASLT_EPILOGUE_DEFAULT;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                           const void* buf, size_t n) {
  switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: d->data[0] = *static_cast<const int32_t*>(buf); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: d->data[1] = *static_cast<const int32_t*>(buf); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: d->data[2] = *static_cast<const uint32_t*>(buf); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: d->data[3] = reinterpret_cast<uint64_t>(*static_cast<void* const*>(buf)); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: d->data[4] = *static_cast<const int32_t*>(buf); break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
  (void)n;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType t, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  if (t != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  *l = new cublasLtMatrixLayoutOpaque_t{};
  (*l)->data[0] = rows;
  (*l)->data[1] = cols;
  (*l)->data[2] = static_cast<uint64_t>(ld);
  (*l)->data[3] = 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(const cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                             cublasLtMatrixLayoutAttribute_t a, const void* buf,
                                                             size_t) {
  if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) l->data[3] = static_cast<uint64_t>(*static_cast<const int32_t*>(buf));
  else if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) l->data[4] = static_cast<uint64_t>(*static_cast<const int64_t*>(buf));
  else return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = new cublasLtMatmulPreferenceOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                                 cublasLtMatmulPreferenceAttributes_t, const void*,
                                                                 size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                                           cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                           cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                           cublasLtMatmulPreference_t, int n,
                                                           cublasLtMatmulHeuristicResult_t* r, int* found) {
  if (n < 1) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(r, 0, sizeof *r);
  r->state = CUBLAS_STATUS_SUCCESS;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void* alphaP,
                                           const void* A, cublasLtMatrixLayout_t la, const void* B,
                                           cublasLtMatrixLayout_t lb, const void* betaP, const void* C,
                                           cublasLtMatrixLayout_t lc, void* D, cublasLtMatrixLayout_t ld,
                                           const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t) {
  for (const void* p : {A, B, C, static_cast<const void*>(D)})
    if (!isDevice(reinterpret_cast<uintptr_t>(p))) return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = d->data[0] != CUBLAS_OP_N, tb = d->data[1] != CUBLAS_OP_N;
  const int64_t m = static_cast<int64_t>(ld->data[0]), n = static_cast<int64_t>(ld->data[1]);
  const int64_t k = static_cast<int64_t>(ta ? la->data[0] : la->data[1]);
  if (static_cast<int64_t>(ta ? la->data[1] : la->data[0]) != m ||
      static_cast<int64_t>(tb ? lb->data[0] : lb->data[1]) != n ||
      static_cast<int64_t>(tb ? lb->data[1] : lb->data[0]) != k || lc->data[0] != ld->data[0] ||
      lc->data[1] != ld->data[1])
    return CUBLAS_STATUS_INVALID_VALUE;
  const int64_t batch = static_cast<int64_t>(ld->data[3]);
  if (la->data[3] != ld->data[3] || lb->data[3] != ld->data[3] || lc->data[3] != ld->data[3])
    return CUBLAS_STATUS_INVALID_VALUE;
  const float alpha = *static_cast<const float*>(alphaP), beta = *static_cast<const float*>(betaP);
  const float* a = static_cast<const float*>(A);
  const float* b = static_cast<const float*>(B);
  const float* c = static_cast<const float*>(C);
  float* out = static_cast<float*>(D);
  const float* bias = d->data[2] == CUBLASLT_EPILOGUE_BIAS ? reinterpret_cast<const float*>(d->data[3]) : nullptr;
  if (d->data[2] == CUBLASLT_EPILOGUE_BIAS && !isDevice(reinterpret_cast<uintptr_t>(bias)))
    return CUBLAS_STATUS_INVALID_VALUE;
  const int64_t lda = static_cast<int64_t>(la->data[2]), ldb = static_cast<int64_t>(lb->data[2]);
  const int64_t ldc = static_cast<int64_t>(lc->data[2]), ldd = static_cast<int64_t>(ld->data[2]);
  for (int64_t q = 0; q < batch; ++q) {
    const float* aq = a + q * static_cast<int64_t>(la->data[4]);
    const float* bq = b + q * static_cast<int64_t>(lb->data[4]);
    const float* cq = c + q * static_cast<int64_t>(lc->data[4]);
    float* dq = out + q * static_cast<int64_t>(ld->data[4]);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += double(ta ? aq[p + i * lda] : aq[i + p * lda]) * (tb ? bq[j + p * ldb] : bq[p + j * ldb]);
        double v = alpha * acc + (beta != 0 ? beta * double(cq[i + j * ldc]) : 0.0) + (bias ? bias[i] : 0.0f);
        dq[i + j * ldd] = static_cast<float>(v);
      }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
