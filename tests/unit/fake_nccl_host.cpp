// A host-memory stand-in for NCCL, so that the cuda backend's NCCL code
// (comm_nccl.cpp) runs without a GPU, on the driver stand-in
// (fake_cuda_host.cpp, whose "device" memory is host memory). Ranks are
// threads of one process: the communicators ncclCommInitRank makes with one
// unique id meet in a shared record. Every call is queued on the caller's
// stream (pccFakeStreamEnqueue) and runs there in order, so the calls return
// at once, as NCCL's do, and the stream stays busy until the work is done:
//  - a collective (all-reduce, all-gather, reduce-scatter; sum only) waits
//    until every rank of the communicator called its collective of the same
//    sequence number, checks that they agree (kind, count, type, operation;
//    a disagreement is the communicator's asynchronous error
//    ncclInvalidUsage), and the last to arrive computes every rank's result
//    in host memory (half and bfloat16 summed in float, in rank order);
//  - ncclSend posts the buffer on the (sender, receiver) channel and waits
//    until the receiver took it; ncclRecv takes the oldest message of its
//    channel (a size that differs is ncclInvalidUsage); between
//    ncclGroupStart and ncclGroupEnd, sends and receives are gathered and run
//    as one piece of work: every send posted, then every receive, then the
//    sends' wait, so that an exchange in both directions completes;
//  - ncclCommAbort ends the rank's waits at once (its work ends without
//    touching memory); ncclCommGetAsyncError reports the first error.
// Test hooks (read at each call): $PCC_FAKE_NCCL_DELAY_MS delays every piece
// of work before it starts (so that a result read before the stream is
// waited for is stale), and $PCC_FAKE_NCCL_ABSENT=R makes rank R of every
// communicator never arrive: its calls return ncclSuccess and queue work that
// joins nothing, so its work and its peers' wait until each rank aborts (or
// $PCC_FAKE_CUDA_WAIT_S passes, then the communicator's asynchronous error
// is ncclSystemError). It proves that pcc's calls, their
// arguments, its stream and event ordering, and its timeouts are right on
// these semantics; nothing about a GPU, NVLink or NCCL's own algorithms.
#include <cuda.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_cuda_host.h"

namespace {

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

enum class Kind { kAllReduce, kAllGather, kReduceScatter };

/// One rank's part in a collective.
struct Part {
  Kind kind;
  const void* send;
  void* recv;
  size_t count;  ///< all-reduce: elements; all-gather: sent; reduce-scatter: received
  ncclDataType_t type;
  ncclRedOp_t op;
};

/// A collective of one sequence number: the parts of the ranks that arrived.
struct Round {
  std::vector<Part> parts;
  std::vector<bool> in;
  int arrived = 0, left = 0;
  bool done = false;
  ncclResult_t result = ncclSuccess;
};

struct Message {
  const void* data;
  size_t bytes;
  bool taken = false;
};

/// What the communicators of one unique id share.
struct Shared {
  int size = 0;
  std::mutex m;
  std::condition_variable cv;
  std::map<uint64_t, Round> rounds;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Message>>> channels;  // (from, to)
};

std::mutex registryMu;
std::map<std::string, std::shared_ptr<Shared>>& registry() {
  static auto* r = new std::map<std::string, std::shared_ptr<Shared>>;
  return *r;
}

size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

float halfToFloat(uint16_t h) { return pccFakeHalfToFloat(h); }
uint16_t floatToHalf(float f) { return pccFakeFloatToHalf(f); }
float bf16ToFloat(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t floatToBf16(float v) {  // round to nearest even
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

template <typename T>
void sumInto(std::vector<const void*> srcs, size_t at, size_t n, T* out) {
  for (size_t i = 0; i < n; ++i) {
    T acc = static_cast<const T*>(srcs[0])[at + i];
    for (size_t r = 1; r < srcs.size(); ++r) acc = static_cast<T>(acc + static_cast<const T*>(srcs[r])[at + i]);
    out[i] = acc;
  }
}
template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void sum16Into(std::vector<const void*> srcs, size_t at, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) {
    float acc = Load(static_cast<const uint16_t*>(srcs[0])[at + i]);
    for (size_t r = 1; r < srcs.size(); ++r) acc += Load(static_cast<const uint16_t*>(srcs[r])[at + i]);
    out[i] = Store(acc);
  }
}

/// Sums elements [at, at + n) of every buffer of `srcs` into `out`.
bool sum(ncclDataType_t t, const std::vector<const void*>& srcs, size_t at, size_t n, void* out) {
  switch (t) {
    case ncclInt8: sumInto(srcs, at, n, static_cast<int8_t*>(out)); return true;
    case ncclUint8: sumInto(srcs, at, n, static_cast<uint8_t*>(out)); return true;
    case ncclInt32: sumInto(srcs, at, n, static_cast<int32_t*>(out)); return true;
    case ncclUint32: sumInto(srcs, at, n, static_cast<uint32_t*>(out)); return true;
    case ncclInt64: sumInto(srcs, at, n, static_cast<int64_t*>(out)); return true;
    case ncclUint64: sumInto(srcs, at, n, static_cast<uint64_t*>(out)); return true;
    case ncclFloat32: sumInto(srcs, at, n, static_cast<float*>(out)); return true;
    case ncclFloat64: sumInto(srcs, at, n, static_cast<double*>(out)); return true;
    case ncclFloat16: sum16Into<halfToFloat, floatToHalf>(srcs, at, n, static_cast<uint16_t*>(out)); return true;
    case ncclBfloat16: sum16Into<bf16ToFloat, floatToBf16>(srcs, at, n, static_cast<uint16_t*>(out)); return true;
    default: return false;
  }
}

/// Computes every rank's result of a round whose parts all arrived.
ncclResult_t compute(std::vector<Part>& parts) {
  const Part& p0 = parts[0];
  for (const Part& p : parts)
    if (p.kind != p0.kind || p.count != p0.count || p.type != p0.type || p.op != p0.op) return ncclInvalidUsage;
  const size_t es = typeSize(p0.type), n = parts.size();
  if (es == 0) return ncclInvalidArgument;
  if (p0.kind != Kind::kAllGather && p0.op != ncclSum) return ncclInvalidArgument;
  std::vector<const void*> srcs;
  for (const Part& p : parts) srcs.push_back(p.send);
  // The results first, then written: a rank's output may be its input.
  std::vector<std::vector<char>> results(n);
  for (size_t r = 0; r < n; ++r) {
    switch (p0.kind) {
      case Kind::kAllReduce:
        results[r].resize(p0.count * es);
        if (!sum(p0.type, srcs, 0, p0.count, results[r].data())) return ncclInvalidArgument;
        break;
      case Kind::kReduceScatter:
        results[r].resize(p0.count * es);
        if (!sum(p0.type, srcs, r * p0.count, p0.count, results[r].data())) return ncclInvalidArgument;
        break;
      case Kind::kAllGather:
        results[r].resize(n * p0.count * es);
        for (size_t q = 0; q < n; ++q)
          std::memcpy(results[r].data() + q * p0.count * es, srcs[q], p0.count * es);
        break;
    }
  }
  for (size_t r = 0; r < n; ++r)
    if (!results[r].empty()) std::memcpy(parts[r].recv, results[r].data(), results[r].size());
  return ncclSuccess;
}

}  // namespace

/// One rank's communicator.
struct ncclComm {
  std::shared_ptr<Shared> shared;
  int rank = 0;
  uint64_t sequence = 0;  // of its collectives, counted when called
  std::atomic<bool> aborted{false};
  std::atomic<int> error{ncclSuccess};

  void fail(ncclResult_t r) {
    int expected = ncclSuccess;
    error.compare_exchange_strong(expected, r);
  }
  /// Waits on the shared record until `ready` (under its lock), an abort, or
  /// the stand-in's wait limit. \returns false unless `ready`.
  template <typename F>
  bool await(std::unique_lock<std::mutex>& lock, F&& ready) {
    const auto limit = std::chrono::seconds(envInt("PCC_FAKE_CUDA_WAIT_S", 60));
    bool ok = shared->cv.wait_for(lock, limit, [&] { return aborted.load() || ready(); });
    if (aborted.load()) return false;
    if (!ok) fail(ncclSystemError);
    return ok;
  }
};

namespace {

/// The communicators, kept alive by the work queued for them.
std::mutex commsMu;
std::map<ncclComm*, std::shared_ptr<ncclComm>>& comms() {
  static auto* m = new std::map<ncclComm*, std::shared_ptr<ncclComm>>;
  return *m;
}
std::shared_ptr<ncclComm> holdOf(ncclComm_t c) {
  std::lock_guard<std::mutex> lock(commsMu);
  auto it = comms().find(c);
  return it == comms().end() ? nullptr : it->second;
}

/// Queues `work` on `stream`, after the delay hook.
ncclResult_t enqueue(cudaStream_t stream, std::function<void()> work) {
  auto* heap = new std::function<void()>(std::move(work));
  const int delay = envInt("PCC_FAKE_NCCL_DELAY_MS", 0);
  auto run = [](void* p) {
    auto* w = static_cast<std::function<void()>*>(p);
    (*w)();
    delete w;
  };
  if (delay > 0) {
    *heap = [delay, w = std::move(*heap)] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      w();
    };
  }
  if (pccFakeStreamEnqueue(reinterpret_cast<CUstream>(stream), run, heap) != 0) {
    delete heap;
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

bool absent(const ncclComm* c) { return envInt("PCC_FAKE_NCCL_ABSENT", -1) == c->rank; }

/// The work of an absent rank's call: it never arrives, and ends when the
/// rank aborts (or at the wait limit).
ncclResult_t stall(const std::shared_ptr<ncclComm>& c, cudaStream_t stream) {
  return enqueue(stream, [c] {
    std::unique_lock<std::mutex> lock(c->shared->m);
    c->await(lock, [] { return false; });
  });
}

ncclResult_t collective(ncclComm_t comm, Part part, cudaStream_t stream) {
  auto c = holdOf(comm);
  if (!c) return ncclInvalidArgument;
  if (c->aborted) return ncclInvalidUsage;
  if (absent(c.get())) return stall(c, stream);
  const uint64_t seq = c->sequence++;
  return enqueue(stream, [c, part, seq] {
    Shared& sh = *c->shared;
    std::unique_lock<std::mutex> lock(sh.m);
    Round& round = sh.rounds[seq];
    if (round.parts.empty()) {
      round.parts.resize(static_cast<size_t>(sh.size));
      round.in.assign(static_cast<size_t>(sh.size), false);
    }
    round.parts[static_cast<size_t>(c->rank)] = part;
    round.in[static_cast<size_t>(c->rank)] = true;
    if (++round.arrived == sh.size) {
      round.result = compute(round.parts);
      round.done = true;
      sh.cv.notify_all();
    } else if (!c->await(lock, [&] { return round.done; })) {
      return;  // aborted or never completed: the round stays (its peers may still wait)
    }
    if (round.result != ncclSuccess) c->fail(round.result);
    if (++round.left == sh.size) sh.rounds.erase(seq);
  });
}

/// Sends and receives gathered between ncclGroupStart and ncclGroupEnd.
struct P2p {
  bool send;
  const void* sendBuf;
  void* recvBuf;
  size_t bytes;
  int peer;
};
struct Group {
  int depth = 0;
  std::map<ncclComm*, std::pair<cudaStream_t, std::vector<P2p>>> ops;
  ncclResult_t error = ncclSuccess;
};
thread_local Group group;

/// Runs one rank's sends and receives: every send posted, every receive
/// taken, then the sends' wait.
void runP2p(const std::shared_ptr<ncclComm>& c, const std::vector<P2p>& ops) {
  Shared& sh = *c->shared;
  std::unique_lock<std::mutex> lock(sh.m);
  std::vector<std::shared_ptr<Message>> posted;
  for (const P2p& op : ops) {
    if (!op.send) continue;
    posted.push_back(std::make_shared<Message>(Message{op.sendBuf, op.bytes}));
    sh.channels[{c->rank, op.peer}].push_back(posted.back());
  }
  sh.cv.notify_all();
  for (const P2p& op : ops) {
    if (op.send) continue;
    auto& channel = sh.channels[{op.peer, c->rank}];
    if (!c->await(lock, [&] { return !channel.empty(); })) return;
    std::shared_ptr<Message> m = channel.front();
    channel.pop_front();
    if (m->bytes != op.bytes) c->fail(ncclInvalidUsage);
    else std::memcpy(op.recvBuf, m->data, op.bytes);
    m->taken = true;
    sh.cv.notify_all();
  }
  for (const auto& m : posted)
    if (!c->await(lock, [&] { return m->taken; })) return;
}

ncclResult_t p2p(ncclComm_t comm, P2p op, cudaStream_t stream) {
  auto c = holdOf(comm);
  if (!c) return ncclInvalidArgument;
  if (c->aborted) return ncclInvalidUsage;
  if (op.peer < 0 || op.peer >= c->shared->size) return ncclInvalidArgument;
  if (absent(c.get()) && group.depth == 0) return stall(c, stream);
  if (group.depth > 0) {
    auto& entry = group.ops[comm];
    if (!entry.second.empty() && entry.first != stream) group.error = ncclInvalidUsage;
    entry.first = stream;
    entry.second.push_back(op);
    return ncclSuccess;
  }
  return enqueue(stream, [c, op] { runP2p(c, {op}); });
}

}  // namespace

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (host stand-in)";
    case ncclSystemError: return "unhandled system error (host stand-in: a peer never arrived)";
    case ncclInternalError: return "internal error (host stand-in)";
    case ncclInvalidArgument: return "invalid argument (host stand-in)";
    case ncclInvalidUsage: return "invalid usage (host stand-in: the ranks' calls disagree)";
    case ncclRemoteError: return "remote process exited or there was a network error (host stand-in)";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<uint64_t> next{1};
  std::memset(id, 0, sizeof *id);
  const std::string text = "pcc-fake-nccl-" + std::to_string(next++) + "-" +
                           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::memcpy(id->internal, text.data(), std::min(text.size(), sizeof id->internal - 1));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  std::shared_ptr<Shared> sh;
  {
    std::lock_guard<std::mutex> lock(registryMu);
    auto& slot = registry()[std::string(id.internal, strnlen(id.internal, sizeof id.internal))];
    if (!slot) {
      slot = std::make_shared<Shared>();
      slot->size = nranks;
    }
    if (slot->size != nranks) return ncclInvalidUsage;
    sh = slot;
  }
  auto c = std::make_shared<ncclComm>();
  c->shared = std::move(sh);
  c->rank = rank;
  std::lock_guard<std::mutex> lock(commsMu);
  comms()[c.get()] = c;
  *comm = c.get();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(commsMu);
  return comms().erase(comm) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  auto c = holdOf(comm);
  if (!c) return ncclInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(c->shared->m);
    c->aborted = true;
    c->shared->cv.notify_all();
  }
  std::lock_guard<std::mutex> lock(commsMu);
  comms().erase(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  auto c = holdOf(comm);
  if (!c) return ncclInvalidArgument;
  *error = static_cast<ncclResult_t>(c->error.load());
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (group.depth > 0) return ncclInvalidUsage;  // not gathered by the stand-in
  return collective(comm, Part{Kind::kAllReduce, send, recv, count, type, op}, stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  if (group.depth > 0) return ncclInvalidUsage;
  return collective(comm, Part{Kind::kAllGather, send, recv, count, type, ncclSum}, stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  if (group.depth > 0) return ncclInvalidUsage;
  return collective(comm, Part{Kind::kReduceScatter, send, recv, count, type, op}, stream);
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return p2p(comm, P2p{true, send, nullptr, count * typeSize(type), peer}, stream);
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return p2p(comm, P2p{false, nullptr, recv, count * typeSize(type), peer}, stream);
}

ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group.depth == 0) return ncclInvalidUsage;
  if (--group.depth > 0) return ncclSuccess;
  ncclResult_t result = group.error;
  auto ops = std::move(group.ops);
  group = Group{};
  if (result != ncclSuccess) return result;
  for (auto& [comm, entry] : ops) {
    auto c = holdOf(comm);
    if (!c) return ncclInvalidArgument;
    if (absent(c.get())) {
      if (ncclResult_t r = stall(c, entry.first); r != ncclSuccess) return r;
      continue;
    }
    ncclResult_t r = enqueue(entry.first, [c, list = std::move(entry.second)] { runP2p(c, list); });
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

}  // extern "C"
