// Regions: nodes owning bodies. Text round trip, clone, verifier scoping,
// inlineBody.
#include <gtest/gtest.h>

#include "compiler/eval/evaluator.h"
#include "compiler/ir/regions.h"
#include "ir_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

const char* kIfText =
    "graph @main(%c: bool[], %x: f32[3]) -> (%y: f32[3]) {\n"
    "  %y = If(%c, %x) : f32[3] loc(\"if\") {\n"
    "    graph @then_branch(%x: f32[3]) -> (%t: f32[3]) {\n"
    "      %t = Relu(%x) : f32[3]\n"
    "      return %t\n"
    "    }\n"
    "    graph @else_branch(%x: f32[3], %k: f32[] const dense<f32[]: 2>) -> (%e: f32[3]) {\n"
    "      %e = Mul(%x, %k) : f32[3]\n"
    "      return %e\n"
    "    }\n"
    "  }\n"
    "  return %y\n"
    "}\n";

TEST(IrRegions, PrintParseRoundTrip) {
  auto g = parseOrFail(kIfText);
  ASSERT_NE(g, nullptr);
  Node* n = g->nodes()[0];
  ASSERT_EQ(n->numBodies(), 2u);
  EXPECT_EQ(n->body(0)->name(), "then_branch");
  EXPECT_EQ(n->body(1)->constants().size(), 1u);
  EXPECT_EQ(printGraph(*g), kIfText);
}

TEST(IrRegions, CloneCopiesBodies) {
  auto g = parseOrFail(kIfText);
  ASSERT_NE(g, nullptr);
  auto c = g->clone();
  EXPECT_EQ(printGraph(*c), kIfText);
  ASSERT_TRUE(verifyGraph(*c).ok());
  // The copy owns its bodies: changing one leaves the original alone.
  Graph* body = c->nodes()[0]->body(0);
  EXPECT_NE(body, g->nodes()[0]->body(0));
  body->nodes()[0]->setName("changed");
  EXPECT_EQ(printGraph(*g), kIfText);
  EXPECT_NE(printGraph(*c), kIfText);
}

TEST(IrRegions, VerifierRejectsABodyReadingAnOuterValue) {
  auto g = parseOrFail(kIfText);
  ASSERT_NE(g, nullptr);
  Node* n = g->nodes()[0];
  // Make the then branch read the outer %x directly instead of its parameter.
  n->body(0)->nodes()[0]->setInput(0, g->inputs()[1]);
  Status s = verifyGraph(*g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("input 0 %x is defined outside body @then_branch of node 'if' (If)"), std::string::npos)
      << s.message();
}

TEST(IrRegions, VerifierRejectsAnOuterUseOfABodyValue) {
  auto g = parseOrFail(kIfText);
  ASSERT_NE(g, nullptr);
  Value* inner = g->nodes()[0]->body(0)->nodes()[0]->output();
  addInferred(*g, OpKind::Neg, {inner}, {}, "neg");
  Status s = verifyGraph(*g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node 'neg' (Neg): input 0 %t is defined inside body @then_branch of node 'if' (If)"),
            std::string::npos)
      << s.message();
  // A graph output that is a body value is refused the same way.
  g->eraseNodes({g->nodes()[1]});
  g->setOutputs({inner});
  s = verifyGraph(*g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is defined inside body @then_branch"), std::string::npos) << s.message();
}

TEST(IrRegions, RegionOpsAndCaptures) {
  EXPECT_TRUE(isRegionOp(OpKind::If));
  EXPECT_TRUE(isRegionOp(OpKind::Loop));
  EXPECT_TRUE(isRegionOp(OpKind::Scan));
  EXPECT_FALSE(isRegionOp(OpKind::Relu));
  EXPECT_EQ(numBodiesOf(OpKind::If), 2u);
  EXPECT_EQ(numBodiesOf(OpKind::Scan), 1u);
  EXPECT_EQ(numBodiesOf(OpKind::Add), 0u);
  auto g = parseOrFail(kIfText);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(numCaptures(*g->nodes()[0]), 1);
}

TEST(IrRegions, InlineBodySplicesTheBranchIn) {
  auto g = parseOrFail(kIfText);
  ASSERT_NE(g, nullptr);
  Node* n = g->nodes()[0];
  auto results = inlineBody(*g, n, 1, {g->inputs()[1]});
  ASSERT_TRUE(results.ok()) << results.status().message();
  g->replaceAllUsesWith(n->output(), (*results)[0]);
  g->eraseNodes({n});
  ASSERT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
  EXPECT_EQ(printGraph(*g),
            "graph @main(%c: bool[], %x: f32[3], %k: f32[] const dense<f32[]: 2>) -> (%e: f32[3]) {\n"
            "  %e = Mul(%x, %k) : f32[3]\n"
            "  return %e\n"
            "}\n");
}

}  // namespace
}  // namespace pcc
