// Data-parallel replicas: a rank whose lowered program is, node for node, its
// stage's dp = 0 program with its peers shifted runs that program. The plan
// emitted through the shared program must be the plan emitted rank by rank,
// but for the weight file the replicas share.
#include <gtest/gtest.h>

#include <map>

#include "codegen/plan_emitter.h"
#include "ir_test_util.h"
#include "partition_test_util.h"
#include "passes/partition/partitioner.h"
#include "passes/partition/search.h"

namespace pcc {
namespace {

using testing::addInferred;

// x[8, 16, 32] -> (MatMul -> Relu) x layers, weights distinct -> sum over the 16 tokens.
std::unique_ptr<Graph> layers(int n) {
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {8, 16, 32}});
  for (int i = 0; i < n; ++i) {
    std::vector<float> w(32 * 32);
    for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>((k * 7 + i) % 13) / 13.0f - 0.5f;
    Value* c = g->addConstant(strCat("w", i), testing::f32({32, 32}, w));
    x = addInferred(*g, OpKind::MatMul, {x, c}, {}, strCat("fc", i))->output();
    x = addInferred(*g, OpKind::Relu, {x}, {}, strCat("act", i))->output();
  }
  // A sum over the tokens: the collective of a split over them.
  Value* axes = g->addConstant("axes", testing::i64({1}, {1}));
  AttrMap keep;
  keep.set("keepdims", int64_t{0});
  x = addInferred(*g, OpKind::ReduceSum, {x, axes}, keep, "sum")->output();
  g->addOutput(x);
  return g;
}

struct Case {
  int dp, tp, pp, microbatches;
};

class Replicas : public ::testing::TestWithParam<Case> {};

TEST_P(Replicas, ReplicasRunTheirLeadsProgramAndEmitTheSamePlan) {
  const Case c = GetParam();
  auto reference = layers(4);
  auto g = reference->clone();
  CostModel cm(testing::h100());
  PartitionOptions po;
  po.gpus = c.dp * c.tp * c.pp;
  po.dp = c.dp;
  po.tp = c.tp;
  po.pp = c.pp;
  po.microbatches = c.microbatches;
  po.cost = &cm;
  // The first product sums over tp (its contraction split): an all-reduce
  // over each tp group follows, whose group a replica retargets.
  std::map<std::string, TpChoice> pinned;
  for (const Node* n : g->nodes())
    if (n->name() == "fc0") pinned[partitionKey(*n)] = TpChoice{TpChoice::kContract, 0};
  if (c.tp > 1) po.pinnedTp = &pinned;
  auto p = partitionGraph(*g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto each = lowerToRanks(*g, *p);
  auto shared = lowerToRanks(*g, *p);
  ASSERT_TRUE(each.ok() && shared.ok());
  const Mesh& mesh = p->mesh;
  ASSERT_EQ(mesh.dp, c.dp);

  // Every rank at dp > 0 replicates the rank of its stage and tp coordinate at dp = 0.
  EXPECT_EQ(findReplicas(*shared, mesh), mesh.size() - mesh.size() / c.dp);
  for (RankGraph& rg : *shared) {
    const int dp = mesh.coord(rg.rank, MeshAxis::kDP);
    const int lead = mesh.rankOf(mesh.coord(rg.rank, MeshAxis::kPP), 0, mesh.coord(rg.rank, MeshAxis::kTP));
    EXPECT_EQ(rg.replicaOf, dp == 0 ? -1 : lead) << "rank " << rg.rank;
  }
  for (RankGraph& rg : *shared) {
    if (rg.replicaOf < 0) continue;
    ASSERT_TRUE(makeReplica(rg, (*shared)[rg.replicaOf]).ok());
    EXPECT_EQ(rg.graph, nullptr);
    EXPECT_EQ(&programOf(*shared, rg), (*shared)[rg.replicaOf].graph.get());
    for (const IoBind& b : rg.inputs) EXPECT_EQ(programOf(*shared, rg).findValue(b.value->name()), b.value);
  }

  auto a = emitPlan(*reference, *g, *p, *each, "layers.onnx", nullptr, nullptr);
  auto b = emitPlan(*reference, *g, *p, *shared, "layers.onnx", nullptr, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(a->plan.ranks_size(), b->plan.ranks_size());
  // The replicas' weight file is their lead's (one file per distinct program).
  EXPECT_EQ(b->weights.size(), static_cast<size_t>(mesh.size() / c.dp) + 1);  // + the reference's
  int sends = 0, collectives = 0;
  for (int r = 0; r < a->plan.ranks_size(); ++r) {
    plan::RankProgram x = a->plan.ranks(r), y = b->plan.ranks(r);
    const int lead = (*shared)[r].replicaOf;
    EXPECT_EQ(y.weight_file(), strCat("rank", lead < 0 ? r : lead, ".bin"));
    EXPECT_EQ(x.weight_file(), strCat("rank", r, ".bin"));
    for (const plan::Instruction& ins : x.instructions()) {
      sends += ins.kind() == plan::Instruction::SEND;
      collectives += ins.kind() == plan::Instruction::ALL_REDUCE || ins.kind() == plan::Instruction::ALL_GATHER ||
                     ins.kind() == plan::Instruction::REDUCE_SCATTER;
    }
    x.clear_weight_file();
    y.clear_weight_file();
    EXPECT_EQ(x.SerializeAsString(), y.SerializeAsString()) << "rank " << r;
  }
  // The groups the collectives name, in the same order.
  ASSERT_EQ(a->plan.groups_size(), b->plan.groups_size());
  for (int i = 0; i < a->plan.groups_size(); ++i)
    EXPECT_EQ(a->plan.groups(i).SerializeAsString(), b->plan.groups(i).SerializeAsString());
  // What was retargeted exists in these meshes.
  if (c.pp > 1) {
    EXPECT_GT(sends, 0);
  }
  if (c.tp > 1) {
    EXPECT_GT(collectives, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, Replicas,
                         ::testing::Values(Case{2, 1, 1, 0}, Case{2, 2, 1, 0}, Case{2, 1, 2, 2}, Case{4, 2, 2, 0}));

TEST(Replicas, AProgramThatDiffersIsItsOwn) {
  auto g = layers(2);
  CostModel cm(testing::h100());
  PartitionOptions po;
  po.gpus = 2;
  po.dp = 2;
  po.cost = &cm;
  auto p = partitionGraph(*g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto ranks = lowerToRanks(*g, *p);
  ASSERT_TRUE(ranks.ok());
  EXPECT_EQ(findReplicas(*ranks, p->mesh), 1);
  // Rank 1 holds another piece of a weight, or another attribute: its own program.
  Value* w = (*ranks)[1].graph->findValue("w0");
  ASSERT_NE(w, nullptr);
  std::vector<float> other(32 * 32, 1.0f);
  w->setConstantData(testing::f32({32, 32}, other));
  EXPECT_EQ(findReplicas(*ranks, p->mesh), 0);
  EXPECT_EQ((*ranks)[1].replicaOf, -1);
  auto again = lowerToRanks(*g, *p);
  ASSERT_TRUE(again.ok());
  (*again)[1].graph->nodes().back()->attrs().set("note", int64_t{1});
  EXPECT_EQ(findReplicas(*again, p->mesh), 0);
}

}  // namespace
}  // namespace pcc
