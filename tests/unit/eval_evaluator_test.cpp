// The reference evaluator and its helpers: hand-computed results, input
// checks, random inputs, tensor comparison.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/eval/evaluator.h"
#include "ir_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

/// y = Relu(x @ w + b), out2 = Split of y.
std::unique_ptr<Graph> smallMlp() {
  return parseOrFail(
      "graph @mlp(%x: f32[2,3], %w: f32[3,2] const dense<f32[3,2]: 1, -1, 0, 2, 3, 0.5>,\n"
      "           %b: f32[2] const dense<f32[2]: 0.5, -10>) -> (%y: f32[2,2], %p: f32[2,1], %q: f32[2,1]) {\n"
      "  %m = MatMul(%x, %w) : f32[2,2]\n"
      "  %a = Add(%m, %b) : f32[2,2]\n"
      "  %y = Relu(%a) : f32[2,2]\n"
      "  %p, %q = Split(%y) {axis = 1, num_outputs = 2} : f32[2,1], f32[2,1]\n"
      "  return %y, %p, %q\n"
      "}\n");
}

TEST(EvalEvaluator, ComputesHandCheckedNumbers) {
  auto g = smallMlp();
  ASSERT_NE(g, nullptr);
  // x = [[1, 2, 3], [-1, 0, 1]]
  // x@w = [[1*1 + 2*0 + 3*3, 1*-1 + 2*2 + 3*0.5], [-1 + 0 + 3, 1 + 0 + 0.5]] = [[10, 4.5], [2, 1.5]]
  // + b = [[10.5, -5.5], [2.5, -8.5]]; relu = [[10.5, 0], [2.5, 0]]
  auto out = evaluateGraph(*g, {f32({2, 3}, {1, 2, 3, -1, 0, 1})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{10.5f, 0.0f, 2.5f, 0.0f}));
  EXPECT_EQ((*out)[1].shape(), (Dims{2, 1}));
  EXPECT_EQ(floatsOf((*out)[1]), (std::vector<float>{10.5f, 2.5f}));
  EXPECT_EQ(floatsOf((*out)[2]), (std::vector<float>{0.0f, 0.0f}));
}

TEST(EvalEvaluator, ReturnsInputsAndConstantsDirectly) {
  auto g = parseOrFail(
      "graph @p(%x: i64[2], %c: i64[1] const dense<i64[1]: 42>) -> (%x: i64[2], %c: i64[1]) {\n"
      "  return %x, %c\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto out = evaluateGraph(*g, {i64({2}, {7, 8})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].toInts(), (std::vector<int64_t>{7, 8}));
  EXPECT_EQ((*out)[1].toInts(), (std::vector<int64_t>{42}));
}

TEST(EvalEvaluator, InputMismatchesNameTheInputAndBothShapes) {
  auto g = smallMlp();
  ASSERT_NE(g, nullptr);
  auto wrongShape = evaluateGraph(*g, {f32({3, 2}, {1, 2, 3, 4, 5, 6})});
  ASSERT_FALSE(wrongShape.ok());
  EXPECT_EQ(wrongShape.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(wrongShape.status().message(), "input 0 %x has type f32[3,2], the graph expects f32[2,3]");
  auto wrongType = evaluateGraph(*g, {Tensor::zeros(DType::kF64, {2, 3})});
  ASSERT_FALSE(wrongType.ok());
  EXPECT_NE(wrongType.status().message().find("has type f64[2,3], the graph expects f32[2,3]"), std::string::npos);
  auto wrongCount = evaluateGraph(*g, {});
  ASSERT_FALSE(wrongCount.ok());
  EXPECT_EQ(wrongCount.status().message(), "graph @mlp takes 1 inputs, got 0");
}

TEST(EvalEvaluator, CollectivesAreRefused) {
  auto g = parseOrFail(
      "graph @c(%x: f32[2]) -> (%y: f32[2]) {\n"
      "  %y = AllReduce(%x) {axis = \"tp\"} : f32[2] loc(\"ar\")\n"
      "  return %y\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto out = evaluateGraph(*g, {f32({2}, {1, 2})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("node 'ar' (AllReduce)"), std::string::npos) << out.status().message();
}

TEST(EvalEvaluator, KernelErrorsNameTheNode) {
  auto g = parseOrFail(
      "graph @g(%x: f32[4], %i: i64[1]) -> (%y: f32[1]) {\n"
      "  %y = Gather(%x, %i) {axis = 0} : f32[1] loc(\"gather\")\n"
      "  return %y\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto out = evaluateGraph(*g, {f32({4}, {1, 2, 3, 4}), i64({1}, {17})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message().rfind("node 'gather' (Gather)", 0), 0u) << out.status().message();
}

// runNode is the evaluator's step, shared with the constant folder and the
// partition tests: the kernel entry of runtime/ops, checked against the node.
TEST(EvalEvaluator, RunNodeChecksTheNodesTypesAndNamesIt) {
  Graph g;
  Value* x = g.addInput("x", TensorType{DType::kF32, {2}});
  Node* ok = g.addNode(OpKind::Relu, {x}, {TensorType{DType::kF32, {2}}}, {}, "relu", {"r"});
  Node* wrong = g.addNode(OpKind::Relu, {x}, {TensorType{DType::kF32, {3}}}, {}, "bad", {"b"});
  Tensor in = f32({2}, {-1, 2});
  auto r = runNode(*ok, {&in});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(floatsOf((*r)[0]), (std::vector<float>{0, 2}));
  auto w = runNode(*wrong, {&in});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInternal);
  EXPECT_EQ(w.status().message().rfind("node 'bad' (Relu): output 0 is f32[2] but %b in the graph is f32[3]", 0), 0u)
      << w.status().message();
  // Absent trailing inputs: the same call with or without them.
  Value* w2 = g.addInput("w", TensorType{DType::kF32, {2, 2}});
  Tensor row = f32({1, 2}, {1, 2}), id = f32({2, 2}, {1, 0, 0, 1});
  Value* xr = g.addInput("xr", TensorType{DType::kF32, {1, 2}});
  Node* gemm2 = g.addNode(OpKind::Gemm, {xr, w2}, {TensorType{DType::kF32, {1, 2}}}, {}, "gemm2", {"g2"});
  auto a = runNode(*gemm2, {&row, &id});
  auto b = runNode(*gemm2, {&row, &id, nullptr});
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(floatsOf((*a)[0]), floatsOf((*b)[0]));
}

TEST(EvalEvaluator, RandomInputsAreDeterministicAndTyped) {
  auto g = parseOrFail(
      "graph @r(%a: f32[64], %b: i64[64], %c: bool[64], %d: f16[8]) -> (%a: f32[64]) {\n"
      "  return %a\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  std::vector<Tensor> r1 = randomInputs(*g, 7), r2 = randomInputs(*g, 7), r3 = randomInputs(*g, 8);
  ASSERT_EQ(r1.size(), 4u);
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_EQ(r1[i].type(), g->inputs()[i]->type());
  EXPECT_EQ(floatsOf(r1[0]), floatsOf(r2[0]));
  EXPECT_NE(floatsOf(r1[0]), floatsOf(r3[0]));
  double lo = 1, hi = -1;
  for (int64_t k = 0; k < 64; ++k) {
    lo = std::min(lo, r1[0].getDouble(k));
    hi = std::max(hi, r1[0].getDouble(k));
    EXPECT_GE(r1[1].getInt(k), 0);
    EXPECT_LT(r1[1].getInt(k), 4);
    EXPECT_TRUE(r1[2].getInt(k) == 0 || r1[2].getInt(k) == 1);
  }
  EXPECT_GE(lo, -1.0);
  EXPECT_LE(hi, 1.0);
  EXPECT_LT(lo, -0.5);  // spread over the range, not stuck near one value
  EXPECT_GT(hi, 0.5);
}

TEST(EvalCompare, ToleranceIsAtolPlusRtolTimesWant) {
  Tensor want = f32({3}, {1.0f, 100.0f, 0.0f});
  Diff same = compareTensors(want, want, 0, 0);
  EXPECT_TRUE(same.ok);
  EXPECT_EQ(same.maxAbs, 0);
  EXPECT_TRUE(same.where.empty());

  Tensor got = f32({3}, {1.0f, 101.0f, 0.001f});
  Diff d = compareTensors(got, want, 1e-2, 2e-3);  // 1 <= 2e-3 + 1; 0.001 <= 2e-3
  EXPECT_TRUE(d.ok) << d.where;
  EXPECT_NEAR(d.maxAbs, 1.0, 1e-6);
  EXPECT_NEAR(d.maxRel, 0.01, 1e-6);

  Diff bad = compareTensors(got, want, 1e-3, 2e-3);  // element 1 is over: 1 > 2e-3 + 0.1
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.where.find("element 1 [1]: got 101, want 100"), std::string::npos) << bad.where;
}

TEST(EvalCompare, TypeMismatchAndNaN) {
  Diff shape = compareTensors(f32({2}, {1, 2}), f32({1, 2}, {1, 2}), 1, 1);
  EXPECT_FALSE(shape.ok);
  EXPECT_EQ(shape.where, "type mismatch: got f32[2], want f32[1,2]");
  Diff dtype = compareTensors(i64({2}, {1, 2}), f32({2}, {1, 2}), 1, 1);
  EXPECT_FALSE(dtype.ok);

  float nan = std::nanf("");
  EXPECT_TRUE(compareTensors(f32({2}, {nan, 1}), f32({2}, {nan, 1}), 0, 0).ok);
  Diff oneNan = compareTensors(f32({2, 2}, {0, 0, 0, nan}), f32({2, 2}, {0, 0, 0, 1}), 1, 1);
  EXPECT_FALSE(oneNan.ok);
  EXPECT_NE(oneNan.where.find("element 3 [1,1]"), std::string::npos) << oneNan.where;
  float inf = INFINITY;
  EXPECT_TRUE(compareTensors(f32({1}, {inf}), f32({1}, {inf}), 0, 0).ok);
  EXPECT_FALSE(compareTensors(f32({1}, {-inf}), f32({1}, {inf}), 0, 0).ok);
}

}  // namespace
}  // namespace pcc
