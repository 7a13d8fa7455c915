// cse: structure and numbers.
#include "passes_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

TEST(PassesCse, MergesDuplicateChainsAndConstants) {
  auto g = parseOrFail(
      "graph @c(%x: f32[4,6], %c1: f32[6] const dense<f32[6]: 1, 2, 3, 4, 5, 6>,\n"
      "         %c2: f32[6] const dense<f32[6]: 1, 2, 3, 4, 5, 6>, %w: f32[6,6] const)\n"
      "    -> (%o1: f32[4,6], %o2: f32[4,6]) {\n"
      "  %a1 = Add(%x, %c1) : f32[4,6]\n"
      "  %a2 = Add(%x, %c2) : f32[4,6]\n"
      "  %m1 = MatMul(%a1, %w) : f32[4,6]\n"
      "  %m2 = MatMul(%a2, %w) : f32[4,6]\n"
      "  %s1 = Softmax(%m1) {axis = -1} : f32[4,6]\n"
      "  %s2 = Softmax(%m2) {axis = -1} : f32[4,6]\n"
      "  %o1 = Mul(%s1, %x) : f32[4,6]\n"
      "  %o2 = Mul(%x, %s2) : f32[4,6]\n"
      "  return %o1, %o2\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "cse"));
  // Operand order matters to CSE: the two Muls stay apart.
  EXPECT_EQ(opNames(*g), (std::vector<std::string>{"Add", "MatMul", "Softmax", "Mul", "Mul"}));
  EXPECT_EQ(g->findValue("c2"), nullptr);
  EXPECT_EQ(g->nodes()[0]->input(1), g->findValue("c1"));
  EXPECT_EQ(g->nodes()[4]->input(1), g->nodes()[2]->output());
  expectNumericallyEquivalent(*before, *g);
  EXPECT_FALSE(runPass(*g, "cse"));
}

TEST(PassesCse, MergesMultiOutputNodes) {
  auto g = parseOrFail(
      "graph @s(%x: f32[2,4]) -> (%r: f32[2,2]) {\n"
      "  %a, %b = Split(%x) {axis = 1, num_outputs = 2} : f32[2,2], f32[2,2]\n"
      "  %c, %d = Split(%x) {num_outputs = 2, axis = 1} : f32[2,2], f32[2,2]\n"
      "  %e = Sub(%a, %d) : f32[2,2]\n"
      "  %f = Sub(%c, %b) : f32[2,2]\n"
      "  %r = Add(%e, %f) : f32[2,2]\n"
      "  return %r\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "cse"));
  // Both Subs become Sub(%a, %b) and merge too.
  EXPECT_EQ(opNames(*g), (std::vector<std::string>{"Split", "Sub", "Add"}));
  EXPECT_EQ(g->nodes()[2]->input(0), g->nodes()[2]->input(1));
  expectNumericallyEquivalent(*before, *g);
}

TEST(PassesCse, LeavesDistinctNodesAlone) {
  auto g = parseOrFail(
      "graph @d(%x: f32[2,2], %one32: f32[1] const dense<f32[1]: 1>, %one64: f64[1] const dense<f64[1]: 1>)\n"
      "    -> (%a: f32[2,2], %b: f32[2,2], %c: f32[2,2], %d: f32[2,2], %e: f32[2,2], %f: f32[1], %h: f64[1]) {\n"
      "  %a = Softmax(%x) {axis = 0} : f32[2,2]\n"
      "  %b = Softmax(%x) {axis = 1} : f32[2,2]\n"
      "  %c = Relu(%x) : f32[2,2]\n"
      "  %d = Relu(%x) : f32[2,2] @stage(1)\n"
      "  %e = Relu(%x) : f32[2,2] #shard<[dp,-]>\n"
      "  %f = Relu(%one32) : f32[1]\n"
      "  %h = Relu(%one64) : f64[1]\n"
      "  return %a, %b, %c, %d, %e, %f, %h\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  std::string text = printGraph(*g);
  EXPECT_FALSE(runPass(*g, "cse"));
  EXPECT_EQ(printGraph(*g), text);
}

TEST(PassesCse, EmptyIntAndFloatListsDiffer) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  AttrMap ints, floats;
  ints.set("v", std::vector<int64_t>{});
  floats.set("v", std::vector<float>{});
  Node* a = addInferred(g, OpKind::Identity, {x}, ints);
  Node* b = addInferred(g, OpKind::Identity, {x}, floats);
  g.setOutputs({a->output(), b->output()});
  EXPECT_FALSE(runPass(g, "cse"));
  EXPECT_EQ(g.numNodes(), 2u);
}

}  // namespace
}  // namespace pcc
