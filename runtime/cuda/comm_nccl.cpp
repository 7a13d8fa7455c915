// NCCL communicators (comm_nccl.h).
//
// Algorithm:
//  1. connect(): for each plan group holding the rank, in group order (so
//     that ranks in several groups never wait on each other in a cycle),
//     the group's first rank makes an ncclUniqueId and sets it in the store
//     under "pcc/nccl/<group>"; the others get it (the store waits for it);
//     every member calls ncclCommInitRank with its position in the group.
//     The world communicator ("pcc/nccl/world") likewise, when asked for.
//  2. Every call: the communication stream waits for the compute stream's
//     work (the operands are ready), the NCCL calls are enqueued on it and
//     an event is recorded after them: a ticket, which holds the scratch
//     memory the call uses and a deadline (now + the timeout), kept in the
//     communicator's list until the event is known reached.
//  3. Operands in host memory (the launcher sends rank times and output
//     pieces to rank 0 as host tensors) are staged through device memory.
//  4. all-gather along a dim with rows before it, or with extents that
//     differ between ranks: every rank's extent is exchanged first, each
//     piece is gathered into a slot of the largest piece's size, and each
//     slot is copied into its columns of the output with a 2-D copy.
//     reduce-scatter with uneven slices or rows before the dim: an all-reduce
//     into a scratch tensor and a 2-D copy of the rank's slice.
//  5. postSend(): the tensor is copied (compute stream) into a buffer of its
//     own, the send enqueued; waitSends() waits for them all.
//  6. all-to-all: the chunks of the split dim are packed in rank order with
//     2-D copies, exchanged by one ncclSend and one ncclRecv per peer inside
//     ncclGroupStart/ncclGroupEnd, and each received piece is copied into its
//     columns of the output (the concat dim) with a 2-D copy.
//  7. The start forms return the work (NcclWork) at once. Its wait() makes
//     the compute stream wait for the ticket's event (no host block), then
//     enqueues on the compute stream what follows (the copies out of
//     scratch of step 4 and 6), so the caller's later kernels see the
//     result. Where the host needs the result (host operands, the extents
//     of step 4, waitSends, every blocking call) it waits on the host
//     instead: it polls the event and ncclCommGetAsyncError until the event
//     is reached or the deadline passes, then aborts the communicator and
//     fails naming the rank, the collective and the group.
//  8. The ticket list is a StreamWatch of the device: every host wait of
//     the device (downloads, uploads, per-kernel syncs) and every later call
//     polls it: finished tickets go, the oldest unfinished one past its
//     deadline (or NCCL's asynchronous error) aborts and fails, so a
//     collective waited for on the device cannot hang the host.
#include "runtime/cuda/comm_nccl.h"

#include <gloo/rendezvous/store.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>

namespace pcc::cuda {

bool ncclTypeOf(DType d, ncclDataType_t* out) {
  switch (d) {
    case DType::kF32: *out = ncclFloat32; return true;
    case DType::kF16: *out = ncclFloat16; return true;
    case DType::kBF16: *out = ncclBfloat16; return true;
    case DType::kF64: *out = ncclFloat64; return true;
    case DType::kI32: *out = ncclInt32; return true;
    case DType::kI64: *out = ncclInt64; return true;
    case DType::kI8: *out = ncclInt8; return true;
    case DType::kU8: *out = ncclUint8; return true;
    case DType::kBool: *out = ncclUint8; return true;
    default: return false;
  }
}

std::string ncclIdKey(const std::string& group) { return "pcc/nccl/" + group; }

namespace {

CUdeviceptr dptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

/// Rows before `dim`, and bytes of one index along it (the dims after it).
void splitAround(const TensorType& t, int dim, int64_t* outer, int64_t* innerBytes) {
  *outer = 1;
  int64_t inner = 1;
  for (int i = 0; i < t.rank(); ++i) {
    if (i < dim) *outer *= t.shape[i];
    if (i > dim) inner *= t.shape[i];
  }
  *innerBytes = inner * static_cast<int64_t>(dtypeSize(t.dtype));
}

/// An operation enqueued on the communication stream: the event recorded
/// after it, and the scratch memory it uses (freed once it is known done).
struct Ticket {
  std::string what;
  std::chrono::steady_clock::time_point deadline;
  CUevent event = nullptr;
  std::vector<DeviceMemory> scratch;
  std::shared_ptr<Device> dev;
  ~Ticket() {
    if (event) dev->api().cuEventDestroy(event);
  }
};

/// What a communicator and the works it started share (a work may outlive
/// the communicator): the NCCL handle, and the operations not yet known done,
/// which every host wait of the device polls (StreamWatch).
class NcclState : public StreamWatch {
 public:
  NcclState(std::shared_ptr<Device> dev, std::shared_ptr<const NcclApi> nccl, ncclComm_t comm, int rank, int size,
            std::string label, std::chrono::milliseconds timeout)
      : dev(std::move(dev)), nccl(std::move(nccl)), comm(comm), rank(rank), size(size), label(std::move(label)),
        timeout(timeout) {}
  ~NcclState() override {
    if (comm && !aborted && dev->makeCurrent().ok()) {
      // What is still queued uses the scratch memory: wait for it first.
      if (!dev->waitUntil(dev->comm(), std::chrono::steady_clock::now() + timeout, nullptr, "").ok()) abort();
    }
    pending.clear();
    kept.clear();
    if (comm && !aborted) nccl->ncclCommDestroy(comm);
  }

  std::string prefix(const std::string& what) const {
    return strCat("rank ", dev->rank(), ": NCCL ", what, " over ", label);
  }
  Status checkNccl(ncclResult_t r, const std::string& what) const {
    if (r == ncclSuccess || r == ncclInProgress) return Status::OK();
    return environmentError(prefix(what), " failed: ", nccl->ncclGetErrorString(r));
  }
  /// NCCL's asynchronous error, as an error naming `what`.
  Status asyncError(const std::string& what) const {
    ncclResult_t async = ncclSuccess;
    RETURN_IF_ERROR(checkNccl(nccl->ncclCommGetAsyncError(comm, &async), what));
    return checkNccl(async, what);
  }
  void abort() {
    if (comm && !aborted.exchange(true)) nccl->ncclCommAbort(comm);
  }
  /// Aborts and \returns the timeout error of `what`.
  Status timedOut(const std::string& what) {
    abort();
    return environmentError(prefix(what), " did not finish within the timeout (", timeout.count() / 1000.0,
                            " s); the communicator is aborted");
  }

  /// Orders the communication stream after the compute stream's work, calls
  /// `call` (the NCCL calls), records an event after it. \returns its ticket.
  template <typename F>
  StatusOr<std::shared_ptr<Ticket>> launch(const std::string& what, std::vector<DeviceMemory> scratch, F&& call) {
    RETURN_IF_ERROR(dev->makeCurrent());
    if (aborted) return environmentError(prefix(what), ": the communicator was aborted");
    RETURN_IF_ERROR(poll());  // an earlier operation's failure first
    RETURN_IF_ERROR(dev->order(dev->compute(), dev->comm()));
    RETURN_IF_ERROR(checkNccl(call(), what));
    auto t = std::make_shared<Ticket>();
    t->what = what;
    t->dev = dev;
    t->deadline = std::chrono::steady_clock::now() + timeout;
    t->scratch = std::move(scratch);
    RETURN_IF_ERROR(dev->check(dev->api().cuEventCreate(&t->event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", what));
    RETURN_IF_ERROR(dev->check(dev->api().cuEventRecord(t->event, dev->comm()), "cuEventRecord", what));
    std::lock_guard<std::mutex> lock(mu);
    pending.push_back(t);
    return t;
  }

  /// Blocks the host until `t` finished, polling NCCL's asynchronous error,
  /// at most until its deadline (then aborts). \returns its status.
  Status waitHost(const Ticket& t) {
    Status st = dev->waitEvent(t.event, t.deadline, [&] { return asyncError(t.what); }, prefix(t.what));
    if (!st.ok()) {
      if (std::chrono::steady_clock::now() > t.deadline) return timedOut(t.what);
      abort();
      return st;
    }
    RETURN_IF_ERROR(asyncError(t.what));  // what NCCL found while it ran
    return poll();
  }

  /// Makes the compute stream wait for `t` (no host block); an error NCCL
  /// already reported fails here, a later one at the next host wait (poll).
  Status waitDevice(const Ticket& t) {
    RETURN_IF_ERROR(dev->makeCurrent());
    RETURN_IF_ERROR(poll());
    RETURN_IF_ERROR(asyncError(t.what));
    return dev->check(dev->api().cuStreamWaitEvent(dev->compute(), t.event, 0), "cuStreamWaitEvent",
                      prefix(t.what));
  }

  /// Keeps `scratch` until the work enqueued so far on stream `s` is done
  /// (copies out of it after a device-side wait); a later poll drops it.
  Status keepUntil(CUstream s, const std::string& what, std::vector<DeviceMemory> scratch) {
    auto t = std::make_shared<Ticket>();
    t->what = what;
    t->dev = dev;
    t->scratch = std::move(scratch);
    RETURN_IF_ERROR(dev->check(dev->api().cuEventCreate(&t->event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", what));
    RETURN_IF_ERROR(dev->check(dev->api().cuEventRecord(t->event, s), "cuEventRecord", what));
    std::lock_guard<std::mutex> lock(mu);
    kept.push_back(std::move(t));
    return Status::OK();
  }

  /// StreamWatch: drops the finished operations (their scratch memory goes);
  /// the oldest unfinished one fails on NCCL's asynchronous error or once
  /// past its deadline (aborting the communicator).
  Status poll() override {
    std::lock_guard<std::mutex> lock(mu);
    std::erase_if(kept, [&](const std::shared_ptr<Ticket>& t) { return dev->api().cuEventQuery(t->event) == CUDA_SUCCESS; });
    while (!pending.empty()) {
      const std::shared_ptr<Ticket>& t = pending.front();
      CUresult r = dev->api().cuEventQuery(t->event);
      if (r == CUDA_SUCCESS) {
        Status st = asyncError(t->what);  // found while it ran
        if (!st.ok()) {
          abort();
          return st;
        }
        pending.pop_front();
        continue;
      }
      if (r != CUDA_ERROR_NOT_READY) return dev->check(r, "cuEventQuery", prefix(t->what));
      if (aborted) return environmentError(prefix(t->what), ": the communicator was aborted");
      Status st = asyncError(t->what);
      if (!st.ok()) {
        abort();
        return st;
      }
      if (std::chrono::steady_clock::now() > t->deadline) return timedOut(t->what);
      break;
    }
    return Status::OK();
  }

  std::shared_ptr<Device> dev;
  std::shared_ptr<const NcclApi> nccl;
  ncclComm_t comm;
  int rank, size;
  std::string label;
  std::chrono::milliseconds timeout;
  std::atomic<bool> aborted{false};

 private:
  std::mutex mu;
  std::deque<std::shared_ptr<Ticket>> pending;  // on the communication stream, in order
  std::vector<std::shared_ptr<Ticket>> kept;    // scratch read by the compute stream
};

/// A started NCCL operation (step 7).
class NcclWork : public CommWork {
 public:
  NcclWork(std::shared_ptr<NcclState> st, std::shared_ptr<Ticket> t, bool onHost, std::function<Status()> after)
      : st_(std::move(st)), ticket_(std::move(t)), onHost_(onHost), after_(std::move(after)) {}
  Status wait() override {
    if (waited_) return status_;
    waited_ = true;
    status_ = onHost_ ? st_->waitHost(*ticket_) : st_->waitDevice(*ticket_);
    if (status_.ok() && after_) status_ = after_();
    at_ = Clock::now();
    after_ = nullptr;
    ticket_.reset();  // the communicator keeps it until it is known done
    return status_;
  }
  Clock::time_point finishedAt() const override { return at_; }

 private:
  std::shared_ptr<NcclState> st_;
  std::shared_ptr<Ticket> ticket_;
  bool onHost_;
  std::function<Status()> after_;
  bool waited_ = false;
  Status status_;
  Clock::time_point at_;
};

using Work = std::unique_ptr<CommWork>;

class NcclComm : public Communicator {
 public:
  explicit NcclComm(std::shared_ptr<NcclState> st) : st_(std::move(st)), dev_(st_->dev), rank_(st_->rank),
                                                     size_(st_->size) {
    dev_->watch(st_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool startsInBackground() const override { return true; }

  Status allReduceSum(Tensor& t) override { return finish(start(allReduce(t, true))); }
  Status allGather(const Tensor& in, int dim, Tensor* out) override { return finish(gather(in, dim, out, true)); }
  Status reduceScatterSum(const Tensor& in, int dim, Tensor* out) override {
    return finish(scatter(in, dim, out, true));
  }
  Status allToAll(const Tensor& in, int splitDim, int concatDim, Tensor* out) override {
    return finish(exchangeChunks(in, splitDim, concatDim, out, true));
  }
  Status send(const Tensor& t, int peer) override {
    const std::string what = strCat("send of ", t.type().str(), " to rank ", peer);
    if (peer < 0 || peer >= size_) return invalidInput(prefix(what), ": invalid peer (world of ", size_, ")");
    ASSIGN_OR_RETURN(Staged s, stage(t, what));
    std::vector<DeviceMemory> scratch;
    if (s.own.owner) scratch.push_back(s.own);
    ASSIGN_OR_RETURN(auto ticket, st_->launch(what, std::move(scratch), [&] {
      return st_->nccl->ncclSend(reinterpret_cast<void*>(s.ptr), t.nbytes(), ncclUint8, peer, st_->comm,
                                 dev_->comm());
    }));
    return st_->waitHost(*ticket);
  }
  Status recv(Tensor* t, int peer) override { return finish(receive(t, peer, true)); }

  StatusOr<Work> startAllReduceSum(Tensor& t) override { return start(allReduce(t, false)); }
  StatusOr<Work> startAllGather(const Tensor& in, int dim, Tensor* out) override { return gather(in, dim, out, false); }
  StatusOr<Work> startReduceScatterSum(const Tensor& in, int dim, Tensor* out) override {
    return scatter(in, dim, out, false);
  }
  StatusOr<Work> startAllToAll(const Tensor& in, int splitDim, int concatDim, Tensor* out) override {
    return exchangeChunks(in, splitDim, concatDim, out, false);
  }
  StatusOr<Work> startRecv(Tensor* t, int peer) override { return receive(t, peer, false); }

  Status postSend(const Tensor& t, int peer) override {
    const std::string what = strCat("send of ", t.type().str(), " to rank ", peer);
    if (peer < 0 || peer >= size_) return invalidInput(prefix(what), ": invalid peer (world of ", size_, ")");
    // Step 5.
    RETURN_IF_ERROR(dev_->makeCurrent());
    ASSIGN_OR_RETURN(DeviceMemory own, dev_->allocate(t.nbytes()));
    if (dev_->isDevicePointer(t.raw())) {
      RETURN_IF_ERROR(dev_->check(dev_->api().cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(own.base), dptr(t.raw()),
                                                                t.nbytes(), dev_->compute()),
                                  "cuMemcpyDtoDAsync", what));
    } else {
      RETURN_IF_ERROR(dev_->upload(static_cast<CUdeviceptr>(own.base), t.raw(), t.nbytes(), what));
    }
    const auto base = own.base;
    ASSIGN_OR_RETURN(auto ticket, st_->launch(what, {std::move(own)}, [&] {
      return st_->nccl->ncclSend(reinterpret_cast<void*>(base), t.nbytes(), ncclUint8, peer, st_->comm, dev_->comm());
    }));
    sends_.push_back(std::move(ticket));
    return Status::OK();
  }

  Status waitSends() override {
    Status first = Status::OK();
    for (const auto& t : sends_) {
      Status st = st_->waitHost(*t);
      if (first.ok() && !st.ok()) first = st;
    }
    sends_.clear();
    return first;
  }

  void abort() override { st_->abort(); }

 private:
  struct Staged {
    CUdeviceptr ptr = 0;
    DeviceMemory own;  ///< set when the tensor is host memory
  };
  /// What a start form launched: the ticket, whether the host must wait
  /// (host operands), what follows once it is done (unpacking on the
  /// compute stream, downloading, setting the output).
  struct Started {
    std::shared_ptr<Ticket> ticket;
    bool onHost = false;
    std::function<Status()> after;
  };

  std::string prefix(const std::string& what) const { return st_->prefix(what); }

  StatusOr<Work> start(StatusOr<Started> s) {
    if (!s.ok()) return s.status();
    return Work(new NcclWork(st_, std::move(s->ticket), s->onHost, std::move(s->after)));
  }
  /// A blocking call: the work, waited for on the host.
  static Status finish(StatusOr<Work> w) {
    if (!w.ok()) return w.status();
    return (*w)->wait();
  }

  /// Step 3: `t` in device memory (itself, or a staged copy when `upload`).
  StatusOr<Staged> stage(const Tensor& t, const std::string& what, bool upload = true) {
    RETURN_IF_ERROR(dev_->makeCurrent());
    if (st_->aborted) return environmentError(prefix(what), ": the communicator was aborted");
    Staged s;
    if (dev_->isDevicePointer(t.raw())) {
      s.ptr = dptr(t.raw());
      return s;
    }
    ASSIGN_OR_RETURN(s.own, dev_->allocate(t.nbytes()));
    s.ptr = static_cast<CUdeviceptr>(s.own.base);
    if (upload) RETURN_IF_ERROR(dev_->upload(s.ptr, t.raw(), t.nbytes(), what));
    return s;
  }

  /// The end of a host wait: the compute stream's copies out of scratch
  /// memory done (the scratch may go after).
  Status settleCompute(const std::string& what) { return dev_->synchronize(dev_->compute(), prefix(what)); }

  StatusOr<Started> allReduce(Tensor& t, bool blocking) {
    const std::string what = strCat("all-reduce of ", t.type().str());
    ncclDataType_t dt;
    if (!ncclTypeOf(t.dtype(), &dt) || t.dtype() == DType::kBool)
      return unsupported(prefix(what), ": NCCL has no sum of this type");
    ASSIGN_OR_RETURN(Staged s, stage(t, what));
    Started out;
    ASSIGN_OR_RETURN(out.ticket, st_->launch(what, {}, [&] {
      return st_->nccl->ncclAllReduce(reinterpret_cast<void*>(s.ptr), reinterpret_cast<void*>(s.ptr), t.numel(), dt,
                                      ncclSum, st_->comm, dev_->comm());
    }));
    out.onHost = blocking || s.own.owner != nullptr;
    if (s.own.owner) {
      Tensor host = t;  // shares the caller's buffer
      out.after = [this, s, host, what]() mutable { return dev_->download(host.mutableData(), s.ptr, host.nbytes(), what); };
    }
    return out;
  }

  StatusOr<Work> gather(const Tensor& in, int dim, Tensor* out, bool blocking) {
    const std::string what = strCat("all-gather of ", in.type().str(), " along dim ", dim);
    if (dim < 0 || dim >= in.type().rank()) return invalidInput(prefix(what), ": dim out of range");
    ncclDataType_t dt;
    if (!ncclTypeOf(in.dtype(), &dt)) return unsupported(prefix(what), ": NCCL has no such type");
    ASSIGN_OR_RETURN(Staged src, stage(in, what));
    // Step 4: every rank's extent (the host needs them: waited for on it).
    ASSIGN_OR_RETURN(std::vector<int64_t> lens, exchange(in.type().shape[dim], what));
    int64_t total = 0, maxLen = 0;
    for (int64_t l : lens) {
      total += l;
      maxLen = std::max(maxLen, l);
    }
    TensorType ot = in.type();
    ot.shape[dim] = total;
    ASSIGN_OR_RETURN(DeviceMemory om, dev_->allocate(ot.bytes()));
    int64_t outer = 1, innerBytes = 0;
    splitAround(in.type(), dim, &outer, &innerBytes);
    const bool even = std::all_of(lens.begin(), lens.end(), [&](int64_t l) { return l == maxLen; });
    const size_t slot = static_cast<size_t>(outer * maxLen * innerBytes);
    std::vector<DeviceMemory> scratch;
    if (src.own.owner) scratch.push_back(src.own);
    Started s;
    s.onHost = blocking;
    if (even && outer == 1) {
      ASSIGN_OR_RETURN(s.ticket, st_->launch(what, std::move(scratch), [&] {
        return st_->nccl->ncclAllGather(reinterpret_cast<void*>(src.ptr), reinterpret_cast<void*>(om.base), slot,
                                        ncclUint8, st_->comm, dev_->comm());
      }));
      s.after = [out, om, ot]() {
        *out = om.view(0, ot);
        return Status::OK();
      };
      return start(std::move(s));
    }
    ASSIGN_OR_RETURN(DeviceMemory padded, dev_->allocate(slot));
    ASSIGN_OR_RETURN(DeviceMemory all, dev_->allocate(slot * size_));
    RETURN_IF_ERROR(dev_->check(dev_->api().cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(padded.base), src.ptr,
                                                              in.nbytes(), dev_->compute()),
                                "cuMemcpyDtoDAsync", what));
    scratch.push_back(padded);
    scratch.push_back(all);
    ASSIGN_OR_RETURN(s.ticket, st_->launch(what, std::move(scratch), [&] {
      return st_->nccl->ncclAllGather(reinterpret_cast<void*>(padded.base), reinterpret_cast<void*>(all.base), slot,
                                      ncclUint8, st_->comm, dev_->comm());
    }));
    // After the gather: each slot into its columns of the output (compute
    // stream; `all` lives until the communicator knows the copies are done,
    // or the host waits for them).
    s.after = [this, out, om, ot, all, lens, slot, total, outer, innerBytes, blocking, what]() -> Status {
      int64_t offset = 0;
      for (int r = 0; r < size_; ++r) {
        RETURN_IF_ERROR(copy2d(static_cast<CUdeviceptr>(all.base) + r * slot, lens[r] * innerBytes,
                               static_cast<CUdeviceptr>(om.base) + offset * innerBytes, total * innerBytes,
                               lens[r] * innerBytes, outer, what));
        offset += lens[r];
      }
      if (blocking) RETURN_IF_ERROR(settleCompute(what));
      else RETURN_IF_ERROR(keepUntilCompute(what, {all}));
      *out = om.view(0, ot);
      return Status::OK();
    };
    return start(std::move(s));
  }

  StatusOr<Work> scatter(const Tensor& in, int dim, Tensor* out, bool blocking) {
    const std::string what = strCat("reduce-scatter of ", in.type().str(), " along dim ", dim);
    if (dim < 0 || dim >= in.type().rank()) return invalidInput(prefix(what), ": dim out of range");
    ncclDataType_t dt;
    if (!ncclTypeOf(in.dtype(), &dt) || in.dtype() == DType::kBool)
      return unsupported(prefix(what), ": NCCL has no sum of this type");
    const int64_t extent = in.type().shape[dim];
    std::vector<int64_t> lens(size_);
    if (out->defined()) {
      ASSIGN_OR_RETURN(lens, exchange(out->type().shape[dim], what));
    } else {
      for (int r = 0; r < size_; ++r) lens[r] = extent / size_ + (r < extent % size_ ? 1 : 0);
    }
    int64_t sum = 0, offset = 0;
    for (int r = 0; r < size_; ++r) {
      if (r < rank_) offset += lens[r];
      sum += lens[r];
    }
    if (sum != extent) return invalidInput(prefix(what), ": slices of ", sum, " rows do not cover ", extent);
    TensorType ot = in.type();
    ot.shape[dim] = lens[rank_];
    if (out->defined() && out->type() != ot)
      return invalidInput(prefix(what), ": output ", out->type().str(), ", expected ", ot.str());
    ASSIGN_OR_RETURN(Staged src, stage(in, what));
    // The output, or device memory for it when it is absent or on the host.
    Tensor hostOut;
    CUdeviceptr dst = 0;
    DeviceMemory om;
    if (out->defined() && dev_->isDevicePointer(out->raw())) {
      dst = dptr(out->raw());
    } else {
      if (out->defined()) hostOut = *out;
      ASSIGN_OR_RETURN(om, dev_->allocate(ot.bytes()));
      dst = static_cast<CUdeviceptr>(om.base);
    }
    int64_t outer = 1, innerBytes = 0;
    splitAround(in.type(), dim, &outer, &innerBytes);
    const bool even = std::all_of(lens.begin(), lens.end(), [&](int64_t l) { return l == lens[0]; });
    std::vector<DeviceMemory> scratch;
    if (src.own.owner) scratch.push_back(src.own);
    Started s;
    s.onHost = blocking || hostOut.defined() || src.own.owner;
    DeviceMemory full;
    if (even && outer == 1) {
      ASSIGN_OR_RETURN(s.ticket, st_->launch(what, std::move(scratch), [&] {
        return st_->nccl->ncclReduceScatter(reinterpret_cast<void*>(src.ptr), reinterpret_cast<void*>(dst),
                                            static_cast<size_t>(ot.numel()), dt, ncclSum, st_->comm, dev_->comm());
      }));
    } else {
      ASSIGN_OR_RETURN(full, dev_->allocate(in.nbytes()));
      scratch.push_back(full);
      ASSIGN_OR_RETURN(s.ticket, st_->launch(what, std::move(scratch), [&] {
        return st_->nccl->ncclAllReduce(reinterpret_cast<void*>(src.ptr), reinterpret_cast<void*>(full.base),
                                        in.numel(), dt, ncclSum, st_->comm, dev_->comm());
      }));
    }
    const bool onHost = s.onHost;
    s.after = [this, out, om, ot, full, dst, offset, extent, lens, outer, innerBytes, hostOut, onHost,
               what]() mutable -> Status {
      if (full.owner) {  // this rank's slice of the sum, on the compute stream
        RETURN_IF_ERROR(copy2d(static_cast<CUdeviceptr>(full.base) + offset * innerBytes, extent * innerBytes, dst,
                               lens[rank_] * innerBytes, lens[rank_] * innerBytes, outer, what));
        if (onHost) RETURN_IF_ERROR(settleCompute(what));
        else RETURN_IF_ERROR(keepUntilCompute(what, {full}));
      }
      if (hostOut.defined()) return dev_->download(hostOut.mutableData(), dst, ot.bytes(), what);
      if (om.owner) *out = om.view(0, ot);
      return Status::OK();
    };
    return start(std::move(s));
  }

  StatusOr<Work> exchangeChunks(const Tensor& in, int splitDim, int concatDim, Tensor* out, bool blocking) {
    const std::string what = strCat("all-to-all of ", in.type().str(), " from dim ", concatDim, " to dim ", splitDim);
    const int rank = in.type().rank();
    if (splitDim < 0 || splitDim >= rank || concatDim < 0 || concatDim >= rank || splitDim == concatDim)
      return invalidInput(prefix(what), ": dims out of range");
    auto chunk = [&](int64_t extent, int r) { return extent / size_ + (r < extent % size_ ? 1 : 0); };
    std::vector<int64_t> lens(size_);
    if (out->defined()) {
      for (int r = 0; r < size_; ++r) lens[r] = chunk(out->type().shape[concatDim], r);
    } else {
      ASSIGN_OR_RETURN(lens, exchange(in.type().shape[concatDim], what));
    }
    if (lens[rank_] != in.type().shape[concatDim])
      return invalidInput(prefix(what), ": the output gives this rank ", lens[rank_], " rows of dim ", concatDim);
    const int64_t extent = in.type().shape[splitDim];
    TensorType ot = in.type();
    ot.shape[splitDim] = chunk(extent, rank_);
    ot.shape[concatDim] = 0;
    for (int64_t l : lens) ot.shape[concatDim] += l;
    if (out->defined() && out->type() != ot)
      return invalidInput(prefix(what), ": output ", out->type().str(), ", expected ", ot.str());
    ASSIGN_OR_RETURN(Staged src, stage(in, what));
    // The output, or device memory for it when it lives on the host.
    DeviceMemory own;
    CUdeviceptr dst = 0;
    if (out->defined() && dev_->isDevicePointer(out->raw())) {
      dst = dptr(out->raw());
    } else {
      ASSIGN_OR_RETURN(own, dev_->allocate(ot.bytes()));
      dst = static_cast<CUdeviceptr>(own.base);
    }
    // Step 6: pack chunk r of splitDim for rank r.
    int64_t outerS = 1, rowS = 0, outerC = 1, rowC = 0;
    splitAround(in.type(), splitDim, &outerS, &rowS);
    splitAround(ot, concatDim, &outerC, &rowC);
    std::vector<int64_t> sendOff(size_ + 1, 0), recvOff(size_ + 1, 0);
    for (int r = 0; r < size_; ++r) {
      sendOff[r + 1] = sendOff[r] + outerS * chunk(extent, r) * rowS;
      recvOff[r + 1] = recvOff[r] + outerC * lens[r] * rowC;
    }
    ASSIGN_OR_RETURN(DeviceMemory sendBuf, dev_->allocate(static_cast<uint64_t>(sendOff[size_])));
    ASSIGN_OR_RETURN(DeviceMemory recvBuf, dev_->allocate(static_cast<uint64_t>(recvOff[size_])));
    const auto sendBase = static_cast<CUdeviceptr>(sendBuf.base), recvBase = static_cast<CUdeviceptr>(recvBuf.base);
    int64_t row = 0;
    for (int r = 0; r < size_; ++r) {
      const int64_t len = chunk(extent, r);
      RETURN_IF_ERROR(copy2d(src.ptr + row * rowS, extent * rowS, sendBase + sendOff[r], len * rowS, len * rowS,
                             outerS, what));
      row += len;
    }
    std::vector<DeviceMemory> scratch{sendBuf, recvBuf};
    if (src.own.owner) scratch.push_back(src.own);
    Started s;
    const bool hostOut = own.owner && out->defined();
    s.onHost = blocking || hostOut || src.own.owner;
    ASSIGN_OR_RETURN(s.ticket, st_->launch(what, std::move(scratch), [&] {
      ncclResult_t first = st_->nccl->ncclGroupStart();
      for (int r = 0; r < size_ && first == ncclSuccess; ++r) {
        // Empty pieces are skipped on both sides: their sizes agree.
        if (sendOff[r + 1] > sendOff[r])
          first = st_->nccl->ncclSend(reinterpret_cast<void*>(sendBase + sendOff[r]),
                                      static_cast<size_t>(sendOff[r + 1] - sendOff[r]), ncclUint8, r, st_->comm,
                                      dev_->comm());
        if (first == ncclSuccess && recvOff[r + 1] > recvOff[r])
          first = st_->nccl->ncclRecv(reinterpret_cast<void*>(recvBase + recvOff[r]),
                                      static_cast<size_t>(recvOff[r + 1] - recvOff[r]), ncclUint8, r, st_->comm,
                                      dev_->comm());
      }
      ncclResult_t end = st_->nccl->ncclGroupEnd();
      return first != ncclSuccess ? first : end;
    }));
    const bool onHost = s.onHost;
    s.after = [this, out, own, ot, dst, recvBuf, recvOff, lens, rowC, outerC, concatDim, hostOut, onHost,
               what]() -> Status {
      const auto base = static_cast<CUdeviceptr>(recvBuf.base);
      int64_t at = 0;
      for (int r = 0; r < size_; ++r) {
        RETURN_IF_ERROR(copy2d(base + recvOff[r], lens[r] * rowC, dst + at * rowC, ot.shape[concatDim] * rowC,
                               lens[r] * rowC, outerC, what));
        at += lens[r];
      }
      if (onHost) RETURN_IF_ERROR(settleCompute(what));
      else RETURN_IF_ERROR(keepUntilCompute(what, {recvBuf}));
      if (!own.owner) return Status::OK();
      if (hostOut) return dev_->download(out->mutableData(), dst, ot.bytes(), what);
      *out = own.view(0, ot);
      return Status::OK();
    };
    return start(std::move(s));
  }

  StatusOr<Work> receive(Tensor* t, int peer, bool blocking) {
    const std::string what = strCat("recv of ", t->type().str(), " from rank ", peer);
    if (peer < 0 || peer >= size_) return invalidInput(prefix(what), ": invalid peer (world of ", size_, ")");
    if (!t->defined()) return internalError(prefix(what), ": receive buffer is not allocated");
    ASSIGN_OR_RETURN(Staged s, stage(*t, what, /*upload=*/false));
    Started out;
    std::vector<DeviceMemory> scratch;
    if (s.own.owner) scratch.push_back(s.own);
    ASSIGN_OR_RETURN(out.ticket, st_->launch(what, std::move(scratch), [&] {
      return st_->nccl->ncclRecv(reinterpret_cast<void*>(s.ptr), t->nbytes(), ncclUint8, peer, st_->comm,
                                 dev_->comm());
    }));
    out.onHost = blocking || s.own.owner != nullptr;
    if (s.own.owner) {
      Tensor host = *t;
      out.after = [this, s, host, what]() mutable { return dev_->download(host.mutableData(), s.ptr, host.nbytes(), what); };
    }
    return start(std::move(out));
  }

  /// Keeps `scratch` until the compute stream's work enqueued so far is done
  /// (the copies out of it after a device-side wait): a ticket on the
  /// compute stream's progress, dropped by a later poll.
  Status keepUntilCompute(const std::string& what, std::vector<DeviceMemory> scratch) {
    return st_->keepUntil(dev_->compute(), what, std::move(scratch));
  }

  /// Exchanges one int64 per rank (the extents of an uneven all-gather,
  /// reduce-scatter or all-to-all), waited for on the host.
  /// \returns them in group order.
  StatusOr<std::vector<int64_t>> exchange(int64_t mine, const std::string& what) {
    Tensor host = Tensor::fromVector<int64_t>(DType::kI64, {1}, {mine});
    ASSIGN_OR_RETURN(DeviceMemory one, dev_->allocate(8));
    ASSIGN_OR_RETURN(DeviceMemory all, dev_->allocate(8 * static_cast<uint64_t>(size_)));
    RETURN_IF_ERROR(dev_->upload(static_cast<CUdeviceptr>(one.base), host.raw(), 8, what));
    const std::string sizes = strCat("exchange of extents for the ", what);
    ASSIGN_OR_RETURN(auto ticket, st_->launch(sizes, {one, all}, [&] {
      return st_->nccl->ncclAllGather(reinterpret_cast<void*>(one.base), reinterpret_cast<void*>(all.base), 1,
                                      ncclInt64, st_->comm, dev_->comm());
    }));
    RETURN_IF_ERROR(st_->waitHost(*ticket));
    std::vector<int64_t> out(size_);
    RETURN_IF_ERROR(dev_->download(out.data(), static_cast<CUdeviceptr>(all.base), 8 * out.size(), sizes));
    return out;
  }

  /// `height` rows of `width` bytes from `src` (row pitch `srcPitch`) to
  /// `dst` (pitch `dstPitch`), on the compute stream.
  Status copy2d(CUdeviceptr src, int64_t srcPitch, CUdeviceptr dst, int64_t dstPitch, int64_t width, int64_t height,
                const std::string& what) {
    if (width == 0 || height == 0) return Status::OK();
    CUDA_MEMCPY2D c;
    std::memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.srcPitch = static_cast<size_t>(srcPitch);
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.dstPitch = static_cast<size_t>(dstPitch);
    c.WidthInBytes = static_cast<size_t>(width);
    c.Height = static_cast<size_t>(height);
    return dev_->check(dev_->api().cuMemcpy2DAsync(&c, dev_->compute()), "cuMemcpy2DAsync", what);
  }

  std::shared_ptr<NcclState> st_;
  std::shared_ptr<Device> dev_;
  int rank_, size_;
  std::vector<std::shared_ptr<Ticket>> sends_;
};

class NcclFactory : public CommunicatorFactory {
 public:
  NcclFactory(std::shared_ptr<Device> dev, std::shared_ptr<GlooStore> store, const GlooOptions& o)
      : dev_(std::move(dev)), store_(std::move(store)), options_(o) {}

  StatusOr<RankComms> connect(int rank, int worldSize, const std::vector<CommGroup>& groups, bool withWorld) override {
    auto api = ncclApi();
    if (!api.ok()) return api.status().withContext(strCat("rank ", rank));
    RETURN_IF_ERROR(dev_->makeCurrent());
    const bool perProcess = std::getenv("LOCAL_RANK") || std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!perProcess && worldSize > dev_->devices())
      return environmentError("rank ", rank, ": ", worldSize, " ranks as threads of one process need one CUDA device "
                              "each (NCCL), this machine has ", dev_->devices());
    RankComms out;
    // Step 1.
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::vector<int>& ranks = groups[g].ranks;
      auto it = std::find(ranks.begin(), ranks.end(), rank);
      out.groups.emplace_back();
      if (it == ranks.end()) continue;
      const int pos = static_cast<int>(it - ranks.begin());
      ASSIGN_OR_RETURN(out.groups.back(), join(*api, strCat(g), pos, static_cast<int>(ranks.size()),
                                               strCat("group ", g, " (", groups[g].axis, ")")));
    }
    if (withWorld) {
      ASSIGN_OR_RETURN(out.world, join(*api, "world", rank, worldSize, "world"));
    }
    return out;
  }

 private:
  StatusOr<std::unique_ptr<Communicator>> join(std::shared_ptr<const NcclApi> api, const std::string& key, int pos,
                                               int size, const std::string& label) {
    const std::string ctx = strCat("rank ", dev_->rank(), ": NCCL communicator of ", label);
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    try {
      if (pos == 0) {
        ncclResult_t r = api->ncclGetUniqueId(&id);
        if (r != ncclSuccess) return environmentError(ctx, ": ncclGetUniqueId failed: ", api->ncclGetErrorString(r));
        const char* b = reinterpret_cast<const char*>(&id);
        store_->store().set(ncclIdKey(key), std::vector<char>(b, b + sizeof id));
      } else {
        store_->store().wait({ncclIdKey(key)}, options_.timeout);
        std::vector<char> got = store_->store().get(ncclIdKey(key));
        if (got.size() != sizeof id)
          return environmentError(ctx, ": the unique id in the store has ", got.size(), " bytes, not ", sizeof id);
        std::memcpy(&id, got.data(), sizeof id);
      }
    } catch (const std::exception& e) {
      return environmentError(ctx, ": rendezvous failed: ", e.what());
    }
    ncclComm_t comm = nullptr;
    ncclResult_t r = api->ncclCommInitRank(&comm, size, id, pos);
    if (r != ncclSuccess) return environmentError(ctx, ": ncclCommInitRank failed: ", api->ncclGetErrorString(r));
    return std::unique_ptr<Communicator>(
        new NcclComm(std::make_shared<NcclState>(dev_, std::move(api), comm, pos, size, label, options_.timeout)));
  }

  std::shared_ptr<Device> dev_;
  std::shared_ptr<GlooStore> store_;
  GlooOptions options_;
};

}  // namespace

std::unique_ptr<CommunicatorFactory> ncclCommunicatorFactory(std::shared_ptr<Device> dev,
                                                             std::shared_ptr<GlooStore> store,
                                                             const GlooOptions& options) {
  return std::make_unique<NcclFactory>(std::move(dev), std::move(store), options);
}

}  // namespace pcc::cuda
