// Importers of the math op family: opset variants (structure) and numerics.
#include <cmath>

#include "onnx_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

TEST(OnnxMathImport, ClipAttributesBecomeInputsBeforeOpset11) {
  Tensor x = Tensor::fromVector<float>(DType::kF32, {4}, {-3.f, -0.5f, 0.5f, 3.f});
  for (int64_t opset : {7, 11, 13}) {
    SCOPED_TRACE(opset);
    ModelBuilder b(opset);
    b.input("x", DType::kF32, {int64_t(4)}).output("y");
    if (opset >= 11) {
      b.init("lo", Tensor::scalarF32(-1.f)).init("hi", Tensor::scalarF32(2.f));
      b.node("Clip", {"x", "lo", "hi"}, {"y"}, "clip");
    } else {
      auto& n = b.node("Clip", {"x"}, {"y"}, "clip");
      setFloat(n, "min", -1.f);
      setFloat(n, "max", 2.f);
    }
    PCC_IMPORT_OK(g, b);
    ASSERT_EQ(g->numNodes(), 1u);
    Node* n = g->nodes()[0];
    EXPECT_EQ(n->op(), OpKind::Clip);
    ASSERT_EQ(n->inputs().size(), 3u);
    ASSERT_TRUE(n->input(1)->isConstant());
    EXPECT_EQ(n->input(1)->type().str(), "f32[]");
    EXPECT_TRUE(n->attrs().empty());
    auto out = evaluate(*g, {x});
    ASSERT_TRUE(out.ok()) << out.status().message();
    expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {4}, {-1.f, -0.5f, 0.5f, 2.f}));
  }
  // Only max given at opset 6-10: min stays absent.
  ModelBuilder b(10);
  b.input("x", DType::kF32, {int64_t(4)}).output("y");
  setFloat(b.node("Clip", {"x"}, {"y"}, "clip"), "max", 0.f);
  PCC_IMPORT_OK(g, b);
  Node* n = g->nodes()[0];
  ASSERT_EQ(n->inputs().size(), 3u);
  EXPECT_EQ(n->input(1), nullptr);
  auto out = evaluate(*g, {x});
  ASSERT_TRUE(out.ok()) << out.status().message();
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {4}, {-3.f, -0.5f, 0.f, 0.f}));
}

TEST(OnnxMathImport, AttributesAreKept) {
  ModelBuilder b(18);
  b.input("a", DType::kI64, {int64_t(2)}).input("x", DType::kF32, {int64_t(2)}).output("m").output("i");
  b.init("d", Tensor::fromVector<int64_t>(DType::kI64, {2}, {3, -3}));
  setInt(b.node("Mod", {"a", "d"}, {"m"}, "mod"), "fmod", 1);
  setInt(b.node("IsInf", {"x"}, {"i"}, "isinf"), "detect_negative", 0);
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->numNodes(), 2u);
  EXPECT_EQ(g->nodes()[0]->attrs().getInt("fmod", 0), 1);
  EXPECT_EQ(g->nodes()[1]->attrs().getInt("detect_negative", 1), 0);
  auto out = evaluate(*g, {Tensor::fromVector<int64_t>(DType::kI64, {2}, {-7, 7}),
                           Tensor::fromVector<float>(DType::kF32, {2}, {-INFINITY, INFINITY})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].toInts(), (std::vector<int64_t>{-1, 1}));
  EXPECT_EQ((*out)[1].toInts(), (std::vector<int64_t>{0, 1}));
}

TEST(OnnxMathImport, RangeOfConstantsFoldsAndNonConstantFails) {
  ModelBuilder b(11);
  b.input("x", DType::kF32, {int64_t(3)}).output("y");
  b.init("s", Tensor::scalarF32(0.f)).init("l", Tensor::scalarF32(3.f)).init("d", Tensor::scalarF32(1.f));
  b.node("Range", {"s", "l", "d"}, {"r"}, "range");
  b.node("Add", {"x", "r"}, {"y"}, "add");
  PCC_IMPORT_OK(g, b);
  EXPECT_TRUE(nodesOf(*g, OpKind::Range).empty());  // folded into a constant
  auto out = evaluate(*g, {iota({3})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {3}, {0.f, 2.f, 4.f}));

  ModelBuilder d(11);
  d.input("s", DType::kF32, {}).output("y");
  d.init("l", Tensor::scalarF32(3.f)).init("d", Tensor::scalarF32(1.f));
  d.node("Range", {"s", "l", "d"}, {"y"}, "range");
  auto r = importModel(d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be a constant"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("range"), std::string::npos) << r.status().message();
}

TEST(OnnxMathImport, QuantizeDequantizeOpsets) {
  for (int64_t opset : {10, 13, 21}) {
    SCOPED_TRACE(opset);
    ModelBuilder b(opset);
    b.input("x", DType::kF32, {int64_t(2), int64_t(2)}).output("y");
    b.init("s", Tensor::scalarF32(0.5f)).init("z", Tensor::fromVector<uint8_t>(DType::kU8, {}, {10}));
    b.node("QuantizeLinear", {"x", "s", "z"}, {"q"}, "q");
    b.node("DequantizeLinear", {"q", "s", "z"}, {"y"}, "dq");
    PCC_IMPORT_OK(g, b);
    EXPECT_EQ(nodesOf(*g, OpKind::QuantizeLinear).size(), 1u);
    auto out = evaluate(*g, {Tensor::fromVector<float>(DType::kF32, {2, 2}, {0.f, 0.74f, -1.f, 200.f})});
    ASSERT_TRUE(out.ok()) << out.status().message();
    // q = round(x / 0.5) + 10, saturated to [0, 255]; back: (q - 10) * 0.5.
    expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {2, 2}, {0.f, 0.5f, -1.f, 122.5f}));
  }
  // Blocked quantization (opset 21) keeps axis and block_size.
  ModelBuilder b(21);
  b.input("x", DType::kF32, {int64_t(1), int64_t(4)}).output("y");
  b.init("s", Tensor::fromVector<float>(DType::kF32, {1, 2}, {1.f, 10.f}));
  auto& n = b.node("QuantizeLinear", {"x", "s"}, {"y"}, "q");
  setInt(n, "axis", 1);
  setInt(n, "block_size", 2);
  setInt(n, "output_dtype", 3);  // int8
  PCC_IMPORT_OK(g, b);
  Node* q = g->nodes()[0];
  EXPECT_EQ(q->attrs().getInt("block_size", 0), 2);
  auto out = evaluate(*g, {Tensor::fromVector<float>(DType::kF32, {1, 4}, {1.f, -2.f, 30.f, -50.f})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dtype(), DType::kI8);
  EXPECT_EQ((*out)[0].toInts(), (std::vector<int64_t>{1, -2, 3, -5}));
}

TEST(OnnxMathImport, CastLikeKeepsSaturate) {
  ModelBuilder b(19);
  b.input("x", DType::kF32, {int64_t(2)}).input("t", DType::kF8E4M3FN, {int64_t(1)}).output("y");
  setInt(b.node("CastLike", {"x", "t"}, {"y"}, "cl"), "saturate", 0);
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->numNodes(), 1u);
  EXPECT_EQ(g->nodes()[0]->attrs().getInt("saturate", 1), 0);
  EXPECT_EQ(g->outputs()[0]->type().str(), "f8e4m3fn[2]");
  // Without saturation, 1000 is beyond e4m3fn's largest value (448): NaN.
  auto out = evaluate(*g, {Tensor::fromVector<float>(DType::kF32, {2}, {1000.f, 0.5f}),
                           Tensor::zeros(DType::kF8E4M3FN, {1})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_TRUE(std::isnan((*out)[0].getDouble(0)));
  EXPECT_EQ((*out)[0].getDouble(1), 0.5);
}

TEST(OnnxMathImport, OpsetGates) {
  // Ops newer than the model's opset are unknown there.
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2)}).output("y");
  b.node("Mish", {"x"}, {"y"}, "mish");  // opset 18
  auto r = importModel(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Mish"), std::string::npos) << r.status().message();
  ModelBuilder ok(18);
  ok.input("x", DType::kF32, {int64_t(2)}).output("y");
  ok.node("Mish", {"x"}, {"y"}, "mish");
  PCC_IMPORT_OK(g, ok);
  EXPECT_EQ(g->nodes()[0]->op(), OpKind::Mish);
}

}  // namespace
}  // namespace pcc
