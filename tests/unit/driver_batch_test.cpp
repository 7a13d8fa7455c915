// Choosing the batch (compiler/batch_search.h) and the device count
// (deviceCount): the sweep's rules on made-up points, then whole compilations
// where memory caps the batch and where the latency objective takes 1.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/batch_search.h"
#include "compiler/driver.h"
#include "tests/unit/onnx_test_util.h"

namespace pcc {
namespace {

using testing::ModelBuilder;

BatchPoint point(int64_t batch, double samplesPerSecond, bool feasible = true) {
  BatchPoint p;
  p.batch = batch;
  p.samplesPerSecond = samplesPerSecond;
  p.seconds = static_cast<double>(batch) / samplesPerSecond;
  p.feasible = feasible;
  if (!feasible) p.why = "rank 0 needs more than the device offers";
  return p;
}

/// Runs a sweep with `sps(batch)` as the estimate, infeasible above
/// `fitsUpTo`. \returns the sweep.
template <typename F>
BatchSweep sweepWith(BatchSweepOptions o, F sps, int64_t fitsUpTo = INT64_MAX) {
  BatchSweep s(o);
  while (std::optional<int64_t> b = s.next()) s.add(point(*b, sps(*b), *b <= fitsUpTo));
  return s;
}

std::vector<int64_t> batches(const BatchSweep& s) {
  std::vector<int64_t> v;
  for (const BatchPoint& p : s.curve()) v.push_back(p.batch);
  return v;
}

TEST(BatchSweep, LatencyTakesOne) {
  BatchSweepOptions o;
  o.objective = Objective::kLatency;
  BatchSweep s = sweepWith(o, [](int64_t b) { return 100.0 * b; });
  EXPECT_EQ(batches(s), std::vector<int64_t>{1});
  ASSERT_TRUE(s.chosen());
  EXPECT_EQ(s.curve()[*s.chosen()].batch, 1);
}

TEST(BatchSweep, MemoryStopsTheDoublingAndTheLargestFittingBatchWins) {
  BatchSweepOptions o;  // throughput
  BatchSweep s = sweepWith(o, [](int64_t b) { return 100.0 * b; }, 16);
  EXPECT_EQ(batches(s), (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
  ASSERT_TRUE(s.chosen());
  EXPECT_EQ(s.curve()[*s.chosen()].batch, 16);
  EXPECT_NE(s.stopReason().find("batch 32 does not fit"), std::string::npos) << s.stopReason();
}

TEST(BatchSweep, StopsWhenADoublingGainsLessThanTheMargin) {
  // Samples/s saturate: 1000 * b / (b + 8); doubling 32 -> 64 gains 11%, 64 -> 128 5.9%,
  // 128 -> 256 3% (< 5%): the sweep stops at 256, which is still 3% faster.
  BatchSweepOptions o;
  BatchSweep s = sweepWith(o, [](int64_t b) { return 1000.0 * b / (b + 8); });
  EXPECT_EQ(batches(s), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(s.curve()[*s.chosen()].batch, 256);
  EXPECT_NE(s.stopReason().find("less than 5%"), std::string::npos) << s.stopReason();
  // A larger batch within 1% of a smaller one does not replace it.
  BatchSweep flat = sweepWith(o, [](int64_t b) { return b >= 4 ? 400.0 + 0.5 * static_cast<double>(b) : 100.0 * b; });
  EXPECT_EQ(batches(flat), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(flat.curve()[*flat.chosen()].batch, 4);
}

TEST(BatchSweep, TheCapEndsIt) {
  BatchSweepOptions o;
  o.maxBatch = 8;
  BatchSweep s = sweepWith(o, [](int64_t b) { return 100.0 * b; });
  EXPECT_EQ(batches(s), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(s.curve()[*s.chosen()].batch, 8);
  EXPECT_NE(s.stopReason().find("largest batch tried, 8"), std::string::npos) << s.stopReason();
}

TEST(BatchSweep, NothingFitsNothingIsChosen) {
  BatchSweep s = sweepWith(BatchSweepOptions{}, [](int64_t b) { return 100.0 * b; }, 0);
  EXPECT_EQ(batches(s), std::vector<int64_t>{1});
  EXPECT_FALSE(s.chosen());
}

TEST(DeviceCount, DefaultsToTheForcedStrategyAndRefusesAConflict) {
  CompileOptions o;
  EXPECT_EQ(*deviceCount(o), 1);
  o.tp = 2;
  EXPECT_EQ(*deviceCount(o), 2);  // --strategy tp=2 alone: 2 devices
  o.dp = 3;
  EXPECT_EQ(*deviceCount(o), 6);
  o.gpus = 6;
  EXPECT_EQ(*deviceCount(o), 6);
  o.gpus = 8;
  auto bad = deviceCount(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(bad.status().message(),
            "--strategy dp=3,tp=2 uses 6 devices but --gpus is 8 (leave out --gpus, or make them agree)");
  o.dp = 0;  // tp=2 with --gpus 8: dp takes the other 4
  EXPECT_EQ(*deviceCount(o), 8);
  o.tp = 3;
  bad = deviceCount(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--strategy tp=3 needs a multiple of 3 devices but --gpus is 8 (leave out --gpus, or make them agree)");
  CompileOptions many;
  many.dp = many.tp = 512;
  EXPECT_FALSE(deviceCount(many).ok());
}

constexpr int64_t kWidth = 512;

/// Writes DIR/model.onnx: y = relu(x @ w1) @ w2, x [batch, 512] f32, two
/// 1 MiB weights, and DIR/device.json: a device of `memoryBytes` whose
/// arithmetic is so fast that moving bytes sets every op's time (so a larger
/// batch keeps paying off until memory stops it). \returns the model's path.
std::string writeModelAndDevice(const std::string& dir, int64_t memoryBytes) {
  ModelBuilder b(17);
  b.input("x", DType::kF32, {std::string("batch"), kWidth}).output("y", DType::kF32);
  Tensor w = Tensor::zeros(DType::kF32, {kWidth, kWidth});
  for (int64_t i = 0; i < w.numel(); ++i) w.mutableData<float>()[i] = static_cast<float>(std::sin(0.1 * static_cast<double>(i))) * 0.05f;
  b.init("w1", w).init("w2", w);
  b.node("MatMul", {"x", "w1"}, {"h"}, "mm1");
  b.node("Relu", {"h"}, {"r"}, "relu");
  b.node("MatMul", {"r", "w2"}, {"y"}, "mm2");
  std::string model = dir + "/model.onnx";
  testing::writeFile(model, b.bytes());
  testing::writeFile(dir + "/device.json", strCat(R"({
  "name": "small", "description": "a device with little memory", "source": "made up for a test",
  "device": {
    "memory_bytes": )", memoryBytes, R"(, "reserved_bytes": 0, "memory_bandwidth": 1.0e11,
    "matrix_flops": {"f32": 1.0e16}, "vector_flops": {"f32": 1.0e16},
    "launch_overhead_s": 1e-6, "efficiency": {"matrix": 1.0, "vector": 1.0, "memory": 1.0}
  },
  "gpus_per_node": 8,
  "intra_node": {"name": "link", "bandwidth": 1.0e11, "latency_s": 1e-6, "efficiency": 1.0},
  "inter_node": {"name": "net", "bandwidth": 1.0e10, "latency_s": 1e-5, "efficiency": 1.0}
})"));
  return model;
}

TEST(DriverBatch, MemoryCapsTheChosenBatch) {
  std::string dir = testing::tempDir("batch_memory");
  CompileOptions o;
  o.modelPath = writeModelAndDevice(dir, 4 << 20);  // 2 MiB of weights, 2 MiB for activations
  o.clusterFile = dir + "/device.json";
  o.objective = "throughput";
  o.quiet = true;
  auto c = compileModel(o, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const plan::BatchReport& b = c->plan.plan.batch();
  EXPECT_TRUE(b.automatic());
  ASSERT_GE(b.curve_size(), 3);
  // Powers of two from 1; every one fits but the last, which stopped the sweep.
  for (int i = 0; i < b.curve_size(); ++i) {
    EXPECT_EQ(b.curve(i).batch(), int64_t{1} << i);
    EXPECT_EQ(b.curve(i).feasible(), i + 1 < b.curve_size()) << b.curve(i).batch();
    EXPECT_EQ(b.curve(i).memory_bytes() <= (4 << 20), b.curve(i).feasible()) << b.curve(i).batch();
    if (i > 0 && b.curve(i).feasible())  // more samples/s at every feasible doubling
      EXPECT_GT(b.curve(i).samples_per_second(), 1.05 * b.curve(i - 1).samples_per_second());
  }
  const plan::BatchPoint& last = b.curve(b.curve_size() - 1);
  EXPECT_NE(last.why().find("rank 0 needs"), std::string::npos) << last.why();  // the search's reason
  // The largest batch that fits is chosen, and the plan is compiled for it.
  EXPECT_EQ(b.batch(), b.curve(b.curve_size() - 2).batch());
  EXPECT_EQ(c->reference->inputs()[0]->type().shape[0], b.batch());
  EXPECT_NE(b.how().find("the most estimated samples/s within memory"), std::string::npos) << b.how();
  // The activations of a batch of 1024 [1024 x 512] f32 (2 MiB each) cannot fit.
  EXPECT_LT(b.batch(), 1024);

  // With twice the memory the choice is a larger batch.
  std::string dir2 = testing::tempDir("batch_memory2");
  o.modelPath = writeModelAndDevice(dir2, 8 << 20);
  o.clusterFile = dir2 + "/device.json";
  auto c2 = compileModel(o, nullptr);
  ASSERT_TRUE(c2.ok()) << c2.status().message();
  EXPECT_GT(c2->plan.plan.batch().batch(), b.batch());

  // --batch N is used as given, and recorded as given.
  o.batch = 3;
  auto given = compileModel(o, nullptr);
  ASSERT_TRUE(given.ok()) << given.status().message();
  EXPECT_FALSE(given->plan.plan.batch().automatic());
  EXPECT_EQ(given->plan.plan.batch().batch(), 3);
  EXPECT_EQ(given->plan.plan.batch().curve_size(), 0);
}

TEST(DriverBatch, LatencyObjectiveTakesOne) {
  CompileOptions o;
  o.modelPath = std::string(PCC_SOURCE_DIR) + "/models/mlp.onnx";
  o.gpus = 8;
  o.quiet = true;
  o.batchAuto = true;  // the same as leaving --batch out
  auto c = compileModel(o, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const plan::BatchReport& b = c->plan.plan.batch();
  EXPECT_TRUE(b.automatic());
  EXPECT_EQ(b.batch(), 1);
  ASSERT_EQ(b.curve_size(), 1);
  EXPECT_EQ(b.curve(0).batch(), 1);
  EXPECT_TRUE(b.curve(0).feasible());
  EXPECT_EQ(c->reference->inputs()[0]->type().str(), "f32[1,64]");
  EXPECT_NE(b.how().find("--objective latency takes 1"), std::string::npos) << b.how();
}

}  // namespace
}  // namespace pcc
