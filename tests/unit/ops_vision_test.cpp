// Kernels of the vision family: hand-checked cases, attribute variants, dtypes
// and errors.
#include "ops_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

Tensor u8(Dims shape, std::vector<uint8_t> v) { return Tensor::fromVector(DType::kU8, std::move(shape), v); }

// ---- GridSample ------------------------------------------------------------------

TEST(OpsVision, GridSampleLinearAlignCorners) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  // (x, y) pairs: top-left corner, top-right corner, centre.
  Tensor grid = f32({1, 1, 3, 2}, {-1, -1, 1, -1, 0, 0});
  Tensor y = run1("GridSample", {&x, &grid}, attrs({{"align_corners", I(1)}}));
  expectTensor(y, DType::kF32, {1, 1, 1, 3}, {1, 2, 2.5});
}

TEST(OpsVision, GridSamplePaddingModes) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor grid = f32({1, 1, 1, 2}, {-1, -1});  // the corner: pixel coordinate (-0.5, -0.5)
  expectTensor(run1("GridSample", {&x, &grid}), DType::kF32, {1, 1, 1, 1}, {0.25});
  expectTensor(run1("GridSample", {&x, &grid}, attrs({{"padding_mode", S("border")}})), DType::kF32, {1, 1, 1, 1},
               {1});
  expectTensor(run1("GridSample", {&x, &grid}, attrs({{"padding_mode", S("reflection")}})), DType::kF32,
               {1, 1, 1, 1}, {1});
}

TEST(OpsVision, GridSampleNearestRoundsHalfToEven) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor grid = f32({1, 1, 1, 2}, {0, 0});  // pixel (0.5, 0.5) -> (0, 0)
  Tensor y = run1("GridSample", {&x, &grid}, attrs({{"mode", S("nearest")}, {"align_corners", I(1)}}));
  expectTensor(y, DType::kF32, {1, 1, 1, 1}, {1});
}

TEST(OpsVision, GridSampleCubicKeysWeights) {
  // Position 2.75 between taps 1..4 (values 1..4); with a = -0.75 the weights
  // are -0.03515625, 0.26171875, 0.87890625, -0.10546875.
  Tensor x = iota({1, 1, 1, 6});
  Tensor grid = f32({1, 1, 1, 2}, {0.1f, 0});
  Tensor y = run1("GridSample", {&x, &grid}, attrs({{"mode", S("cubic")}, {"align_corners", I(1)}}));
  expectTensor(y, DType::kF32, {1, 1, 1, 1}, {2.703125});
}

TEST(OpsVision, GridSampleVolumetricAndErrors) {
  Tensor x = iota({1, 1, 2, 2, 2});
  Tensor grid = f32({1, 1, 1, 1, 3}, {1, 1, 1});  // (x, y, z) = last corner
  expectTensor(run1("GridSample", {&x, &grid}, attrs({{"align_corners", I(1)}})), DType::kF32, {1, 1, 1, 1, 1}, {7});
  Tensor bad = f32({1, 1, 1, 2}, {0, 0});
  EXPECT_NE(runError("GridSample", {&x, &bad}).find("grid"), std::string::npos);
  EXPECT_NE(runError("GridSample", {&x, &grid}, attrs({{"mode", S("bilinear")}})).find("unknown mode"),
            std::string::npos);
}

// ---- AffineGrid ------------------------------------------------------------------

TEST(OpsVision, AffineGridIdentity) {
  Tensor theta = f32({1, 2, 3}, {1, 0, 0, 0, 1, 0});
  Tensor size = ints({1, 1, 2, 2});
  expectTensor(run1("AffineGrid", {&theta, &size}), DType::kF32, {1, 2, 2, 2},
               {-0.5, -0.5, 0.5, -0.5, -0.5, 0.5, 0.5, 0.5});
  expectTensor(run1("AffineGrid", {&theta, &size}, attrs({{"align_corners", I(1)}})), DType::kF32, {1, 2, 2, 2},
               {-1, -1, 1, -1, -1, 1, 1, 1});
  auto r = infer("AffineGrid", {theta.type(), size.type()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be a constant"), std::string::npos);
}

// ---- RoiAlign --------------------------------------------------------------------

TEST(OpsVision, RoiAlignModes) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor rois = f32({1, 4}, {0, 0, 1, 1});
  Tensor bi = i64({1}, {0});
  AttrMap a = attrs({{"sampling_ratio", I(1)}});
  expectTensor(run1("RoiAlign", {&x, &rois, &bi}, a), DType::kF32, {1, 1, 1, 1}, {1});
  a.set("coordinate_transformation_mode", S("output_half_pixel"));
  expectTensor(run1("RoiAlign", {&x, &rois, &bi}, a), DType::kF32, {1, 1, 1, 1}, {2.5});
  a.set("mode", S("max"));  // the largest weighted corner: 0.25 * 4
  expectTensor(run1("RoiAlign", {&x, &rois, &bi}, a), DType::kF32, {1, 1, 1, 1}, {1});
  Tensor badBatch = i64({1}, {3});
  EXPECT_NE(runError("RoiAlign", {&x, &rois, &badBatch}).find("batch index"), std::string::npos);
}

// ---- DeformConv ------------------------------------------------------------------

TEST(OpsVision, DeformConvZeroOffsetIsConv) {
  Tensor x = iota({1, 1, 3, 3});
  Tensor w = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor off = Tensor::zeros(DType::kF32, {1, 8, 2, 2});
  expectTensor(run1("DeformConv", {&x, &w, &off}), DType::kF32, {1, 1, 2, 2}, {8, 12, 20, 24});
  Tensor b = f32({1}, {1});
  Tensor mask = f32({1, 4, 2, 2}, std::vector<float>(16, 0.5f));
  expectTensor(run1("DeformConv", {&x, &w, &off, &b, &mask}), DType::kF32, {1, 1, 2, 2}, {5, 7, 11, 13});
}

TEST(OpsVision, DeformConvFractionalOffsetInterpolates) {
  Tensor x = iota({1, 1, 1, 3});
  Tensor w = f32({1, 1, 1, 1}, {1});
  // dx = 0.5 everywhere: samples at 0.5, 1.5 and 2.5 (half outside: its right tap reads 0).
  std::vector<float> o(6, 0.f);
  o[3] = o[4] = o[5] = 0.5f;
  Tensor off = f32({1, 2, 1, 3}, o);
  expectTensor(run1("DeformConv", {&x, &w, &off}), DType::kF32, {1, 1, 1, 3}, {0.5, 1.5, 1});
}

// ---- NonMaxSuppression ----------------------------------------------------------

TEST(OpsVision, NonMaxSuppressionSuppressesOverlaps) {
  Tensor boxes = f32({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11});
  Tensor scores = f32({1, 1, 3}, {0.9f, 0.8f, 0.7f});
  Tensor maxOut = i64({1}, {3});
  Tensor iou = f32({1}, {0.5f});
  Tensor y = run1("NonMaxSuppression", {&boxes, &scores, &maxOut, &iou});
  expectTensor(y, DType::kI64, {2, 3}, {0, 0, 0, 0, 0, 2});
  Tensor few = i64({1}, {1});
  expectTensor(run1("NonMaxSuppression", {&boxes, &scores, &few, &iou}), DType::kI64, {1, 3}, {0, 0, 0});
  Tensor thr = f32({1}, {0.75f});
  expectTensor(run1("NonMaxSuppression", {&boxes, &scores, &maxOut, &iou, &thr}), DType::kI64, {1, 3}, {0, 0, 0});
  // No max_output_boxes_per_class: nothing is selected.
  expectTensor(run1("NonMaxSuppression", {&boxes, &scores}), DType::kI64, {0, 3}, {});
}

TEST(OpsVision, NonMaxSuppressionCenterBoxesAndConstantInputs) {
  Tensor boxes = f32({1, 2, 4}, {0.5f, 0.5f, 1, 1, 0.5f, 0.6f, 1, 1});
  Tensor scores = f32({1, 1, 2}, {0.5f, 0.6f});
  Tensor maxOut = i64({1}, {2});
  Tensor iou = f32({1}, {0.5f});
  Tensor y = run1("NonMaxSuppression", {&boxes, &scores, &maxOut, &iou}, attrs({{"center_point_box", I(1)}}));
  expectTensor(y, DType::kI64, {1, 3}, {0, 0, 1});
  auto r = infer("NonMaxSuppression", {boxes.type(), scores.type()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be a constant"), std::string::npos);
}

// ---- Unique ----------------------------------------------------------------------

TEST(OpsVision, UniqueFlattenedSortedAndNot) {
  Tensor x = f32({6}, {2, 1, 1, 3, 4, 3});
  auto s = run("Unique", {&x});
  ASSERT_EQ(s.size(), 4u);
  expectTensor(s[0], DType::kF32, {4}, {1, 2, 3, 4});
  expectTensor(s[1], DType::kI64, {4}, {1, 0, 3, 4});
  expectTensor(s[2], DType::kI64, {6}, {1, 0, 0, 2, 3, 2});
  expectTensor(s[3], DType::kI64, {4}, {2, 1, 2, 1});
  auto u = run("Unique", {&x}, attrs({{"sorted", I(0)}, {"num_outputs", I(2)}}));
  ASSERT_EQ(u.size(), 2u);
  expectTensor(u[0], DType::kF32, {4}, {2, 1, 3, 4});
  expectTensor(u[1], DType::kI64, {4}, {0, 1, 3, 4});
}

TEST(OpsVision, UniqueAlongAxis) {
  Tensor x = i32({3, 2}, {1, 0, 1, 0, 0, 1});
  auto s = run("Unique", {&x}, attrs({{"axis", I(0)}}));
  ASSERT_EQ(s.size(), 4u);
  expectTensor(s[0], DType::kI32, {2, 2}, {0, 1, 1, 0});
  expectTensor(s[1], DType::kI64, {2}, {2, 0});
  expectTensor(s[2], DType::kI64, {3}, {1, 1, 0});
  expectTensor(s[3], DType::kI64, {2}, {1, 2});
  auto r = infer("Unique", {x.type()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be a constant"), std::string::npos);
}

// ---- CenterCropPad, MaxUnpool, Col2Im, TensorScatter ------------------------------

TEST(OpsVision, CenterCropPadCropsAndPads) {
  Tensor x = iota({5});
  Tensor three = ints({3});
  expectTensor(run1("CenterCropPad", {&x, &three}), DType::kF32, {3}, {1, 2, 3});
  Tensor small = iota({2, 2}, 1);
  Tensor shape = ints({4});
  expectTensor(run1("CenterCropPad", {&small, &shape}, attrs({{"axes", Is({-1})}})), DType::kF32, {2, 4},
               {0, 1, 2, 0, 0, 3, 4, 0});
  EXPECT_NE(runError("CenterCropPad", {&small, &three}).find("one value per axis"), std::string::npos);
}

TEST(OpsVision, MaxUnpoolScattersByIndex) {
  Tensor x = f32({1, 1, 2, 2}, {5, 6, 7, 8});
  Tensor idx = i64({1, 1, 2, 2}, {0, 3, 8, 15});
  AttrMap a = attrs({{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}});
  std::vector<double> want(16, 0.0);
  want[0] = 5, want[3] = 6, want[8] = 7, want[15] = 8;
  expectTensor(run1("MaxUnpool", {&x, &idx}, a), DType::kF32, {1, 1, 4, 4}, want);
  Tensor shape = ints({1, 1, 5, 5});
  // A larger output_shape keeps the [4, 4] layout of the indices at its origin.
  std::vector<double> want5(25, 0.0);
  want5[0] = 5, want5[3] = 6, want5[10] = 7, want5[18] = 8;
  expectTensor(run1("MaxUnpool", {&x, &idx, &shape}, a), DType::kF32, {1, 1, 5, 5}, want5);
}

TEST(OpsVision, Col2ImSumsOverlappingBlocks) {
  Tensor x = f32({1, 2, 2}, {1, 2, 3, 4});  // [tap][position]
  Tensor image = ints({1, 3});
  Tensor block = ints({1, 2});
  expectTensor(run1("Col2Im", {&x, &image, &block}), DType::kF32, {1, 1, 1, 3}, {1, 5, 4});
  Tensor x4 = iota({1, 4, 1});
  Tensor image2 = ints({2, 2});
  Tensor block2 = ints({2, 2});
  expectTensor(run1("Col2Im", {&x4, &image2, &block2}), DType::kF32, {1, 1, 2, 2}, {0, 1, 2, 3});
}

TEST(OpsVision, TensorScatterLinearAndCircular) {
  Tensor cache = Tensor::zeros(DType::kF32, {1, 4, 1});
  Tensor update = f32({1, 2, 1}, {1, 2});
  Tensor at1 = i64({1}, {1});
  expectTensor(run1("TensorScatter", {&cache, &update, &at1}, attrs({{"axis", I(1)}})), DType::kF32, {1, 4, 1},
               {0, 1, 2, 0});
  Tensor at3 = i64({1}, {3});
  expectTensor(run1("TensorScatter", {&cache, &update, &at3}, attrs({{"axis", I(1)}, {"mode", S("circular")}})),
               DType::kF32, {1, 4, 1}, {2, 0, 0, 1});
  EXPECT_NE(runError("TensorScatter", {&cache, &update, &at3}, attrs({{"axis", I(1)}})).find("outside"),
            std::string::npos);
}

// ---- Det, Swish ------------------------------------------------------------------

TEST(OpsVision, DetBatched) {
  Tensor x = f64({2, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0});
  expectTensor(run1("Det", {&x}), DType::kF64, {2}, {-2, -1});
  Tensor d = f32({3, 3}, {2, 0, 0, 0, 3, 0, 0, 0, 4});
  expectTensor(run1("Det", {&d}), DType::kF32, {}, {24});
  Tensor bad = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  EXPECT_NE(runError("Det", {&bad}).find("[..., M, M]"), std::string::npos);
}

TEST(OpsVision, SwishAlpha) {
  Tensor x = f32({2}, {0, 1});
  expectTensor(run1("Swish", {&x}), DType::kF32, {2}, {0, 0.7310586});
  expectTensor(run1("Swish", {&x}, attrs({{"alpha", F(2)}})), DType::kF32, {2}, {0, 0.8807971});
  Tensor i = i32({1}, {1});
  EXPECT_FALSE(runError("Swish", {&i}).empty());
}

// ---- Quantized ops ---------------------------------------------------------------

TEST(OpsVision, QLinearMatMulRequantizes) {
  Tensor a = u8({1, 2}, {2, 4}), as = f32({}, {0.5f}), az = u8({}, {0});
  Tensor b = u8({2, 1}, {3, 5}), bs = f32({}, {1}), bz = u8({}, {1});
  Tensor ys = f32({}, {1}), yz = u8({}, {10});
  // (2*2 + 4*4) * 0.5 + 10
  expectTensor(run1("QLinearMatMul", {&a, &as, &az, &b, &bs, &bz, &ys, &yz}), DType::kU8, {1, 1}, {20});
  Tensor big = f32({}, {100});
  expectTensor(run1("QLinearMatMul", {&a, &big, &az, &b, &bs, &bz, &ys, &yz}), DType::kU8, {1, 1}, {255});
}

TEST(OpsVision, ConvIntegerAndQLinearConv) {
  Tensor x = u8({1, 1, 2, 2}, {1, 2, 3, 4}), xz = u8({}, {1});
  Tensor w = u8({1, 1, 1, 1}, {2});
  expectTensor(run1("ConvInteger", {&x, &w, &xz}), DType::kI32, {1, 1, 2, 2}, {0, 2, 4, 6});
  Tensor xs = f32({}, {1}), ws = f32({}, {0.25f}), wz = u8({}, {0}), ys = f32({}, {1}), yz = u8({}, {0});
  // (x - 1) * 2 * 0.25 = 0, 0.5, 1, 1.5: halves round to even.
  expectTensor(run1("QLinearConv", {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz}), DType::kU8, {1, 1, 2, 2},
               {0, 0, 1, 2});
  Tensor bias = i32({1}, {2});  // in accumulator units: + 2 * 0.25
  expectTensor(run1("QLinearConv", {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz, &bias}), DType::kU8, {1, 1, 2, 2},
               {0, 1, 2, 2});
  Tensor f = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_FALSE(runError("ConvInteger", {&f, &w}).empty());
}

}  // namespace
}  // namespace pcc
