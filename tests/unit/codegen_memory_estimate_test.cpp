// The estimate of a rank's peak memory (codegen/memory_estimate.h) against
// what the runtime measures when it runs the program (RunOptions::
// measureMemory): the measurement counts at least the arena, the weights and
// the model inputs and outputs, it returns to its baseline after every run,
// and on programs whose kernels allocate nothing else it equals the estimate.
#include <gtest/gtest.h>

#include "codegen/memory_estimate.h"
#include "codegen/memory_plan.h"
#include "runtime/executor.h"
#include "runtime/launcher.h"
#include "runtime/support/memory_account.h"
#include "runtime_test_util.h"

namespace pcc {
namespace {

using namespace testing_rt;
using K = plan::Instruction;

/// x[32,64] -> Relu -> Tanh -> Add(x) -> MatMul(w[64,16]) -> y[32,16]: the
/// intermediates planned in one arena (Relu and Tanh in place).
plan::Plan chain(WeightFileWriter& w0, WeightFileWriter& wr, const Tensor& w) {
  plan::Plan p;
  addIo(&p, true, "x", f32({32, 64}));
  addIo(&p, false, "y", f32({32, 16}));
  for (ProgBuilder b : {ProgBuilder(p.add_ranks(), 0, &w0), ProgBuilder(p.mutable_reference(), 0, &wr)}) {
    int x = b.buffer("x", f32({32, 64})), wb = b.weight("w", w);
    int r = b.buffer("r", f32({32, 64})), t = b.buffer("t", f32({32, 64})), s = b.buffer("s", f32({32, 64}));
    int y = b.buffer("y", f32({32, 16}));
    b.input(x, 0);
    b.kernel("Relu", {x}, {r});
    b.kernel("Tanh", {r}, {t});
    b.kernel("Add", {t, x}, {s});
    b.kernel("MatMul", {s, wb}, {y});
    b.output(y, 0);
  }
  p.mutable_reference()->set_weight_file("reference.bin");
  return p;
}

TEST(MemoryEstimate, TermsOfAPlannedProgram) {
  WeightFileWriter w0, wr;
  plan::Plan p = chain(w0, wr, pattern(f32({64, 16})));
  ASSERT_TRUE(planMemory(p.mutable_ranks(0), opMayRunInPlace).ok());
  RankMemoryEstimate m = estimateRankMemory(p.ranks(0));
  EXPECT_EQ(p.ranks(0).arena_bytes(), 32u * 64 * 4);  // r, t and s share one block
  EXPECT_EQ(m.weights, 64 * 16 * 4);
  EXPECT_EQ(m.arena, 32 * 64 * 4);
  EXPECT_EQ(m.inputs, 32 * 64 * 4);
  EXPECT_EQ(m.outputs, 32 * 16 * 4);
  EXPECT_EQ(m.comm, 0);
  EXPECT_EQ(m.kernel, 0);  // every kernel here writes its planned output
  EXPECT_EQ(m.total(), m.weights + m.arena + m.inputs + m.outputs);
}

TEST(MemoryEstimate, MeasuredPeakHoldsTheArenaAndEqualsTheEstimateHere) {
  WeightFileWriter w0, wr;
  Tensor w = pattern(f32({64, 16}));
  plan::Plan p = chain(w0, wr, w);
  ASSERT_TRUE(planMemory(p.mutable_ranks(0), opMayRunInPlace).ok());
  const RankMemoryEstimate est = estimateRankMemory(p.ranks(0));
  LoadedPlan lp = writeAndLoad("memory_estimate", p, {{"rank0.bin", &w0}, {"reference.bin", &wr}});
  Tensor x = pattern(f32({32, 64}), 0.3f);
  for (bool reference : {false, true}) {
    RunOptions o;
    o.measureMemory = true;
    o.referenceKernels = reference;
    o.iters = 3;  // outputs of an earlier run are released before the next allocates its own
    auto r = runPlan(lp, {x}, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->memory.size(), 1u);
    const RunResult::RankMemory& m = r->memory[0];
    EXPECT_EQ(m.weightBytes, est.weights);
    EXPECT_EQ(m.arenaBytes, est.arena);
    EXPECT_GE(m.peakBytes, est.weights + est.arena + est.inputs + est.outputs);
    // Nothing else allocates on this program: the measurement is the estimate.
    EXPECT_EQ(m.peakBytes, est.total()) << (reference ? "reference" : "oneDNN") << " kernels";
    EXPECT_GT(m.processPeakRss, m.peakBytes);  // one rank in this process
  }
  auto off = runPlan(lp, {x}, RunOptions());
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->memory.empty());  // not measured unless asked
}

TEST(MemoryEstimate, AccountReturnsToItsBaselineAfterEveryRun) {
  WeightFileWriter w0, wr;
  plan::Plan p = chain(w0, wr, pattern(f32({64, 16})));
  ASSERT_TRUE(planMemory(p.mutable_ranks(0), opMayRunInPlace).ok());
  LoadedPlan lp = writeAndLoad("memory_baseline", p, {{"rank0.bin", &w0}, {"reference.bin", &wr}});
  Tensor x = pattern(f32({32, 64}), 0.3f);
  std::shared_ptr<MemoryAccount> account = MemoryAccount::make();
  {
    ScopedMemoryAccount charging(account.get());
    auto exec = Executor::create(lp, lp.plan.ranks(0), /*verifyChecksums=*/true);
    ASSERT_TRUE(exec.ok()) << exec.status().message();
    const int64_t baseline = account->current();
    EXPECT_GE(baseline, static_cast<int64_t>(lp.plan.ranks(0).arena_bytes()));  // the arena, allocated once
    std::vector<OutputPiece> pieces;
    for (int run = 0; run < 3; ++run) {
      ASSERT_TRUE((*exec)->run({x}, nullptr, &pieces).ok());
      EXPECT_EQ(account->current(), baseline + 32 * 16 * 4) << "run " << run << ": the output piece is held";
      pieces.clear();
      EXPECT_EQ(account->current(), baseline) << "run " << run;
    }
  }
  EXPECT_EQ(account->current(), 0);  // the executor released its arena
}

TEST(MemoryEstimate, AllGatherStagingIsCountedAndEstimated) {
  // Two ranks gather their [4,8] halves of x into [8,8] and apply Relu.
  plan::Plan p;
  addIo(&p, true, "x", f32({8, 8}));
  addIo(&p, false, "y", f32({8, 8}));
  addGroup(&p, "tp", {0, 1});
  std::vector<WeightFileWriter> ws(2);
  for (int r = 0; r < 2; ++r) {
    ProgBuilder b(p.add_ranks(), r, &ws[r]);
    int xs = b.buffer("xs", f32({4, 8})), g = b.buffer("g", f32({8, 8})), y = b.buffer("y", f32({8, 8}));
    b.input(xs, 0, 0, 4 * r, 4);
    b.collective(K::ALL_GATHER, xs, g, 0, 0);
    b.kernel("Relu", {g}, {y});
    if (r == 0) b.output(y, 0);
  }
  WeightFileWriter wr;
  {
    ProgBuilder b(p.mutable_reference(), 0, &wr);
    p.mutable_reference()->set_weight_file("reference.bin");
    int x = b.buffer("x", f32({8, 8})), y = b.buffer("y", f32({8, 8}));
    b.input(x, 0);
    b.kernel("Relu", {x}, {y});
    b.output(y, 0);
  }
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(planMemory(p.mutable_ranks(r), opMayRunInPlace).ok());
  LoadedPlan lp = writeAndLoad("memory_gather", p,
                               {{"rank0.bin", &ws[0]}, {"rank1.bin", &ws[1]}, {"reference.bin", &wr}});
  RunOptions o;
  o.measureMemory = true;
  auto run = runPlan(lp, {pattern(f32({8, 8}))}, o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  for (int r = 0; r < 2; ++r) {
    RankMemoryEstimate est = estimateRankMemory(p.ranks(r));
    EXPECT_EQ(est.comm, 2 * 8 * 8 * 4);
    // At the all-gather the rank holds its arena and input slice, the staging
    // vector (256 + 1 bytes, not rounded) and the gathered tensor; rank 0's
    // output is allocated later, when Relu writes it (the estimate holds it
    // throughout, an upper bound).
    const int64_t atGather = est.weights + est.arena + est.inputs + (8 * 8 * 4 + 1) + 8 * 8 * 4;
    EXPECT_EQ(run->memory[r].peakBytes, atGather) << "rank " << r;
    EXPECT_LE(run->memory[r].peakBytes, est.total() + 1) << "rank " << r;
    EXPECT_LE(run->memory[r].processPeakRss, -1);  // two ranks share the process: no RSS per rank
  }
}

}  // namespace
}  // namespace pcc
