// The gloo communicator (comm_gloo.h).
//
// Started operations (Communicator::start*):
//  1. A start call checks what it can on the calling thread, keeps handles on
//     its operands (the tensors' memory stays alive) and queues a job; the
//     first one starts the communicator's communication thread.
//  2. The job carries the calling thread's memory account, so that what the
//     operation allocates (an all-gather's result and staging) is charged to
//     the rank as when the call blocks.
//  3. The thread runs the jobs one at a time in the order they were queued,
//     on the communicator's gloo context (a context is not safe for
//     concurrent operations; one thread in order is), and marks each work
//     done with its status and, for a gather or scatter, its result tensor,
//     which wait() hands to the caller. Each gloo call keeps its timeout, so
//     a wait ends within the timeout of the operation that hangs; after a
//     failure the queued jobs fail at once.
//  4. Once the thread exists, the blocking calls go through it too (start,
//     then wait), so every operation of the communicator keeps the order in
//     which it was called. postSend() stays on the calling thread: it only
//     posts a buffer, which gloo's pairs take from any thread.
//  5. abort() closes the connections and fails the queued jobs at once;
//     nothing starts after. The gloo call in flight ends as a blocking call
//     would: at its timeout or when a peer closes (a rank's own close does
//     not wake it).
#include "runtime/comm_gloo.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <tuple>
#include <mutex>
#include <numeric>
#include <thread>

#include "runtime/support/memory_account.h"
#include "runtime/tcp_store.h"

namespace pcc {

namespace {

using Ms = std::chrono::milliseconds;

/// Elementwise c = a + b for the gloo allreduce, computed in T (or in float
/// for the 16-bit float types).
template <typename T>
void sumInto(void* c, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(c);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = static_cast<T>(x[i] + y[i]);
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void sum16(void* c, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(c);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = FromF(ToF(x[i]) + ToF(y[i]));
}

using SumFn = void (*)(void*, const void*, const void*, size_t);

/// \returns the sum function for `t`, or nullptr when sums of it are unsupported.
SumFn sumFor(DType t) {
  switch (t) {
    case DType::kF32: return &sumInto<float>;
    case DType::kF64: return &sumInto<double>;
    case DType::kI32: return &sumInto<int32_t>;
    case DType::kI64: return &sumInto<int64_t>;
    case DType::kI8: return &sumInto<int8_t>;
    case DType::kU8: return &sumInto<uint8_t>;
    case DType::kI16: return &sumInto<int16_t>;
    case DType::kU16: return &sumInto<uint16_t>;
    case DType::kU32: return &sumInto<uint32_t>;
    case DType::kU64: return &sumInto<uint64_t>;
    case DType::kF16: return &sum16<&halfToFloat, &floatToHalf>;
    case DType::kBF16: return &sum16<&bf16ToFloat, &floatToBf16>;
    default: return nullptr;
  }
}

/// A tensor seen as [outer, extent(dim), inner] rows of bytes.
struct Split3 {
  int64_t outer = 1, extent = 0, inner = 1;
  size_t elem = 0;
  size_t rowBytes() const { return static_cast<size_t>(inner) * elem; }
};

Split3 split3(const Dims& shape, int dim, DType dt) {
  Split3 s;
  s.elem = dtypeSize(dt);
  for (int i = 0; i < dim; ++i) s.outer *= shape[i];
  s.extent = shape[dim];
  for (size_t i = dim + 1; i < shape.size(); ++i) s.inner *= shape[i];
  return s;
}

/// Copies [outer, ext, inner] at `src` to rows [off, off+ext) of the
/// [outer, total, inner] tensor at `dst`.
void copyIntoSlab(const Split3& s, const uint8_t* src, int64_t ext, uint8_t* dst, int64_t total,
                  int64_t off) {
  size_t row = s.rowBytes();
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(dst + (o * total + off) * row, src + o * ext * row, ext * row);
}

/// \returns the extent of chunk `r` of `extent` split `n` ways (the first
/// extent % n chunks one larger), as the compiler splits dimensions.
int64_t chunkOf(int64_t extent, int n, int r) { return extent / n + (r < extent % n ? 1 : 0); }

/// A started operation of a GlooCommunicator: done once its communication
/// thread ran it (step 3 of the algorithm at the top).
class GlooWork final : public CommWork {
 public:
  explicit GlooWork(Tensor* out) : out_(out) {}
  Status wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    if (out_ && status_.ok()) *out_ = std::move(result_);
    out_ = nullptr;
    return status_;
  }
  Clock::time_point finishedAt() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return at_;
  }
  /// The operation ended with `s` (the communication thread's side, or
  /// abort()'s); only the first call counts.
  void finish(Status s, Tensor result) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return;
      status_ = std::move(s);
      result_ = std::move(result);
      at_ = Clock::now();
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
  Tensor result_;
  Tensor* out_;  // where wait() delivers result_ (all-gather, reduce-scatter)
  Clock::time_point at_;
};

/// The handle start*() returns: the work is shared with the thread running it.
class GlooWorkHandle final : public CommWork {
 public:
  explicit GlooWorkHandle(std::shared_ptr<GlooWork> w) : w_(std::move(w)) {}
  Status wait() override { return w_->wait(); }
  Clock::time_point finishedAt() const override { return w_->finishedAt(); }

 private:
  std::shared_ptr<GlooWork> w_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> ctx, int globalRank, int groupRank,
                   int groupSize, std::string label, Ms timeout)
      : ctx_(std::move(ctx)), globalRank_(globalRank), rank_(groupRank), size_(groupSize),
        label_(std::move(label)), timeout_(timeout), sendSeq_(groupSize, 0), recvSeq_(groupSize, 0) {}

  ~GlooCommunicator() override {
    if (!worker_) return;
    bool left;
    {
      std::lock_guard<std::mutex> lock(queueMu_);
      stopping_ = true;
      left = running_ || !queue_.empty();
    }
    // Nobody waits for what is left: fail it now. A gloo call already
    // running ends at its own timeout (or when a peer closes), as a blocking
    // call would.
    if (left) abort();
    queueCv_.notify_all();
    worker_->join();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status allReduceSum(Tensor& t) override {
    if (!worker_) return doAllReduceSum(t);
    ASSIGN_OR_RETURN(std::unique_ptr<CommWork> w, startAllReduceSum(t));
    return w->wait();
  }
  Status allGather(const Tensor& in, int dim, Tensor* out) override {
    if (!worker_) return doAllGather(in, dim, out);
    ASSIGN_OR_RETURN(std::unique_ptr<CommWork> w, startAllGather(in, dim, out));
    return w->wait();
  }
  Status reduceScatterSum(const Tensor& in, int dim, Tensor* out) override {
    if (!worker_) return doReduceScatterSum(in, dim, out);
    ASSIGN_OR_RETURN(std::unique_ptr<CommWork> w, startReduceScatterSum(in, dim, out));
    return w->wait();
  }
  Status allToAll(const Tensor& in, int splitDim, int concatDim, Tensor* out) override {
    if (!worker_) return doAllToAll(in, splitDim, concatDim, out);
    ASSIGN_OR_RETURN(std::unique_ptr<CommWork> w, startAllToAll(in, splitDim, concatDim, out));
    return w->wait();
  }
  Status recv(Tensor* t, int peer) override {
    if (!worker_) return doRecv(t, peer);
    ASSIGN_OR_RETURN(std::unique_ptr<CommWork> w, startRecv(t, peer));
    return w->wait();
  }

  bool startsInBackground() const override { return size_ > 1; }

  StatusOr<std::unique_ptr<CommWork>> startAllReduceSum(Tensor& t) override {
    if (size_ == 1 || t.nbytes() == 0 || !sumFor(t.dtype())) return Communicator::startAllReduceSum(t);
    Tensor mine = t;  // the same bytes
    return issue(nullptr, [this, mine](Tensor*) mutable { return doAllReduceSum(mine); });
  }
  StatusOr<std::unique_ptr<CommWork>> startAllGather(const Tensor& in, int dim, Tensor* out) override {
    if (size_ == 1) return Communicator::startAllGather(in, dim, out);
    return issue(out, [this, in, dim](Tensor* result) { return doAllGather(in, dim, result); });
  }
  StatusOr<std::unique_ptr<CommWork>> startReduceScatterSum(const Tensor& in, int dim, Tensor* out) override {
    if (size_ == 1) return Communicator::startReduceScatterSum(in, dim, out);
    Tensor given = *out;  // its extent says this rank's slice
    return issue(out, [this, in, dim, given](Tensor* result) {
      *result = given;
      return doReduceScatterSum(in, dim, result);
    });
  }
  StatusOr<std::unique_ptr<CommWork>> startAllToAll(const Tensor& in, int splitDim, int concatDim,
                                                     Tensor* out) override {
    if (size_ == 1) return Communicator::startAllToAll(in, splitDim, concatDim, out);
    Tensor given = *out;  // when defined, its extents say every rank's rows
    return issue(out, [this, in, splitDim, concatDim, given](Tensor* result) {
      *result = given;
      return doAllToAll(in, splitDim, concatDim, result);
    });
  }
  StatusOr<std::unique_ptr<CommWork>> startRecv(Tensor* t, int peer) override {
    if (peer < 0 || peer >= size_ || peer == rank_)
      return invalidInput(prefix("recv"), "invalid peer ", peer, " (world of ", size_, ")");
    if (!t->defined()) return internalError(prefix("recv"), "receive buffer is not allocated");
    if (t->nbytes() == 0) return Communicator::startRecv(t, peer);
    Tensor into = *t;  // the same bytes
    return issue(nullptr, [this, into, peer](Tensor*) mutable { return doRecv(&into, peer); });
  }

 private:
  /// Gathers every rank's extent `mine` into `*lens` (group order).
  Status gatherExtents(const char* what, const TensorType& type, int64_t mine, std::vector<int64_t>* lens) {
    return guard(what, type, [&] {
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput(&mine, 1);
      opts.setOutput(lens->data(), lens->size());
      opts.setTag(nextTag());
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
  }

  Status doAllReduceSum(Tensor& t) {
    SumFn fn = sumFor(t.dtype());
    if (!fn) return unsupported(prefix("all-reduce"), "sum of ", t.type().str(), " is not supported");
    if (size_ == 1 || t.nbytes() == 0) return Status::OK();
    switch (dtypeSize(t.dtype())) {
      case 1: return allReduceAs<uint8_t>(t, fn);
      case 2: return allReduceAs<uint16_t>(t, fn);
      case 4: return allReduceAs<uint32_t>(t, fn);
      case 8: return allReduceAs<uint64_t>(t, fn);
      default: return internalError(prefix("all-reduce"), "unexpected element size");
    }
  }

  Status doAllGather(const Tensor& in, int dim, Tensor* out) {
    if (dim < 0 || dim >= in.rank())
      return invalidInput(prefix("all-gather"), "dim ", dim, " is out of range for ", in.type().str());
    if (size_ == 1) {
      *out = in.clone();
      return Status::OK();
    }
    Split3 s = split3(in.shape(), dim, in.dtype());
    // Exchange (extent, row size) first: extents may differ between ranks.
    std::vector<int64_t> mine = {s.extent, s.outer * s.inner}, all(2 * size_);
    Status st = guard("all-gather (sizes)", in.type(), [&] {
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput(mine.data(), mine.size());
      opts.setOutput(all.data(), all.size());
      opts.setTag(nextTag());
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
    RETURN_IF_ERROR(st);
    int64_t total = 0;
    std::vector<size_t> bytesPer(size_);
    for (int r = 0; r < size_; ++r) {
      if (all[2 * r + 1] != mine[1])
        return invalidInput(prefix("all-gather"), "rank ", r, " of the group has ",
                            all[2 * r + 1], " elements per row along dim ", dim, ", this rank ",
                            in.type().str(), " has ", mine[1]);
      total += all[2 * r];
      bytesPer[r] = static_cast<size_t>(all[2 * r] * s.outer) * s.rowBytes();
    }
    std::vector<uint8_t> flat(std::accumulate(bytesPer.begin(), bytesPer.end(), size_t{0}) + 1);
    MemoryCharge staging(static_cast<int64_t>(flat.size()));  // the rank's memory account, if any
    st = guard("all-gather", in.type(), [&] {
      gloo::AllgathervOptions opts(ctx_);
      opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in.raw())), in.nbytes());
      opts.setOutput(flat.data(), bytesPer);
      opts.setTag(nextTag());
      opts.setTimeout(timeout_);
      gloo::allgatherv(opts);
    });
    RETURN_IF_ERROR(st);
    Dims shape = in.shape();
    shape[dim] = total;
    Tensor result = Tensor::zeros(in.dtype(), shape);
    uint8_t* dst = result.mutableData<uint8_t>();
    size_t pos = 0;
    int64_t off = 0;
    for (int r = 0; r < size_; ++r) {
      copyIntoSlab(s, flat.data() + pos, all[2 * r], dst, total, off);
      pos += bytesPer[r];
      off += all[2 * r];
    }
    *out = std::move(result);
    return Status::OK();
  }

  Status doReduceScatterSum(const Tensor& in, int dim, Tensor* out) {
    if (dim < 0 || dim >= in.rank())
      return invalidInput(prefix("reduce-scatter"), "dim ", dim, " is out of range for ",
                          in.type().str());
    if (!sumFor(in.dtype()))
      return unsupported(prefix("reduce-scatter"), "sum of ", in.type().str(), " is not supported");
    Split3 s = split3(in.shape(), dim, in.dtype());
    // Every rank's slice length along dim, in group order.
    std::vector<int64_t> lens(size_);
    if (out->defined()) {
      if (out->rank() != in.rank() || out->dtype() != in.dtype())
        return invalidInput(prefix("reduce-scatter"), "output ", out->type().str(),
                            " does not match input ", in.type().str());
      int64_t mine = out->shape()[dim];
      if (size_ == 1) {
        lens[0] = mine;
      } else {
        RETURN_IF_ERROR(gatherExtents("reduce-scatter (sizes)", in.type(), mine, &lens));
      }
    } else {
      for (int r = 0; r < size_; ++r) lens[r] = s.extent / size_ + (r < s.extent % size_ ? 1 : 0);
    }
    if (std::accumulate(lens.begin(), lens.end(), int64_t{0}) != s.extent)
      return invalidInput(prefix("reduce-scatter"), "slice lengths along dim ", dim,
                          " do not add up to the input's ", in.type().str());
    int64_t off = std::accumulate(lens.begin(), lens.begin() + rank_, int64_t{0});
    Dims outShape = in.shape();
    outShape[dim] = lens[rank_];
    Tensor result = Tensor::zeros(in.dtype(), outShape);

    // Lay the input out as [dim, outer, inner] so that every rank's slice is
    // one contiguous block, the form gloo's reduce-scatter scatters.
    size_t row = s.rowBytes();
    Tensor work = Tensor::zeros(in.dtype(), {s.extent * s.outer * s.inner});
    {
      const uint8_t* src = static_cast<const uint8_t*>(in.raw());
      uint8_t* dst = work.mutableData<uint8_t>();
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t d = 0; d < s.extent; ++d)
          std::memcpy(dst + (d * s.outer + o) * row, src + (o * s.extent + d) * row, row);
    }
    const uint8_t* mySlice = work.data<uint8_t>() + off * s.outer * row;
    if (size_ > 1 && work.nbytes() > 0) {
      std::vector<int> counts(size_);
      for (int r = 0; r < size_; ++r) counts[r] = static_cast<int>(lens[r] * s.outer * s.inner);
      RETURN_IF_ERROR(runReduceScatter(work, counts, in.type()));
      mySlice = work.data<uint8_t>();  // gloo leaves this rank's block at the front
    }
    // [len, outer, inner] -> [outer, len, inner]
    uint8_t* dst = result.mutableData<uint8_t>();
    for (int64_t d = 0; d < lens[rank_]; ++d)
      for (int64_t o = 0; o < s.outer; ++o)
        std::memcpy(dst + (o * lens[rank_] + d) * row, mySlice + (d * s.outer + o) * row, row);
    *out = std::move(result);
    return Status::OK();
  }

  Status doAllToAll(const Tensor& in, int splitDim, int concatDim, Tensor* out) {
    const int rank = in.rank();
    if (splitDim < 0 || splitDim >= rank || concatDim < 0 || concatDim >= rank || splitDim == concatDim)
      return invalidInput(prefix("all-to-all"), "split dim ", splitDim, " and concat dim ", concatDim,
                          " do not fit ", in.type().str());
    // Every rank's extent along concatDim, in group order.
    std::vector<int64_t> lens(size_);
    if (out->defined()) {
      if (out->rank() != rank || out->dtype() != in.dtype())
        return invalidInput(prefix("all-to-all"), "output ", out->type().str(), " does not match input ",
                            in.type().str());
      for (int r = 0; r < size_; ++r) lens[r] = chunkOf(out->shape()[concatDim], size_, r);
    } else if (size_ == 1) {
      lens[0] = in.shape()[concatDim];
    } else {
      int64_t mine = in.shape()[concatDim];
      RETURN_IF_ERROR(gatherExtents("all-to-all (sizes)", in.type(), mine, &lens));
    }
    if (lens[rank_] != in.shape()[concatDim])
      return invalidInput(prefix("all-to-all"), "the output gives this rank ", lens[rank_], " rows along dim ",
                          concatDim, ", the input ", in.type().str(), " has ", in.shape()[concatDim]);
    const int64_t extent = in.shape()[splitDim];
    Dims outShape = in.shape();
    outShape[splitDim] = chunkOf(extent, size_, rank_);
    outShape[concatDim] = std::accumulate(lens.begin(), lens.end(), int64_t{0});
    if (out->defined() && out->shape() != outShape)
      return invalidInput(prefix("all-to-all"), "output ", out->type().str(), " is not the ",
                          dimsToString(outShape), " that ", in.type().str(), " exchanges to");
    if (size_ == 1) {
      *out = in.clone();
      return Status::OK();
    }
    // Chunk j of splitDim goes to rank j: packed contiguous, in rank order.
    const Split3 s = split3(in.shape(), splitDim, in.dtype());
    const size_t row = s.rowBytes();
    std::vector<int64_t> sendBytes(size_), recvBytes(size_);
    Dims piece = outShape;  // what rank r sends here: its rows of concatDim, this rank's chunk of splitDim
    for (int r = 0; r < size_; ++r) {
      sendBytes[r] = s.outer * chunkOf(extent, size_, r) * static_cast<int64_t>(row);
      piece[concatDim] = lens[r];
      recvBytes[r] = numElements(piece) * static_cast<int64_t>(s.elem);
    }
    std::vector<uint8_t> sendBuf(std::accumulate(sendBytes.begin(), sendBytes.end(), size_t{0}) + 1);
    std::vector<uint8_t> recvBuf(std::accumulate(recvBytes.begin(), recvBytes.end(), size_t{0}) + 1);
    MemoryCharge staging(static_cast<int64_t>(sendBuf.size() + recvBuf.size()));  // the rank's memory account, if any
    {
      const uint8_t* src = static_cast<const uint8_t*>(in.raw());
      uint8_t* dst = sendBuf.data();
      int64_t off = 0;
      for (int r = 0; r < size_; ++r) {
        const int64_t len = chunkOf(extent, size_, r);
        for (int64_t o = 0; o < s.outer; ++o, dst += len * row)
          std::memcpy(dst, src + (o * extent + off) * row, len * row);
        off += len;
      }
    }
    RETURN_IF_ERROR(guard("all-to-all", in.type(), [&] {
      gloo::AlltoallvOptions opts(ctx_);
      opts.setInput(sendBuf.data(), sendBytes);
      opts.setOutput(recvBuf.data(), recvBytes);
      opts.setTag(nextTag());
      opts.setTimeout(timeout_);
      gloo::alltoallv(opts);
    }));
    // Rank r's piece goes to rows [off, off + lens[r]) of concatDim.
    Tensor result = Tensor::zeros(in.dtype(), outShape);
    const Split3 c = split3(outShape, concatDim, in.dtype());
    size_t pos = 0;
    int64_t off = 0;
    for (int r = 0; r < size_; ++r) {
      copyIntoSlab(c, recvBuf.data() + pos, lens[r], result.mutableData<uint8_t>(), c.extent, off);
      pos += static_cast<size_t>(recvBytes[r]);
      off += lens[r];
    }
    *out = std::move(result);
    return Status::OK();
  }

  Status doRecv(Tensor* t, int peer) {
    if (peer < 0 || peer >= size_ || peer == rank_)
      return invalidInput(prefix("recv"), "invalid peer ", peer, " (world of ", size_, ")");
    if (!t->defined()) return internalError(prefix("recv"), "receive buffer is not allocated");
    if (t->nbytes() == 0) return Status::OK();
    uint64_t slot = kP2PSlot | recvSeq_[peer]++;
    return guard(strCat("recv from rank ", peer).c_str(), t->type(), [&] {
      auto buf = ctx_->createUnboundBuffer(t->mutableData(), t->nbytes());
      buf->recv(peer, slot);
      if (!buf->waitRecv(timeout_)) throw std::runtime_error("recv aborted");
    });
  }

 public:
  Status send(const Tensor& t, int peer) override {
    if (peer < 0 || peer >= size_ || peer == rank_)
      return invalidInput(prefix("send"), "invalid peer ", peer, " (world of ", size_, ")");
    if (t.nbytes() == 0) return Status::OK();
    uint64_t slot = kP2PSlot | sendSeq_[peer]++;
    return guard(strCat("send to rank ", peer).c_str(), t.type(), [&] {
      auto buf = ctx_->createUnboundBuffer(const_cast<void*>(t.raw()), t.nbytes());
      buf->send(peer, slot);
      if (!buf->waitSend(timeout_)) throw std::runtime_error("send aborted");
    });
  }

  Status postSend(const Tensor& t, int peer) override {
    if (peer < 0 || peer >= size_ || peer == rank_)
      return invalidInput(prefix("send"), "invalid peer ", peer, " (world of ", size_, ")");
    if (t.nbytes() == 0) return Status::OK();
    uint64_t slot = kP2PSlot | sendSeq_[peer]++;
    auto pending = std::make_unique<PendingSend>();
    pending->peer = peer;
    pending->type = t.type();
    const auto* bytes = static_cast<const uint8_t*>(t.raw());
    pending->data.assign(bytes, bytes + t.nbytes());  // the source may be reused at once
    Status st = guard(strCat("send to rank ", peer).c_str(), t.type(), [&] {
      pending->buffer = ctx_->createUnboundBuffer(pending->data.data(), pending->data.size());
      pending->buffer->send(peer, slot);
    });
    if (st.ok()) pending_.push_back(std::move(pending));
    return st;
  }

  Status waitSends() override {
    Status first = Status::OK();
    for (auto& p : pending_) {
      Status st = guard(strCat("send to rank ", p->peer).c_str(), p->type, [&] {
        if (!p->buffer->waitSend(timeout_)) throw std::runtime_error("send aborted");
      });
      if (first.ok() && !st.ok()) first = st;
    }
    pending_.clear();
    return first;
  }

  void abort() override {
    aborted_ = true;
    if (ctx_) {
      try {
        ctx_->closeConnections();
      } catch (const std::exception&) {
        // Best effort: the peers fall back to their timeout.
      }
    }
    // Step 5: the queued operations fail now. The gloo call in flight ends
    // as a blocking call would: at its timeout or when a peer closes (this
    // rank's own close does not wake it); a rank blocked in its wait() is
    // then stopped by the launcher's watcher, as one blocked in the call was.
    std::deque<Job> queued;
    {
      std::lock_guard<std::mutex> lock(queueMu_);
      queued.swap(queue_);
    }
    Status aborted = environmentError(prefix("operation"), "the communicator was aborted");
    for (Job& j : queued) j.work->finish(aborted, Tensor());
  }

 private:
  /// One operation for the communication thread: `run` computes it (into
  /// `*result` where it makes a tensor) on this rank's memory account.
  struct Job {
    std::shared_ptr<GlooWork> work;
    std::function<Status(Tensor* result)> run;
    MemoryAccount* account = nullptr;
  };

  /// Steps 1-2: queues `run` behind the operations started before it.
  /// \returns its work; `out` receives the result tensor at wait().
  StatusOr<std::unique_ptr<CommWork>> issue(Tensor* out, std::function<Status(Tensor*)> run) {
    if (aborted_) return environmentError(prefix("start"), "the communicator was aborted");
    if (!worker_) worker_ = std::make_unique<std::thread>([this] { serve(); });
    auto work = std::make_shared<GlooWork>(out);
    {
      std::lock_guard<std::mutex> lock(queueMu_);
      queue_.push_back({work, std::move(run), currentMemoryAccount()});
    }
    queueCv_.notify_one();
    return std::unique_ptr<CommWork>(new GlooWorkHandle(std::move(work)));
  }

  /// Step 3: the communication thread runs the queue in order. After a
  /// failure (a timeout, a lost peer, abort()) the rest fail at once: the
  /// group's operations no longer match between its ranks.
  void serve() {
    Status failed;
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(queueMu_);
        queueCv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        running_ = job.work;
      }
      Tensor result;
      Status st;
      if (aborted_) {
        st = environmentError(prefix("operation"), "not run: the communicator was aborted");
      } else if (!failed.ok()) {
        st = environmentError(prefix("operation"), "not run: an earlier one failed: ", failed.message());
      } else {
        ScopedMemoryAccount charging(job.account);
        st = job.run(&result);
        if (!st.ok()) failed = st;
      }
      {
        // Idle before the waiter learns of it: a communicator destroyed
        // after its last wait must not think a job still runs (and abort).
        std::lock_guard<std::mutex> lock(queueMu_);
        running_ = nullptr;
      }
      job.work->finish(std::move(st), std::move(result));
    }
  }

  // Point-to-point slots live above every slot gloo's collectives build.
  static constexpr uint64_t kP2PSlot = uint64_t{1} << 60;

  uint32_t nextTag() { return tag_++; }

  std::string prefix(const char* what) const {
    return strCat("rank ", globalRank_, ": ", what, " over ", label_, ": ");
  }

  /// Runs a gloo call; gloo reports errors (timeouts, closed peers) by throwing.
  template <typename F>
  Status guard(const char* what, const TensorType& type, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return environmentError(prefix(what), type.str(), " failed (timeout ", timeout_.count() / 1000.0,
                           " s): ", e.what());
    }
    return Status::OK();
  }

  /// All-reduce with gloo seeing elements of T's size, so that its segments
  /// never split an element; the arithmetic is `fn`'s.
  template <typename T>
  Status allReduceAs(Tensor& t, SumFn fn) {
    return guard("all-reduce", t.type(), [&] {
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(t.mutableData<T>(), static_cast<size_t>(t.numel()));
      opts.setReduceFunction(fn);
      opts.setTag(nextTag());
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    });
  }

  Status runReduceScatter(Tensor& work, const std::vector<int>& counts, const TensorType& type) {
    (void)type;
    // Not gloo's ReduceScatterHalvingDoubling: its last step moves a rank's
    // block to the front of the buffer with memcpy, over overlapping ranges
    // when the blocks are small (undefined behaviour: AddressSanitizer reports
    // memcpy-param-overlap in unit_nccl's uneven reduce-scatter on 2 ranks),
    // and it never completes when a block is empty. All-reduce, then move this
    // rank's block to the front as the reduce-scatter would: twice the bytes
    // of a reduce-scatter on CPU ranks (NCCL's reduce-scatter is unaffected).
    RETURN_IF_ERROR(doAllReduceSum(work));
    size_t es = dtypeSize(work.dtype());
    size_t off = std::accumulate(counts.begin(), counts.begin() + rank_, size_t{0}) * es;
    uint8_t* p = work.mutableData<uint8_t>();
    std::memmove(p, p + off, counts[rank_] * es);
    return Status::OK();
  }

  std::shared_ptr<gloo::rendezvous::Context> ctx_;  // null for a group of one
  int globalRank_, rank_, size_;
  std::string label_;
  Ms timeout_;
  uint32_t tag_ = 0;
  std::vector<uint64_t> sendSeq_, recvSeq_;
  // postSend()'s transfers in flight: the copy and gloo's buffer over it.
  struct PendingSend {
    int peer = 0;
    TensorType type;
    std::vector<uint8_t> data;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  };
  std::vector<std::unique_ptr<PendingSend>> pending_;
  // The communication thread (started by the first start*() call) and its queue.
  std::unique_ptr<std::thread> worker_;
  std::mutex queueMu_;
  std::condition_variable queueCv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::shared_ptr<GlooWork> running_;  // the job the thread runs, if any
  std::atomic<bool> aborted_{false};
};

std::string groupLabel(const std::string& name, const std::vector<int>& ranks) {
  std::string s = name + " (ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s + ")";
}

}  // namespace

std::shared_ptr<GlooStore> GlooStore::inProcess() {
  return std::shared_ptr<GlooStore>(new GlooStore(std::make_shared<gloo::rendezvous::HashStore>()));
}

namespace {

/// gloo's file store with its waits (and so its gets, which wait for their
/// key) bounded by the run's timeout rather than gloo's default 30 seconds.
class BoundedFileStore final : public gloo::rendezvous::FileStore {
 public:
  BoundedFileStore(const std::string& dir, std::chrono::milliseconds timeout) : FileStore(dir), timeout_(timeout) {}
  using FileStore::wait;
  void wait(const std::vector<std::string>& keys) override { FileStore::wait(keys, timeout_); }

 private:
  std::chrono::milliseconds timeout_;
};

}  // namespace

StatusOr<std::shared_ptr<GlooStore>> GlooStore::inDirectory(const std::string& dir, std::chrono::milliseconds timeout) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return invalidInput(dir, ": cannot create rendezvous directory: ", ec.message());
  try {
    return std::shared_ptr<GlooStore>(new GlooStore(std::make_shared<BoundedFileStore>(dir, timeout)));
  } catch (const std::exception& e) {
    return invalidInput(dir, ": cannot open rendezvous store: ", e.what());
  }
}

namespace {

/// gloo's Store over a TcpStoreClient: gloo expects errors as exceptions.
class TcpGlooStore final : public gloo::rendezvous::Store {
 public:
  explicit TcpGlooStore(std::shared_ptr<TcpStoreClient> c) : client_(std::move(c)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    raise(client_->set(key, data));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = client_->get(key, client_->requestTimeout());
    raise(v.status());
    return std::move(v).value();
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, client_->requestTimeout()); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    raise(client_->wait(keys, timeout));
  }

 private:
  static void raise(const Status& s) {
    if (!s.ok()) throw gloo::IoException(s.message());
  }
  std::shared_ptr<TcpStoreClient> client_;
};

}  // namespace

std::shared_ptr<GlooStore> GlooStore::overTcp(std::shared_ptr<TcpStoreClient> client) {
  return std::shared_ptr<GlooStore>(new GlooStore(std::make_shared<TcpGlooStore>(std::move(client))));
}

namespace {

/// Holds the store an OwningPrefixStore prefixes (a base class, so that it is
/// built before the PrefixStore that refers to it).
struct StoreOwner {
  std::shared_ptr<gloo::rendezvous::Store> owned;
};

/// gloo's PrefixStore, keeping the store it prefixes alive. A wait without a
/// timeout is the prefixed store's own (PrefixStore's would be gloo's default
/// 30 seconds, not the run's bound of BoundedFileStore).
class OwningPrefixStore final : private StoreOwner, public gloo::rendezvous::PrefixStore {
 public:
  OwningPrefixStore(std::shared_ptr<gloo::rendezvous::Store> base, const std::string& prefix)
      : StoreOwner{std::move(base)}, PrefixStore(prefix, *owned) {}
  using PrefixStore::wait;
  void wait(const std::vector<std::string>& keys) override {
    std::vector<std::string> joined;
    for (const std::string& k : keys) joined.push_back(joinKey(k));
    store_.wait(joined);
  }
};

}  // namespace

std::shared_ptr<GlooStore> GlooStore::withPrefix(const std::string& prefix) const {
  return std::shared_ptr<GlooStore>(new GlooStore(std::make_shared<OwningPrefixStore>(store_, prefix)));
}

namespace {

/// \returns the process's gloo TCP device for `attr`, made on first use and
/// kept while a connection uses it: the rank threads of one process share
/// one device, so one event loop thread serves all their connections (a
/// device per rank added a thread per rank and doubled a small all-reduce's
/// time on two cores).
std::shared_ptr<gloo::transport::Device> sharedDevice(const gloo::transport::tcp::attr& attr) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, std::string, int>, std::weak_ptr<gloo::transport::Device>> devices;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(attr.hostname, attr.iface, attr.ai_family);
  if (auto dev = devices[key].lock()) return dev;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  devices[key] = dev;
  return dev;
}

}  // namespace

StatusOr<RankComms> connectGloo(GlooStore& store, int rank, int worldSize,
                                const std::vector<GlooGroup>& groups, bool withWorld,
                                const GlooOptions& options) {
  std::shared_ptr<gloo::transport::Device> dev;
  try {
    gloo::transport::tcp::attr attr;
    if (options.iface.empty()) {
      // An address literal fixes the family gloo resolves it in (an IPv6 one
      // may come in brackets, as in a rendezvous address); a name keeps
      // AF_UNSPEC: gloo binds the first of its addresses it can.
      auto host = parseHost(options.hostname);
      if (!host.ok()) return invalidInput("rank ", rank, ": gloo host ", host.status().message());
      attr.hostname = *host;
      in_addr v4;
      if (isIpv6Literal(attr.hostname)) attr.ai_family = AF_INET6;
      else if (inet_pton(AF_INET, attr.hostname.c_str(), &v4) == 1) attr.ai_family = AF_INET;
    } else {
      // gloo takes the interface's first IPv4 or IPv6 address in getifaddrs'
      // order, which on Linux lists IPv4 ones first: `lo` is 127.0.0.1.
      attr.iface = options.iface;
    }
    dev = sharedDevice(attr);
  } catch (const std::exception& e) {
    return environmentError("rank ", rank, ": cannot create a gloo TCP device on ",
                            options.iface.empty() ? options.hostname : "interface " + options.iface, ": ",
                            e.what());
  }
  // One deadline for every group: a peer that never arrives ends the rank
  // within the timeout, not within the timeout once per group.
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  auto connect = [&](const std::string& key, const std::string& label,
                     const std::vector<int>& ranks) -> StatusOr<std::unique_ptr<Communicator>> {
    auto it = std::find(ranks.begin(), ranks.end(), rank);
    int me = static_cast<int>(it - ranks.begin());
    int n = static_cast<int>(ranks.size());
    std::shared_ptr<gloo::rendezvous::Context> ctx;
    if (n > 1) {
      try {
        auto left = std::chrono::duration_cast<Ms>(deadline - std::chrono::steady_clock::now());
        if (left <= Ms(0)) throw std::runtime_error("the deadline passed before this group's turn");
        ctx = std::make_shared<gloo::rendezvous::Context>(me, n);
        ctx->setTimeout(left);
        gloo::rendezvous::PrefixStore prefixed(key, store.store());
        ctx->connectFullMesh(prefixed, dev);
        // A barrier before anyone may fail and close connections: a peer
        // still completing its side of the mesh would otherwise see its
        // socket closed inside gloo's own event thread, which aborts the
        // process instead of returning an error.
        gloo::BarrierOptions barrier(ctx);
        barrier.setTag(0);
        barrier.setTimeout(std::max(Ms(1), std::chrono::duration_cast<Ms>(deadline - std::chrono::steady_clock::now())));
        gloo::barrier(barrier);
      } catch (const std::exception& e) {
        return environmentError("rank ", rank, ": cannot connect ", label, " within ",
                             options.timeout.count() / 1000.0, " s: ", e.what());
      }
    }
    return std::unique_ptr<Communicator>(
        new GlooCommunicator(std::move(ctx), rank, me, n, label, options.timeout));
  };

  RankComms comms;
  comms.groups.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<int>& ranks = groups[g].ranks;
    if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) continue;
    std::string label = groupLabel(strCat("group ", g, " '", groups[g].axis, "'"), ranks);
    ASSIGN_OR_RETURN(comms.groups[g], connect(strCat("group", g), label, ranks));
  }
  if (withWorld) {
    std::vector<int> all(worldSize);
    std::iota(all.begin(), all.end(), 0);
    ASSIGN_OR_RETURN(comms.world, connect("world", strCat("the world of ", worldSize, " ranks"), all));
  }
  return comms;
}

namespace {
class GlooFactory : public CommunicatorFactory {
 public:
  GlooFactory(std::shared_ptr<GlooStore> store, const GlooOptions& options)
      : store_(std::move(store)), options_(options) {}
  StatusOr<RankComms> connect(int rank, int worldSize, const std::vector<CommGroup>& groups,
                              bool withWorld) override {
    return connectGloo(*store_, rank, worldSize, groups, withWorld, options_);
  }

 private:
  std::shared_ptr<GlooStore> store_;
  GlooOptions options_;
};
}  // namespace

std::unique_ptr<CommunicatorFactory> glooCommunicatorFactory(std::shared_ptr<GlooStore> store,
                                                             const GlooOptions& options) {
  return std::make_unique<GlooFactory>(std::move(store), options);
}

}  // namespace pcc
