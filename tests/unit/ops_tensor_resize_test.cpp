// Resize: modes, coordinate transformations, scales vs sizes, axes, policies.
#include "ops_test_util.h"

namespace pcc::testing {
namespace {

Tensor scales(std::vector<float> v) { return f32({static_cast<int64_t>(v.size())}, v); }

TEST(OpsResize, NearestUpsampleScales) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4}), s = scales({1, 1, 2, 3});
  expectTensor(run1("Resize", {&x, nullptr, &s}), DType::kF32, {1, 1, 4, 6},
               {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // Integers are copied exactly, whatever their size.
  int64_t big = (int64_t(1) << 60) + 1;
  Tensor xi = i64({2}, {big, 3}), s2 = scales({1.5f});
  expectTensor(run1("Resize", {&xi, nullptr, &s2}, attrs({{"coordinate_transformation_mode", S("asymmetric")}})),
               DType::kI64, {3}, {static_cast<double>(big), 3, 3});
  EXPECT_EQ(run1("Resize", {&xi, nullptr, &s2}).data<int64_t>()[0], big);
}

TEST(OpsResize, NearestModes) {
  // 1-D, 4 -> 8 asymmetric: source coords 0, .5, 1, 1.5, ...
  Tensor x = f32({4}, {10, 20, 30, 40}), s = scales({2});
  auto run = [&](const char* mode) {
    return run1("Resize", {&x, nullptr, &s},
                attrs({{"coordinate_transformation_mode", S("asymmetric")}, {"nearest_mode", S(mode)}}));
  };
  expectTensor(run("round_prefer_floor"), DType::kF32, {8}, {10, 10, 20, 20, 30, 30, 40, 40});
  expectTensor(run("round_prefer_ceil"), DType::kF32, {8}, {10, 20, 20, 30, 30, 40, 40, 40});
  expectTensor(run("floor"), DType::kF32, {8}, {10, 10, 20, 20, 30, 30, 40, 40});
  expectTensor(run("ceil"), DType::kF32, {8}, {10, 20, 20, 30, 30, 40, 40, 40});
}

TEST(OpsResize, LinearHalfPixelAndAlignCorners) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4}), s = scales({1, 1, 2, 2});
  expectTensor(run1("Resize", {&x, nullptr, &s}, attrs({{"mode", S("linear")}})), DType::kF32, {1, 1, 4, 4},
               {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  const double t = 1.0 / 3;
  expectTensor(
      run1("Resize", {&x, nullptr, &s},
           attrs({{"mode", S("linear")}, {"coordinate_transformation_mode", S("align_corners")}})),
      DType::kF32, {1, 1, 4, 4},
      {1, 1 + t, 1 + 2 * t, 2, 1 + 2 * t, 2, 2 + t, 2 + 2 * t, 2 + t, 2 + 2 * t, 3, 3 + t, 3, 3 + t,
       3 + 2 * t, 4});
}

TEST(OpsResize, CubicByHand) {
  // Keys kernel, A = -0.75: weights at distances 1.5, .5, .5, 1.5 are
  // -0.09375, 0.59375, 0.59375, -0.09375; index -1 reads the edge.
  Tensor x = f32({4}, {0, 1, 2, 3}), s = scales({2});
  Tensor y = run1("Resize", {&x, nullptr, &s},
                  attrs({{"mode", S("cubic")}, {"coordinate_transformation_mode", S("asymmetric")}}));
  ASSERT_EQ(y.shape(), Dims{8});
  EXPECT_NEAR(y.getDouble(1), 0.40625, 1e-6);
  EXPECT_NEAR(y.getDouble(2), 1.0, 1e-6);
  EXPECT_NEAR(y.getDouble(3), 1.5, 1e-6);
  // exclude_outside drops the edge tap and renormalizes.
  Tensor z = run1("Resize", {&x, nullptr, &s},
                  attrs({{"mode", S("cubic")}, {"coordinate_transformation_mode", S("asymmetric")},
                         {"exclude_outside", I(1)}}));
  EXPECT_NEAR(z.getDouble(1), (0.59375 - 2 * 0.09375) / (1 + 0.09375), 1e-6);
}

TEST(OpsResize, SizesAxesAndPolicies) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor sizes = ints({1, 1, 4, 4});
  Tensor a = run1("Resize", {&x, nullptr, nullptr, &sizes});
  expectTensor(a, DType::kF32, {1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  // axes reorders which dims the sizes name.
  Tensor hw = ints({3, 1});
  Tensor b = run1("Resize", {&x, nullptr, nullptr, &hw}, attrs({{"axes", Is({3, 2})}}));
  expectTensor(b, DType::kF32, {1, 1, 1, 3}, {1, 1, 2});
  Tensor want = ints({7, 8});
  auto shapeWith = [&](const char* policy) {
    auto r = infer("Resize", {x.type(), {}, {}, want.type()}, {nullptr, nullptr, nullptr, &want},
                   attrs({{"axes", Is({2, 3})}, {"keep_aspect_ratio_policy", S(policy)}}));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? (*r)[0].shape : Dims{};
  };
  EXPECT_EQ(shapeWith("stretch"), (Dims{1, 1, 7, 8}));
  EXPECT_EQ(shapeWith("not_larger"), (Dims{1, 1, 7, 7}));
  EXPECT_EQ(shapeWith("not_smaller"), (Dims{1, 1, 8, 8}));
}

TEST(OpsResize, TfCropAndResizeExtrapolates) {
  Tensor x = f32({4}, {1, 2, 3, 4}), roi = f32({2}, {0.5f, 1.5f}), sizes = ints({3});
  // Source coords 1.5 + 1.5 * i: 1.5, 3, 4.5 (outside).
  expectTensor(run1("Resize", {&x, &roi, nullptr, &sizes},
                    attrs({{"mode", S("linear")},
                           {"coordinate_transformation_mode", S("tf_crop_and_resize")},
                           {"extrapolation_value", F(10)}})),
               DType::kF32, {3}, {2.5, 4, 10});
}

TEST(OpsResize, IntegerLinearRoundsAndHalfTypes) {
  Tensor x = Tensor::fromVector<uint8_t>(DType::kU8, {2}, {0, 255}), s = scales({2});
  // half_pixel: coords -.25, .25, .75, 1.25 -> 0, 63.75, 191.25, 255.
  expectTensor(run1("Resize", {&x, nullptr, &s}, attrs({{"mode", S("linear")}})), DType::kU8, {4},
               {0, 64, 191, 255});
  Tensor h = Tensor::fromVector<uint16_t>(DType::kBF16, {2}, {floatToBf16(1), floatToBf16(3)});
  expectTensor(run1("Resize", {&h, nullptr, &s}, attrs({{"mode", S("linear")}})), DType::kBF16, {4},
               {1, 1.5, 2.5, 3});
}

TEST(OpsResize, Errors) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4}), s = scales({2, 2}), sizes = ints({4, 4});
  EXPECT_NE(runError("Resize", {&x, nullptr, &s, &sizes}).find("exactly one"), std::string::npos);
  EXPECT_NE(runError("Resize", {&x}).find("exactly one"), std::string::npos);
  Tensor s3 = scales({1, 2, 2});
  EXPECT_NE(runError("Resize", {&x, nullptr, &s3}).find("scales has 3 values"), std::string::npos);
  EXPECT_NE(runError("Resize", {&x, nullptr, &s}, attrs({{"mode", S("area")}})).find("unknown mode"),
            std::string::npos);
  // Shapes cannot be inferred from run-time scales.
  auto r = infer("Resize", {x.type(), {}, s.type()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be a constant"), std::string::npos);
  // An empty scales tensor counts as absent (opset 11-12 models pass one).
  Tensor empty = f32({0}, {});
  expectTensor(run1("Resize", {&x, nullptr, &empty, &sizes}), DType::kF32, {4, 4},
               {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

}  // namespace
}  // namespace pcc::testing
