// One rank's CUDA device: the primary context of the device the rank runs
// on, its three streams (compute, copy, communication), the events that
// order them, device memory, and the checks that turn every driver error
// into a Status naming the rank and the call.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cuda/cuda_api.h"

namespace pcc::cuda {

/// \returns the device index global rank `rank` runs on among `devices`:
/// $LOCAL_RANK (one process per rank, torchrun / mpirun style; also
/// OMPI_COMM_WORLD_LOCAL_RANK) modulo `devices` when set, else `rank` modulo
/// `devices` (ranks as threads of one process).
int deviceIndexFor(int rank, int devices);

/// Work the device runs for someone else that a host wait must watch: a
/// communicator whose operations the compute stream waits for without the
/// host (NCCL's start forms). Device::synchronize polls it while it waits, so
/// that an operation whose peer never arrives fails (the poll aborts it)
/// instead of hanging the host.
class StreamWatch {
 public:
  virtual ~StreamWatch() = default;
  /// \returns an error once a watched operation failed or passed its
  /// deadline (after making it end), else ok.
  virtual Status poll() = 0;
};

class Device : public std::enable_shared_from_this<Device> {
 public:
  /// Opens the device of global rank `rank` (deviceIndexFor): retains its
  /// primary context, creates the streams and events.
  /// \returns the device, or an environment error naming the rank and what failed.
  static StatusOr<std::shared_ptr<Device>> open(int rank);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DriverApi& api() const { return *api_; }
  int rank() const { return rank_; }
  int index() const { return index_; }
  int devices() const { return devices_; }
  int major() const { return major_; }
  int minor() const { return minor_; }
  int maxThreadsPerBlock() const { return maxThreads_; }
  CUstream compute() const { return compute_; }
  CUstream copyStream() const { return copy_; }
  CUstream comm() const { return comm_; }

  /// \returns ok, or an environment error "rank R: CALL failed: CUDA_ERROR_X
  /// (text)" with `where` (a node, a collective) after the rank when given.
  Status check(CUresult r, const char* call, std::string_view where = {}) const;
  /// Makes the rank's context current on the calling thread (every entry
  /// point does this first: ranks are prepared on one thread and run on another).
  Status makeCurrent() const;
  /// \returns `bytes` (at least 256) of device memory, freed with the last
  /// tensor that views it; filled with 0xFF bytes when `poison`.
  StatusOr<DeviceMemory> allocate(uint64_t bytes, bool poison = false);
  /// Makes stream `waiter` wait for the work enqueued so far on `signaller`.
  Status order(CUstream signaller, CUstream waiter);
  /// Waits for stream `s` until `deadline`, calling `poll` between queries
  /// (NCCL's asynchronous error check). \returns ok once the stream is idle,
  /// poll's error, or a deadline-exceeded environment error naming `what`.
  Status waitUntil(CUstream s, std::chrono::steady_clock::time_point deadline, const std::function<Status()>& poll,
                   std::string_view what);
  /// Waits for event `e` like waitUntil waits for a stream.
  Status waitEvent(CUevent e, std::chrono::steady_clock::time_point deadline, const std::function<Status()>& poll,
                   std::string_view what);
  /// Adds `w` to what synchronize() polls (kept while it lives).
  void watch(std::weak_ptr<StreamWatch> w);
  /// Waits on the host for stream `s`, polling the watches (a failed one
  /// ends the wait with its error). `where` names the caller in errors.
  Status synchronize(CUstream s, std::string_view where);
  /// Copies host bytes to device memory and waits for the copy (the host
  /// buffer may go right after).
  Status upload(CUdeviceptr dst, const void* src, size_t bytes, std::string_view where);
  /// Copies device bytes to host memory after the compute stream's work and
  /// waits for the copy.
  Status download(void* dst, CUdeviceptr src, size_t bytes, std::string_view where);
  /// \returns whether `p` is device memory (false for host memory, which the
  /// driver does not know or knows as host).
  bool isDevicePointer(const void* p) const;

 private:
  Device() = default;
  /// \returns `st`, after waiting for the copy stream when it failed.
  Status settleCopy(Status st);
  std::shared_ptr<const DriverApi> api_;
  int rank_ = 0, index_ = 0, devices_ = 0, major_ = 0, minor_ = 0, maxThreads_ = 1024;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream compute_ = nullptr, copy_ = nullptr, comm_ = nullptr;
  CUevent computeEv_ = nullptr, copyEv_ = nullptr, commEv_ = nullptr;
  std::mutex watchMu_;
  std::vector<std::weak_ptr<StreamWatch>> watches_;
};

}  // namespace pcc::cuda
