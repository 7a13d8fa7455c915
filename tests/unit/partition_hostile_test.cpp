// Inputs a hostile user would give the partitioner: empty tensors (a zero
// dimension once divided by in the dimension maps) and a device count far
// beyond what a small model can use (once minutes of costing and gigabytes).
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "compiler/ir/text.h"
#include "ir_test_util.h"
#include "partition_test_util.h"
#include "passes/partition/dim_map.h"
#include "passes/partition/partitioner.h"
#include "passes/partition/search.h"

namespace pcc {
namespace {

std::unique_ptr<Graph> parse(const char* text) {
  auto g = parseGraph(text, "test.ir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(g).value() : nullptr;
}

// A Reshape to a zero dimension (allowzero) and an empty Slice, both read by
// an elementwise op.
const char kEmpty[] = R"(
graph @main(%x: f32[4,6], %shape: i64[3] const dense<i64[3]: 0, 3, 2>, %st: i64[1] const dense<i64[1]: 2>,
            %en: i64[1] const dense<i64[1]: 2>, %ax: i64[1] const dense<i64[1]: 0>) -> (%y: f32[0,3,2], %z: f32[0,6]) {
  %s = Slice(%x, %st, %en, %ax) : f32[0,6]
  %r = Reshape(%s, %shape) {allowzero = 1} : f32[0,3,2]
  %y = Relu(%r) : f32[0,3,2]
  %z = Neg(%s) : f32[0,6]
  return %y, %z
}
)";

TEST(PartitionHostile, AZeroDimensionMapsTrivially) {
  // The reshape rule divided by the zero dim (SIGFPE).
  EXPECT_EQ(reshapeLinks({0, 4}, {0, 2, 2}).size(), 2u);
  for (const DimLink& l : reshapeLinks({4, 0}, {2, 2, 0})) EXPECT_EQ(l.outDim, -1);
  for (const DimLink& l : reshapeLinks({2, 3}, {0, 6})) EXPECT_EQ(l.outDim, -1);
  auto g = parse(kEmpty);
  ASSERT_NE(g, nullptr);
  for (const Node* n : g->nodes()) {
    OpDimMap m = dimMapFor(*n);
    for (const auto& links : m.links)
      for (const DimLink& l : links) EXPECT_EQ(l.outDim, -1) << n->name() << " links an empty tensor";
  }
  // Partitioned over 1, 2 and 4 devices, dp and tp.
  for (int gpus : {1, 2, 4}) {
    for (int tp : {1, gpus}) {
      auto copy = parse(kEmpty);
      PartitionOptions po;
      po.gpus = gpus;
      po.tp = tp;
      auto p = partitionGraph(*copy, po);
      ASSERT_TRUE(p.ok()) << p.status().message();
      auto ranks = lowerToRanks(*copy, *p);
      ASSERT_TRUE(ranks.ok()) << ranks.status().message();
    }
  }
}

// x[1, 4, 8] -> MatMul(8 x 16) -> Relu -> MatMul(16 x 8): no dim beyond 16.
std::unique_ptr<Graph> tinyMlp() {
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {1, 4, 8}});
  Value* w1 = g->addConstant("w1", Tensor::zeros(DType::kF32, {8, 16}));
  Value* w2 = g->addConstant("w2", Tensor::zeros(DType::kF32, {16, 8}));
  Node* fc1 = testing::addInferred(*g, OpKind::MatMul, {x, w1}, {}, "fc1");
  Node* act = testing::addInferred(*g, OpKind::Relu, {fc1->output()}, {}, "act");
  Node* fc2 = testing::addInferred(*g, OpKind::MatMul, {act->output(), w2}, {}, "fc2");
  g->addOutput(fc2->output());
  return g;
}

TEST(PartitionHostile, ManyDevicesOnATinyModelCostOnlyTheMeshesItCanUse) {
  // --gpus 65536 once costed every split of 2^16 devices: tp up to 65536 on
  // a model whose largest dim is 16, and dp up to 65536 for a batch of 1
  // (each the same mesh as dp = 1), lowering up to 65536 rank programs each.
  auto g = tinyMlp();
  CostModel cm(testing::h100());
  PartitionOptions po;
  po.gpus = 65536;
  auto r = searchMesh(*g, po, cm, Objective::kLatency);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::set<std::tuple<int, int, int>> meshes;
  for (const PlanEstimate& e : r->candidates) {
    EXPECT_EQ(e.mesh.dp, 1) << e.mesh.str();
    EXPECT_LE(e.mesh.tp, 16) << e.mesh.str();
    EXPECT_TRUE(meshes.emplace(e.mesh.pp, e.mesh.dp, e.mesh.tp).second) << e.mesh.str() << " costed twice";
  }
  // tp = 1, 2, 4, 8, 16 and pp = 1, 2 (3 nodes): at most 10 meshes, costed or
  // bounded out; every other (pp, dp, tp) folded onto one of them.
  EXPECT_LE(r->candidates.size() + r->pruned, 10u);
  EXPECT_GT(r->folded, 0);
  EXPECT_EQ(r->candidates.front().mesh.size(), 1);
}

}  // namespace
}  // namespace pcc
