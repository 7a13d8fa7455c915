// fold-constants, cse and dce on graphs with region nodes: structure and
// numbers (before vs after, on the reference evaluator).
#include <gtest/gtest.h>

#include "passes_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

/// An If on `cond` (a graph argument text) over %x, with a dead node and a
/// duplicated pair in its then branch.
std::unique_ptr<Graph> ifGraph(const std::string& cond) {
  return parseOrFail(
      "graph @main(" + cond + ", %x: f32[3]) -> (%y: f32[3]) {\n"
      "  %y = If(%c, %x) : f32[3] loc(\"if\") {\n"
      "    graph @then(%a: f32[3]) -> (%s: f32[3]) {\n"
      "      %t1 = Tanh(%a) : f32[3]\n"
      "      %t2 = Tanh(%a) : f32[3]\n"
      "      %dead = Exp(%a) : f32[3]\n"
      "      %s = Add(%t1, %t2) : f32[3]\n"
      "      return %s\n"
      "    }\n"
      "    graph @else(%a: f32[3]) -> (%n: f32[3]) {\n"
      "      %n = Neg(%a) : f32[3]\n"
      "      return %n\n"
      "    }\n"
      "  }\n"
      "  return %y\n"
      "}\n");
}

TEST(PassesRegions, FoldInlinesAnIfOnAConstantCondition) {
  for (int c : {0, 1}) {
    auto g = ifGraph(strCat("%c: bool[] const dense<bool[]: ", c, ">"));
    ASSERT_NE(g, nullptr);
    auto before = g->clone();
    EXPECT_TRUE(runPass(*g, "fold-constants"));
    EXPECT_EQ(opNames(*g), c ? (std::vector<std::string>{"Tanh", "Tanh", "Exp", "Add"}) : std::vector<std::string>{"Neg"});
    EXPECT_TRUE(g->constants().empty());  // the condition went with the If
    expectNumericallyEquivalent(*before, *g);
  }
}

TEST(PassesRegions, FoldRecursesIntoBodies) {
  auto g = parseOrFail(
      "graph @main(%c: bool[], %x: f32[2]) -> (%y: f32[2]) {\n"
      "  %y = If(%c, %x) : f32[2] {\n"
      "    graph @then(%a: f32[2], %k: f32[2] const dense<f32[2]: 1, 4>) -> (%s: f32[2]) {\n"
      "      %r = Sqrt(%k) : f32[2]\n"
      "      %s = Mul(%a, %r) : f32[2]\n"
      "      return %s\n"
      "    }\n"
      "    graph @else(%a: f32[2]) -> (%a: f32[2]) {\n"
      "      return %a\n"
      "    }\n"
      "  }\n"
      "  return %y\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "fold-constants"));
  Graph* then = g->nodes()[0]->body(0);
  EXPECT_EQ(opNames(*then), (std::vector<std::string>{"Mul"}));
  ASSERT_EQ(then->constants().size(), 1u);
  EXPECT_EQ(floatsOf(then->constants()[0]->constantData()), (std::vector<float>{1, 2}));
  expectNumericallyEquivalent(*before, *g);
}

TEST(PassesRegions, DceAndCseWorkInsideBodies) {
  auto g = ifGraph("%c: bool[]");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "dce"));
  EXPECT_EQ(opNames(*g->nodes()[0]->body(0)), (std::vector<std::string>{"Tanh", "Tanh", "Add"}));
  EXPECT_TRUE(runPass(*g, "cse"));
  EXPECT_EQ(opNames(*g->nodes()[0]->body(0)), (std::vector<std::string>{"Tanh", "Add"}));
  EXPECT_EQ(opNames(*g->nodes()[0]->body(1)), (std::vector<std::string>{"Neg"}));
  expectNumericallyEquivalent(*before, *g);
}

TEST(PassesRegions, DceRemovesAnUnusedRegionNode) {
  auto g = parseOrFail(
      "graph @main(%c: bool[], %x: f32[2]) -> (%x: f32[2]) {\n"
      "  %y = If(%c, %x) : f32[2] {\n"
      "    graph @then(%a: f32[2]) -> (%a: f32[2]) {\n"
      "      return %a\n"
      "    }\n"
      "    graph @else(%a: f32[2]) -> (%a: f32[2]) {\n"
      "      return %a\n"
      "    }\n"
      "  }\n"
      "  return %x\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(runPass(*g, "dce"));
  EXPECT_EQ(g->numNodes(), 0u);
}

TEST(PassesRegions, CseMergesRegionNodesOnlyWithIdenticalBodies) {
  // %y1 and %y2 are the same If; %y3 has the same inputs but another body.
  // Outside the bodies, %o1 and a Tanh inside a body never merge either.
  auto g = parseOrFail(
      "graph @main(%c: bool[], %x: f32[2]) -> (%s: f32[2], %o1: f32[2]) {\n"
      "  %o1 = Tanh(%x) : f32[2]\n"
      "  %y1 = If(%c, %x) : f32[2] {\n"
      "    graph @then(%a: f32[2]) -> (%t: f32[2]) {\n"
      "      %t = Tanh(%a) : f32[2]\n"
      "      return %t\n"
      "    }\n"
      "    graph @else(%a: f32[2]) -> (%a: f32[2]) {\n"
      "      return %a\n"
      "    }\n"
      "  }\n"
      "  %y2 = If(%c, %x) : f32[2] {\n"
      "    graph @then(%a: f32[2]) -> (%t: f32[2]) {\n"
      "      %t = Tanh(%a) : f32[2]\n"
      "      return %t\n"
      "    }\n"
      "    graph @else(%a: f32[2]) -> (%a: f32[2]) {\n"
      "      return %a\n"
      "    }\n"
      "  }\n"
      "  %y3 = If(%c, %x) : f32[2] {\n"
      "    graph @then(%a: f32[2]) -> (%t: f32[2]) {\n"
      "      %t = Sigmoid(%a) : f32[2]\n"
      "      return %t\n"
      "    }\n"
      "    graph @else(%a: f32[2]) -> (%a: f32[2]) {\n"
      "      return %a\n"
      "    }\n"
      "  }\n"
      "  %p = Add(%y1, %y2) : f32[2]\n"
      "  %s = Add(%p, %y3) : f32[2]\n"
      "  return %s, %o1\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "cse"));
  EXPECT_EQ(opNames(*g), (std::vector<std::string>{"Tanh", "If", "If", "Add", "Add"}));
  EXPECT_EQ(g->nodes()[3]->input(0), g->nodes()[3]->input(1));  // %y1 + %y1
  EXPECT_EQ(opNames(*g->nodes()[1]->body(0)), (std::vector<std::string>{"Tanh"}));
  expectNumericallyEquivalent(*before, *g);
}

}  // namespace
}  // namespace pcc
