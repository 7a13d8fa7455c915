// Overlap scheduling (passes/schedule.h): collectives issued early, independent
// nodes between a collective and its first reader, collectives in their order,
// barriers kept, the reorder bounded and deterministic.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir_test_util.h"
#include "passes/schedule.h"

namespace pcc {
namespace {

using testing::parseOrFail;

// Two tensor-parallel branches, each ending in an all-reduce read at once
// (the order the partitioner emits): branch b does not depend on branch a's
// all-reduce, so it can run while that all-reduce is in flight.
const char* kTwoBranches =
    "graph @two(%x: f32[4,8], %wa: f32[8,8] const, %wb: f32[8,8] const) -> (%y: f32[4,8]) {\n"
    "  %ma = MatMul(%x, %wa) : f32[4,8] loc(\"ma\")\n"
    "  %ha = Relu(%ma) : f32[4,8] loc(\"ha\")\n"
    "  %na = MatMul(%ha, %wa) : f32[4,8] loc(\"na\")\n"
    "  %ra = AllReduce(%na) {axis = \"tp\"} : f32[4,8] loc(\"ar_a\")\n"
    "  %sa = Tanh(%ra) : f32[4,8] loc(\"read_a\")\n"
    "  %mb = MatMul(%x, %wb) : f32[4,8] loc(\"mb\")\n"
    "  %hb = Relu(%mb) : f32[4,8] loc(\"hb\")\n"
    "  %nb = MatMul(%hb, %wb) : f32[4,8] loc(\"nb\")\n"
    "  %rb = AllReduce(%nb) {axis = \"tp\"} : f32[4,8] loc(\"ar_b\")\n"
    "  %sb = Tanh(%rb) : f32[4,8] loc(\"read_b\")\n"
    "  %y = Add(%sa, %sb) : f32[4,8] loc(\"y\")\n"
    "  return %y\n"
    "}\n";

std::vector<std::string> names(const std::vector<Node*>& order) {
  std::vector<std::string> out;
  for (const Node* n : order) out.push_back(n->name());
  return out;
}

size_t at(const std::vector<std::string>& order, const std::string& name) {
  auto it = std::find(order.begin(), order.end(), name);
  EXPECT_NE(it, order.end()) << name;
  return static_cast<size_t>(it - order.begin());
}

TEST(PassesSchedule, IndependentBranchRunsBetweenACollectiveAndItsReader) {
  auto g = parseOrFail(kTwoBranches);
  ASSERT_NE(g, nullptr);
  OverlapScheduleStats stats;
  std::vector<std::string> order = names(overlapOrder(*g, {}, &stats));
  // Branch b's three nodes go between ar_a and read_a, and ar_b is issued right after nb.
  EXPECT_EQ(order, (std::vector<std::string>{"ma", "ha", "na", "ar_a", "mb", "hb", "nb", "ar_b", "read_a", "read_b",
                                             "y"}));
  EXPECT_EQ(stats.collectives, 2);
  EXPECT_EQ(stats.overlapBefore, 0);
  EXPECT_EQ(stats.overlapAfter, 4 + 1);  // ar_a: mb hb nb ar_b; ar_b: read_a
  EXPECT_GT(stats.moved, 0);

  // The graph takes the order and still verifies.
  auto r = scheduleOverlap(*g);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(names(g->nodes()), order);
  Status v = verifyGraph(*g);
  EXPECT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(nodesBeforeFirstReaders(g->nodes()), 5);
  // Scheduling a scheduled graph changes nothing.
  EXPECT_EQ(names(overlapOrder(*g)), order);
}

TEST(PassesSchedule, WindowBoundsHowFarNodesAreHoisted) {
  auto g = parseOrFail(kTwoBranches);
  ASSERT_NE(g, nullptr);
  OverlapScheduleOptions o;
  o.window = 1;  // mb (position 5) may pass read_a (position 4); hb and nb lie further
  std::vector<std::string> order = names(overlapOrder(*g, o));
  EXPECT_EQ(at(order, "mb"), at(order, "ar_a") + 1);
  EXPECT_LT(at(order, "read_a"), at(order, "hb"));
  o.window = 0;  // nothing passes a reader: the graph order
  EXPECT_EQ(names(overlapOrder(*g, o)), names(g->nodes()));
}

// Fused nodes (the rank programs after fusion) are scheduled like any node:
// only a body holding a collective, a transfer or control flow makes one a
// barrier. The program pcc emits for a two-branch MLP at tp=2.
TEST(PassesSchedule, FusedNodesAreNotBarriers) {
  auto g = parseOrFail(
      "graph @main(%x: f32[4,64], %wa1: f32[64,128] const, %wa2: f32[128,64] const, %wb1: f32[64,128] const,\n"
      "            %wb2: f32[128,64] const) -> (%y: f32[2,64]) {\n"
      "  %ra = Fused(%x, %wa1) {kind = \"epilogue\"} : f32[4,128] loc(\"a1\") {\n"
      "    graph @fused(%x: f32[4,64], %wa1: f32[64,128]) -> (%ra: f32[4,128]) {\n"
      "      %ha = MatMul(%x, %wa1) : f32[4,128]\n"
      "      %ra = Relu(%ha) : f32[4,128]\n"
      "      return %ra\n"
      "    }\n"
      "  }\n"
      "  %ya = MatMul(%ra, %wa2) : f32[4,64] loc(\"a2\")\n"
      "  %rb = Fused(%x, %wb1) {kind = \"epilogue\"} : f32[4,128] loc(\"b1\") {\n"
      "    graph @fused(%x: f32[4,64], %wb1: f32[64,128]) -> (%rb: f32[4,128]) {\n"
      "      %hb = MatMul(%x, %wb1) : f32[4,128]\n"
      "      %rb = Relu(%hb) : f32[4,128]\n"
      "      return %rb\n"
      "    }\n"
      "  }\n"
      "  %yb = MatMul(%rb, %wb2) : f32[4,64] loc(\"b2\")\n"
      "  %sa = ReduceScatter(%ya) {axis = \"tp\", dim = 0, group_size = 2} : f32[2,64] loc(\"rs_a\")\n"
      "  %sb = ReduceScatter(%yb) {axis = \"tp\", dim = 0, group_size = 2} : f32[2,64] loc(\"rs_b\")\n"
      "  %y = Add(%sa, %sb) : f32[2,64] loc(\"sum\")\n"
      "  return %y\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(names(overlapOrder(*g)), (std::vector<std::string>{"a1", "a2", "rs_a", "b1", "b2", "rs_b", "sum"}));
}

// A collective whose input is ready early stays after the collective before
// it: every rank issues them in graph order, so the ranks of a group match.
TEST(PassesSchedule, CollectivesKeepTheirOrder) {
  auto g = parseOrFail(
      "graph @c(%x: f32[4,8], %w: f32[8,8] const) -> (%y: f32[4,8]) {\n"
      "  %e = Relu(%x) : f32[4,8] loc(\"e\")\n"
      "  %m1 = MatMul(%x, %w) : f32[4,8] loc(\"m1\")\n"
      "  %m2 = MatMul(%m1, %w) : f32[4,8] loc(\"m2\")\n"
      "  %m3 = MatMul(%m2, %w) : f32[4,8] loc(\"m3\")\n"
      "  %g1 = AllReduce(%m3) {axis = \"tp\"} : f32[4,8] loc(\"late\")\n"
      "  %g2 = AllReduce(%e) {axis = \"tp\"} : f32[4,8] loc(\"early\")\n"
      "  %s = Relu(%g1) : f32[4,8] loc(\"s\")\n"
      "  %y = Add(%s, %g2) : f32[4,8] loc(\"y\")\n"
      "  return %y\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  std::vector<std::string> order = names(overlapOrder(*g));
  EXPECT_LT(at(order, "late"), at(order, "early"));
  EXPECT_EQ(order, (std::vector<std::string>{"e", "m1", "m2", "m3", "late", "early", "s", "y"}));
  EXPECT_LT(at(order, "early"), at(order, "s"));
}

// A Recv is a barrier: no node crosses it (the executor posts the receives
// that open a stage's program ahead, and sends and receives pair up in order).
TEST(PassesSchedule, NothingCrossesARecv) {
  auto g = parseOrFail(
      "graph @p(%x: f32[4,8], %w: f32[8,8] const) -> (%y: f32[4,8], %z: f32[4,8]) {\n"
      "  %m = MatMul(%x, %w) : f32[4,8] loc(\"m\")\n"
      "  %r = AllReduce(%m) {axis = \"tp\"} : f32[4,8] loc(\"ar\")\n"
      "  %y = Relu(%r) : f32[4,8] loc(\"read\")\n"
      "  %z = Tanh(%x) : f32[4,8] loc(\"after\")\n"
      "  return %y, %z\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  std::vector<std::string> free = names(overlapOrder(*g));
  EXPECT_LT(at(free, "after"), at(free, "read"));  // without a barrier, tanh is hoisted
  AttrMap attrs;
  attrs.set("peer", int64_t{1});
  Node* recv = g->addNode(OpKind::Recv, {}, {{DType::kF32, {4, 8}}}, attrs, "recv", {}, size_t{3});
  ASSERT_EQ(g->indexOf(recv), 3u);
  std::vector<std::string> order = names(overlapOrder(*g));
  EXPECT_EQ(order, (std::vector<std::string>{"m", "ar", "read", "recv", "after"}));
}

TEST(PassesSchedule, ReorderRefusesABrokenOrder) {
  auto g = parseOrFail(kTwoBranches);
  ASSERT_NE(g, nullptr);
  std::vector<Node*> nodes = g->nodes();
  std::vector<std::string> before = names(nodes);
  std::vector<Node*> swapped = nodes;
  std::swap(swapped[3], swapped[4]);  // read_a before ar_a
  EXPECT_FALSE(g->reorderNodes(swapped));
  std::vector<Node*> shorter(nodes.begin(), nodes.end() - 1);
  EXPECT_FALSE(g->reorderNodes(shorter));
  std::vector<Node*> twice = nodes;
  twice.back() = twice.front();
  EXPECT_FALSE(g->reorderNodes(twice));
  EXPECT_EQ(names(g->nodes()), before);
}

}  // namespace
}  // namespace pcc
