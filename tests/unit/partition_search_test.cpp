// The mesh search picks what the cost model says, for reasons a reader can
// check by hand: data parallelism for a large batch, tensor parallelism when
// the batch cannot be split and the matmuls are large, the smallest tp that
// fits when one device's memory is too small, and only the forced mesh when
// one is forced.
#include <gtest/gtest.h>

#include "ir_test_util.h"
#include "partition_test_util.h"
#include "passes/partition/search.h"
#include "passes/partition/tp_search.h"

namespace pcc {
namespace {

using testing::addInferred;

using testing::h100;

// x[batch, seq, k] -> MatMul(k x n) -> Relu -> MatMul(n x k): an MLP.
std::unique_ptr<Graph> mlp(int64_t batch, int64_t seq, int64_t k, int64_t n, DType t = DType::kF16) {
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {t, {batch, seq, k}});
  Value* w1 = g->addConstant("w1", Tensor::zeros(t, {k, n}));
  Value* w2 = g->addConstant("w2", Tensor::zeros(t, {n, k}));
  Node* fc1 = addInferred(*g, OpKind::MatMul, {x, w1}, {}, "fc1");
  Node* act = addInferred(*g, OpKind::Relu, {fc1->output()}, {}, "act");
  Node* fc2 = addInferred(*g, OpKind::MatMul, {act->output(), w2}, {}, "fc2");
  g->addOutput(fc2->output());
  return g;
}

const PlanEstimate* find(const SearchResult& r, int dp, int tp, int pp = 1) {
  for (const PlanEstimate& e : r.candidates)
    if (e.mesh.dp == dp && e.mesh.tp == tp && e.mesh.pp == pp) return &e;
  return nullptr;
}

TEST(MeshSearch, ALargeBatchGoesDataParallel) {
  auto g = mlp(64, 128, 768, 3072);
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 8;
  auto r = searchMesh(*g, po, cm, Objective::kThroughput);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const PlanEstimate& best = r->candidates.front();
  EXPECT_EQ(best.mesh.dp, 8);
  EXPECT_EQ(best.mesh.tp, 1);
  EXPECT_EQ(best.ranks.size(), 8u);
  // Pure data parallelism needs no collective.
  for (const RankEstimate& rk : best.ranks) EXPECT_EQ(rk.commSeconds, 0);
  // Every divisor split was costed: d = 8, 4, 2, 1 with every tp dividing
  // it (10 meshes). The 6 with 2 pipeline stages (the 3 nodes allow no more
  // than 3, and 3 divides no d) were costed or bounded out: a pipeline over
  // dp × tp cannot beat 1/pp of the one-stage dp × tp, and dp=8 beats that.
  EXPECT_EQ(r->candidates.size() + r->pruned, 16u);
  EXPECT_GT(r->pruned, 0);
  for (int d : {1, 2, 4, 8})
    for (int tp = 1; tp <= d; tp *= 2) EXPECT_NE(find(*r, d / tp, tp), nullptr) << "dp=" << d / tp << " tp=" << tp;
  // Best first.
  for (size_t i = 1; i < r->candidates.size(); ++i)
    EXPECT_GE(r->candidates[0].samplesPerSecond, r->candidates[i].samplesPerSecond);
}

TEST(MeshSearch, BatchOneWithLargeMatmulsGoesTensorParallel) {
  // Batch 1 cannot be split; two 2048 x 8192 matmuls over 2048 positions take
  // about 0.2 ms on one H100, and an all-reduce of the 8 MiB output far less.
  auto g = mlp(1, 2048, 2048, 8192);
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 8;
  auto r = searchMesh(*g, po, cm, Objective::kLatency);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const PlanEstimate& best = r->candidates.front();
  EXPECT_EQ(best.mesh.dp, 1);
  EXPECT_GE(best.mesh.tp, 4);
  const PlanEstimate* single = find(*r, 1, 1);
  ASSERT_NE(single, nullptr);
  EXPECT_LT(best.seconds, single->seconds / 2);
  // The positions are independent in an MLP: the cheapest tensor-parallel
  // plan splits the sequence (each rank takes 256 positions with the whole
  // weights) and needs no collective, which the search finds on its own.
  for (const RankEstimate& rk : best.ranks) EXPECT_EQ(rk.commSeconds, 0);
  // The batch capped dp: no candidate has dp > 1.
  for (const PlanEstimate& e : r->candidates) EXPECT_EQ(e.mesh.dp, 1);
}

// A device whose memory holds the weights only when split at least four ways.
class SmallDevice : public CostModel {
 public:
  explicit SmallDevice(int64_t capacity) : CostModel(h100()), capacity_(capacity) {}
  int64_t memoryCapacity() const override { return capacity_; }

 private:
  int64_t capacity_;
};

TEST(MeshSearch, TooLargeForOneDeviceTakesTheSmallestTpThatFits) {
  auto g = mlp(8, 256, 1024, 4096);
  const int64_t weights = 2 * 2 * 1024 * 4096;  // two f16 matrices, 16 MiB
  SmallDevice cm(weights / 4 + (4 << 20));    // a quarter of the weights plus room for activations
  PartitionOptions po;
  po.gpus = 8;
  auto r = searchMesh(*g, po, cm, Objective::kThroughput);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const PlanEstimate& best = r->candidates.front();
  EXPECT_TRUE(best.infeasible.empty()) << best.infeasible;
  EXPECT_EQ(best.mesh.tp, 4);
  // Smaller tp does not fit, and says why.
  const PlanEstimate* tp2 = find(*r, 4, 2);
  ASSERT_NE(tp2, nullptr);
  EXPECT_NE(tp2->infeasible.find("needs"), std::string::npos) << tp2->infeasible;
  EXPECT_NE(find(*r, 8, 1)->infeasible, "");
  // Infeasible ones rank after every feasible one.
  bool seenInfeasible = false;
  for (const PlanEstimate& e : r->candidates) {
    if (!e.infeasible.empty()) seenInfeasible = true;
    else EXPECT_FALSE(seenInfeasible) << "feasible " << e.mesh.str() << " after an infeasible candidate";
  }
}

TEST(MeshSearch, AForcedMeshIsTheOnlyCandidate) {
  auto g = mlp(8, 16, 64, 256);
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 4;
  po.dp = 2;
  po.tp = 2;
  auto r = searchMesh(*g, po, cm, Objective::kLatency);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->candidates.size(), 1u);
  EXPECT_EQ(r->candidates[0].mesh.dp, 2);
  EXPECT_EQ(r->candidates[0].mesh.tp, 2);
  // A forced mesh the partitioner refuses is an error.
  po.tp = 3;
  po.dp = 0;
  auto bad = searchMesh(*g, po, cm, Objective::kLatency);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not divide"), std::string::npos) << bad.status().message();
}

TEST(MeshSearch, EstimateAddsComputeAndCommunicationOfTheSlowestRank) {
  auto g = mlp(2, 64, 256, 1024, DType::kF32);
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 2;
  po.tp = 2;
  po.tensorParallelSearch = false;
  auto part = partitionGraph(*g, po);
  ASSERT_TRUE(part.ok()) << part.status().message();
  // Megatron's pair, laid on by hand: fc1 by columns, fc2 by rows.
  applyTpChoices(*g, *part, {TpChoice{TpChoice::kSplitOutput, 2}, TpChoice{TpChoice::kSplitOutput, 2},
                             TpChoice{TpChoice::kContract, 0}});
  auto ranks = lowerToRanks(*g, *part);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  PlanEstimate e = estimatePlan(*ranks, part->mesh, cm, 2);
  ASSERT_EQ(e.ranks.size(), 2u);
  // Worked by hand: each rank holds half of each weight and one all-reduce of
  // the f32 [2, 64, 256] output over 2 devices on NVLink.
  double allReduce = cm.collectiveTime(CollectiveKind::kAllReduce, 4 * 2 * 64 * 256, 2, false);
  for (const RankEstimate& rk : e.ranks) {
    EXPECT_DOUBLE_EQ(rk.commSeconds, allReduce);
    EXPECT_EQ(rk.weightBytes, 4 * (256 * 512 + 512 * 256));
    EXPECT_EQ(rk.flops, 2 * 2 * 64 * 512 * 256 + 2 * 64 * 512 + 2 * 2 * 64 * 256 * 512);
    EXPECT_GT(rk.computeSeconds, 0);
  }
  EXPECT_DOUBLE_EQ(e.seconds, std::max(e.ranks[0].seconds(), e.ranks[1].seconds()));
  EXPECT_DOUBLE_EQ(e.samplesPerSecond, 2 / e.seconds);
}

}  // namespace
}  // namespace pcc

namespace pcc {
namespace {

TEST(MeshSearch, ThePipelineBoundPrunesNothingThatWouldWin) {
  // Each mesh costed with and without the bound: the same plan wins, and
  // every pipeline left out is slower than the winner.
  for (int64_t batch : {1, 8, 64}) {
    auto g = mlp(batch, 128, 1024, 4096);
    CostModel cm(h100());
    PartitionOptions po;
    po.gpus = 8;
    auto bounded = searchMesh(*g, po, cm, Objective::kLatency);
    ASSERT_TRUE(bounded.ok()) << bounded.status().message();
    double best = bounded->candidates.front().seconds;
    for (int pp : {2, 3}) {
      for (int tp = 1; tp * pp <= 8; tp *= 2)
        for (int dp = 1; dp * tp * pp <= 8; dp *= 2) {
          if (find(*bounded, dp, tp, pp)) continue;  // costed
          PartitionOptions forced;
          forced.gpus = dp * tp * pp;
          forced.dp = dp;
          forced.tp = tp;
          forced.pp = pp;
          auto one = searchMesh(*g, forced, cm, Objective::kLatency);
          if (!one.ok() || !one->candidates.front().error.empty()) continue;
          EXPECT_GE(one->candidates.front().seconds, best * 0.99)
              << "batch " << batch << ": pp=" << pp << " dp=" << dp << " tp=" << tp << " was bounded out";
        }
    }
  }
}

TEST(MeshSearch, AGraphWithoutNodesStillGetsAPlan) {
  // Every node folded away: the output is a constant. No pipeline stage can
  // be cut, but the one-stage meshes remain.
  auto g = std::make_unique<Graph>();
  g->addInput("x", {DType::kF32, {4, 8}});
  g->addOutput(g->addConstant("c", Tensor::zeros(DType::kF32, {4, 8})));
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 2;
  auto r = searchMesh(*g, po, cm, Objective::kLatency);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const PlanEstimate& e : r->candidates) EXPECT_EQ(e.mesh.pp, 1);
}

}  // namespace
}  // namespace pcc
