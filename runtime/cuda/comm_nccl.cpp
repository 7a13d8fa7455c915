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
//     work (the operands are ready), the NCCL call is enqueued on it, and the
//     host polls the stream and ncclCommGetAsyncError until it is done or
//     the timeout passes, then aborts the communicator and fails naming the
//     rank and the collective. The caller's later kernels are enqueued after
//     the call returns, so they see its result.
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
#include "runtime/cuda/comm_nccl.h"

#include <gloo/rendezvous/store.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>

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

class NcclComm : public Communicator {
 public:
  NcclComm(std::shared_ptr<Device> dev, std::shared_ptr<const NcclApi> nccl, ncclComm_t comm, int rank, int size,
           std::string label, std::chrono::milliseconds timeout)
      : dev_(std::move(dev)), nccl_(std::move(nccl)), comm_(comm), rank_(rank), size_(size),
        label_(std::move(label)), timeout_(timeout) {}
  ~NcclComm() override {
    if (comm_ && !aborted_ && dev_->makeCurrent().ok()) nccl_->ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status allReduceSum(Tensor& t) override {
    const std::string what = strCat("all-reduce of ", t.type().str());
    ncclDataType_t dt;
    if (!ncclTypeOf(t.dtype(), &dt) || t.dtype() == DType::kBool)
      return unsupported(prefix(what), ": NCCL has no sum of this type");
    ASSIGN_OR_RETURN(Staged s, stage(t, what));
    RETURN_IF_ERROR(enqueue(what, [&] {
      return nccl_->ncclAllReduce(reinterpret_cast<void*>(s.ptr), reinterpret_cast<void*>(s.ptr), t.numel(), dt,
                                  ncclSum, comm_, dev_->comm());
    }));
    return unstage(s, t, what);
  }

  Status allGather(const Tensor& in, int dim, Tensor* out) override {
    const std::string what = strCat("all-gather of ", in.type().str(), " along dim ", dim);
    if (dim < 0 || dim >= in.type().rank()) return invalidInput(prefix(what), ": dim out of range");
    ncclDataType_t dt;
    if (!ncclTypeOf(in.dtype(), &dt)) return unsupported(prefix(what), ": NCCL has no such type");
    ASSIGN_OR_RETURN(Staged src, stage(in, what));
    // Step 4: every rank's extent.
    ASSIGN_OR_RETURN(std::vector<int64_t> lens, exchange(in.type().shape[dim], what));
    int64_t total = 0, maxLen = 0;
    for (int64_t l : lens) {
      total += l;
      maxLen = std::max(maxLen, l);
    }
    TensorType ot = in.type();
    ot.shape[dim] = total;
    ASSIGN_OR_RETURN(DeviceMemory om, dev_->allocate(ot.bytes()));
    *out = om.view(0, ot);
    int64_t outer = 1, innerBytes = 0;
    splitAround(in.type(), dim, &outer, &innerBytes);
    const bool even = std::all_of(lens.begin(), lens.end(), [&](int64_t l) { return l == maxLen; });
    const size_t slot = static_cast<size_t>(outer * maxLen * innerBytes);
    if (even && outer == 1) {
      return enqueue(what, [&] {
        return nccl_->ncclAllGather(reinterpret_cast<void*>(src.ptr), reinterpret_cast<void*>(om.base), slot, ncclUint8,
                                    comm_, dev_->comm());
      });
    }
    ASSIGN_OR_RETURN(DeviceMemory padded, dev_->allocate(slot));
    ASSIGN_OR_RETURN(DeviceMemory all, dev_->allocate(slot * size_));
    RETURN_IF_ERROR(dev_->check(dev_->api().cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(padded.base), src.ptr,
                                                              in.nbytes(), dev_->compute()),
                                "cuMemcpyDtoDAsync", what));
    RETURN_IF_ERROR(enqueue(what, [&] {
      return nccl_->ncclAllGather(reinterpret_cast<void*>(padded.base), reinterpret_cast<void*>(all.base), slot,
                                  ncclUint8, comm_, dev_->comm());
    }));
    int64_t offset = 0;
    for (int r = 0; r < size_; ++r) {
      RETURN_IF_ERROR(copy2d(static_cast<CUdeviceptr>(all.base) + r * slot, lens[r] * innerBytes,
                             static_cast<CUdeviceptr>(om.base) + offset * innerBytes, total * innerBytes,
                             lens[r] * innerBytes, outer, what));
      offset += lens[r];
    }
    // The scratch buffers go when this returns: the copies out of them first.
    return dev_->check(dev_->api().cuStreamSynchronize(dev_->compute()), "cuStreamSynchronize", what);
  }

  Status reduceScatterSum(const Tensor& in, int dim, Tensor* out) override {
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
    if (!out->defined()) {
      ASSIGN_OR_RETURN(DeviceMemory om, dev_->allocate(ot.bytes()));
      *out = om.view(0, ot);
    }
    ASSIGN_OR_RETURN(Staged src, stage(in, what));
    int64_t outer = 1, innerBytes = 0;
    splitAround(in.type(), dim, &outer, &innerBytes);
    const bool even = std::all_of(lens.begin(), lens.end(), [&](int64_t l) { return l == lens[0]; });
    if (even && outer == 1 && dev_->isDevicePointer(out->raw())) {
      return enqueue(what, [&] {
        return nccl_->ncclReduceScatter(reinterpret_cast<void*>(src.ptr), const_cast<void*>(out->raw()),
                                        static_cast<size_t>(ot.numel()), dt, ncclSum, comm_, dev_->comm());
      });
    }
    ASSIGN_OR_RETURN(DeviceMemory full, dev_->allocate(in.nbytes()));
    RETURN_IF_ERROR(enqueue(what, [&] {
      return nccl_->ncclAllReduce(reinterpret_cast<void*>(src.ptr), reinterpret_cast<void*>(full.base), in.numel(), dt,
                                  ncclSum, comm_, dev_->comm());
    }));
    RETURN_IF_ERROR(copy2d(static_cast<CUdeviceptr>(full.base) + offset * innerBytes, extent * innerBytes,
                           dptr(out->raw()), lens[rank_] * innerBytes, lens[rank_] * innerBytes, outer, what));
    return dev_->check(dev_->api().cuStreamSynchronize(dev_->compute()), "cuStreamSynchronize", what);
  }

  Status allToAll(const Tensor& in, int splitDim, int concatDim, Tensor* out) override {
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
    RETURN_IF_ERROR(enqueue(what, [&] {
      ncclResult_t first = nccl_->ncclGroupStart();
      for (int r = 0; r < size_ && first == ncclSuccess; ++r) {
        // Empty pieces are skipped on both sides: their sizes agree.
        if (sendOff[r + 1] > sendOff[r])
          first = nccl_->ncclSend(reinterpret_cast<void*>(sendBase + sendOff[r]),
                                  static_cast<size_t>(sendOff[r + 1] - sendOff[r]), ncclUint8, r, comm_, dev_->comm());
        if (first == ncclSuccess && recvOff[r + 1] > recvOff[r])
          first = nccl_->ncclRecv(reinterpret_cast<void*>(recvBase + recvOff[r]),
                                  static_cast<size_t>(recvOff[r + 1] - recvOff[r]), ncclUint8, r, comm_, dev_->comm());
      }
      ncclResult_t end = nccl_->ncclGroupEnd();
      return first != ncclSuccess ? first : end;
    }));
    int64_t at = 0;
    for (int r = 0; r < size_; ++r) {
      RETURN_IF_ERROR(copy2d(recvBase + recvOff[r], lens[r] * rowC, dst + at * rowC, ot.shape[concatDim] * rowC,
                             lens[r] * rowC, outerC, what));
      at += lens[r];
    }
    RETURN_IF_ERROR(dev_->check(dev_->api().cuStreamSynchronize(dev_->compute()), "cuStreamSynchronize", what));
    if (!own.owner) return Status::OK();
    if (out->defined()) return dev_->download(out->mutableData(), dst, ot.bytes(), what);
    *out = own.view(0, ot);
    return Status::OK();
  }

  Status send(const Tensor& t, int peer) override {
    const std::string what = strCat("send of ", t.type().str(), " to rank ", peer);
    if (peer < 0 || peer >= size_) return invalidInput(prefix(what), ": invalid peer (world of ", size_, ")");
    ASSIGN_OR_RETURN(Staged s, stage(t, what));
    return enqueue(what, [&] {
      return nccl_->ncclSend(reinterpret_cast<void*>(s.ptr), t.nbytes(), ncclUint8, peer, comm_, dev_->comm());
    });
  }

  Status recv(Tensor* t, int peer) override {
    const std::string what = strCat("recv of ", t->type().str(), " from rank ", peer);
    if (peer < 0 || peer >= size_) return invalidInput(prefix(what), ": invalid peer (world of ", size_, ")");
    if (!t->defined()) return internalError(prefix(what), ": receive buffer is not allocated");
    ASSIGN_OR_RETURN(Staged s, stage(*t, what, /*upload=*/false));
    RETURN_IF_ERROR(enqueue(what, [&] {
      return nccl_->ncclRecv(reinterpret_cast<void*>(s.ptr), t->nbytes(), ncclUint8, peer, comm_, dev_->comm());
    }));
    return unstage(s, *t, what);
  }

  Status postSend(const Tensor& t, int peer) override {
    const std::string what = strCat("send of ", t.type().str(), " to rank ", peer);
    if (peer < 0 || peer >= size_) return invalidInput(prefix(what), ": invalid peer (world of ", size_, ")");
    // Step 5.
    ASSIGN_OR_RETURN(DeviceMemory own, dev_->allocate(t.nbytes()));
    if (dev_->isDevicePointer(t.raw())) {
      RETURN_IF_ERROR(dev_->makeCurrent());
      RETURN_IF_ERROR(dev_->check(dev_->api().cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(own.base), dptr(t.raw()),
                                                                t.nbytes(), dev_->compute()),
                                  "cuMemcpyDtoDAsync", what));
    } else {
      RETURN_IF_ERROR(dev_->upload(static_cast<CUdeviceptr>(own.base), t.raw(), t.nbytes(), what));
    }
    RETURN_IF_ERROR(dev_->order(dev_->compute(), dev_->comm()));
    RETURN_IF_ERROR(checkNccl(nccl_->ncclSend(reinterpret_cast<void*>(own.base), t.nbytes(), ncclUint8, peer, comm_,
                                              dev_->comm()),
                              what));
    pending_.push_back({what, std::move(own)});
    return Status::OK();
  }

  Status waitSends() override {
    if (pending_.empty()) return Status::OK();
    const std::string what = strCat(pending_.size(), " posted send(s), the last ", pending_.back().what);
    Status st = wait(what);
    pending_.clear();
    return st;
  }

  void abort() override {
    if (comm_ && !aborted_) {
      aborted_ = true;
      nccl_->ncclCommAbort(comm_);
    }
  }

 private:
  struct Staged {
    CUdeviceptr ptr = 0;
    DeviceMemory own;  ///< set when the tensor is host memory
  };
  struct Pending {
    std::string what;
    DeviceMemory buffer;
  };

  std::string prefix(const std::string& what) const { return strCat("rank ", dev_->rank(), ": NCCL ", what, " over ", label_); }

  Status checkNccl(ncclResult_t r, const std::string& what) {
    if (r == ncclSuccess || r == ncclInProgress) return Status::OK();
    return environmentError(prefix(what), " failed: ", nccl_->ncclGetErrorString(r));
  }

  /// Step 3: `t` in device memory (itself, or a staged copy when `upload`).
  StatusOr<Staged> stage(const Tensor& t, const std::string& what, bool upload = true) {
    RETURN_IF_ERROR(dev_->makeCurrent());
    if (aborted_) return environmentError(prefix(what), ": the communicator was aborted");
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

  /// Copies a staged result back into host tensor `t`.
  Status unstage(const Staged& s, Tensor& t, const std::string& what) {
    if (!s.own.owner) return Status::OK();
    return dev_->download(t.mutableData(), s.ptr, t.nbytes(), what);
  }

  /// Step 2: orders, enqueues `call` on the communication stream, waits.
  template <typename F>
  Status enqueue(const std::string& what, F&& call) {
    RETURN_IF_ERROR(dev_->makeCurrent());
    RETURN_IF_ERROR(dev_->order(dev_->compute(), dev_->comm()));
    RETURN_IF_ERROR(checkNccl(call(), what));
    return wait(what);
  }

  Status wait(const std::string& what) {
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    Status st = dev_->waitUntil(
        dev_->comm(), deadline,
        [&]() -> Status {
          ncclResult_t async = ncclSuccess;
          RETURN_IF_ERROR(checkNccl(nccl_->ncclCommGetAsyncError(comm_, &async), what));
          return checkNccl(async, what);
        },
        prefix(what));
    if (!st.ok()) {
      abort();
      return Status(st.code(), strCat(st.message(), " (timeout ", timeout_.count() / 1000.0, " s)"));
    }
    return st;
  }

  /// Exchanges one int64 per rank (the extents of an uneven all-gather,
  /// reduce-scatter or all-to-all). \returns them in group order.
  StatusOr<std::vector<int64_t>> exchange(int64_t mine, const std::string& what) {
    Tensor host = Tensor::fromVector<int64_t>(DType::kI64, {1}, {mine});
    ASSIGN_OR_RETURN(DeviceMemory one, dev_->allocate(8));
    ASSIGN_OR_RETURN(DeviceMemory all, dev_->allocate(8 * static_cast<uint64_t>(size_)));
    RETURN_IF_ERROR(dev_->upload(static_cast<CUdeviceptr>(one.base), host.raw(), 8, what));
    RETURN_IF_ERROR(enqueue(what, [&] {
      return nccl_->ncclAllGather(reinterpret_cast<void*>(one.base), reinterpret_cast<void*>(all.base), 1, ncclInt64,
                                  comm_, dev_->comm());
    }));
    std::vector<int64_t> out(size_);
    RETURN_IF_ERROR(dev_->download(out.data(), static_cast<CUdeviceptr>(all.base), 8 * out.size(), what));
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

  std::shared_ptr<Device> dev_;
  std::shared_ptr<const NcclApi> nccl_;
  ncclComm_t comm_;
  int rank_, size_;
  std::string label_;
  std::chrono::milliseconds timeout_;
  bool aborted_ = false;
  std::deque<Pending> pending_;
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
    return std::unique_ptr<Communicator>(new NcclComm(dev_, std::move(api), comm, pos, size, label, options_.timeout));
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
