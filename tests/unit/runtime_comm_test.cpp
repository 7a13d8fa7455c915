// The gloo communicator on its own: rank threads of this process.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "runtime/comm_gloo.h"
#include "runtime/tensor_slice.h"
#include "runtime_test_util.h"

namespace pcc {
namespace {

using namespace testing_rt;

/// Runs fn(rank, comms) on `n` rank threads connected over `groups`; every
/// rank's status is returned.
std::vector<Status> onRanks(int n, const std::vector<GlooGroup>& groups, bool world,
                            const std::function<Status(int, RankComms&)>& fn,
                            std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto store = GlooStore::inProcess();
  std::vector<Status> st(n);
  std::vector<RankComms> comms(n);
  std::vector<std::thread> threads;
  GlooOptions o;
  o.timeout = timeout;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto c = connectGloo(*store, r, n, groups, world, o);
      if (!c.ok()) {
        st[r] = c.status();
        return;
      }
      comms[r] = std::move(c).value();
      st[r] = fn(r, comms[r]);
    });
  for (auto& t : threads) t.join();
  return st;
}

void expectAllOk(const std::vector<Status>& st) {
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].message();
}

/// Rank r's tensor: pattern shifted by r.
Tensor rankTensor(DType dt, Dims shape, int r) {
  Tensor t = Tensor::zeros(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = (i % 5) + 10 * r;
    switch (dt) {
      case DType::kF32: t.mutableData<float>()[i] = static_cast<float>(v); break;
      case DType::kF64: t.mutableData<double>()[i] = v; break;
      case DType::kI64: t.mutableData<int64_t>()[i] = static_cast<int64_t>(v); break;
      case DType::kF16: t.mutableData<uint16_t>()[i] = floatToHalf(static_cast<float>(v)); break;
      default: ADD_FAILURE() << "unexpected dtype";
    }
  }
  return t;
}

class RuntimeCommAllReduce : public ::testing::TestWithParam<DType> {};

TEST_P(RuntimeCommAllReduce, SumsOverThreeRanks) {
  DType dt = GetParam();
  std::vector<Tensor> got(3);
  expectAllOk(onRanks(3, {{"tp", {0, 1, 2}}}, false, [&](int r, RankComms& c) {
    Tensor t = rankTensor(dt, {2, 7}, r);
    Status s = c.groups[0]->allReduceSum(t);
    got[r] = t;
    return s;
  }));
  for (int r = 0; r < 3; ++r)
    for (int64_t i = 0; i < 14; ++i) EXPECT_EQ(got[r].getDouble(i), 3 * (i % 5) + 30) << r << " " << i;
}

INSTANTIATE_TEST_SUITE_P(DTypes, RuntimeCommAllReduce,
                         ::testing::Values(DType::kF32, DType::kF64, DType::kI64, DType::kF16));

TEST(RuntimeComm, AllGatherUnevenAlongDim1) {
  // Ranks hold [2,1], [2,3], [2,2]; the gather is [2,6] in rank order.
  const int64_t ext[3] = {1, 3, 2};
  std::vector<Tensor> got(3);
  expectAllOk(onRanks(3, {{"tp", {0, 1, 2}}}, false, [&](int r, RankComms& c) {
    Tensor t = Tensor::zeros(DType::kF32, {2, ext[r]});
    for (int64_t row = 0; row < 2; ++row)
      for (int64_t j = 0; j < ext[r]; ++j) t.mutableData<float>()[row * ext[r] + j] = 100 * r + 10 * row + j;
    return c.groups[0]->allGather(t, 1, &got[r]);
  }));
  Tensor want = Tensor::fromVector<float>(DType::kF32, {2, 6},
                                          {0, 100, 101, 102, 200, 201, 10, 110, 111, 112, 210, 211});
  for (int r = 0; r < 3; ++r) expectClose(got[r], want);
}

TEST(RuntimeComm, AllGatherRejectsMismatchedRows) {
  auto st = onRanks(2, {{"tp", {0, 1}}}, false, [&](int r, RankComms& c) {
    Tensor out;
    return c.groups[0]->allGather(Tensor::zeros(DType::kF32, {2, r + 1}), 0, &out);
  });
  for (const Status& s : st) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("elements per row"), std::string::npos) << s.message();
  }
}

struct RsCase {
  int n;
  int dim;
  std::vector<int64_t> lens;  // empty: even split by the communicator
  DType dt;
};

class RuntimeCommReduceScatter : public ::testing::TestWithParam<RsCase> {};

TEST_P(RuntimeCommReduceScatter, KeepsThisRanksSliceOfTheSum) {
  const RsCase& c = GetParam();
  Dims shape = {3, 5, 2};
  int64_t extent = shape[c.dim];
  std::vector<Tensor> got(c.n);
  std::vector<int> ranks(c.n);
  for (int r = 0; r < c.n; ++r) ranks[r] = r;
  expectAllOk(onRanks(c.n, {{"tp", ranks}}, false, [&](int r, RankComms& comms) {
    Tensor out;
    if (!c.lens.empty()) {
      Dims s = shape;
      s[c.dim] = c.lens[r];
      out = Tensor::zeros(c.dt, s);
    }
    Status st = comms.groups[0]->reduceScatterSum(rankTensor(c.dt, shape, r), c.dim, &out);
    got[r] = out;
    return st;
  }));
  // The full sum, then rank r's slice along dim.
  Tensor sum = Tensor::zeros(DType::kF64, shape);
  for (int r = 0; r < c.n; ++r) {
    Tensor t = rankTensor(c.dt, shape, r);
    for (int64_t i = 0; i < t.numel(); ++i) sum.mutableData<double>()[i] += t.getDouble(i);
  }
  int64_t off = 0;
  for (int r = 0; r < c.n; ++r) {
    int64_t len = c.lens.empty() ? extent / c.n + (r < extent % c.n ? 1 : 0) : c.lens[r];
    ASSERT_EQ(got[r].shape()[c.dim], len) << "rank " << r;
    auto want = sliceAlong(sum, c.dim, off, len);
    ASSERT_TRUE(want.ok());
    for (int64_t i = 0; i < want->numel(); ++i)
      EXPECT_EQ(got[r].getDouble(i), want->getDouble(i)) << "rank " << r << " element " << i;
    off += len;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RuntimeCommReduceScatter,
    ::testing::Values(RsCase{2, 1, {}, DType::kF32},          // uneven 3/2 along the middle
                      RsCase{3, 0, {}, DType::kF32},          // one row each
                      RsCase{4, 1, {}, DType::kF64},          // 2,1,1,1
                      RsCase{3, 1, {2, 2, 1}, DType::kI64},   // lengths from the outputs
                      RsCase{3, 1, {1, 0, 4}, DType::kI64},   // an empty slice
                      RsCase{2, 2, {}, DType::kF16}));        // fallback path, last dim

struct A2aCase {
  int n;
  Dims global;     // the whole tensor
  int splitDim;    // split over the ranks afterwards
  int concatDim;   // split over the ranks before
  DType dt;
  bool outGiven;   // the output is allocated on entry (else extents are exchanged)
};

void PrintTo(const A2aCase& c, std::ostream* os) {
  *os << c.n << " ranks, " << dimsToString(c.global) << " dim " << c.concatDim << " -> " << c.splitDim << " "
      << dtypeName(c.dt) << (c.outGiven ? "" : ", extents exchanged");
}

/// \returns the extent of chunk `r` of `extent` split `n` ways (the first extent % n one larger).
int64_t chunkLen(int64_t extent, int n, int r) { return extent / n + (r < extent % n ? 1 : 0); }
int64_t chunkStart(int64_t extent, int n, int r) {
  int64_t off = 0;
  for (int k = 0; k < r; ++k) off += chunkLen(extent, n, k);
  return off;
}

class RuntimeCommAllToAll : public ::testing::TestWithParam<A2aCase> {};

TEST_P(RuntimeCommAllToAll, MovesTheSplitToAnotherDim) {
  const A2aCase& c = GetParam();
  // Every element distinct (modulo 251 for bytes), so that a chunk in the
  // wrong place shows.
  Tensor whole = Tensor::zeros(c.dt, c.global);
  for (int64_t i = 0; i < whole.numel(); ++i) whole.setDouble(i, c.dt == DType::kU8 ? i % 251 : i + 1);
  std::vector<int> ranks(c.n);
  for (int r = 0; r < c.n; ++r) ranks[r] = r;
  std::vector<Tensor> got(c.n);
  expectAllOk(onRanks(c.n, {{"tp", ranks}}, false, [&](int r, RankComms& comms) -> Status {
    const int64_t ext = c.global[c.concatDim];
    ASSIGN_OR_RETURN(Tensor mine, sliceAlong(whole, c.concatDim, chunkStart(ext, c.n, r), chunkLen(ext, c.n, r)));
    Tensor out;
    if (c.outGiven) {
      Dims shape = c.global;
      shape[c.splitDim] = chunkLen(c.global[c.splitDim], c.n, r);
      out = Tensor::zeros(c.dt, shape);
    }
    Status st = comms.groups[0]->allToAll(mine, c.splitDim, c.concatDim, &out);
    got[r] = out;
    return st;
  }));
  const int64_t ext = c.global[c.splitDim];
  for (int r = 0; r < c.n; ++r) {
    auto want = sliceAlong(whole, c.splitDim, chunkStart(ext, c.n, r), chunkLen(ext, c.n, r));
    ASSERT_TRUE(want.ok());
    ASSERT_EQ(got[r].type(), want->type()) << "rank " << r;
    for (int64_t i = 0; i < want->numel(); ++i)
      ASSERT_EQ(got[r].getDouble(i), want->getDouble(i)) << "rank " << r << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RuntimeCommAllToAll,
    ::testing::Values(A2aCase{2, {4, 6}, 1, 0, DType::kF32, true},           // even: rows -> columns
                      A2aCase{2, {5, 3, 4}, 0, 2, DType::kF32, true},        // uneven 3/2 along the new split
                      A2aCase{3, {7, 5, 2}, 1, 0, DType::kF64, true},        // uneven both ways: 3,2,2 -> 2,2,1
                      A2aCase{3, {2, 4, 5}, 2, 1, DType::kI64, false},       // extents exchanged: 2,1,1 -> 2,2,1
                      A2aCase{4, {3, 6, 2}, 0, 1, DType::kF16, true},        // an empty chunk of the new split
                      A2aCase{4, {2, 9, 3}, 1, 0, DType::kI32, true},        // ranks 2, 3 hold no rows before
                      A2aCase{4, {8, 2, 3}, 2, 0, DType::kU8, false}));      // bytes, innermost split

TEST(RuntimeComm, AllToAllRejectsAnOutputOfTheWrongShape) {
  auto st = onRanks(2, {{"tp", {0, 1}}}, false, [&](int, RankComms& c) {
    Tensor out = Tensor::zeros(DType::kF32, {4, 4});  // should be [4, 2]
    return c.groups[0]->allToAll(Tensor::zeros(DType::kF32, {2, 4}), 1, 0, &out);
  });
  for (const Status& s : st) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("all-to-all"), std::string::npos) << s.message();
  }
}

TEST(RuntimeComm, SendRecvInOrder) {
  std::vector<Tensor> got(2);
  expectAllOk(onRanks(3, {}, true, [&](int r, RankComms& c) -> Status {
    if (r == 0) {
      RETURN_IF_ERROR(c.world->send(rankTensor(DType::kF32, {4}, 1), 2));
      return c.world->send(rankTensor(DType::kF32, {2, 2}, 2), 2);
    }
    if (r == 2) {
      got[0] = Tensor::zeros(DType::kF32, {4});
      got[1] = Tensor::zeros(DType::kF32, {2, 2});
      RETURN_IF_ERROR(c.world->recv(&got[0], 0));
      return c.world->recv(&got[1], 0);
    }
    return Status::OK();
  }));
  expectClose(got[0], rankTensor(DType::kF32, {4}, 1));
  expectClose(got[1], rankTensor(DType::kF32, {2, 2}, 2));
}

TEST(RuntimeComm, CollectiveTimesOutWithAnError) {
  auto start = std::chrono::steady_clock::now();
  auto st = onRanks(
      2, {{"tp", {0, 1}}}, false,
      [&](int r, RankComms& c) -> Status {
        if (r == 1) return Status::OK();  // never joins the all-reduce
        Tensor t = Tensor::zeros(DType::kF32, {8});
        return c.groups[0]->allReduceSum(t);
      },
      std::chrono::seconds(2));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 15.0);
  ASSERT_FALSE(st[0].ok());
  EXPECT_NE(st[0].message().find("rank 0"), std::string::npos) << st[0].message();
  EXPECT_NE(st[0].message().find("all-reduce"), std::string::npos) << st[0].message();
  EXPECT_TRUE(st[1].ok());
}


// Started operations (Communicator::start*): run on the communicator's own
// thread, in the order they were started, finished by wait().

TEST(RuntimeCommAsync, StartedOperationsFinishInIssueOrder) {
  std::vector<std::vector<Tensor>> got(2, std::vector<Tensor>(4));
  std::vector<std::vector<CommWork::Clock::time_point>> at(2);
  expectAllOk(onRanks(2, {{"tp", {0, 1}}}, false, [&](int r, RankComms& c) -> Status {
    Communicator& g = *c.groups[0];
    EXPECT_TRUE(g.startsInBackground());
    got[r][0] = rankTensor(DType::kF32, {3, 4}, r);
    Tensor in = rankTensor(DType::kF32, {2, 3}, r);
    got[r][2] = Tensor::zeros(DType::kF32, {2, 3});  // this rank's slice: one row
    got[r][2] = sliceAlong(got[r][2], 0, 0, 1).value().clone();
    got[r][3] = rankTensor(DType::kF64, {5}, r);
    std::vector<std::unique_ptr<CommWork>> w;
    ASSIGN_OR_RETURN(auto a, g.startAllReduceSum(got[r][0]));
    w.push_back(std::move(a));
    ASSIGN_OR_RETURN(auto b, g.startAllGather(in, 1, &got[r][1]));
    w.push_back(std::move(b));
    ASSIGN_OR_RETURN(auto d, g.startReduceScatterSum(in, 0, &got[r][2]));
    w.push_back(std::move(d));
    // A blocking call after started ones runs after them, on the same thread.
    RETURN_IF_ERROR(g.allReduceSum(got[r][3]));
    for (int k = 2; k >= 0; --k) RETURN_IF_ERROR(w[k]->wait());  // any order
    for (auto& x : w) at[r].push_back(x->finishedAt());
    return w[1]->wait();  // the same status again
  }));
  for (int r = 0; r < 2; ++r) {
    EXPECT_LE(at[r][0], at[r][1]);
    EXPECT_LE(at[r][1], at[r][2]);
    for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(got[r][0].getDouble(i), 2 * (i % 5) + 10) << i;
    ASSERT_EQ(got[r][1].shape(), (Dims{2, 6}));
    for (int64_t row = 0; row < 2; ++row)
      for (int64_t col = 0; col < 6; ++col)
        EXPECT_EQ(got[r][1].getDouble(row * 6 + col), (row * 3 + col % 3) % 5 + 10 * (col / 3)) << row << "," << col;
    ASSERT_EQ(got[r][2].shape(), (Dims{1, 3}));
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(got[r][2].getDouble(i), 2 * ((r * 3 + i) % 5) + 10) << r << " " << i;
    for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(got[r][3].getDouble(i), 2 * (i % 5) + 10) << i;
  }
}

TEST(RuntimeCommAsync, PostedReceivesKeepTheirOrder) {
  std::vector<Tensor> got(3);
  expectAllOk(onRanks(2, {}, true, [&](int r, RankComms& c) -> Status {
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the receives are posted first
      for (int k = 0; k < 3; ++k) RETURN_IF_ERROR(c.world->postSend(rankTensor(DType::kF32, {4}, k), 1));
      return c.world->waitSends();
    }
    std::vector<std::unique_ptr<CommWork>> w;
    for (int k = 0; k < 3; ++k) {
      got[k] = Tensor::zeros(DType::kF32, {4});
      ASSIGN_OR_RETURN(auto x, c.world->startRecv(&got[k], 0));
      w.push_back(std::move(x));
    }
    for (int k = 2; k >= 0; --k) RETURN_IF_ERROR(w[k]->wait());
    return Status::OK();
  }));
  for (int k = 0; k < 3; ++k) expectClose(got[k], rankTensor(DType::kF32, {4}, k));
}

TEST(RuntimeCommAsync, TimeoutIsReportedAtWaitAndLaterOperationsFailAtOnce) {
  auto st = onRanks(
      2, {{"tp", {0, 1}}}, false,
      [&](int r, RankComms& c) -> Status {
        if (r == 1) return Status::OK();  // never joins
        Tensor t = Tensor::zeros(DType::kF32, {8}), u = Tensor::zeros(DType::kF32, {8});
        auto t0 = std::chrono::steady_clock::now();
        ASSIGN_OR_RETURN(auto w, c.groups[0]->startAllReduceSum(t));
        ASSIGN_OR_RETURN(auto later, c.groups[0]->startAllReduceSum(u));
        // Starting does not wait for the peer.
        EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5);
        Status first = w->wait();
        EXPECT_FALSE(first.ok());
        EXPECT_NE(first.message().find("timeout"), std::string::npos) << first.message();
        auto t1 = std::chrono::steady_clock::now();
        Status second = later->wait();
        EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 0.5);
        EXPECT_NE(second.message().find("an earlier one failed"), std::string::npos) << second.message();
        return first;
      },
      std::chrono::seconds(2));
  ASSERT_FALSE(st[0].ok());
  EXPECT_NE(st[0].message().find("rank 0"), std::string::npos) << st[0].message();
  EXPECT_NE(st[0].message().find("all-reduce"), std::string::npos) << st[0].message();
  EXPECT_TRUE(st[1].ok());
}

TEST(RuntimeCommAsync, AbortFailsQueuedOperationsAtOnce) {
  double waited = 0;
  auto st = onRanks(
      2, {{"tp", {0, 1}}}, false,
      [&](int r, RankComms& c) -> Status {
        if (r == 1) return Status::OK();  // never joins
        Tensor t = Tensor::zeros(DType::kF32, {8}), u = Tensor::zeros(DType::kF32, {8});
        ASSIGN_OR_RETURN(auto running, c.groups[0]->startAllReduceSum(t));
        ASSIGN_OR_RETURN(auto queued, c.groups[0]->startAllReduceSum(u));
        std::thread stopper([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          c.abortAll();
        });
        auto t0 = std::chrono::steady_clock::now();
        Status b = queued->wait();
        waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        Status a = running->wait();  // as a blocking call: at the timeout
        stopper.join();
        EXPECT_FALSE(a.ok());
        EXPECT_FALSE(b.ok());
        EXPECT_NE(b.message().find("aborted"), std::string::npos) << b.message();
        // Nothing starts on an aborted communicator.
        auto after = c.groups[0]->startAllReduceSum(t);
        EXPECT_FALSE(after.ok());
        return b;
      },
      std::chrono::seconds(4));
  EXPECT_FALSE(st[0].ok());
  EXPECT_LT(waited, 2.0);  // the queued operation fails at the abort, not at the 4 s timeout
}

}  // namespace
}  // namespace pcc
