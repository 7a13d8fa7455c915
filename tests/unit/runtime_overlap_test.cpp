// The executor's wait rule for collectives and receives in flight
// (runtime/executor.cpp), on one rank whose peer a communicator simulates:
// its started operations complete only when they are waited for, and each
// wait first checks that the rank left the operation's memory alone while it
// was in flight, so a missing wait is an error here, not a race.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "runtime/executor.h"
#include "runtime_test_util.h"

namespace pcc {
namespace {

using namespace testing_rt;

/// What the simulated communicator saw, in order: "start NAME" and "wait NAME".
using Events = std::vector<std::string>;

/// A started operation of FakePeer: the bytes of `watched` are copied at the
/// start and compared at wait(), before `complete` runs.
class FakeWork final : public CommWork {
 public:
  FakeWork(std::string name, std::vector<Tensor> watched, std::function<Status()> complete, Events* events,
           std::chrono::milliseconds delay = {})
      : name_(std::move(name)), watched_(std::move(watched)), complete_(std::move(complete)), events_(events),
        delay_(delay) {
    for (const Tensor& t : watched_) {
      const auto* b = static_cast<const uint8_t*>(t.raw());
      snapshot_.emplace_back(b, b + t.nbytes());
    }
    events_->push_back("start " + name_);
  }
  Status wait() override {
    if (done_) return status_;
    done_ = true;
    events_->push_back("wait " + name_);
    for (size_t k = 0; k < watched_.size(); ++k)
      if (std::memcmp(watched_[k].raw(), snapshot_[k].data(), snapshot_[k].size()) != 0)
        return status_ = internalError(name_, ": its memory was written while it was in flight");
    status_ = complete_();
    std::this_thread::sleep_for(delay_);  // the operation still runs when its wait begins
    at_ = Clock::now();
    return status_;
  }
  Clock::time_point finishedAt() const override { return at_; }

 private:
  std::string name_;
  std::vector<Tensor> watched_;
  std::vector<std::vector<uint8_t>> snapshot_;
  std::function<Status()> complete_;
  Events* events_;
  std::chrono::milliseconds delay_;
  bool done_ = false;
  Status status_;
  Clock::time_point at_;
};

/// Rank `me` of a group of two whose other member is simulated: it adds 100
/// to every element of an all-reduce, gathers a copy of this rank's piece plus
/// 1000, and sends 10 * k + i as element i of its k-th transfer (the data is
/// there at once: a receive writes it when it is posted).
class FakePeer final : public Communicator {
 public:
  FakePeer(int me, Events* events, std::chrono::milliseconds delay = {}) : me_(me), events_(events), delay_(delay) {}
  int rank() const override { return me_; }
  int size() const override { return 2; }
  bool startsInBackground() const override { return true; }

  Status allReduceSum(Tensor& t) override { return startAndWait(startAllReduceSum(t)); }
  Status allGather(const Tensor& in, int dim, Tensor* out) override { return startAndWait(startAllGather(in, dim, out)); }
  Status reduceScatterSum(const Tensor&, int, Tensor*) override { return unsupported("not simulated"); }
  Status allToAll(const Tensor&, int, int, Tensor*) override { return unsupported("not simulated"); }
  Status send(const Tensor&, int) override { return unsupported("not simulated"); }
  Status recv(Tensor* t, int peer) override { return startAndWait(startRecv(t, peer)); }

  StatusOr<std::unique_ptr<CommWork>> startAllReduceSum(Tensor& t) override {
    Tensor mine = t;
    return work("all-reduce", {t}, [mine]() mutable {
      for (int64_t i = 0; i < mine.numel(); ++i) mine.mutableData<float>()[i] += 100;
      return Status::OK();
    });
  }
  StatusOr<std::unique_ptr<CommWork>> startAllGather(const Tensor& in, int dim, Tensor* out) override {
    if (dim != 0) return unsupported("not simulated");
    return work("all-gather", {in}, [in, out, me = me_] {
      Dims shape = in.shape();
      shape[0] *= 2;
      Tensor all = Tensor::zeros(in.dtype(), shape);
      for (int64_t i = 0; i < in.numel(); ++i) {
        const float v = in.data<float>()[i];
        all.mutableData<float>()[me * in.numel() + i] = v;
        all.mutableData<float>()[(1 - me) * in.numel() + i] = v + 1000;
      }
      *out = all;
      return Status::OK();
    });
  }
  StatusOr<std::unique_ptr<CommWork>> startRecv(Tensor* t, int) override {
    const int k = transfers_++;
    for (int64_t i = 0; i < t->numel(); ++i) t->mutableData<float>()[i] = static_cast<float>(10 * k + i);
    return work("recv", {*t}, [] { return Status::OK(); });
  }

 private:
  StatusOr<std::unique_ptr<CommWork>> work(const std::string& what, std::vector<Tensor> watched,
                                           std::function<Status()> complete) {
    const std::string name = strCat(what, " #", ++count_[what]);
    return std::unique_ptr<CommWork>(new FakeWork(name, std::move(watched), std::move(complete), events_, delay_));
  }
  static Status startAndWait(StatusOr<std::unique_ptr<CommWork>> w) {
    if (!w.ok()) return w.status();
    return (*w)->wait();
  }

  int me_;
  Events* events_;
  std::chrono::milliseconds delay_;  // each wait takes this long
  std::map<std::string, int> count_;
  int transfers_ = 0;
};

/// Places `id` at `offset` in rank program `p`'s arena.
void place(plan::RankProgram* p, int id, int64_t offset) { p->mutable_buffers(id)->set_arena_offset(offset); }

/// A tp=2 plan whose memory plan reuses collectives' memory: rank 0's program
///   a@0 = Relu(x); g@64 = AllGather(a); FREE a; y@0 = Neg(x)   (over a: waits for the gather)
///   r@128 = AllReduce(y); z@192 = Neg(x); s@256 = AllReduce(z)    (r still in flight)
///   d@320 = AllReduce(x); FREE d; w@320 = Neg(x)                  (over d: waits for it)
///   outputs Identity(g), Identity(r), Identity(s), Identity(w)
plan::Plan reusePlan() {
  plan::Plan p;
  addIo(&p, true, "x", f32({4}));
  const char* outs[] = {"g", "r", "s", "w"};
  addIo(&p, false, "g", f32({8}));
  for (int k = 1; k < 4; ++k) addIo(&p, false, outs[k], f32({4}));
  addGroup(&p, "tp", {0, 1});
  for (int rank = 0; rank < 2; ++rank) {
    plan::RankProgram* prog = p.add_ranks();
    ProgBuilder b(prog, rank);
    int x = b.buffer("x", f32({4}));
    int a = b.buffer("a", f32({4})), g = b.buffer("g", f32({8})), y = b.buffer("y", f32({4}));
    int r = b.buffer("r", f32({4})), z = b.buffer("z", f32({4})), s = b.buffer("s", f32({4}));
    int d = b.buffer("d", f32({4})), w = b.buffer("w", f32({4}));
    place(prog, a, 0), place(prog, g, 64), place(prog, y, 0), place(prog, r, 128);
    place(prog, z, 192), place(prog, s, 256), place(prog, d, 320), place(prog, w, 320);
    prog->set_arena_bytes(384);
    b.input(x, 0);
    b.kernel("Relu", {x}, {a});
    b.collective(plan::Instruction::ALL_GATHER, a, g, 0);
    b.free({a});
    b.kernel("Neg", {x}, {y});
    b.collective(plan::Instruction::ALL_REDUCE, y, r, 0);
    b.kernel("Neg", {x}, {z});
    b.collective(plan::Instruction::ALL_REDUCE, z, s, 0);
    b.collective(plan::Instruction::ALL_REDUCE, x, d, 0);
    b.free({d});
    b.kernel("Neg", {x}, {w});
    int k = 0;
    for (int from : {g, r, s, w}) {
      int o = b.buffer(strCat("out_", outs[k]), from == g ? f32({8}) : f32({4}));
      b.kernel("Identity", {from}, {o});
      if (rank == 0) b.output(o, k);
      ++k;
    }
  }
  return p;
}

TEST(RuntimeOverlap, InstructionsReusingACollectivesMemoryWaitForIt) {
  LoadedPlan lp = writeAndLoad("overlap_reuse", reusePlan());
  auto exec = Executor::create(lp, lp.plan.ranks(0), /*verifyChecksums=*/false);
  ASSERT_TRUE(exec.ok()) << exec.status().message();
  Events events;
  RankComms comms;
  comms.groups.push_back(std::make_unique<FakePeer>(0, &events));
  Tensor x = Tensor::fromVector<float>(DType::kF32, {4}, {-1.5f, -0.5f, 0.5f, 1.5f});
  std::vector<OutputPiece> outs;
  Status st = (*exec)->run({x}, &comms, &outs);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(outs.size(), 4u);
  std::sort(outs.begin(), outs.end(), [](const OutputPiece& u, const OutputPiece& v) { return u.index < v.index; });
  expectClose(outs[0].tensor,
              Tensor::fromVector<float>(DType::kF32, {8}, {0, 0, 0.5f, 1.5f, 1000, 1000, 1000.5f, 1001.5f}));
  Tensor minusX = Tensor::fromVector<float>(DType::kF32, {4}, {1.5f, 0.5f, -0.5f, -1.5f});
  Tensor plus100 = Tensor::fromVector<float>(DType::kF32, {4}, {101.5f, 100.5f, 99.5f, 98.5f});
  expectClose(outs[1].tensor, plus100);
  expectClose(outs[2].tensor, plus100);
  expectClose(outs[3].tensor, minusX);
  // Overlap: the second all-reduce started while the first was in flight,
  // and the gather was waited for before the write over its input.
  auto at = [&](const std::string& e) {
    return std::find(events.begin(), events.end(), e) - events.begin();
  };
  EXPECT_LT(at("start all-reduce #2"), at("wait all-reduce #1"));
  EXPECT_LT(at("wait all-gather #1"), at("start all-reduce #1"));
  EXPECT_LT(at("wait all-reduce #3"), at("wait all-reduce #1"));  // waited at w's write, not at the end
  EXPECT_EQ((*exec)->collectiveTimes().operations, 4);
}

/// Two all-reduces started back to back, then read: r1@0 = AllReduce(x),
/// r2@64 = AllReduce(x), Identity(r1), Identity(r2).
plan::Plan twoInFlightPlan() {
  plan::Plan p;
  addIo(&p, true, "x", f32({4}));
  addIo(&p, false, "o1", f32({4}));
  addIo(&p, false, "o2", f32({4}));
  addGroup(&p, "tp", {0, 1});
  for (int rank = 0; rank < 2; ++rank) {
    plan::RankProgram* prog = p.add_ranks();
    ProgBuilder b(prog, rank);
    int x = b.buffer("x", f32({4}));
    int r1 = b.buffer("r1", f32({4})), r2 = b.buffer("r2", f32({4}));
    int o1 = b.buffer("o1", f32({4})), o2 = b.buffer("o2", f32({4}));
    place(prog, r1, 0), place(prog, r2, 64);
    prog->set_arena_bytes(128);
    b.input(x, 0);
    b.collective(plan::Instruction::ALL_REDUCE, x, r1, 0);
    b.collective(plan::Instruction::ALL_REDUCE, x, r2, 0);
    b.kernel("Identity", {r1}, {o1});
    b.kernel("Identity", {r2}, {o2});
    if (rank == 0) b.output(o1, 0), b.output(o2, 1);
  }
  return p;
}

// An operation in flight while the rank waits for another one is hidden
// behind compute: the second all-reduce is in flight while the rank waits
// for the first, then for it; nothing counts as hidden.
TEST(RuntimeOverlap, WaitingForAnotherOperationHidesNothing) {
  LoadedPlan lp = writeAndLoad("overlap_two_in_flight", twoInFlightPlan());
  auto exec = Executor::create(lp, lp.plan.ranks(0), /*verifyChecksums=*/false);
  ASSERT_TRUE(exec.ok()) << exec.status().message();
  Events events;
  RankComms comms;
  comms.groups.push_back(std::make_unique<FakePeer>(0, &events, std::chrono::milliseconds(50)));
  Tensor x = Tensor::fromVector<float>(DType::kF32, {4}, {1, 2, 3, 4});
  std::vector<OutputPiece> outs;
  Status st = (*exec)->run({x}, &comms, &outs);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(events, (Events{"start all-reduce #1", "start all-reduce #2", "wait all-reduce #1", "wait all-reduce #2"}));
  const Executor::CommTimes& t = (*exec)->collectiveTimes();
  EXPECT_EQ(t.operations, 2);
  // The accounting, not a speed: 50 ms and 100 ms in flight, the rank held
  // throughout but for the Identity between the waits (microseconds).
  EXPECT_GE(t.busySeconds, 0.149);
  EXPECT_GE(t.blockedSeconds, 0.099);
  EXPECT_LT(t.hiddenSeconds, 0.025);  // 50 ms if only an operation's own start and wait counted
}

/// A two-stage pipeline of 3 micro-batches: stage 0 sends Relu of its slice,
/// stage 1 receives it into r@0 and outputs Neg(r).
plan::Plan pipelinePlan() {
  plan::Plan p;
  addIo(&p, true, "x", f32({6, 3}));
  addIo(&p, false, "y", f32({6, 3}));
  ProgBuilder b0(p.add_ranks(), 0), b1(p.add_ranks(), 1);
  int x = b0.buffer("x", f32({2, 3}));
  int h = b0.buffer("h", f32({2, 3}));
  b0.input(x, 0, 0, 0, 2);
  b0.kernel("Relu", {x}, {h});
  b0.send(h, 1);
  int r = b1.buffer("r", f32({2, 3}));
  int y = b1.buffer("y", f32({2, 3}));
  b1.recv(r, 0);
  b1.kernel("Neg", {r}, {y});
  b1.output(y, 0, 0, 0, 2);
  for (int k = 0; k < 2; ++k) {
    plan::RankProgram* prog = p.mutable_ranks(k);
    prog->set_microbatches(3);
    prog->set_stage(k);
    if (k == 0) prog->mutable_inputs(0)->set_per_microbatch(true);
    if (k == 1) prog->mutable_outputs(0)->set_per_microbatch(true);
    prog->set_arena_bytes(64);
    place(prog, k == 0 ? h : r, 0);
  }
  setMesh(&p, 2, 1, 1);
  return p;
}

TEST(RuntimeOverlap, ReceivesArePostedAMicroBatchAheadIntoBuffersOfTheirOwn) {
  LoadedPlan lp = writeAndLoad("overlap_pipeline", pipelinePlan());
  auto exec = Executor::create(lp, lp.plan.ranks(1), /*verifyChecksums=*/false);
  ASSERT_TRUE(exec.ok()) << exec.status().message();
  Events events;
  RankComms comms;
  comms.world = std::make_unique<FakePeer>(1, &events);
  std::vector<OutputPiece> outs;
  Status st = (*exec)->run({Tensor::zeros(f32({6, 3}))}, &comms, &outs);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(outs.size(), 3u);
  for (int m = 0; m < 3; ++m) {
    EXPECT_EQ(outs[m].offset, 2 * m);
    Tensor want = Tensor::zeros(f32({2, 3}));
    for (int64_t i = 0; i < 6; ++i) want.mutableData<float>()[i] = -static_cast<float>(10 * m + i);
    expectClose(outs[m].tensor, want);
  }
  // Micro-batch m+1's receive was posted during micro-batch m, before Neg
  // read micro-batch m's r (the simulated peer's data lands at once: into a
  // buffer of its own, or micro-batch m's output would be m+1's).
  EXPECT_EQ((*exec)->receiveTimes().postedAhead, 2);
  EXPECT_EQ((*exec)->receiveTimes().operations, 3);
  EXPECT_EQ(events, (Events{"start recv #1", "start recv #2", "wait recv #1", "start recv #3", "wait recv #2",
                            "wait recv #3"}));
}

}  // namespace
}  // namespace pcc
