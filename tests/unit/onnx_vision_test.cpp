// Importers of the vision family: GridSample mode names across opsets,
// RoiAlign's legacy coordinates, Unique's output count and refusals of
// shapes that depend on run-time values.
#include "onnx_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

std::vector<double> valuesOf(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.getDouble(i));
  return v;
}

TEST(OnnxVisionImport, GridSampleOpset16ModeNames) {
  for (auto [opset, mode] : {std::pair<int64_t, const char*>{16, "bicubic"}, {20, "cubic"}}) {
    ModelBuilder b(opset);
    b.input("x", DType::kF32, {int64_t(1), int64_t(1), int64_t(2), int64_t(2)})
        .input("g", DType::kF32, {int64_t(1), int64_t(1), int64_t(1), int64_t(2)})
        .output("y");
    setString(b.node("GridSample", {"x", "g"}, {"y"}), "mode", mode);
    PCC_IMPORT_OK(g, b);
    auto nodes = nodesOf(*g, OpKind::GridSample);
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0]->attrs().getString("mode", ""), "cubic") << "opset " << opset;
  }
  // Opset 16's default is bilinear, which is canonical linear.
  ModelBuilder b(16);
  b.input("x", DType::kF32, {int64_t(1), int64_t(1), int64_t(2), int64_t(2)})
      .input("g", DType::kF32, {int64_t(1), int64_t(1), int64_t(1), int64_t(2)})
      .output("y");
  b.node("GridSample", {"x", "g"}, {"y"});
  PCC_IMPORT_OK(g, b);
  auto out = evaluate(*g, {iota({1, 1, 2, 2}, 1), Tensor::fromVector<float>(DType::kF32, {1, 1, 1, 2}, {0, 0})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(valuesOf((*out)[0]), (std::vector<double>{2.5}));
}

TEST(OnnxVisionImport, RoiAlignOpset10UsesOutputHalfPixel) {
  ModelBuilder b(10);
  b.input("x", DType::kF32, {int64_t(1), int64_t(1), int64_t(2), int64_t(2)}).output("y");
  b.init("rois", Tensor::fromVector<float>(DType::kF32, {1, 4}, {0, 0, 1, 1})).initI64("bi", {0});
  setInt(b.node("RoiAlign", {"x", "rois", "bi"}, {"y"}), "sampling_ratio", 1);
  PCC_IMPORT_OK(g, b);
  auto out = evaluate(*g, {iota({1, 1, 2, 2}, 1)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(valuesOf((*out)[0]), (std::vector<double>{2.5}));
}

TEST(OnnxVisionImport, UniqueOutputCountFollowsTheNode) {
  ModelBuilder b(11);
  b.init("x", Tensor::fromVector<float>(DType::kF32, {4}, {3, 1, 3, 2})).output("y").output("idx");
  b.node("Unique", {"x"}, {"y", "idx"});
  PCC_IMPORT_OK(g, b);
  auto out = evaluate(*g, {});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ(valuesOf((*out)[0]), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(valuesOf((*out)[1]), (std::vector<double>{1, 3, 0}));
}

TEST(OnnxVisionImport, DataDependentShapesNeedConstants) {
  ModelBuilder b(11);
  b.input("x", DType::kF32, {int64_t(4)}).output("y");
  b.node("Unique", {"x"}, {"y"});
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("must be a constant"), std::string::npos) << g.status().message();

  ModelBuilder n(11);
  n.input("boxes", DType::kF32, {int64_t(1), int64_t(2), int64_t(4)})
      .input("scores", DType::kF32, {int64_t(1), int64_t(1), int64_t(2)})
      .output("sel");
  n.node("NonMaxSuppression", {"boxes", "scores"}, {"sel"});
  auto gn = importModel(n);
  ASSERT_FALSE(gn.ok());
  EXPECT_NE(gn.status().message().find("must be a constant"), std::string::npos) << gn.status().message();
}

TEST(OnnxVisionImport, CenterCropPadWithConstantShape) {
  ModelBuilder b(18);
  b.input("x", DType::kF32, {int64_t(5)}).output("y");
  b.initI64("shape", {3});
  b.node("CenterCropPad", {"x", "shape"}, {"y"});
  PCC_IMPORT_OK(g, b);
  auto out = evaluate(*g, {iota({5})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(valuesOf((*out)[0]), (std::vector<double>{1, 2, 3}));
}

}  // namespace
}  // namespace pcc
