// Importers of the tensor family: opset variants of Pad, Resize/Upsample,
// Scatter, Size, NonZero, Compress and Dropout.
#include "onnx_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

/// Imports `b`, evaluates it on `inputs` and \returns output 0.
Tensor importAndRun(ModelBuilder& b, const std::vector<Tensor>& inputs) {
  auto g = importModel(b);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return Tensor();
  auto out = evaluate(**g, inputs);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? (*out)[0] : Tensor();
}

std::vector<double> valuesOf(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.getDouble(i));
  return v;
}

TEST(OnnxTensorImport, PadAttributesBeforeOpset11) {
  ModelBuilder b(10);
  b.input("x", DType::kF32, {int64_t(3)}).output("y");
  auto& n = b.node("Pad", {"x"}, {"y"}, "pad");
  setInts(n, "pads", {1, 2});
  setFloat(n, "value", 7.f);
  PCC_IMPORT_OK(g, b);
  auto pads = nodesOf(*g, OpKind::Pad);
  ASSERT_EQ(pads.size(), 1u);
  ASSERT_EQ(pads[0]->inputs().size(), 3u);
  EXPECT_TRUE(pads[0]->inputs()[1]->isConstant());
  auto out = evaluate(*g, {iota({3}, 1.f)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(valuesOf((*out)[0]), (std::vector<double>{7, 1, 2, 3, 7, 7}));
}

TEST(OnnxTensorImport, PadOpset18AxesInput) {
  ModelBuilder b(18);
  b.input("x", DType::kF32, {int64_t(2), int64_t(2)}).output("y");
  b.initI64("pads", {1, 1}).initI64("axes", {0});
  setString(b.node("Pad", {"x", "pads", "", "axes"}, {"y"}), "mode", "edge");
  Tensor y = importAndRun(b, {iota({2, 2})});
  EXPECT_EQ(y.shape(), (Dims{4, 2}));
  EXPECT_EQ(valuesOf(y), (std::vector<double>{0, 1, 0, 1, 2, 3, 2, 3}));
}

TEST(OnnxTensorImport, UpsampleOpset7And9AreAsymmetricResize) {
  for (int64_t opset : {7, 9}) {
    ModelBuilder b(opset);
    b.input("x", DType::kF32, {int64_t(1), int64_t(3)}).output("y");
    std::vector<std::string> ins = {"x"};
    if (opset >= 9) {
      b.init("s", Tensor::fromVector<float>(DType::kF32, {2}, {1.f, 2.f}));
      ins.push_back("s");
    }
    auto& n = b.node("Upsample", ins, {"y"});
    setString(n, "mode", "linear");
    if (opset < 9) setFloats(n, "scales", {1.f, 2.f});
    PCC_IMPORT_OK(g, b);
    auto rs = nodesOf(*g, OpKind::Resize);
    ASSERT_EQ(rs.size(), 1u) << opset;
    EXPECT_EQ(rs[0]->attrs().getString("coordinate_transformation_mode", ""), "asymmetric");
    auto out = evaluate(*g, {iota({1, 3})});
    ASSERT_TRUE(out.ok()) << out.status().message();
    // Asymmetric: source x / 2; the last position reads the edge.
    EXPECT_EQ(valuesOf((*out)[0]), (std::vector<double>{0, 0.5, 1, 1.5, 2, 2})) << opset;
  }
}

TEST(OnnxTensorImport, ResizeOpset10And11) {
  {
    ModelBuilder b(10);
    b.input("x", DType::kF32, {int64_t(2)}).output("y");
    b.init("s", Tensor::fromVector<float>(DType::kF32, {1}, {2.f}));
    b.node("Resize", {"x", "s"}, {"y"});
    Tensor y = importAndRun(b, {iota({2}, 5.f)});
    EXPECT_EQ(valuesOf(y), (std::vector<double>{5, 5, 6, 6}));
  }
  {
    // Opset 11: empty roi and scales, sizes given; half_pixel linear.
    ModelBuilder b(11);
    b.input("x", DType::kF32, {int64_t(2)}).output("y");
    b.init("roi", Tensor::zeros(DType::kF32, {0})).init("s", Tensor::zeros(DType::kF32, {0}));
    b.initI64("sizes", {4});
    setString(b.node("Resize", {"x", "roi", "s", "sizes"}, {"y"}), "mode", "linear");
    Tensor y = importAndRun(b, {Tensor::fromVector<float>(DType::kF32, {2}, {1.f, 3.f})});
    EXPECT_EQ(valuesOf(y), (std::vector<double>{1, 1.5, 2.5, 3}));
  }
}

TEST(OnnxTensorImport, ScatterIsScatterElements) {
  ModelBuilder b(10);
  b.input("d", DType::kF32, {int64_t(1), int64_t(3)}).output("y");
  b.init("i", Tensor::fromVector<int64_t>(DType::kI64, {1, 1}, {2}));
  b.init("u", Tensor::fromVector<float>(DType::kF32, {1, 1}, {9.f}));
  setInt(b.node("Scatter", {"d", "i", "u"}, {"y"}), "axis", 1);
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(nodesOf(*g, OpKind::ScatterElements).size(), 1u);
  auto out = evaluate(*g, {iota({1, 3})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(valuesOf((*out)[0]), (std::vector<double>{0, 1, 9}));
}

TEST(OnnxTensorImport, SizeIsAConstant) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2), int64_t(5)}).output("y");
  b.node("Size", {"x"}, {"y"});
  Tensor y = importAndRun(b, {iota({2, 5})});
  EXPECT_EQ(y.type(), (TensorType{DType::kI64, {}}));
  EXPECT_EQ(y.getInt(0), 10);
}

TEST(OnnxTensorImport, NonZeroNeedsAConstantInput) {
  {
    ModelBuilder b(13);
    b.input("x", DType::kF32, {int64_t(3)}).output("y");
    b.node("NonZero", {"x"}, {"y"}, "nz");
    auto g = importModel(b);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(g.status().message().find("NonZero: output size depends on run-time data"), std::string::npos)
        << g.status().message();
    EXPECT_NE(g.status().message().find("'nz'"), std::string::npos) << g.status().message();
  }
  {
    ModelBuilder b(13);
    b.input("x", DType::kF32, {int64_t(1)}).output("y");
    b.init("c", Tensor::fromVector<float>(DType::kF32, {4}, {0.f, 2.f, 0.f, 1.f}));
    b.node("NonZero", {"c"}, {"nz"});
    setInt(b.node("Cast", {"nz"}, {"nzf"}), "to", 1);
    b.node("Add", {"x", "nzf"}, {"y"});
    Tensor y = importAndRun(b, {Tensor::fromVector<float>(DType::kF32, {1}, {10.f})});
    EXPECT_EQ(y.shape(), (Dims{1, 2}));
    EXPECT_EQ(valuesOf(y), (std::vector<double>{11, 13}));
  }
}

TEST(OnnxTensorImport, DropoutMaskIsAllOnes) {
  for (int64_t opset : {7, 13}) {
    ModelBuilder b(opset);
    b.input("x", DType::kF32, {int64_t(2)}).output("y").output("mask");
    b.node("Dropout", {"x"}, {"y", "mask"});
    PCC_IMPORT_OK(g, b);
    auto out = evaluate(*g, {iota({2}, 3.f)});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(valuesOf((*out)[0]), (std::vector<double>{3, 4}));
    EXPECT_EQ((*out)[1].dtype(), opset >= 10 ? DType::kBool : DType::kF32);
    EXPECT_EQ(valuesOf((*out)[1]), (std::vector<double>{1, 1}));
  }
  // Training with a run-time flag is refused as unsupported.
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2)}).input("t", DType::kBool, {}).output("y");
  b.node("Dropout", {"x", "", "t"}, {"y"});
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
}

TEST(OnnxTensorImport, DepthToSpaceOpset7DefaultsToDcr) {
  ModelBuilder b(7);
  b.input("x", DType::kF32, {int64_t(1), int64_t(8), int64_t(1), int64_t(1)}).output("y");
  setInt(b.node("DepthToSpace", {"x"}, {"y"}), "blocksize", 2);
  Tensor y = importAndRun(b, {iota({1, 8, 1, 1})});
  EXPECT_EQ(valuesOf(y), (std::vector<double>{0, 2, 4, 6, 1, 3, 5, 7}));
}

}  // namespace
}  // namespace pcc
