// fold-constants: structure and numbers.
#include "passes_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

TEST(PassesFoldConstants, FoldsChainsAndKeepsNumbers) {
  // The weights are synthesized (elided data), the 'shape' path is integer math.
  auto g = parseOrFail(
      "graph @f(%x: f32[4,8], %w: f32[8,4] const, %b: f32[4] const, %two: f32[] const dense<f32[]: 2>,\n"
      "         %minus1: i64[1] const dense<i64[1]: -1>) -> (%y: f32[4,4], %n: i64[1]) {\n"
      "  %wt = Transpose(%w) {perm = [1, 0]} : f32[4,8]\n"
      "  %ws = Mul(%wt, %two) : f32[4,8]\n"
      "  %bb = Add(%b, %b) : f32[4]\n"
      "  %m = Gemm(%x, %ws, %bb) {transB = 1} : f32[4,4]\n"
      "  %y = Relu(%m) : f32[4,4]\n"
      "  %flat = Reshape(%w, %minus1) : f32[32]\n"
      "  %n = Shape(%flat) : i64[1]\n"
      "  return %y, %n\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "fold-constants"));
  EXPECT_EQ(opNames(*g), (std::vector<std::string>{"Gemm", "Relu"}));
  Node* gemm = g->nodes()[0];
  ASSERT_TRUE(gemm->input(1)->isConstant());
  ASSERT_TRUE(gemm->input(2)->isConstant());
  EXPECT_EQ(gemm->input(1)->name(), "ws_folded");
  // ws = transpose(w) * 2, element by element.
  const Tensor& w = before->findValue("w")->constantData();
  const Tensor& ws = gemm->input(1)->constantData();
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(ws.getDouble(r * 8 + c), 2 * w.getDouble(c * 4 + r));
  ASSERT_TRUE(g->outputs()[1]->isConstant());
  EXPECT_EQ(g->outputs()[1]->constantData().toInts(), std::vector<int64_t>{32});
  // Only the constants still read remain.
  EXPECT_EQ(g->constants().size(), 3u);
  expectNumericallyEquivalent(*before, *g);
  // A second run finds nothing more to do.
  EXPECT_FALSE(runPass(*g, "fold-constants"));
}

TEST(PassesFoldConstants, LeavesNonConstantNodesAlone) {
  auto g = parseOrFail(
      "graph @a(%x: f32[3], %c: f32[3] const dense<f32[3]: 1, 2, 3>, %u: f32[1] const dense<f32[1]: 0>)\n"
      "    -> (%y: f32[3]) {\n"
      "  %s = Add(%x, %c) : f32[3]\n"
      "  %y = Tanh(%s) : f32[3]\n"
      "  return %y\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  std::string text = printGraph(*g);
  EXPECT_FALSE(runPass(*g, "fold-constants"));
  EXPECT_EQ(printGraph(*g), text);  // untouched, the unused constant included
}

TEST(PassesFoldConstants, RespectsTheSizeLimit) {
  auto g = parseOrFail(
      "graph @big(%a: f32[64] const) -> (%s: f32[64], %t: f32[1]) {\n"
      "  %s = Add(%a, %a) : f32[64]\n"
      "  %t = ReduceMean(%a) {keepdims = 1} : f32[1]\n"
      "  return %s, %t\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  PassManager pm;
  pm.add(createFoldConstantsPass(FoldLimits{/*maxElements=*/16, /*maxExpandElements=*/16}));
  PassContext ctx;
  auto changed = pm.run(*g, ctx);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(opNames(*g), std::vector<std::string>{"Add"});  // 64 elements > 16: stays
  EXPECT_TRUE(g->outputs()[1]->isConstant());
  expectNumericallyEquivalent(*before, *g);
}

TEST(PassesFoldConstants, SmallInputsMayExpandUpToTheExpandLimit) {
  // The importer's policy (FoldLimits): 100 output elements are over
  // maxElements, but the only input is small, so maxExpandElements decides.
  const char* text =
      "graph @gen(%x: f32[100], %s: i64[1] const dense<i64[1]: 100>) -> (%y: f32[100]) {\n"
      "  %c = ConstantOfShape(%s) : f32[100]\n"
      "  %y = Add(%x, %c) : f32[100]\n"
      "  return %y\n"
      "}\n";
  for (int64_t expand : {50, 1000}) {
    auto g = parseOrFail(text);
    ASSERT_NE(g, nullptr);
    auto before = g->clone();
    PassManager pm;
    pm.add(createFoldConstantsPass(FoldLimits{/*maxElements=*/16, /*maxExpandElements=*/expand}));
    PassContext ctx;
    auto changed = pm.run(*g, ctx);
    ASSERT_TRUE(changed.ok()) << changed.status().message();
    EXPECT_EQ(*changed, expand >= 100) << expand;
    std::vector<std::string> want = {"ConstantOfShape", "Add"};
    if (expand >= 100) want = {"Add"};
    EXPECT_EQ(opNames(*g), want);
    expectNumericallyEquivalent(*before, *g);
  }
}

TEST(PassesFoldConstants, FailingKernelLeavesTheNodeAndLogs) {
  // Index 9 is out of range: the kernel fails, so the node stays for run time.
  auto g = parseOrFail(
      "graph @bad(%x: f32[2], %d: f32[4] const dense<f32[4]: 1, 2, 3, 4>, %i: i64[1] const dense<i64[1]: 9>)\n"
      "    -> (%y: f32[1]) {\n"
      "  %y = Gather(%d, %i) {axis = 0} : f32[1] loc(\"g\")\n"
      "  return %y\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  std::ostringstream log;
  PassManager pm;
  pm.add(createPass("fold-constants"));
  PassContext ctx;
  ctx.log = &log;
  auto changed = pm.run(*g, ctx);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(opNames(*g), std::vector<std::string>{"Gather"});
  EXPECT_NE(log.str().find("left node 'g' (Gather) alone"), std::string::npos) << log.str();
}

// The folder runs nodes as the evaluator does (runNode): a node whose declared
// type its kernel contradicts is a compiler bug, reported, not folded or skipped.
TEST(PassesFoldConstants, ANodeTypeTheKernelContradictsIsAnInternalError) {
  Graph g;
  Value* c = g.addConstant("c", Tensor::fromVector<float>(DType::kF32, {2}, {-1, 1}));
  Node* n = g.addNode(OpKind::Relu, {c}, {TensorType{DType::kF32, {3}}}, {}, "r", {"y"});
  g.addOutput(n->output());
  PassContext ctx;
  auto changed = createPass("fold-constants")->run(g, ctx);
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.status().code(), StatusCode::kInternal);
  EXPECT_NE(changed.status().message().find("node 'r' (Relu): output 0 is f32[2] but %y in the graph is f32[3]"),
            std::string::npos)
      << changed.status().message();
}

}  // namespace
}  // namespace pcc
