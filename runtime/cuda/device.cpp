// One rank's CUDA device (device.h).
//
// Algorithm (open):
//  1. Load the driver (driverApi), count the devices, pick the rank's one.
//  2. Retain its primary context and make it current.
//  3. Create the compute, copy and communication streams (non-blocking, so
//     they do not synchronize with the legacy default stream) and one event
//     per stream, re-recorded by every order() call.
// Every later entry point makes the context current first: ranks are
// prepared on the launcher's thread and run on their own.
#include "runtime/cuda/device.h"

#include <cstdlib>
#include <thread>

#include "runtime/support/memory_account.h"

namespace pcc::cuda {

int deviceIndexFor(int rank, int devices) {
  if (devices < 1) return 0;
  for (const char* var : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end == 0 && n >= 0) return static_cast<int>(n % devices);
  }
  return rank < 0 ? 0 : rank % devices;
}

StatusOr<std::shared_ptr<Device>> Device::open(int rank) {
  // Step 1.
  auto loaded = driverApi();
  if (!loaded.ok()) return loaded.status().withContext(strCat("rank ", rank));
  std::shared_ptr<Device> d(new Device);
  d->api_ = *loaded;
  d->rank_ = rank;
  const DriverApi& a = *d->api_;
  RETURN_IF_ERROR(d->check(a.cuDeviceGetCount(&d->devices_), "cuDeviceGetCount"));
  if (d->devices_ < 1) return environmentError("rank ", rank, ": no CUDA device");
  d->index_ = deviceIndexFor(rank, d->devices_);
  RETURN_IF_ERROR(d->check(a.cuDeviceGet(&d->dev_, d->index_), "cuDeviceGet"));
  RETURN_IF_ERROR(d->check(a.cuDeviceGetAttribute(&d->major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev_),
                           "cuDeviceGetAttribute"));
  RETURN_IF_ERROR(d->check(a.cuDeviceGetAttribute(&d->minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev_),
                           "cuDeviceGetAttribute"));
  RETURN_IF_ERROR(d->check(a.cuDeviceGetAttribute(&d->maxThreads_, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, d->dev_),
                           "cuDeviceGetAttribute"));
  // Step 2.
  RETURN_IF_ERROR(d->check(a.cuDevicePrimaryCtxRetain(&d->ctx_, d->dev_), "cuDevicePrimaryCtxRetain"));
  RETURN_IF_ERROR(d->makeCurrent());
  // Step 3.
  for (CUstream* s : {&d->compute_, &d->copy_, &d->comm_})
    RETURN_IF_ERROR(d->check(a.cuStreamCreate(s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  for (CUevent* e : {&d->computeEv_, &d->copyEv_, &d->commEv_})
    RETURN_IF_ERROR(d->check(a.cuEventCreate(e, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  return d;
}

Device::~Device() {
  if (!api_ || !ctx_) return;
  const DriverApi& a = *api_;
  a.cuCtxSetCurrent(ctx_);
  for (CUstream s : {compute_, copy_, comm_})
    if (s) {
      a.cuStreamSynchronize(s);
      a.cuStreamDestroy(s);
    }
  for (CUevent e : {computeEv_, copyEv_, commEv_})
    if (e) a.cuEventDestroy(e);
  a.cuDevicePrimaryCtxRelease(dev_);
}

Status Device::check(CUresult r, const char* call, std::string_view where) const {
  if (r == CUDA_SUCCESS) return Status::OK();
  // An instruction's `where` names the rank already ("rank R: node 'N' (Op)").
  const bool named = where.substr(0, 5) == "rank ";
  return environmentError(named ? std::string(where) : strCat("rank ", rank_, where.empty() ? "" : ": ", where), ": ",
                          call, " failed on CUDA device ", index_, ": ", api_->errorText(r));
}

Status Device::makeCurrent() const { return check(api_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

StatusOr<DeviceMemory> Device::allocate(uint64_t bytes, bool poison) {
  RETURN_IF_ERROR(makeCurrent());
  const uint64_t n = std::max<uint64_t>((bytes + 255) / 256 * 256, 256);
  CUdeviceptr p = 0;
  RETURN_IF_ERROR(check(api_->cuMemAlloc(&p, n), "cuMemAlloc", strCat(n, " bytes")));
  if (poison) {
    Status st = check(api_->cuMemsetD8Async(p, 0xFF, n, compute_), "cuMemsetD8Async");
    if (!st.ok()) {
      api_->cuMemFree(p);
      return st;
    }
  }
  std::shared_ptr<Device> self = shared_from_this();
  // Charged to the allocating thread's memory account, if any (the rank's),
  // as the cpu backend's allocations are: the rank's memory is device memory.
  std::shared_ptr<MemoryAccount> account = chargeAllocation(static_cast<int64_t>(n));
  DeviceMemory m;
  // Freed with the context current (the last view may die on any thread).
  m.owner = std::shared_ptr<const void>(reinterpret_cast<const void*>(p), [self, p, account, n](const void*) {
    self->api_->cuCtxSetCurrent(self->ctx_);
    self->api_->cuMemFree(p);
    if (account) account->sub(static_cast<int64_t>(n));
  });
  m.base = static_cast<uintptr_t>(p);
  m.bytes = bytes;
  return m;
}

Status Device::order(CUstream signaller, CUstream waiter) {
  if (signaller == waiter) return Status::OK();
  CUevent e = signaller == compute_ ? computeEv_ : signaller == copy_ ? copyEv_ : commEv_;
  RETURN_IF_ERROR(check(api_->cuEventRecord(e, signaller), "cuEventRecord"));
  return check(api_->cuStreamWaitEvent(waiter, e, 0), "cuStreamWaitEvent");
}

Status Device::waitUntil(CUstream s, std::chrono::steady_clock::time_point deadline,
                         const std::function<Status()>& poll, std::string_view what) {
  auto pause = std::chrono::microseconds(20);
  while (true) {
    CUresult r = api_->cuStreamQuery(s);
    if (r == CUDA_SUCCESS) return Status::OK();
    if (r != CUDA_ERROR_NOT_READY) return check(r, "cuStreamQuery", what);
    if (poll) RETURN_IF_ERROR(poll());
    if (std::chrono::steady_clock::now() > deadline)
      return environmentError("rank ", rank_, ": ", what, " did not finish within the timeout");
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::microseconds(2000));
  }
}

Status Device::waitEvent(CUevent e, std::chrono::steady_clock::time_point deadline,
                         const std::function<Status()>& poll, std::string_view what) {
  auto pause = std::chrono::microseconds(20);
  while (true) {
    CUresult r = api_->cuEventQuery(e);
    if (r == CUDA_SUCCESS) return Status::OK();
    if (r != CUDA_ERROR_NOT_READY) return check(r, "cuEventQuery", what);
    if (poll) RETURN_IF_ERROR(poll());
    if (std::chrono::steady_clock::now() > deadline) return environmentError(what, " did not finish within the timeout");
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::microseconds(2000));
  }
}

void Device::watch(std::weak_ptr<StreamWatch> w) {
  std::lock_guard<std::mutex> lock(watchMu_);
  watches_.push_back(std::move(w));
}

Status Device::synchronize(CUstream s, std::string_view where) {
  std::vector<std::shared_ptr<StreamWatch>> live;
  {
    std::lock_guard<std::mutex> lock(watchMu_);
    std::erase_if(watches_, [](const std::weak_ptr<StreamWatch>& w) { return w.expired(); });
    for (const auto& w : watches_)
      if (auto p = w.lock()) live.push_back(std::move(p));
  }
  if (live.empty()) return check(api_->cuStreamSynchronize(s), "cuStreamSynchronize", where);
  return waitUntil(
      s, std::chrono::steady_clock::time_point::max(),
      [&]() -> Status {
        for (const auto& w : live) RETURN_IF_ERROR(w->poll());
        return Status::OK();
      },
      where);
}

Status Device::settleCopy(Status st) {
  // A watch failed (and aborted its communicator, which ends the work the
  // copy waits for): the copy still runs, into or out of the caller's host
  // buffer, so it is waited for before the caller may free that.
  if (!st.ok()) api_->cuStreamSynchronize(copy_);
  return st;
}

Status Device::upload(CUdeviceptr dst, const void* src, size_t bytes, std::string_view where) {
  RETURN_IF_ERROR(makeCurrent());
  if (bytes == 0) return Status::OK();
  // After the compute stream's work, which may still read the old bytes.
  RETURN_IF_ERROR(order(compute_, copy_));
  RETURN_IF_ERROR(check(api_->cuMemcpyHtoDAsync(dst, src, bytes, copy_), "cuMemcpyHtoDAsync", where));
  return settleCopy(synchronize(copy_, where));
}

Status Device::download(void* dst, CUdeviceptr src, size_t bytes, std::string_view where) {
  RETURN_IF_ERROR(makeCurrent());
  if (bytes == 0) return Status::OK();
  RETURN_IF_ERROR(order(compute_, copy_));
  RETURN_IF_ERROR(check(api_->cuMemcpyDtoHAsync(dst, src, bytes, copy_), "cuMemcpyDtoHAsync", where));
  return settleCopy(synchronize(copy_, where));
}

bool Device::isDevicePointer(const void* p) const {
  unsigned int type = 0;
  CUresult r = api_->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                           static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)));
  return r == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE;
}

}  // namespace pcc::cuda
