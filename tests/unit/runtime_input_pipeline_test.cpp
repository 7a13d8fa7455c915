// InputPipeline (runtime/input_pipeline.h): slices per rank and micro-batch in
// staging buffers reused across batches, the bounded read-ahead, errors kept
// with their batch, and cancel waking a waiting rank.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/input_pipeline.h"
#include "runtime/plan_convert.h"

namespace pcc {
namespace {

TensorType f32(Dims shape) { return {DType::kF32, std::move(shape)}; }

/// A plan with input x f32[4,2]; rank 0 binds rows [m, m+1) of x in micro-batch
/// m (2 micro-batches), rank 1 binds x whole.
plan::Plan twoRankPlan() {
  plan::Plan p;
  plan::IoDesc* in = p.add_inputs();
  in->set_name("x");
  *in->mutable_desc() = toDesc(f32({4, 2}));
  for (int r = 0; r < 2; ++r) {
    plan::RankProgram* prog = p.add_ranks();
    prog->set_rank(r);
    plan::Buffer* b = prog->add_buffers();
    b->set_id(0);
    *b->mutable_desc() = toDesc(r == 0 ? f32({1, 2}) : f32({4, 2}));
    plan::IoBinding* bind = prog->add_inputs();
    bind->set_index(0);
    bind->set_buffer(0);
    if (r == 0) {
      prog->set_microbatches(2);
      bind->set_split_dim(0);
      bind->set_offset(0);
      bind->set_length(1);
      bind->set_per_microbatch(true);
    } else {
      bind->set_split_dim(-1);
    }
  }
  return p;
}

/// Batch k: x[i] = 100 k + i.
BatchInputs batchOf(int k) {
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[i] = static_cast<float>(100 * k + i);
  return BatchInputs{{Tensor::fromVector<float>(DType::kF32, {4, 2}, v)}, {"file_" + std::to_string(k)}};
}

StagingAllocator hostStaging() {
  return [](const TensorType& t) -> StatusOr<Tensor> { return Tensor::zeros(t); };
}

std::vector<const plan::RankProgram*> progsOf(const plan::Plan& p) {
  std::vector<const plan::RankProgram*> out;
  for (const plan::RankProgram& r : p.ranks()) out.push_back(&r);
  return out;
}

TEST(InputPipeline, SlicesPerRankAndMicroBatchInReusedStagingBuffers) {
  plan::Plan p = twoRankPlan();
  PipelineOptions o;
  o.batches = 5;
  o.prefetch = 1;
  auto pipe = InputPipeline::start(p, progsOf(p), [](int k) -> StatusOr<BatchInputs> { return batchOf(k); },
                                   hostStaging(), o);
  ASSERT_TRUE(pipe.ok()) << pipe.status().message();
  std::vector<const void*> firstSlot;
  for (int k = 0; k < 5; ++k) {
    double wait = -1;
    auto r0 = (*pipe)->acquire(k, 0, &wait);
    ASSERT_TRUE(r0.ok()) << r0.status().message();
    EXPECT_GE(wait, 0.0);
    auto r1 = (*pipe)->acquire(k, 1, nullptr);
    ASSERT_TRUE(r1.ok()) << r1.status().message();
    const RankSlices& s0 = **r0;
    const RankSlices& s1 = **r1;
    ASSERT_EQ(s0.size(), 1u);
    ASSERT_EQ(s0[0].size(), 2u);  // one slice per micro-batch
    ASSERT_EQ(s1[0].size(), 1u);  // the whole input
    for (int m = 0; m < 2; ++m) {
      EXPECT_EQ(s0[0][m].type(), f32({1, 2}));
      EXPECT_EQ(s0[0][m].data<float>()[0], 100.0f * k + 2 * m);
      EXPECT_EQ(s0[0][m].data<float>()[1], 100.0f * k + 2 * m + 1);
    }
    EXPECT_EQ(s1[0][0].data<float>()[7], 100.0f * k + 7);
    EXPECT_TRUE((*pipe)->holds(s0[0][1]));
    // Two slots (prefetch 1): batch k reuses the buffers of batch k - 2.
    if (k < 2) firstSlot.push_back(s0[0][0].raw());
    else EXPECT_EQ(s0[0][0].raw(), firstSlot[k % 2]);
    (*pipe)->release(k, 0);
    (*pipe)->release(k, 1);
  }
  (*pipe)->stop();
  EXPECT_EQ((*pipe)->readSeconds().size(), 5u);
  EXPECT_FALSE((*pipe)->holds(Tensor::zeros(f32({2}))));
}

TEST(InputPipeline, ReaderStaysWithinItsPrefetch) {
  plan::Plan p = twoRankPlan();
  std::atomic<int> maxRead{-1};
  PipelineOptions o;
  o.batches = 6;
  o.prefetch = 1;
  auto pipe = InputPipeline::start(p, progsOf(p),
                                   [&](int k) -> StatusOr<BatchInputs> {
                                     maxRead = std::max(maxRead.load(), k);
                                     return batchOf(k);
                                   },
                                   hostStaging(), o);
  ASSERT_TRUE(pipe.ok());
  ASSERT_TRUE((*pipe)->acquire(0, 0, nullptr).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(maxRead.load(), 1);  // batch 0 held, batch 1 ready, no third slot
  (*pipe)->release(0, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(maxRead.load(), 1);  // rank 1 still holds batch 0
  (*pipe)->release(0, 1);
  ASSERT_TRUE((*pipe)->acquire(2, 1, nullptr).ok());
  EXPECT_EQ(maxRead.load(), 2);
}

TEST(InputPipeline, WithoutPrefetchEachBatchIsReadAfterTheLastIsReleased) {
  plan::Plan p = twoRankPlan();
  std::atomic<int> maxRead{-1};
  PipelineOptions o;
  o.batches = 3;
  o.prefetch = 0;
  auto pipe = InputPipeline::start(p, progsOf(p),
                                   [&](int k) -> StatusOr<BatchInputs> {
                                     maxRead = std::max(maxRead.load(), k);
                                     return batchOf(k);
                                   },
                                   hostStaging(), o);
  ASSERT_TRUE(pipe.ok());
  ASSERT_TRUE((*pipe)->acquire(0, 0, nullptr).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(maxRead.load(), 0);
}

TEST(InputPipeline, AnErrorStaysWithItsBatch) {
  plan::Plan p = twoRankPlan();
  PipelineOptions o;
  o.batches = 5;
  auto pipe = InputPipeline::start(p, progsOf(p),
                                   [](int k) -> StatusOr<BatchInputs> {
                                     if (k == 2) return invalidInput("dir/batch_2/input_0.pb: not a valid file");
                                     return batchOf(k);
                                   },
                                   hostStaging(), o);
  ASSERT_TRUE(pipe.ok());
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE((*pipe)->acquire(k, 0, nullptr).ok());
    (*pipe)->release(k, 0);
    (*pipe)->release(k, 1);
  }
  auto bad = (*pipe)->acquire(2, 0, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(bad.status().message(), "batch 2: dir/batch_2/input_0.pb: not a valid file");
  EXPECT_FALSE((*pipe)->acquire(4, 1, nullptr).ok());  // later batches too, no wait
  EXPECT_FALSE((*pipe)->error().ok());
}

TEST(InputPipeline, AWrongShapeNamesTheFileTheBatchAndTheInput) {
  plan::Plan p = twoRankPlan();
  PipelineOptions o;
  o.batches = 2;
  auto pipe = InputPipeline::start(p, progsOf(p),
                                   [](int k) -> StatusOr<BatchInputs> {
                                     BatchInputs in = batchOf(k);
                                     if (k == 1) in.tensors[0] = Tensor::zeros(f32({3, 2}));
                                     return in;
                                   },
                                   hostStaging(), o);
  ASSERT_TRUE(pipe.ok());
  ASSERT_TRUE((*pipe)->acquire(0, 0, nullptr).ok());
  (*pipe)->release(0, 0);
  (*pipe)->release(0, 1);
  auto bad = (*pipe)->acquire(1, 1, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "file_1: batch 1, input 0 'x': the plan expects f32[4,2], got f32[3,2]");
}

TEST(InputPipeline, CancelWakesAWaitingRank) {
  plan::Plan p = twoRankPlan();
  std::atomic<bool> go{false};
  PipelineOptions o;
  o.batches = 2;
  auto pipe = InputPipeline::start(p, progsOf(p),
                                   [&](int k) -> StatusOr<BatchInputs> {
                                     while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                                     return batchOf(k);
                                   },
                                   hostStaging(), o);
  ASSERT_TRUE(pipe.ok());
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (*pipe)->cancel();
    go = true;
  });
  auto t0 = std::chrono::steady_clock::now();
  auto got = (*pipe)->acquire(0, 0, nullptr);
  canceller.join();
  EXPECT_FALSE(got.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
}  // namespace pcc
