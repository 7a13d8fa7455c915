// fuse: structure, numbers (rtol 1e-5 in float32 against the unfused graph on
// the reference evaluator) and the no-cycle guarantee on random graphs.
#include <random>

#include "passes/fuse.h"
#include "passes/partition/partitioner.h"
#include "passes_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

constexpr double kRtol = 1e-5, kAtol = 1e-6;

std::vector<const Node*> fusedNodes(const Graph& g) {
  std::vector<const Node*> out;
  for (const Node* n : g.nodes())
    if (n->op() == OpKind::Fused) out.push_back(n);
  return out;
}

TEST(PassesFuse, EpilogueBiasActivationResidual) {
  auto g = parseOrFail(
      "graph @e(%x: f32[4,8], %w: f32[8,8] const, %b: f32[8] const) -> (%r: f32[4,8]) {\n"
      "  %m = MatMul(%x, %w) : f32[4,8]\n"
      "  %a = Add(%m, %b) : f32[4,8]\n"
      "  %h = Gelu(%a) : f32[4,8]\n"
      "  %r = Add(%h, %x) : f32[4,8]\n"
      "  return %r\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  PassContext ctx;
  auto pass = createPass("fuse");
  auto changed = pass->run(*g, ctx);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
  ASSERT_EQ(opNames(*g), std::vector<std::string>{"Fused"});
  const Node* f = g->nodes()[0];
  EXPECT_EQ(f->attrs().getString("kind", ""), "epilogue");
  EXPECT_EQ(opNames(*f->body(0)), (std::vector<std::string>{"MatMul", "Add", "Gelu", "Add"}));
  EXPECT_EQ(f->output(0)->name(), "r");
  EXPECT_EQ(ctx.stats["fused_epilogue"], 1);
  EXPECT_EQ(ctx.stats["fused_elementwise"], 0);
  EXPECT_EQ(countKernels(*before), 4);
  EXPECT_EQ(countKernels(*g), 1);
  expectNumericallyEquivalent(*before, *g, kRtol, kAtol);
  // A second run finds nothing left to fuse.
  EXPECT_FALSE(runPass(*g, "fuse"));
}

TEST(PassesFuse, ElementwiseGroupWithReductionsAndExtraOutput) {
  // A decomposed LayerNorm: two reductions, so two groups; %d is read by
  // both (an extra output of the first), %y is returned and read again.
  auto g = parseOrFail(
      "graph @ln(%x: f32[2,3,8], %ax: i64[1] const dense<i64[1]: -1>, %eps: f32[] const dense<f32[]: 1e-05>,\n"
      "          %two: f32[] const dense<f32[]: 2>, %s: f32[8] const, %b: f32[8] const)\n"
      "    -> (%y: f32[2,3,8], %z: f32[2,3,8]) {\n"
      "  %m = ReduceMean(%x, %ax) : f32[2,3,1]\n"
      "  %d = Sub(%x, %m) : f32[2,3,8]\n"
      "  %p = Pow(%d, %two) : f32[2,3,8]\n"
      "  %v = ReduceMean(%p, %ax) : f32[2,3,1]\n"
      "  %ve = Add(%v, %eps) : f32[2,3,1]\n"
      "  %sd = Sqrt(%ve) : f32[2,3,1]\n"
      "  %n = Div(%d, %sd) : f32[2,3,8]\n"
      "  %ns = Mul(%n, %s) : f32[2,3,8]\n"
      "  %y = Add(%ns, %b) : f32[2,3,8]\n"
      "  %z = Tanh(%y) : f32[2,3,8]\n"
      "  return %y, %z\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "fuse"));
  auto fused = fusedNodes(*g);
  ASSERT_EQ(fused.size(), 2u);
  EXPECT_EQ(g->numNodes(), 2u);
  for (const Node* f : fused) EXPECT_EQ(f->attrs().getString("kind", ""), "elementwise");
  EXPECT_EQ(opNames(*fused[0]->body(0)), (std::vector<std::string>{"ReduceMean", "Sub", "Pow"}));
  EXPECT_EQ(opNames(*fused[1]->body(0)),
            (std::vector<std::string>{"ReduceMean", "Add", "Sqrt", "Div", "Mul", "Add", "Tanh"}));
  // %d leaves the first group as an extra output; %y and %z leave the second.
  EXPECT_EQ(fused[0]->outputs().size(), 2u);
  EXPECT_EQ(fused[1]->outputs().size(), 2u);
  expectNumericallyEquivalent(*before, *g, kRtol, kAtol);
}

TEST(PassesFuse, NeverAcrossACycle) {
  // Fusing %a with %c would need %t, which needs %a: left alone.
  auto g = parseOrFail(
      "graph @c(%x: f32[4,4]) -> (%c: f32[4,4]) {\n"
      "  %a = Relu(%x) : f32[4,4]\n"
      "  %t = Transpose(%a) {perm = [1, 0]} : f32[4,4]\n"
      "  %c = Add(%a, %t) : f32[4,4]\n"
      "  return %c\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(runPass(*g, "fuse"));
  EXPECT_EQ(opNames(*g), (std::vector<std::string>{"Relu", "Transpose", "Add"}));
}

TEST(PassesFuse, FusedNodeTextRoundTripsAndPartitionerInlinesIt) {
  auto g = parseOrFail(
      "graph @e(%x: f32[4,8], %w: f32[8,8] const, %b: f32[8] const) -> (%r: f32[4,8]) {\n"
      "  %m = MatMul(%x, %w) : f32[4,8]\n"
      "  %a = Add(%m, %b) : f32[4,8]\n"
      "  %r = Relu(%a) : f32[4,8]\n"
      "  return %r\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "fuse"));
  std::string text = printGraph(*g);
  auto back = parseOrFail(text);
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(verifyGraph(*back).ok());
  EXPECT_EQ(printGraph(*back), text);
  EXPECT_EQ(printGraph(*g->clone()), text);
  ASSERT_TRUE(inlineFusedNodes(*back).ok());
  EXPECT_EQ(printGraph(*back), printGraph(*before));
}

TEST(PassesFuse, CseMergesIdenticalFusedNodesAndDceDropsDeadOnes) {
  const std::string body =
      "    graph @fused(%x: f32[4]) -> (%t: f32[4]) {\n"
      "      %r = Relu(%x) : f32[4]\n"
      "      %t = Tanh(%r) : f32[4]\n"
      "      return %t\n"
      "    }\n";
  auto g = parseOrFail("graph @c(%x: f32[4]) -> (%s: f32[4]) {\n"
                       "  %a = Fused(%x) {kind = \"elementwise\"} : f32[4] {\n" + body + "  }\n"
                       "  %b = Fused(%x) {kind = \"elementwise\"} : f32[4] {\n" + body + "  }\n"
                       "  %d = Fused(%x) {kind = \"elementwise\"} : f32[4] {\n"
                       "    graph @fused(%x: f32[4]) -> (%e: f32[4]) {\n"
                       "      %e = Sigmoid(%x) : f32[4]\n"
                       "      return %e\n"
                       "    }\n"
                       "  }\n"
                       "  %s = Mul(%a, %b) : f32[4]\n"
                       "  return %s\n"
                       "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "dce"));
  EXPECT_EQ(opNames(*g), (std::vector<std::string>{"Fused", "Fused", "Mul"}));
  EXPECT_TRUE(runPass(*g, "cse"));
  EXPECT_EQ(opNames(*g), (std::vector<std::string>{"Fused", "Mul"}));
  EXPECT_EQ(g->nodes()[1]->input(0), g->nodes()[1]->input(1));
  expectNumericallyEquivalent(*before, *g, kRtol, kAtol);
}

TEST(PassesFuse, VerifierRejectsABadFusedNode) {
  auto g = parseGraph(
      "graph @e(%x: f32[4]) -> (%r: f32[4]) {\n"
      "  %r = Fused(%x) {kind = \"epilogue\"} : f32[4] {\n"
      "    graph @fused(%x: f32[3]) -> (%r: f32[3]) {\n"
      "      %r = Relu(%x) : f32[3]\n"
      "      return %r\n"
      "    }\n"
      "  }\n"
      "  return %r\n"
      "}\n",
      "bad.ir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  Status s = verifyGraph(**g);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("parameter 0"), std::string::npos) << s.message();
}

// Random DAGs of elementwise, reduction, opaque and injective ops: after
// fusion the graph verifies (so its node order is topological: no cycle),
// every fused group is connected work of legal kinds, and the outputs match
// the unfused graph.
TEST(PassesFuse, RandomGraphsStayAcyclicAndEquivalent) {
  std::mt19937 rng(7);
  int fusedTotal = 0;
  for (int trial = 0; trial < 60; ++trial) {
    Graph g;
    TensorType t{DType::kF32, {4, 4}};
    std::vector<Value*> pool{g.addInput("x", t), g.addInput("y", t)};
    Value* axes = g.addConstant("axes", i64({1}, {1}));
    int count = 6 + static_cast<int>(rng() % 14);
    for (int i = 0; i < count; ++i) {
      auto pick = [&] { return pool[rng() % pool.size()]; };
      Node* n = nullptr;
      switch (rng() % 7) {
        case 0: n = addInferred(g, OpKind::Add, {pick(), pick()}); break;
        case 1: n = addInferred(g, OpKind::Mul, {pick(), pick()}); break;
        case 2: n = addInferred(g, OpKind::Tanh, {pick()}); break;
        case 3: n = addInferred(g, OpKind::Sigmoid, {pick()}); break;
        case 4: n = addInferred(g, OpKind::MatMul, {pick(), pick()}); break;
        case 5: n = addInferred(g, OpKind::Transpose, {pick()}, [] {
                  AttrMap a;
                  a.set("perm", std::vector<int64_t>{1, 0});
                  return a;
                }()); break;
        default: {
          AttrMap a;
          a.set("keepdims", int64_t{1});
          Node* r = addInferred(g, OpKind::ReduceMax, {pick(), axes}, a);
          ASSERT_NE(r, nullptr);
          n = addInferred(g, OpKind::Sub, {pick(), r->output()});  // broadcast back to [4,4]
          break;
        }
      }
      ASSERT_NE(n, nullptr);
      pool.push_back(n->output());
    }
    g.addOutput(pool.back());
    g.addOutput(pool[pool.size() - 2]);
    ASSERT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
    auto before = g.clone();
    runPass(g, "fuse");  // verifies after the pass
    ASSERT_TRUE(verifyGraph(g).ok()) << "trial " << trial << ": " << verifyGraph(g).message() << "\n" << printGraph(g);
    for (const Node* f : fusedNodes(g)) {
      ++fusedTotal;
      int anchors = 0, reductions = 0;
      for (const Node* m : f->body(0)->nodes()) {
        anchors += m->op() == OpKind::MatMul;
        reductions += opClass(m->op()) == OpClass::kReduction;
        EXPECT_NE(m->op(), OpKind::Transpose) << "trial " << trial;
      }
      EXPECT_LE(anchors, 1);
      EXPECT_LE(reductions, 1);
      if (anchors) {
        EXPECT_EQ(reductions, 0);
      }
    }
    expectNumericallyEquivalent(*before, g, kRtol, kAtol);
  }
  EXPECT_GT(fusedTotal, 30);  // the property was exercised, not vacuous
}

}  // namespace
}  // namespace pcc
