// dce: structure and numbers.
#include "passes_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

TEST(PassesDce, RemovesDeadChainsAndTheirConstants) {
  auto g = parseOrFail(
      "graph @d(%x: f32[2,6], %unused: f32[3], %c: f32[2,3] const, %k: f32[3] const) -> (%y: f32[2,3]) {\n"
      "  %a, %b = Split(%x) {axis = 1, num_outputs = 2} : f32[2,3], f32[2,3]\n"
      "  %dead1 = Mul(%b, %c) : f32[2,3]\n"
      "  %dead2 = Tanh(%dead1) : f32[2,3]\n"
      "  %y = Add(%a, %k) : f32[2,3]\n"
      "  %dead3 = Relu(%y) : f32[2,3]\n"
      "  return %y\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "dce"));
  EXPECT_EQ(opNames(*g), (std::vector<std::string>{"Split", "Add"}));  // Split lives through %a
  EXPECT_EQ(g->findValue("c"), nullptr);
  EXPECT_NE(g->findValue("k"), nullptr);
  EXPECT_EQ(g->inputs().size(), 2u);  // %unused is interface
  expectNumericallyEquivalent(*before, *g);
  EXPECT_FALSE(runPass(*g, "dce"));
}

TEST(PassesDce, RemovesUnusedConstantsEvenWithoutDeadNodes) {
  auto g = parseOrFail(
      "graph @c(%x: f32[2], %w: f32[2] const dense<f32[2]: 1, 2>) -> (%x: f32[2]) {\n"
      "  return %x\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(runPass(*g, "dce"));
  EXPECT_TRUE(g->constants().empty());
}

TEST(PassesDce, LeavesALiveGraphAlone) {
  auto g = parseOrFail(
      "graph @l(%x: f32[2], %c: f32[2] const dense<f32[2]: 1, 2>) -> (%a: f32[2], %r: f32[2]) {\n"
      "  %a = Add(%x, %c) : f32[2]\n"
      "  %r = Relu(%a) : f32[2] @stage(1)\n"
      "  return %a, %r\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  std::string text = printGraph(*g);
  EXPECT_FALSE(runPass(*g, "dce"));
  EXPECT_EQ(printGraph(*g), text);
}

TEST(PassesDce, EmptiesAGraphWithoutOutputs) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  Node* r = addInferred(g, OpKind::Relu, {x});
  addInferred(g, OpKind::Tanh, {r->output()});
  EXPECT_TRUE(runPass(g, "dce"));
  EXPECT_EQ(g.numNodes(), 0u);
}

}  // namespace
}  // namespace pcc
