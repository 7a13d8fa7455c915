// Region nodes (If, Loop, Scan) under partitioning: replicated on every rank.
#include <gtest/gtest.h>

#include "compiler/ir/text.h"
#include "compiler/ir/verifier.h"
#include "passes/partition/partitioner.h"

namespace pcc {
namespace {

TEST(PartitionRegions, RegionNodesAreReplicated) {
  // The batch of %x is split over dp=2; the Loop reads the MatMul's output and
  // must see it whole, so it is gathered first, and the Loop's outputs are
  // replicated on both ranks.
  auto parsed = parseGraph(R"(
graph @main(%x: f32[4,3], %w: f32[3,2] const, %m: i64[] const dense<i64[]: 2>) -> (%v: f32[4,2]) {
  %h = MatMul(%x, %w) : f32[4,2]
  %v = Loop(%m, _, %h) : f32[4,2] {
    graph @body(%i: i64[], %c: bool[], %a: f32[4,2]) -> (%c: bool[], %t: f32[4,2]) {
      %t = Tanh(%a) : f32[4,2]
      return %c, %t
    }
  }
  return %v
}
)");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  Graph& g = **parsed;
  ASSERT_TRUE(verifyGraph(g).ok());
  PartitionOptions o;
  o.gpus = 2;
  auto p = partitionGraph(g, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->mesh.dp, 2);
  Node* loop = g.nodes()[1];
  ASSERT_EQ(loop->op(), OpKind::Loop);
  EXPECT_EQ(g.nodes()[0]->output()->sharding()->str(), "[dp,-]");
  EXPECT_TRUE(loop->output()->sharding()->isReplicated());
  EXPECT_TRUE(p->inputSharding.at({loop, 2}).isReplicated());
  ASSERT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();

  auto ranks = lowerToRanks(g, *p);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  ASSERT_EQ(ranks->size(), 2u);
  for (const RankGraph& rg : *ranks) {
    Status v = verifyGraph(*rg.graph);
    EXPECT_TRUE(v.ok()) << "rank " << rg.rank << ": " << v.message();
    std::vector<std::string> ops;
    for (const Node* n : rg.graph->nodes()) ops.emplace_back(n->opName());
    EXPECT_EQ(ops, (std::vector<std::string>{"MatMul", "AllGather", "Loop"})) << "rank " << rg.rank;
    const Node* rloop = rg.graph->nodes().back();
    ASSERT_EQ(rloop->numBodies(), 1u);
    EXPECT_EQ(rloop->output()->type().str(), "f32[4,2]");
    EXPECT_EQ(rloop->body(0)->nodes()[0]->op(), OpKind::Tanh);
  }
}

TEST(PartitionRegions, DynamicRegionNodesAreReplicatedWithTheirRunTimeOperands) {
  // The trip count and the If's condition are run-time inputs: every rank
  // reads them whole, and runs both region nodes on replicated operands.
  auto parsed = parseGraph(R"(
graph @main(%x: f32[4,3], %m: i64[], %c: bool[], %w: f32[3,2] const) -> (%y: f32[4,2]) {
  %h = MatMul(%x, %w) : f32[4,2]
  %v = Loop(%m, _, %h) : f32[4,2] {
    graph @body(%i: i64[], %k: bool[], %a: f32[4,2]) -> (%k: bool[], %t: f32[4,2]) {
      %t = Tanh(%a) : f32[4,2]
      return %k, %t
    }
  }
  %y = If(%c, %v) : f32[4,2] {
    graph @then_branch(%p: f32[4,2]) -> (%r: f32[4,2]) {
      %r = Relu(%p) : f32[4,2]
      return %r
    }
    graph @else_branch(%q: f32[4,2]) -> (%q: f32[4,2]) {
      return %q
    }
  }
  return %y
}
)");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  Graph& g = **parsed;
  ASSERT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
  PartitionOptions o;
  o.gpus = 2;
  auto p = partitionGraph(g, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  Node* loop = g.nodes()[1];
  Node* branch = g.nodes()[2];
  ASSERT_EQ(loop->op(), OpKind::Loop);
  ASSERT_EQ(branch->op(), OpKind::If);
  EXPECT_TRUE(p->inputSharding.at({loop, 0}).isReplicated());
  EXPECT_TRUE(p->inputSharding.at({loop, 2}).isReplicated());
  EXPECT_TRUE(p->inputSharding.at({branch, 0}).isReplicated());
  EXPECT_TRUE(branch->output()->sharding()->isReplicated());
  auto ranks = lowerToRanks(g, *p);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  ASSERT_EQ(ranks->size(), 2u);
  for (const RankGraph& rg : *ranks) {
    Status v = verifyGraph(*rg.graph);
    EXPECT_TRUE(v.ok()) << "rank " << rg.rank << ": " << v.message();
    std::vector<std::string> ops;
    for (const Node* n : rg.graph->nodes()) ops.emplace_back(n->opName());
    EXPECT_EQ(ops, (std::vector<std::string>{"MatMul", "AllGather", "Loop", "If"})) << "rank " << rg.rank;
    EXPECT_EQ(rg.graph->nodes()[2]->input(0)->type().str(), "i64[]");
    EXPECT_EQ(rg.graph->nodes()[3]->numBodies(), 2u);
  }
}

}  // namespace
}  // namespace pcc
