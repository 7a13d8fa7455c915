// A host-memory stand-in for the CUDA driver, cuBLASLt and cuDNN, so that
// the cuda backend's own code (device memory, copies, streams and events,
// the CPU fallback, the cuBLASLt and cuDNN descriptions and calls) runs end
// to end on a machine without a GPU: "device" memory is host memory the
// stand-in tracks, copies are memcpy, modules cannot be loaded,
// cublasLtMatmul is a column-major GEMM and cudnnConvolutionForward a direct
// convolution, each reading its descriptors as the library documents them.
// It proves the plumbing, not anything about a GPU. The entry points are
// defined with cuda.h's, cublasLt.h's and cudnn.h's own declarations, so
// their names (cuMemAlloc_v2, ...) and signatures are the real ones.
//
// Streams: work runs at once on the calling thread when its stream has
// nothing queued; otherwise it is queued and a worker thread of the stream
// runs it in order. Work is queued behind a wait for an event that has not
// happened (cuStreamWaitEvent) and behind other libraries' work
// (pccFakeStreamEnqueue, fake_cuda_host.h: the NCCL stand-in's calls).
// cuStreamQuery and cuEventQuery say CUDA_ERROR_NOT_READY while queued work
// is pending; an event stands for the work queued on its stream when it was
// recorded. cuBLASLt and cuDNN compute on the calling thread, so they first
// wait for their stream's queued work; cuStreamSynchronize waits for it.
// cuMemFree waits for the queued work of the current context's streams, as
// the driver's does. Such host waits, and a stream's wait for an event, last at most
// $PCC_FAKE_CUDA_WAIT_S seconds (default 60). The device count is
// $PCC_FAKE_CUDA_DEVICES (default 1): ranks as threads of one process need
// one device each.
#include "fake_cuda_host.h"

#include <cuda.h>
#include <cublasLt.h>
#include <cudnn.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

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

/// A stream: work that may not run yet (behind a wait for an event, or
/// behind other libraries' work) is queued and run in order by a worker.
struct FakeStream {
  uintptr_t context = 0;
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0, completed = 0;
  std::thread worker;
  bool stop = false;

  void run() {
    std::unique_lock<std::mutex> lock(m);
    while (true) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      std::function<void()> fn = std::move(queue.front());
      lock.unlock();
      fn();
      lock.lock();
      queue.pop_front();
      ++completed;
      cv.notify_all();
    }
  }
  void push(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(m);
    if (!worker.joinable()) worker = std::thread([this] { run(); });
    queue.push_back(std::move(fn));
    ++enqueued;
    cv.notify_all();
  }
  /// Waits until `ticket` items of queued work completed, at most
  /// $PCC_FAKE_CUDA_WAIT_S seconds.
  bool reach(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(m);
    const char* env = std::getenv("PCC_FAKE_CUDA_WAIT_S");
    const auto limit = std::chrono::seconds(env ? std::atoi(env) : 60);
    return cv.wait_for(lock, limit, [&] { return completed >= ticket; });
  }
  bool reached(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(m);
    return completed >= ticket;
  }
  uint64_t ticket() {
    std::lock_guard<std::mutex> lock(m);
    return enqueued;
  }
};
struct FakeEvent {
  FakeStream* stream = nullptr;
  uint64_t ticket = 0;
};
FakeStream* streamOf(CUstream s) { return reinterpret_cast<FakeStream*>(s); }
/// The context current on the calling thread, and the streams of each.
thread_local uintptr_t currentContext = 0;
std::mutex streamsMu;
std::multimap<uintptr_t, FakeStream*>& streams() {
  static auto* m = new std::multimap<uintptr_t, FakeStream*>;
  return *m;
}
/// Waits (the calling thread) until the work queued on `s` so far is done.
bool settle(CUstream s) { return !s || streamOf(s)->reach(streamOf(s)->ticket()); }
/// Runs `fn` now when nothing is queued on `s`, else queues it behind.
template <typename F>
void runOn(CUstream s, F&& fn) {
  if (!s || streamOf(s)->reached(streamOf(s)->ticket())) {
    fn();
    return;
  }
  streamOf(s)->push(std::forward<F>(fn));
}
}  // namespace

extern "C" int pccFakeStreamEnqueue(CUstream s, void (*fn)(void*), void* arg) {
  if (!s) return 1;
  streamOf(s)->push([fn, arg] { fn(arg); });
  return 0;
}

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int* n) {
  const char* env = std::getenv("PCC_FAKE_CUDA_DEVICES");
  *n = env ? std::atoi(env) : 1;
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
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  *c = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(d) + 1);  // one per device
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) {
  currentContext = reinterpret_cast<uintptr_t>(c);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t n) {
  void* q = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (!q) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(mu);
  allocations()[reinterpret_cast<uintptr_t>(q)] = n;
  *p = reinterpret_cast<CUdeviceptr>(q);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  // As the driver's: after the context's queued work (which may use it).
  std::vector<FakeStream*> mine;
  {
    std::lock_guard<std::mutex> lock(streamsMu);
    auto [lo, hi] = streams().equal_range(currentContext);
    for (auto it = lo; it != hi; ++it) mine.push_back(it->second);
  }
  for (FakeStream* f : mine)
    if (!f->reach(f->ticket())) return CUDA_ERROR_LAUNCH_TIMEOUT;
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
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream stream) {
  if (!isDevice(p)) return CUDA_ERROR_INVALID_VALUE;
  runOn(stream, [=] { std::memset(reinterpret_cast<void*>(p), v, n); });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream stream) {
  if (!isDevice(d) || isDevice(reinterpret_cast<uintptr_t>(s))) return CUDA_ERROR_INVALID_VALUE;
  runOn(stream, [=] { std::memcpy(reinterpret_cast<void*>(d), s, n); });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream stream) {
  if (!isDevice(s) || isDevice(reinterpret_cast<uintptr_t>(d))) return CUDA_ERROR_INVALID_VALUE;
  runOn(stream, [=] { std::memcpy(d, reinterpret_cast<const void*>(s), n); });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream stream) {
  if (!isDevice(d) || !isDevice(s)) return CUDA_ERROR_INVALID_VALUE;
  runOn(stream, [=] { std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n); });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D* c, CUstream stream) {
  runOn(stream, [c = *c] {
    for (size_t r = 0; r < c.Height; ++r)
      std::memmove(reinterpret_cast<void*>(c.dstDevice + r * c.dstPitch),
                   reinterpret_cast<const void*>(c.srcDevice + r * c.srcPitch), c.WidthInBytes);
  });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr p) {
  if (a != CU_POINTER_ATTRIBUTE_MEMORY_TYPE || !isDevice(p)) return CUDA_ERROR_INVALID_VALUE;
  *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  auto* f = new FakeStream;
  f->context = currentContext;
  {
    std::lock_guard<std::mutex> lock(streamsMu);
    streams().emplace(f->context, f);
  }
  *s = reinterpret_cast<CUstream>(f);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  FakeStream* f = streamOf(s);
  {
    std::lock_guard<std::mutex> lock(streamsMu);
    auto [lo, hi] = streams().equal_range(f->context);
    for (auto it = lo; it != hi; ++it)
      if (it->second == f) {
        streams().erase(it);
        break;
      }
  }
  {
    std::lock_guard<std::mutex> lock(f->m);
    f->stop = true;
    f->cv.notify_all();
  }
  if (f->worker.joinable()) f->worker.join();  // after the queued work
  delete f;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) { return settle(s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_TIMEOUT; }
CUresult CUDAAPI cuStreamQuery(CUstream s) { return !s || streamOf(s)->reached(streamOf(s)->ticket()) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY; }
CUresult CUDAAPI cuStreamWaitEvent(CUstream waiter, CUevent e, unsigned int) {
  const FakeEvent ev = *reinterpret_cast<FakeEvent*>(e);
  if (!ev.stream || ev.stream->reached(ev.ticket) || !waiter) return CUDA_SUCCESS;
  streamOf(waiter)->push([ev] { ev.stream->reach(ev.ticket); });  // the waiter's later work queues behind
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) {
  *e = reinterpret_cast<CUevent>(new FakeEvent);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent e) {
  delete reinterpret_cast<FakeEvent*>(e);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  ev->stream = s ? streamOf(s) : nullptr;
  ev->ticket = s ? streamOf(s)->ticket() : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventQuery(CUevent e) {
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (!ev->stream) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(ev->stream->m);
  return ev->stream->completed >= ev->ticket ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult CUDAAPI cuModuleLoadData(CUmodule*, const void*) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleGetFunction(CUfunction*, CUmodule, const char*) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                CUstream, void**, void**) {
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // extern "C"

namespace {
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);

/// Element `i` of a cuBLASLt matrix of `type` (32F, 16F or 16BF) as float.
float element(cudaDataType_t type, const void* p, int64_t i) {
  if (type == CUDA_R_16F) return halfToFloat(static_cast<const uint16_t*>(p)[i]);
  if (type == CUDA_R_16BF) {
    const uint32_t bits = uint32_t{static_cast<const uint16_t*>(p)[i]} << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return static_cast<const float*>(p)[i];
}
void setElement(cudaDataType_t type, void* p, int64_t i, float v) {
  if (type == CUDA_R_16F) {
    static_cast<uint16_t*>(p)[i] = floatToHalf(v);
  } else if (type == CUDA_R_16BF) {  // round to nearest even
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(bits >> 16);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}
}  // namespace

extern "C" {

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
  if (t != CUDA_R_32F && t != CUDA_R_16F && t != CUDA_R_16BF) return CUBLAS_STATUS_NOT_SUPPORTED;
  *l = new cublasLtMatrixLayoutOpaque_t{};
  (*l)->data[0] = rows;
  (*l)->data[1] = cols;
  (*l)->data[2] = static_cast<uint64_t>(ld);
  (*l)->data[3] = 1;
  (*l)->data[5] = static_cast<uint64_t>(t);
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
                                           const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t stream) {
  // Computed on the calling thread: after the stream's queued work.
  if (!settle(reinterpret_cast<CUstream>(stream))) return CUBLAS_STATUS_EXECUTION_FAILED;
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
  const auto type = static_cast<cudaDataType_t>(ld->data[5]);
  if (la->data[5] != ld->data[5] || lb->data[5] != ld->data[5] || lc->data[5] != ld->data[5])
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const auto epilogue = static_cast<cublasLtEpilogue_t>(d->data[2]);
  const bool hasBias = epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
                       epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  const bool relu = epilogue == CUBLASLT_EPILOGUE_RELU || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  const bool gelu = epilogue == CUBLASLT_EPILOGUE_GELU || epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  if (!hasBias && !relu && !gelu && epilogue != CUBLASLT_EPILOGUE_DEFAULT) return CUBLAS_STATUS_NOT_SUPPORTED;
  const void* bias = hasBias ? reinterpret_cast<const void*>(d->data[3]) : nullptr;
  if (hasBias && (!isDevice(reinterpret_cast<uintptr_t>(bias)) || d->data[4] != ld->data[5]))
    return CUBLAS_STATUS_INVALID_VALUE;
  const int64_t lda = static_cast<int64_t>(la->data[2]), ldb = static_cast<int64_t>(lb->data[2]);
  const int64_t ldc = static_cast<int64_t>(lc->data[2]), ldd = static_cast<int64_t>(ld->data[2]);
  for (int64_t q = 0; q < batch; ++q) {
    const int64_t aq = q * static_cast<int64_t>(la->data[4]), bq = q * static_cast<int64_t>(lb->data[4]);
    const int64_t cq = q * static_cast<int64_t>(lc->data[4]), dq = q * static_cast<int64_t>(ld->data[4]);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += double(element(type, A, aq + (ta ? p + i * lda : i + p * lda))) *
                 element(type, B, bq + (tb ? j + p * ldb : p + j * ldb));
        double v = alpha * acc + (beta != 0 ? beta * double(element(type, C, cq + i + j * ldc)) : 0.0) +
                   (bias ? element(type, bias, i) : 0.0f);
        if (relu) v = v > 0 ? v : 0.0;
        if (gelu) v = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        setElement(type, D, dq + i + j * ldd, static_cast<float>(v));
      }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"

// --- cuDNN: descriptors are structs of the stand-in's own (cudnn.h only
// declares them); cudnnConvolutionForward is a direct convolution that reads
// them as cuDNN documents them (packed or strided N, C, spatial tensors, a
// KCRS filter, symmetric pads, strides, dilations, groups, cross-correlation
// or convolution), so a wrong descriptor gives wrong numbers.
struct cudnnContext {
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0;
  int dims[8] = {}, strides[8] = {};
};
struct cudnnFilterStruct {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0;
  int dims[8] = {};
};
struct cudnnConvolutionStruct {
  int n = 0;  // spatial dims
  int pads[3] = {}, strides[3] = {}, dilations[3] = {};
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace {

float halfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (man ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (man >> 13);
  const uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float loadAs(cudnnDataType_t t, const void* p, int64_t i) {
  return t == CUDNN_DATA_HALF ? halfToFloat(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
}
void storeAs(cudnnDataType_t t, void* p, int64_t i, float v) {
  if (t == CUDNN_DATA_HALF)
    static_cast<uint16_t*>(p)[i] = floatToHalf(v);
  else
    static_cast<float*>(p)[i] = v;
}
bool dataType(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_HALF; }

/// Output extent of one spatial dim, as cuDNN computes it.
int convOut(int in, int pad, int k, int stride, int dil) { return (in + 2 * pad - ((k - 1) * dil + 1)) / stride + 1; }

bool outputDims(const cudnnConvolutionStruct* c, const cudnnTensorStruct* x, const cudnnFilterStruct* w, int* out) {
  if (x->n != w->n || x->n != c->n + 2 || x->type != w->type) return false;
  if (c->groups < 1 || x->dims[1] != w->dims[1] * c->groups || w->dims[0] % c->groups != 0) return false;
  out[0] = x->dims[0];
  out[1] = w->dims[0];
  for (int i = 0; i < c->n; ++i) {
    out[2 + i] = convOut(x->dims[2 + i], c->pads[i], w->dims[2 + i], c->strides[i], c->dilations[i]);
    if (out[2 + i] < 1) return false;
  }
  return true;
}

constexpr size_t kFakeWorkspace = 4096;  // what the stand-in's algorithm asks for

}  // namespace

extern "C" float pccFakeHalfToFloat(uint16_t h) { return halfToFloat(h); }
extern "C" uint16_t pccFakeFloatToHalf(float f) { return floatToHalf(f); }


extern "C" {

const char* CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t s) {
  switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    default: return "CUDNN_STATUS_(stand-in)";
  }
}
cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t* h) {
  *h = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnDestroy(cudnnHandle_t h) {
  delete h;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
  if (!h || !s) return CUDNN_STATUS_BAD_PARAM;
  h->stream = s;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* t) {
  *t = new cudnnTensorStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t t, cudnnDataType_t type, int n,
                                                     const int dims[], const int strides[]) {
  if (n < 4 || n > 8 || !dataType(type)) return CUDNN_STATUS_BAD_PARAM;
  for (int i = 0; i < n; ++i)
    if (dims[i] < 1 || strides[i] < 1) return CUDNN_STATUS_BAD_PARAM;
  t->type = type;
  t->n = n;
  for (int i = 0; i < n; ++i) {
    t->dims[i] = dims[i];
    t->strides[i] = strides[i];
  }
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t t) {
  delete t;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* f) {
  *f = new cudnnFilterStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t f, cudnnDataType_t type,
                                                     cudnnTensorFormat_t format, int n, const int dims[]) {
  if (n < 4 || n > 5 || format != CUDNN_TENSOR_NCHW || !dataType(type)) return CUDNN_STATUS_BAD_PARAM;
  f->type = type;
  f->n = n;
  for (int i = 0; i < n; ++i) {
    if (dims[i] < 1) return CUDNN_STATUS_BAD_PARAM;
    f->dims[i] = dims[i];
  }
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t f) {
  delete f;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* c) {
  *c = new cudnnConvolutionStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t c, int n, const int pads[],
                                                          const int strides[], const int dilations[],
                                                          cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
  if (n < 2 || n > 3) return CUDNN_STATUS_BAD_PARAM;
  c->n = n;
  for (int i = 0; i < n; ++i) {
    if (pads[i] < 0 || strides[i] < 1 || dilations[i] < 1) return CUDNN_STATUS_BAD_PARAM;
    c->pads[i] = pads[i];
    c->strides[i] = strides[i];
    c->dilations[i] = dilations[i];
  }
  c->mode = mode;
  c->compute = compute;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t c, int groups) {
  if (groups < 1) return CUDNN_STATUS_BAD_PARAM;
  c->groups = groups;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t c, cudnnMathType_t m) {
  c->math = m;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t c) {
  delete c;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t c,
                                                                const cudnnTensorDescriptor_t x,
                                                                const cudnnFilterDescriptor_t w, int n, int out[]) {
  if (n != x->n || !outputDims(c, x, w, out)) return CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t x,
                                                                 const cudnnFilterDescriptor_t w,
                                                                 const cudnnConvolutionDescriptor_t c,
                                                                 const cudnnTensorDescriptor_t, int requested,
                                                                 int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
  int out[8];
  if (requested < 1 || !outputDims(c, x, w, out)) return CUDNN_STATUS_BAD_PARAM;
  std::memset(perf, 0, sizeof *perf);
  perf->algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  perf->status = CUDNN_STATUS_SUCCESS;
  perf->memory = kFakeWorkspace;
  perf->mathType = c->math;
  *returned = 1;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t, const cudnnTensorDescriptor_t,
                                                                  const cudnnFilterDescriptor_t,
                                                                  const cudnnConvolutionDescriptor_t,
                                                                  const cudnnTensorDescriptor_t,
                                                                  cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
  *bytes = algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ? kFakeWorkspace : 0;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnConvolutionForward(cudnnHandle_t h, const void* alphaP,
                                                  const cudnnTensorDescriptor_t xd, const void* x,
                                                  const cudnnFilterDescriptor_t wd, const void* w,
                                                  const cudnnConvolutionDescriptor_t c, cudnnConvolutionFwdAlgo_t algo,
                                                  void* ws, size_t wsBytes, const void* betaP,
                                                  const cudnnTensorDescriptor_t yd, void* y) {
  if (!h || !h->stream) return CUDNN_STATUS_BAD_PARAM;
  if (!settle(reinterpret_cast<CUstream>(h->stream))) return CUDNN_STATUS_EXECUTION_FAILED;
  for (const void* p : {x, w, static_cast<const void*>(y)})
    if (!isDevice(reinterpret_cast<uintptr_t>(p))) return CUDNN_STATUS_BAD_PARAM;
  if (algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM &&
      (wsBytes < kFakeWorkspace || !isDevice(reinterpret_cast<uintptr_t>(ws))))
    return CUDNN_STATUS_BAD_PARAM;
  int out[8];
  if (!outputDims(c, xd, wd, out) || yd->n != xd->n || yd->type != xd->type || c->compute != CUDNN_DATA_FLOAT)
    return CUDNN_STATUS_BAD_PARAM;
  for (int i = 0; i < yd->n; ++i)
    if (yd->dims[i] != out[i]) return CUDNN_STATUS_BAD_PARAM;
  const float alpha = *static_cast<const float*>(alphaP), beta = *static_cast<const float*>(betaP);
  const int s = c->n, K = out[1], Cg = wd->dims[1], Kg = K / c->groups;
  const cudnnDataType_t t = xd->type;
  int64_t yCount = 1, wCount = 1;
  for (int i = 0; i < yd->n; ++i) yCount *= out[i];
  for (int i = 0; i < s; ++i) wCount *= wd->dims[2 + i];
  int o[3] = {}, r[3] = {};
  for (int64_t yi = 0; yi < yCount; ++yi) {
    int64_t rest = yi;
    for (int i = s - 1; i >= 0; --i) {
      o[i] = static_cast<int>(rest % out[2 + i]);
      rest /= out[2 + i];
    }
    const int k = static_cast<int>(rest % K), nb = static_cast<int>(rest / K), g = k / Kg;
    double acc = 0;
    for (int ch = 0; ch < Cg; ++ch)
      for (int64_t wi = 0; wi < wCount; ++wi) {
        int64_t q = wi;
        for (int i = s - 1; i >= 0; --i) {
          r[i] = static_cast<int>(q % wd->dims[2 + i]);
          q /= wd->dims[2 + i];
        }
        int64_t xo = int64_t{nb} * xd->strides[0] + int64_t{g * Cg + ch} * xd->strides[1];
        bool inside = true;
        for (int i = 0; i < s && inside; ++i) {
          // Convolution mode flips the filter; cross-correlation (ONNX's) does not.
          const int ri = c->mode == CUDNN_CONVOLUTION ? wd->dims[2 + i] - 1 - r[i] : r[i];
          const int at = o[i] * c->strides[i] - c->pads[i] + ri * c->dilations[i];
          inside = at >= 0 && at < xd->dims[2 + i];
          xo += int64_t{at} * xd->strides[2 + i];
        }
        if (inside) acc += double(loadAs(t, x, xo)) * loadAs(t, w, (int64_t{k} * Cg + ch) * wCount + wi);
      }
    int64_t yo = 0, idx = yi;
    for (int i = yd->n - 1; i >= 0; --i) {
      yo += (idx % out[i]) * yd->strides[i];
      idx /= out[i];
    }
    double v = alpha * acc + (beta != 0 ? beta * double(loadAs(t, y, yo)) : 0.0);
    storeAs(t, y, yo, static_cast<float>(v));
  }
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI cudnnAddTensor(cudnnHandle_t h, const void* alphaP, const cudnnTensorDescriptor_t ad,
                                         const void* A, const void* betaP, const cudnnTensorDescriptor_t cd, void* C) {
  if (!h || !isDevice(reinterpret_cast<uintptr_t>(A)) || !isDevice(reinterpret_cast<uintptr_t>(C)))
    return CUDNN_STATUS_BAD_PARAM;
  if (!settle(reinterpret_cast<CUstream>(h->stream))) return CUDNN_STATUS_EXECUTION_FAILED;
  if (ad->n != cd->n || ad->type != cd->type) return CUDNN_STATUS_BAD_PARAM;
  for (int i = 0; i < cd->n; ++i)
    if (ad->dims[i] != 1 && ad->dims[i] != cd->dims[i]) return CUDNN_STATUS_BAD_PARAM;
  const float alpha = *static_cast<const float*>(alphaP), beta = *static_cast<const float*>(betaP);
  int64_t count = 1;
  for (int i = 0; i < cd->n; ++i) count *= cd->dims[i];
  for (int64_t e = 0; e < count; ++e) {
    int64_t co = 0, ao = 0, idx = e;
    for (int i = cd->n - 1; i >= 0; --i) {
      const int64_t v = idx % cd->dims[i];
      idx /= cd->dims[i];
      co += v * cd->strides[i];
      if (ad->dims[i] != 1) ao += v * ad->strides[i];
    }
    const double v = alpha * double(loadAs(ad->type, A, ao)) + beta * double(loadAs(cd->type, C, co));
    storeAs(cd->type, C, co, static_cast<float>(v));
  }
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
