// The NCCL communicator (runtime/cuda/comm_nccl.cpp) on the host stand-ins
// for the driver (fake_cuda_host.cpp) and NCCL (fake_nccl_host.cpp): rank
// threads of this process, one stand-in device each. Results are compared
// with the gloo communicator's on the same inputs, bit for bit where both
// sum in the same order (integers; floats over two ranks).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "runtime/comm_gloo.h"
#include "runtime/cuda/comm_nccl.h"
#include "runtime/cuda/device.h"

namespace pcc::cuda {
namespace {

using RankFn = std::function<Status(int, Device*, RankComms&)>;

struct ScopedEnv {
  ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~ScopedEnv() { unsetenv(name); }
  const char* name;
};

/// Runs fn on `n` rank threads, connected by NCCL (with a device each) or by
/// gloo (device null). \returns every rank's status.
std::vector<Status> onRanks(bool nccl, int n, const std::vector<CommGroup>& groups, bool world, const RankFn& fn,
                            std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto store = GlooStore::inProcess();
  GlooOptions o;
  o.timeout = timeout;
  std::vector<Status> st(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::shared_ptr<Device> dev;
      std::unique_ptr<CommunicatorFactory> f;
      if (nccl) {
        auto d = Device::open(r);
        if (!d.ok()) {
          st[r] = d.status();
          return;
        }
        dev = *d;
        f = ncclCommunicatorFactory(dev, store, o);
      } else {
        f = glooCommunicatorFactory(store, o);
      }
      auto c = f->connect(r, n, groups, world);
      if (!c.ok()) {
        st[r] = c.status();
        return;
      }
      st[r] = fn(r, dev.get(), *c);
    });
  for (auto& t : threads) t.join();
  return st;
}

void expectAllOk(const std::vector<Status>& st) {
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].message();
}

/// Rank r's input: distinct values per rank and element (with fractions, so
/// that a float sum in another order would show).
Tensor rankTensor(DType dt, Dims shape, int r) {
  Tensor t = Tensor::zeros(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const bool integer = dt == DType::kI32 || dt == DType::kI64 || dt == DType::kI8 || dt == DType::kU8;
    t.setDouble(i, integer ? static_cast<double>((i * 7 + r * 13) % 50) : 0.37 * i - 1.25 * r + 0.125 * (i % 3));
  }
  return t;
}

/// `host` in device memory of `dev`.
StatusOr<Tensor> toDevice(Device* dev, const Tensor& host) {
  ASSIGN_OR_RETURN(DeviceMemory m, dev->allocate(host.nbytes()));
  RETURN_IF_ERROR(dev->upload(static_cast<CUdeviceptr>(m.base), host.raw(), host.nbytes(), "test"));
  return m.view(0, host.type());
}
/// A device tensor's bytes in host memory (after the compute stream's work).
StatusOr<Tensor> toHost(Device* dev, const Tensor& t) {
  Tensor h = Tensor::zeros(t.type());
  RETURN_IF_ERROR(dev->download(h.mutableData(), static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(t.raw())),
                                t.nbytes(), "test"));
  return h;
}

void expectSameBytes(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t r = 0; r < a.size(); ++r) {
    ASSERT_TRUE(a[r].defined() && b[r].defined()) << what << " rank " << r;
    ASSERT_EQ(a[r].type(), b[r].type()) << what << " rank " << r << ": " << a[r].type().str() << " vs "
                                        << b[r].type().str();
    EXPECT_EQ(std::memcmp(a[r].raw(), b[r].raw(), a[r].nbytes()), 0) << what << " rank " << r;
  }
}

/// One collective: (communicator, input, output, start form?) -> status.
using CollFn = std::function<Status(Communicator&, Tensor& in, Tensor* out, bool start)>;

std::vector<CommGroup> groupOf(int n) {
  CommGroup g{"tp", {}};
  for (int r = 0; r < n; ++r) g.ranks.push_back(r);
  return {g};
}

/// Runs the work of a start form (or the blocking call) of `op`.
Status run(bool start, const std::function<StatusOr<std::unique_ptr<CommWork>>()>& started,
           const std::function<Status()>& blocking) {
  if (!start) return blocking();
  ASSIGN_OR_RETURN(auto w, started());
  return w->wait();
}

/// Runs `op` on `n` ranks through NCCL (device operands; the start form when
/// `start`) and through gloo (host operands), and compares the results.
void compare(int n, const std::function<Tensor(int)>& input, const std::function<Tensor(int)>& outShape,
             const CollFn& op, bool start, const std::string& what, bool exact = true) {
  std::vector<Tensor> viaNccl(n), viaGloo(n);
  for (bool nccl : {true, false}) {
    expectAllOk(onRanks(nccl, n, groupOf(n), false, [&](int r, Device* dev, RankComms& c) -> Status {
      Tensor host = input(r);
      Tensor in = host, out = outShape ? outShape(r) : Tensor();
      if (nccl) {
        ASSIGN_OR_RETURN(in, toDevice(dev, host));
        if (out.defined()) {
          ASSIGN_OR_RETURN(out, toDevice(dev, out));
        }
      }
      RETURN_IF_ERROR(op(*c.groups[0], in, &out, nccl && start));
      const Tensor& result = out.defined() ? out : in;
      if (nccl) {
        ASSIGN_OR_RETURN(viaNccl[r], toHost(dev, result));
      } else {
        viaGloo[r] = result;
      }
      return Status::OK();
    }));
  }
  if (exact) {
    expectSameBytes(viaNccl, viaGloo, what);
    return;
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(viaNccl[r].type(), viaGloo[r].type()) << what;
    for (int64_t i = 0; i < viaNccl[r].numel(); ++i)
      EXPECT_NEAR(viaNccl[r].getDouble(i), viaGloo[r].getDouble(i), 1e-4) << what << " rank " << r << " at " << i;
  }
}

const CollFn kAllReduce = [](Communicator& c, Tensor& in, Tensor*, bool start) {
  return run(start, [&] { return c.startAllReduceSum(in); }, [&] { return c.allReduceSum(in); });
};
CollFn allGather(int dim) {
  return [dim](Communicator& c, Tensor& in, Tensor* out, bool start) {
    return run(start, [&] { return c.startAllGather(in, dim, out); }, [&] { return c.allGather(in, dim, out); });
  };
}
CollFn reduceScatter(int dim) {
  return [dim](Communicator& c, Tensor& in, Tensor* out, bool start) {
    return run(start, [&] { return c.startReduceScatterSum(in, dim, out); },
               [&] { return c.reduceScatterSum(in, dim, out); });
  };
}
CollFn allToAll(int split, int concat) {
  return [=](Communicator& c, Tensor& in, Tensor* out, bool start) {
    return run(start, [&] { return c.startAllToAll(in, split, concat, out); },
               [&] { return c.allToAll(in, split, concat, out); });
  };
}

class NcclAllReduce : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(NcclAllReduce, TwoRanksMatchGlooBitForBit) {
  const DType dt = std::get<0>(GetParam());  // not a structured binding: clang 14 cannot capture one
  const bool start = std::get<1>(GetParam());
  compare(2, [&](int r) { return rankTensor(dt, {3, 5}, r); }, nullptr, kAllReduce, start, "all-reduce");
}

INSTANTIATE_TEST_SUITE_P(DTypes, NcclAllReduce,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF64, DType::kF16, DType::kI32,
                                                              DType::kI64),
                                            ::testing::Bool()));

TEST(Nccl, AllReduceFourRanks) {
  compare(4, [](int r) { return rankTensor(DType::kI64, {2, 9}, r); }, nullptr, kAllReduce, true, "i64 all-reduce");
  compare(4, [](int r) { return rankTensor(DType::kF32, {2, 9}, r); }, nullptr, kAllReduce, true, "f32 all-reduce",
          /*exact=*/false);
}

TEST(Nccl, AllGatherDim0Even) {
  for (bool start : {false, true})
    compare(3, [](int r) { return rankTensor(DType::kF32, {2, 4}, r); }, nullptr, allGather(0), start, "all-gather dim 0");
}

TEST(Nccl, AllGatherInnerDimUneven) {
  // Extents 1, 3, 2 along dim 1, with rows before it.
  for (bool start : {false, true})
    compare(3, [](int r) { return rankTensor(DType::kI32, {2, r == 0 ? 1 : r == 1 ? 3 : 2, 3}, r); }, nullptr,
            allGather(1), start, "all-gather dim 1");
}

TEST(Nccl, ReduceScatterEvenAndUneven) {
  for (bool start : {false, true}) {
    compare(2, [](int r) { return rankTensor(DType::kF32, {6, 3}, r); }, nullptr, reduceScatter(0), start,
            "reduce-scatter even dim 0");
    // 7 rows over 3 ranks: 3, 2, 2 (the default split).
    compare(3, [](int r) { return rankTensor(DType::kI64, {7, 2}, r); }, nullptr, reduceScatter(0), start,
            "reduce-scatter uneven dim 0");
    // Given slices 1, 4 of an inner dim.
    compare(2, [](int r) { return rankTensor(DType::kI32, {3, 5}, r); },
            [](int r) { return Tensor::zeros(DType::kI32, {3, r == 0 ? 1 : 4}); }, reduceScatter(1), start,
            "reduce-scatter given slices dim 1");
  }
}

TEST(Nccl, AllToAllUnevenChunks) {
  for (bool start : {false, true}) {
    // Split dim 0 (5 rows: 2, 2, 1), concat dim 1 (extents 1, 2, 3: exchanged).
    compare(3, [](int r) { return rankTensor(DType::kF32, {5, r + 1}, r); }, nullptr, allToAll(0, 1), start,
            "all-to-all 0<-1");
    // Split dim 2 (7: 3, 2, 2), concat dim 0 with the output given (4 rows: 2, 1, 1).
    compare(3, [](int r) { return rankTensor(DType::kI64, {r == 0 ? 2 : 1, 2, 7}, r); },
            [](int r) { return Tensor::zeros(DType::kI64, {4, 2, r == 0 ? 3 : 2}); }, allToAll(2, 0), start,
            "all-to-all 2<-0");
  }
}

TEST(Nccl, HostOperandsAreStaged) {
  // Host tensors on the NCCL side: staged through device memory.
  std::vector<Tensor> got(2);
  expectAllOk(onRanks(true, 2, groupOf(2), false, [&](int r, Device*, RankComms& c) -> Status {
    Tensor t = rankTensor(DType::kI64, {4}, r);
    ASSIGN_OR_RETURN(auto w, c.groups[0]->startAllReduceSum(t));
    RETURN_IF_ERROR(w->wait());
    got[r] = t;
    return Status::OK();
  }));
  for (int r = 0; r < 2; ++r)
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_EQ(got[r].getDouble(i), rankTensor(DType::kI64, {4}, 0).getDouble(i) +
                                         rankTensor(DType::kI64, {4}, 1).getDouble(i));
}

TEST(Nccl, SendRecvAndPostedSends) {
  // A chain over the world communicator: each rank but the last posts two
  // sends to the next one, each rank but the first receives them from the
  // previous one (blocking, then started). A ring would not complete: a
  // send outside a group holds its stream until the peer takes it, as NCCL's.
  const int n = 3;
  std::vector<Tensor> first(n), second(n);
  expectAllOk(onRanks(true, n, {}, true, [&](int r, Device* dev, RankComms& c) -> Status {
    Communicator& w = *c.world;
    if (r + 1 < n) {
      ASSIGN_OR_RETURN(Tensor a, toDevice(dev, rankTensor(DType::kF32, {3, 2}, r)));
      RETURN_IF_ERROR(w.postSend(a, r + 1));
      RETURN_IF_ERROR(w.postSend(rankTensor(DType::kF32, {5}, r + 10), r + 1));  // a host tensor
    }
    if (r > 0) {
      ASSIGN_OR_RETURN(Tensor x, toDevice(dev, Tensor::zeros(DType::kF32, {3, 2})));
      RETURN_IF_ERROR(w.recv(&x, r - 1));
      ASSIGN_OR_RETURN(Tensor y, toDevice(dev, Tensor::zeros(DType::kF32, {5})));
      ASSIGN_OR_RETURN(auto work, w.startRecv(&y, r - 1));
      RETURN_IF_ERROR(work->wait());
      ASSIGN_OR_RETURN(first[r], toHost(dev, x));
      ASSIGN_OR_RETURN(second[r], toHost(dev, y));
    }
    return w.waitSends();
  }));
  for (int r = 1; r < n; ++r) {
    expectSameBytes({first[r]}, {rankTensor(DType::kF32, {3, 2}, r - 1)}, "first message");
    expectSameBytes({second[r]}, {rankTensor(DType::kF32, {5}, r - 1 + 10)}, "second message");
  }
  // Blocking send and recv, host tensors on both ends.
  std::vector<Tensor> got(2);
  expectAllOk(onRanks(true, 2, {}, true, [&](int r, Device*, RankComms& c) -> Status {
    if (r == 0) return c.world->send(rankTensor(DType::kI64, {6}, 7), 1);
    got[1] = Tensor::zeros(DType::kI64, {6});
    return c.world->recv(&got[1], 0);
  }));
  expectSameBytes({got[1]}, {rankTensor(DType::kI64, {6}, 7)}, "blocking send");
}

TEST(Nccl, StartedWorkIsOrderedByWait) {
  // The stand-in delays every NCCL call: a result read on the host without
  // the compute stream waiting for the collective would be the input.
  ScopedEnv delay("PCC_FAKE_NCCL_DELAY_MS", "40");
  for (bool start : {true, false}) {
    compare(2, [](int r) { return rankTensor(DType::kF32, {4, 4}, r); }, nullptr, kAllReduce, start, "delayed all-reduce");
    compare(2, [](int r) { return rankTensor(DType::kF32, {2, r + 2}, r); }, nullptr, allGather(1), start,
            "delayed uneven all-gather");
    compare(2, [](int r) { return rankTensor(DType::kF32, {5, 3}, r); }, nullptr, reduceScatter(0), start,
            "delayed uneven reduce-scatter");
    compare(2, [](int r) { return rankTensor(DType::kF32, {4, r + 1}, r); }, nullptr, allToAll(0, 1), start,
            "delayed all-to-all");
  }
  // Several collectives in flight at once, waited for in order.
  std::vector<Tensor> got(2);
  expectAllOk(onRanks(true, 2, groupOf(2), false, [&](int r, Device* dev, RankComms& c) -> Status {
    std::vector<Tensor> ts;
    std::vector<std::unique_ptr<CommWork>> works;
    for (int k = 0; k < 3; ++k) {
      ASSIGN_OR_RETURN(Tensor t, toDevice(dev, rankTensor(DType::kI64, {8}, r + k)));
      ts.push_back(t);
      ASSIGN_OR_RETURN(auto w, c.groups[0]->startAllReduceSum(ts.back()));
      works.push_back(std::move(w));
    }
    for (auto& w : works) RETURN_IF_ERROR(w->wait());
    Tensor sum = Tensor::zeros(DType::kI64, {24});
    for (int k = 0; k < 3; ++k) {
      ASSIGN_OR_RETURN(Tensor h, toHost(dev, ts[k]));
      std::memcpy(sum.mutableData<int64_t>() + 8 * k, h.raw(), h.nbytes());
    }
    got[r] = sum;
    return Status::OK();
  }));
  for (int k = 0; k < 3; ++k)
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_EQ(got[0].getDouble(8 * k + i), rankTensor(DType::kI64, {8}, k).getDouble(i) +
                                                 rankTensor(DType::kI64, {8}, 1 + k).getDouble(i));
}

TEST(Nccl, AbsentPeerTimesOutNamingRankCollectiveAndGroup) {
  ScopedEnv absent("PCC_FAKE_NCCL_ABSENT", "1");
  // The blocking call, then a started one waited for on the device whose
  // failure shows at the host's next wait (a download).
  for (bool start : {false, true}) {
    auto st = onRanks(
        true, 2, groupOf(2), false,
        [&](int r, Device* dev, RankComms& c) -> Status {
          ASSIGN_OR_RETURN(Tensor t, toDevice(dev, rankTensor(DType::kF32, {4}, r)));
          if (!start) return c.groups[0]->allReduceSum(t);
          ASSIGN_OR_RETURN(auto w, c.groups[0]->startAllReduceSum(t));
          RETURN_IF_ERROR(w->wait());
          return toHost(dev, t).status();
        },
        std::chrono::milliseconds(300));
    // Both time out: rank 0 waits for rank 1, whose own call never arrives.
    for (int r = 0; r < 2; ++r) {
      ASSERT_FALSE(st[r].ok()) << (start ? "started" : "blocking");
      const std::string& m = st[r].message();
      EXPECT_NE(m.find(strCat("rank ", r, ": NCCL all-reduce of f32[4] over group 0 (tp)")), std::string::npos) << m;
      EXPECT_NE(m.find("did not finish within the timeout (0.3 s)"), std::string::npos) << m;
    }
  }
}

TEST(Nccl, MismatchedCallsAreTheAsyncError) {
  // Ranks calling different collectives: the stand-in's asynchronous error,
  // which the communicator reports naming the rank and the call.
  auto st = onRanks(true, 2, groupOf(2), false, [&](int r, Device* dev, RankComms& c) -> Status {
    ASSIGN_OR_RETURN(Tensor t, toDevice(dev, rankTensor(DType::kF32, {r == 0 ? 4 : 6}, r)));
    return c.groups[0]->allReduceSum(t);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(st[r].ok());
    EXPECT_NE(st[r].message().find(strCat("rank ", r, ": NCCL all-reduce")), std::string::npos) << st[r].message();
    EXPECT_NE(st[r].message().find("invalid usage"), std::string::npos) << st[r].message();
  }
}

}  // namespace
}  // namespace pcc::cuda

int main(int argc, char** argv) {
  // Before the first load of the driver and NCCL tables (kept per process).
  setenv("PCC_CUDA_DRIVER_LIB", PCC_FAKE_CUDA_HOST, 1);
  setenv("PCC_NCCL_LIB", PCC_FAKE_NCCL_HOST, 1);
  setenv("PCC_FAKE_CUDA_DEVICES", "4", 1);
  setenv("PCC_FAKE_CUDA_WAIT_S", "20", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
