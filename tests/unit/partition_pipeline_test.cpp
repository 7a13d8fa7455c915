// Pipeline stages: the cut balances the stages, is optimal for the cost the
// plan is estimated with (a brute force over every cut agrees), respects each
// device's memory, and lowers to rank programs that run one micro-batch with
// matching transfers between the stages.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "ir_test_util.h"
#include "partition_test_util.h"
#include "passes/partition/pipeline.h"
#include "passes/partition/search.h"

namespace pcc {
namespace {

using testing::addInferred;

using testing::h100;

/// A device with h100 speeds and `bytes` of memory.
class SmallDevice : public CostModel {
 public:
  SmallDevice(int64_t bytes) : CostModel(h100()), bytes_(bytes) {}
  int64_t memoryCapacity() const override { return bytes_; }

 private:
  int64_t bytes_;
};

// x[batch, 64, widths[0]] -> MatMul -> Relu -> MatMul -> Relu ... (one
// MatMul and one Relu per entry of `widths` after the first).
std::unique_ptr<Graph> chain(int64_t batch, const std::vector<int64_t>& widths) {
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {batch, 64, widths[0]}});
  for (size_t i = 1; i < widths.size(); ++i) {
    Value* w = g->addConstant(strCat("w", i), Tensor::zeros(DType::kF32, {widths[i - 1], widths[i]}));
    x = addInferred(*g, OpKind::MatMul, {x, w}, {}, strCat("fc", i))->output();
    x = addInferred(*g, OpKind::Relu, {x}, {}, strCat("act", i))->output();
  }
  g->addOutput(x);
  return g;
}

std::vector<int> stagesOf(const Graph& g) {
  std::vector<int> s;
  for (const Node* n : g.nodes()) s.push_back(n->stage());
  return s;
}

double slowestStage(const Graph& g, const Partition& p, const CostModel& cm) {
  auto ranks = lowerToRanks(g, p);
  EXPECT_TRUE(ranks.ok()) << ranks.status().message();
  if (!ranks.ok()) return 0;
  PlanEstimate e = estimatePlan(*ranks, p.mesh, cm, 8, p.microbatches);
  return *std::max_element(e.stageSeconds.begin(), e.stageSeconds.end());
}

TEST(Pipeline, EqualLayersGetEqualStages) {
  auto g = chain(8, std::vector<int64_t>(9, 1024));  // 8 layers of 1024 x 1024
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 4;
  po.pp = 4;
  po.cost = &cm;
  auto p = partitionGraph(*g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->stages.size(), 4u);
  std::vector<int> s = stagesOf(*g);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  for (const StageInfo& st : p->stages) EXPECT_EQ(st.numNodes, 4u);  // two layers each
  for (int k = 0; k < 3; ++k) EXPECT_GT(p->stages[k].sendBytes, 0);
  EXPECT_EQ(p->stages[3].sendBytes, 0);
}

TEST(Pipeline, TheCutIsOptimalForThePlansEstimate) {
  // Unequal layers: 12 nodes, cut into 3 stages every possible way.
  auto g = chain(8, {256, 2048, 256, 1024, 512, 4096, 128});
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 3;
  po.pp = 3;
  po.cost = &cm;
  auto p = partitionGraph(*g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const double ours = slowestStage(*g, *p, cm);
  std::vector<Node*> nodes = g->nodes();
  const size_t n = nodes.size();
  double best = 1e30;
  int cuts = 0;
  for (size_t a = 1; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b) {
      for (size_t i = 0; i < n; ++i) nodes[i]->setStage(i < a ? 0 : i < b ? 1 : 2);
      best = std::min(best, slowestStage(*g, *p, cm));
      ++cuts;
    }
  EXPECT_EQ(cuts, 55);  // C(11, 2)
  EXPECT_GT(ours, 0);
  EXPECT_LE(ours, best * (1 + 1e-9)) << "a cut " << best / ours << "x as slow exists";
}

TEST(Pipeline, TheCutKeepsEveryStageInMemory) {
  // An embedding table of 25 MiB, cheap to read, then six 1024 x 1024
  // layers (4 MiB of weights, 2 MiB activations each): by time alone the
  // first stage takes the table and three layers; a device of 25 MiB + 10 MiB
  // holds the table and one layer at most (with the layer's input and output
  // live).
  auto g = std::make_unique<Graph>();
  Value* ids = g->addInput("ids", {DType::kI64, {8, 64}});
  Value* table = g->addConstant("table", Tensor::zeros(DType::kF32, {6400, 1024}));
  Value* x = addInferred(*g, OpKind::Gather, {table, ids}, {}, "embed")->output();
  for (int i = 0; i < 6; ++i) {
    Value* w = g->addConstant(strCat("w", i), Tensor::zeros(DType::kF32, {1024, 1024}));
    x = addInferred(*g, OpKind::MatMul, {x, w}, {}, strCat("fc", i))->output();
  }
  g->addOutput(x);
  const int64_t tableBytes = 6400 * 1024 * 4;
  SmallDevice cm(tableBytes + 10 * 1024 * 1024);
  PartitionOptions po;
  po.gpus = 2;
  po.pp = 2;
  po.cost = &cm;
  auto p = partitionGraph(*g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->stages.size(), 2u);
  for (const StageInfo& st : p->stages) EXPECT_LE(st.weightBytes + st.activationBytes, cm.memoryCapacity());
  EXPECT_LE(p->stages[0].numNodes, 2u);
  // What the plan is estimated to need agrees: every rank fits.
  auto ranks = lowerToRanks(*g, *p);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  PlanEstimate e = estimatePlan(*ranks, p->mesh, cm, 8);
  EXPECT_TRUE(e.infeasible.empty()) << e.infeasible;

  // On an h100 the same graph is cut by time alone, which the bound changed.
  auto g3 = g->clone();
  CostModel big(h100());
  po.cost = &big;
  auto r = partitionGraph(*g3, po);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->stages[0].numNodes, 4u);

  // Half that device holds no cut: the fastest is kept, and the note says so.
  auto g2 = g->clone();
  SmallDevice tiny(tableBytes / 2);
  po.cost = &tiny;
  auto q = partitionGraph(*g2, po);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_TRUE(std::any_of(q->notes.begin(), q->notes.end(),
                          [](const std::string& s) { return s.find("no cut fits") != std::string::npos; }));
}

TEST(Pipeline, RanksRunOneMicroBatchAndTransfersMatch) {
  auto g = chain(8, {64, 128, 64, 128, 64});
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 4;
  po.dp = 2;
  po.pp = 2;
  po.microbatches = 2;
  po.cost = &cm;
  auto p = partitionGraph(*g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->microbatches, 2);
  auto ranks = lowerToRanks(*g, *p);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  ASSERT_EQ(ranks->size(), 4u);
  for (const RankGraph& rg : *ranks) {
    const int stage = p->mesh.coord(rg.rank, MeshAxis::kPP), dp = p->mesh.coord(rg.rank, MeshAxis::kDP);
    EXPECT_EQ(rg.stage, stage);
    int sends = 0, recvs = 0;
    for (const Node* n : rg.graph->nodes()) {
      sends += n->op() == OpKind::Send;
      recvs += n->op() == OpKind::Recv;
      if (n->op() == OpKind::Send || n->op() == OpKind::Recv) {
        // The peer: the other stage, same replica.
        int peer = static_cast<int>(n->attrs().getInt("peer", -1));
        EXPECT_EQ(p->mesh.coord(peer, MeshAxis::kPP), 1 - stage);
        EXPECT_EQ(p->mesh.coord(peer, MeshAxis::kDP), dp);
      }
    }
    EXPECT_EQ(sends, stage == 0 ? 1 : 0) << "rank " << rg.rank;
    EXPECT_EQ(recvs, stage == 1 ? 1 : 0) << "rank " << rg.rank;
    // Stage 0 reads x, a quarter of the batch per run: replica dp's half,
    // micro-batch m at offset dp * 4 + m * 2.
    if (stage == 0) {
      ASSERT_EQ(rg.inputs.size(), 1u);
      EXPECT_EQ(rg.inputs[0].value->type().shape, (Dims{2, 64, 64}));
      EXPECT_TRUE(rg.inputs[0].perMicrobatch);
      EXPECT_EQ(rg.inputs[0].offset, dp * 4);
      EXPECT_EQ(rg.inputs[0].length, 2);
      EXPECT_TRUE(rg.outputs.empty());
    } else {
      EXPECT_TRUE(rg.inputs.empty());
      ASSERT_EQ(rg.outputs.size(), 1u);
      EXPECT_TRUE(rg.outputs[0].perMicrobatch);
      EXPECT_EQ(rg.outputs[0].offset, dp * 4);
    }
  }
  // The estimate: two stages, fill-drain over two micro-batches.
  PlanEstimate e = estimatePlan(*ranks, p->mesh, cm, 8, 2);
  ASSERT_EQ(e.stageSeconds.size(), 2u);
  const double slowest = std::max(e.stageSeconds[0], e.stageSeconds[1]);
  EXPECT_NEAR(e.seconds, e.stageSeconds[0] + e.stageSeconds[1] + slowest, 1e-15);
  EXPECT_GT(e.bubble, 0);
  EXPECT_LT(e.bubble, 1);
}

TEST(Pipeline, TheMemoryBoundHoldsForTheLastStageToo) {
  // Six 1024 x 1024 layers (4 MiB of weights, 2 MiB activations each), then
  // an embedding table of 25 MiB read by the last two nodes (6 MiB live at
  // the sum): by time alone the last stage takes the table and at least two
  // layers (33 MiB of weights); a device of 36 MiB holds the table and one
  // layer at most, so the first stage must take five layers.
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {8, 64, 1024}});
  Value* ids = g->addInput("ids", {DType::kI64, {8, 64}});
  for (int i = 0; i < 6; ++i) {
    Value* w = g->addConstant(strCat("w", i), Tensor::zeros(DType::kF32, {1024, 1024}));
    x = addInferred(*g, OpKind::MatMul, {x, w}, {}, strCat("fc", i))->output();
  }
  Value* table = g->addConstant("table", Tensor::zeros(DType::kF32, {6400, 1024}));
  Value* e = addInferred(*g, OpKind::Gather, {table, ids}, {}, "embed")->output();
  g->addOutput(addInferred(*g, OpKind::Add, {x, e}, {}, "sum")->output());
  ASSERT_EQ(g->numNodes(), 8u);
  SmallDevice cm(36 * 1024 * 1024);
  PartitionOptions po;
  po.gpus = 2;
  po.pp = 2;
  po.cost = &cm;
  auto p = partitionGraph(*g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->stages.size(), 2u);
  for (const std::string& note : p->notes) EXPECT_EQ(note.find("no cut fits"), std::string::npos) << note;
  for (size_t s = 0; s < p->stages.size(); ++s)
    EXPECT_LE(p->stages[s].weightBytes + p->stages[s].activationBytes, cm.memoryCapacity()) << "stage " << s;
  EXPECT_LE(p->stages[1].numNodes, 3u);
  auto ranks = lowerToRanks(*g, *p);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  PlanEstimate est = estimatePlan(*ranks, p->mesh, cm, 8);
  EXPECT_TRUE(est.infeasible.empty()) << est.infeasible;

  // By time alone (an h100's memory) the cut differs: its last stage would
  // not fit the small device, so the bound is what changed it.
  auto g2 = g->clone();
  CostModel big(h100());
  po.cost = &big;
  auto q = partitionGraph(*g2, po);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_GT(q->stages[1].numNodes, 3u);
  EXPECT_GT(q->stages[1].weightBytes + q->stages[1].activationBytes, cm.memoryCapacity());
}

// The bubble is the idle fraction of a fill-drain schedule: with stage times
// s_i over pp stages and m micro-batches the run takes T = sum s_i + (m - 1)
// max s_i, each stage works m s_i of it, so the bubble is
// 1 - m sum s_i / (pp T); with equal stages (pp - 1) / (pp - 1 + m).
TEST(Pipeline, TheBubbleIsTheIdleFractionOfTheStages) {
  for (int m : {1, 2, 4, 8}) {
    SCOPED_TRACE(strCat(m, " micro-batches"));
    auto g = chain(8, {64, 128, 64, 256, 64, 128, 64});
    CostModel cm(h100());
    PartitionOptions po;
    po.gpus = 3;
    po.pp = 3;
    po.microbatches = m;
    po.cost = &cm;
    auto p = partitionGraph(*g, po);
    ASSERT_TRUE(p.ok()) << p.status().message();
    auto ranks = lowerToRanks(*g, *p);
    ASSERT_TRUE(ranks.ok()) << ranks.status().message();
    PlanEstimate e = estimatePlan(*ranks, p->mesh, cm, 8, m);
    ASSERT_EQ(e.stageSeconds.size(), 3u);
    double sum = 0, slowest = 0;
    for (double s : e.stageSeconds) sum += s, slowest = std::max(slowest, s);
    const double total = sum + (m - 1) * slowest;
    EXPECT_NEAR(e.seconds, total, 1e-12 * total);
    double idle = 0;  // each stage's idle time, summed
    for (double s : e.stageSeconds) idle += total - m * s;
    EXPECT_NEAR(e.bubble, idle / (3 * total), 1e-9);
  }
  // Equal stages: (pp - 1) / (pp - 1 + m), by the same function.
  auto g = chain(8, std::vector<int64_t>(9, 512));
  CostModel cm(h100());
  auto ranks = [&](int m) {
    PartitionOptions po;
    po.gpus = 4;
    po.pp = 4;
    po.microbatches = m;
    po.cost = &cm;
    auto gg = g->clone();
    auto p = partitionGraph(*gg, po);
    EXPECT_TRUE(p.ok()) << p.status().message();
    auto r = lowerToRanks(*gg, *p);
    EXPECT_TRUE(r.ok()) << r.status().message();
    PlanEstimate e = estimatePlan(*r, p->mesh, cm, 8, m);
    return e;
  };
  for (int m : {1, 4}) {
    PlanEstimate e = ranks(m);
    // The stages differ only by the last one's missing send: nearly equal.
    double lo = *std::min_element(e.stageSeconds.begin(), e.stageSeconds.end());
    double hi = *std::max_element(e.stageSeconds.begin(), e.stageSeconds.end());
    ASSERT_LT(hi / lo, 1.5);
    EXPECT_NEAR(e.bubble, 3.0 / (3 + m), 0.1) << m << " micro-batches";
  }
}

// A value read two stages later (a skip connection from stage 0 to stage 2)
// is sent straight to the stage that reads it: every Send has a matching
// Recv on its peer, from it, and the pieces run to the right answer.
TEST(Pipeline, ASkipAcrossTwoStagesIsSentToItsReader) {
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {8, 64, 256}});
  Value* first = nullptr;
  for (int i = 0; i < 6; ++i) {
    Value* w = g->addConstant(strCat("w", i), Tensor::zeros(DType::kF32, {256, 256}));
    x = addInferred(*g, OpKind::MatMul, {x, w}, {}, strCat("fc", i))->output();
    x = addInferred(*g, OpKind::Relu, {x}, {}, strCat("act", i))->output();
    if (i == 0) first = x;
  }
  g->addOutput(addInferred(*g, OpKind::Add, {x, first}, {}, "skip")->output());
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 3;
  po.pp = 3;
  po.cost = &cm;
  auto p = partitionGraph(*g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const Node* from = first->producer();
  const Node* to = g->nodes().back();
  ASSERT_EQ(from->stage(), 0);
  ASSERT_EQ(to->stage(), 2);
  auto ranks = lowerToRanks(*g, *p);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  ASSERT_EQ(ranks->size(), 3u);
  // (sender, receiver) -> count, from the Sends and from the Recvs.
  std::map<std::pair<int, int>, int> sends, recvs;
  for (const RankGraph& rg : *ranks)
    for (const Node* n : rg.graph->nodes()) {
      int peer = static_cast<int>(n->attrs().getInt("peer", -1));
      if (n->op() == OpKind::Send) ++sends[{rg.rank, peer}];
      if (n->op() == OpKind::Recv) ++recvs[{peer, rg.rank}];
    }
  EXPECT_EQ(sends, recvs);
  const int s0 = p->mesh.rankOf(0, 0, 0), s1 = p->mesh.rankOf(1, 0, 0), s2 = p->mesh.rankOf(2, 0, 0);
  EXPECT_EQ((sends[{s0, s2}]), 1) << "the skip goes from stage 0 to stage 2";
  EXPECT_EQ((sends[{s0, s1}]), 1);
  EXPECT_EQ((sends[{s1, s2}]), 1);
}

TEST(Pipeline, MicroBatchesMustDivideTheBatch) {
  auto g = chain(6, {64, 64});
  PartitionOptions po;
  po.gpus = 2;
  po.pp = 2;
  po.microbatches = 4;
  auto p = partitionGraph(*g, po);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("does not divide"), std::string::npos) << p.status().message();
}

// A generation plan's prefill follows its decode step's stages: each node in
// the stage of its namesake, a node the other graph lacks in the stage of the
// node before it, stages out of graph order refused.
TEST(Pipeline, FollowedStagesAreTheOtherPartitionsAndOutOfOrderOnesAreRefused) {
  CostModel cm(h100());
  auto decode = chain(8, {256, 2048, 256, 1024, 512, 4096, 128});
  PartitionOptions po;
  po.gpus = 3;
  po.pp = 3;
  po.cost = &cm;
  auto cut = partitionGraph(*decode, po);
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  std::map<std::string, int> stages;
  for (const Node* n : decode->nodes()) stages[partitionKey(*n)] = n->stage();
  // The same chain at another batch, with one node of its own after fc3.
  auto prefill = chain(32, {256, 2048, 256, 1024, 512, 4096, 128});
  Node* fc3 = nullptr;
  for (Node* n : prefill->nodes())
    if (n->name() == "fc3") fc3 = n;
  ASSERT_NE(fc3, nullptr);
  Value* extra = addInferred(*prefill, OpKind::Neg, {fc3->output()}, {}, "extra")->output();
  addInferred(*prefill, OpKind::Neg, {extra}, {}, "extra2");  // dead end: kept, no reader
  po.pinnedStages = &stages;
  auto followed = partitionGraph(*prefill, po);
  ASSERT_TRUE(followed.ok()) << followed.status().message();
  for (const Node* n : prefill->nodes()) {
    auto it = stages.find(partitionKey(*n));
    if (it != stages.end()) EXPECT_EQ(n->stage(), it->second) << n->name();
  }
  std::vector<int> s = stagesOf(*prefill);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  // Out of order: the first node in the last stage.
  std::map<std::string, int> backwards = stages;
  backwards[partitionKey(*prefill->nodes().front())] = 2;
  auto again = chain(32, {256, 2048, 256, 1024, 512, 4096, 128});
  po.pinnedStages = &backwards;
  auto refused = partitionGraph(*again, po);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("in graph order"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace pcc
