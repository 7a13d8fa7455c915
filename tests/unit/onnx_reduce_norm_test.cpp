// Importers of the reduce_norm family, with their opset variants: structure
// (which canonical ops, inputs and attributes come out) and numerics.
#include <cmath>

#include "onnx_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

/// \returns the outputs of `g` on `inputs`, failing the test on error.
std::vector<Tensor> eval(const Graph& g, const std::vector<Tensor>& inputs) {
  auto out = evaluate(g, inputs);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? std::move(out).value() : std::vector<Tensor>{};
}

TEST(OnnxReduceNorm, ReduceAxesAttributeBecomesInput) {
  // ReduceSum takes axes as an input from opset 13, the other Reduce* from 18.
  struct Case {
    const char* op;
    int64_t opset;
    bool attr;
  } cases[] = {{"ReduceSum", 11, true}, {"ReduceSum", 13, false}, {"ReduceMax", 17, true},
               {"ReduceMax", 18, false}, {"ReduceL2", 13, true},  {"ReduceLogSumExp", 18, false}};
  for (const Case& k : cases) {
    ModelBuilder b(k.opset);
    b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).output("y");
    std::vector<std::string> ins = {"x"};
    if (!k.attr) {
      b.initI64("axes", {-1});
      ins.push_back("axes");
    }
    auto& n = b.node(k.op, ins, {"y"}, "r");
    if (k.attr) setInts(n, "axes", {-1});
    setInt(n, "keepdims", 0);
    PCC_IMPORT_OK(g, b);
    ASSERT_EQ(g->numNodes(), 1u) << k.op << " opset " << k.opset;
    Node* r = g->nodes()[0];
    EXPECT_EQ(r->opName(), k.op);
    ASSERT_EQ(r->inputs().size(), 2u) << k.op << " opset " << k.opset;
    ASSERT_TRUE(r->input(1)->isConstant());
    EXPECT_EQ(r->input(1)->constantData().toInts(), std::vector<int64_t>{-1});
    EXPECT_FALSE(r->attrs().has("axes"));
    EXPECT_EQ(r->output()->type().str(), "f32[2]");
  }
}

TEST(OnnxReduceNorm, ReduceNoopWithEmptyAxes) {
  ModelBuilder b(18);
  b.input("x", DType::kF32, {int64_t(2), int64_t(2)}).output("y");
  auto& n = b.node("ReduceProd", {"x"}, {"y"});
  setInt(n, "noop_with_empty_axes", 1);
  PCC_IMPORT_OK(g, b);
  auto out = eval(*g, {iota({2, 2}, 1)});
  ASSERT_EQ(out.size(), 1u);
  expectNear(out[0], iota({2, 2}, 1));
}

TEST(OnnxReduceNorm, LogSoftmaxAndHardmaxBeforeOpset13CoerceTo2D) {
  Tensor x = iota({2, 3, 2}, -1.f, 0.5f);
  for (const char* op : {"LogSoftmax", "Hardmax"}) {
    ModelBuilder b11(11), b13(13);
    for (ModelBuilder* b : {&b11, &b13}) {
      b->input("x", DType::kF32, {int64_t(2), int64_t(3), int64_t(2)}).output("y");
      setInt(b->node(op, {"x"}, {"y"}, "sm"), "axis", 1);
    }
    PCC_IMPORT_OK(g11, b11);
    PCC_IMPORT_OK(g13, b13);
    EXPECT_EQ(nodesOf(*g11, OpKind::Flatten).size(), 1u) << op;
    EXPECT_EQ(nodesOf(*g13, OpKind::Flatten).size(), 0u) << op;
    auto y11 = eval(*g11, {x}), y13 = eval(*g13, {x});
    ASSERT_EQ(y11.size(), 1u);
    ASSERT_EQ(y13.size(), 1u);
    EXPECT_EQ(y11[0].shape(), (Dims{2, 3, 2})) << op;
    if (std::string(op) == "Hardmax") {
      // Opset 11: one 1 per batch row of 6 (its last element); opset 13: one per column.
      std::vector<float> want11(12, 0.f), want13(12, 0.f);
      want11[5] = want11[11] = 1.f;
      want13[4] = want13[5] = want13[10] = want13[11] = 1.f;
      expectNear(y11[0], Tensor::fromVector<float>(DType::kF32, {2, 3, 2}, want11));
      expectNear(y13[0], Tensor::fromVector<float>(DType::kF32, {2, 3, 2}, want13));
    } else {
      // Opset 11 normalizes each batch row of 6: exp(y) sums to 1 over it.
      for (int64_t row = 0; row < 2; ++row) {
        double sum = 0;
        for (int64_t i = 0; i < 6; ++i) sum += std::exp(y11[0].getDouble(row * 6 + i));
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
  }
}

TEST(OnnxReduceNorm, TopKAttributeBeforeOpset10) {
  for (int64_t opset : {9, 11}) {
    ModelBuilder b(opset);
    b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).output("v").output("i");
    std::vector<std::string> ins = {"x"};
    if (opset >= 10) {
      b.initI64("k", {2});
      ins.push_back("k");
    }
    auto& n = b.node("TopK", ins, {"v", "i"});
    if (opset < 10) setInt(n, "k", 2);
    PCC_IMPORT_OK(g, b);
    ASSERT_EQ(g->numNodes(), 1u);
    auto out = eval(*g, {Tensor::fromVector<float>(DType::kF32, {2, 3}, {1, 3, 2, 6, 5, 4})});
    ASSERT_EQ(out.size(), 2u);
    expectNear(out[0], Tensor::fromVector<float>(DType::kF32, {2, 2}, {3, 2, 6, 5}));
    expectNear(out[1], Tensor::fromVector<int64_t>(DType::kI64, {2, 2}, {1, 2, 0, 1}));
  }
}

TEST(OnnxReduceNorm, GroupNormOpset18ScaleIsExpandedPerChannel) {
  Tensor x = iota({1, 4, 2}, 0.f, 0.7f);
  ModelBuilder b18(18), b21(21);
  b18.init("s", Tensor::fromVector<float>(DType::kF32, {2}, {2, 3}))
      .init("bias", Tensor::fromVector<float>(DType::kF32, {2}, {1, -1}));
  b21.init("s", Tensor::fromVector<float>(DType::kF32, {4}, {2, 2, 3, 3}))
      .init("bias", Tensor::fromVector<float>(DType::kF32, {4}, {1, 1, -1, -1}));
  for (ModelBuilder* b : {&b18, &b21}) {
    b->input("x", DType::kF32, {int64_t(1), int64_t(4), int64_t(2)}).output("y");
    setInt(b->node("GroupNormalization", {"x", "s", "bias"}, {"y"}), "num_groups", 2);
  }
  PCC_IMPORT_OK(g18, b18);
  PCC_IMPORT_OK(g21, b21);
  // The expansion of constant scale and bias folds away.
  ASSERT_EQ(g18->numNodes(), 1u);
  Node* n = g18->nodes()[0];
  ASSERT_TRUE(n->input(1)->isConstant());
  EXPECT_EQ(n->input(1)->constantData().toInts(), (std::vector<int64_t>{2, 2, 3, 3}));
  auto y18 = eval(*g18, {x}), y21 = eval(*g21, {x});
  ASSERT_EQ(y18.size(), 1u);
  ASSERT_EQ(y21.size(), 1u);
  expectNear(y18[0], y21[0]);
  // Group 0 is {0, .7, 1.4, 2.1}: the first element normalizes to -1.3416 * 2 + 1.
  EXPECT_NEAR(y18[0].getDouble(0), -1.3416408 * 2 + 1, 1e-4);
}

TEST(OnnxReduceNorm, GroupNormOpset18RuntimeScale) {
  ModelBuilder b(18);
  b.input("x", DType::kF32, {int64_t(1), int64_t(4), int64_t(2)})
      .input("s", DType::kF32, {int64_t(2)})
      .input("bias", DType::kF32, {int64_t(2)})
      .output("y");
  setInt(b.node("GroupNormalization", {"x", "s", "bias"}, {"y"}), "num_groups", 2);
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(nodesOf(*g, OpKind::Expand).size(), 2u);
  auto y = eval(*g, {iota({1, 4, 2}, 0.f, 0.7f), Tensor::fromVector<float>(DType::kF32, {2}, {2, 3}),
                     Tensor::fromVector<float>(DType::kF32, {2}, {1, -1})});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_NEAR(y[0].getDouble(0), -1.3416408 * 2 + 1, 1e-4);
  EXPECT_NEAR(y[0].getDouble(7), 1.3416408 * 3 - 1, 1e-4);
}

TEST(OnnxReduceNorm, AttentionCarriesItsOutputCount) {
  ModelBuilder b(23);
  b.input("q", DType::kF32, {int64_t(1), int64_t(2), int64_t(3), int64_t(4)})
      .input("k", DType::kF32, {int64_t(1), int64_t(2), int64_t(5), int64_t(4)})
      .input("v", DType::kF32, {int64_t(1), int64_t(2), int64_t(5), int64_t(4)})
      .output("y")
      .output("pk");
  b.node("Attention", {"q", "k", "v"}, {"y", "pk"});
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->numNodes(), 1u);
  Node* n = g->nodes()[0];
  EXPECT_EQ(n->attrs().getInt("num_outputs", 0), 2);
  ASSERT_EQ(n->outputs().size(), 2u);
  EXPECT_EQ(n->output(0)->type().str(), "f32[1,2,3,4]");
  EXPECT_EQ(n->output(1)->type().str(), "f32[1,2,5,4]");
}

TEST(OnnxReduceNorm, MissingRequiredAttributesAreErrors) {
  ModelBuilder b(9);
  b.input("x", DType::kF32, {int64_t(3)}).output("v").output("i");
  b.node("TopK", {"x"}, {"v", "i"});
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'k'"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace pcc
