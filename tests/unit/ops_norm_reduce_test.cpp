// Softmax, LayerNormalization, BatchNormalization, ReduceMean. Expected values
// are from numpy in double precision.
#include <cmath>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsSoftmax, DefaultAxisAndNegativeAxis) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 6, 8});
  std::vector<double> last = {0.0900306, 0.2447285, 0.665241, 0.0158762, 0.1173104, 0.8668133};
  expectTensor(run1("Softmax", {&x}), DType::kF32, {2, 3}, last);
  expectTensor(run1("Softmax", {&x}, attrs({{"axis", I(1)}})), DType::kF32, {2, 3}, last);
  expectTensor(run1("Softmax", {&x}, attrs({{"axis", I(-2)}})), DType::kF32, {2, 3},
               {0.0474259, 0.0179862, 0.0066929, 0.9525741, 0.9820138, 0.9933071});
  // Large inputs do not overflow (max is subtracted first).
  Tensor big = f32({2}, {1000, 1000});
  expectTensor(run1("Softmax", {&big}), DType::kF32, {2}, {0.5, 0.5});
  EXPECT_FALSE(infer("Softmax", {{DType::kF32, {2, 3}}}, {}, attrs({{"axis", I(2)}})).ok());
  EXPECT_FALSE(infer("Softmax", {{DType::kI64, {2, 3}}}).ok());
}

TEST(OpsLayerNorm, LastAxisWithScaleAndBias) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 6, 8}), s = f32({3}, {1, 2, 0.5f}), b = f32({3}, {0, 1, -1});
  expectTensor(run1("LayerNormalization", {&x, &s, &b}), DType::kF32, {2, 3},
               {-1.2247357, 1.0, -0.3876322, -1.2247426, 1.0, -0.3876287});
}

TEST(OpsLayerNorm, MultiAxisNoBiasBroadcastScale) {
  Tensor x = iota({2, 2, 3}), s = f32({1}, {2});  // scale broadcast over [2,3]
  std::vector<double> half = {-2.9276952, -1.7566171, -0.585539, 0.585539, 1.7566171, 2.9276952};
  std::vector<double> want = half;
  want.insert(want.end(), half.begin(), half.end());
  expectTensor(run1("LayerNormalization", {&x, &s}, attrs({{"axis", I(1)}})), DType::kF32,
               {2, 2, 3}, want);
  expectTensor(run1("LayerNormalization", {&x, &s, nullptr}, attrs({{"axis", I(-2)}})), DType::kF32,
               {2, 2, 3}, want);
  EXPECT_FALSE(infer("LayerNormalization", {{DType::kF32, {2, 3}}, {DType::kF32, {2}}}).ok());
  EXPECT_FALSE(infer("LayerNormalization", {{DType::kF32, {2, 3}}, {DType::kF32, {3}}}, {},
                     attrs({{"axis", I(2)}})).ok());
  EXPECT_FALSE(infer("LayerNormalization", {{DType::kF32, {2, 3}}, {DType::kF64, {3}}}).ok());
}

TEST(OpsBatchNorm, Inference) {
  // y = (x - mean) / sqrt(var + eps) * scale + B, per channel; eps chosen so sqrt is exact.
  Tensor x = f32({1, 2, 1, 2}, {1, 3, 10, 20});
  Tensor scale = f32({2}, {2, 1}), b = f32({2}, {0, 5}), mean = f32({2}, {1, 10}), var = f32({2}, {3, 15});
  expectTensor(run1("BatchNormalization", {&x, &scale, &b, &mean, &var}, attrs({{"epsilon", F(1)}})),
               DType::kF32, {1, 2, 1, 2}, {0, 2, 5, 7.5});
  Tensor x2 = f32({2, 2}, {1, 10, 3, 20});  // [N,C] input
  expectTensor(run1("BatchNormalization", {&x2, &scale, &b, &mean, &var}, attrs({{"epsilon", F(1)}})),
               DType::kF32, {2, 2}, {0, 5, 2, 7.5});
  TensorType c3{DType::kF32, {3}}, c2{DType::kF32, {2}};
  EXPECT_FALSE(infer("BatchNormalization", {{DType::kF32, {1, 2, 4}}, c2, c2, c3, c2}).ok());
  EXPECT_FALSE(infer("BatchNormalization", {{DType::kF32, {1, 2, 4}}, c2, c2, c2, c2}, {},
                     attrs({{"training_mode", I(1)}})).ok());
}

TEST(OpsReduceMean, AxesKeepdimsNegative) {
  Tensor x = iota({2, 3, 2});
  Tensor ax = ints({1});
  expectTensor(run1("ReduceMean", {&x, &ax}), DType::kF32, {2, 1, 2}, {2, 3, 8, 9});
  Tensor neg = ints({-1, 0});
  expectTensor(run1("ReduceMean", {&x, &neg}, attrs({{"keepdims", I(0)}})), DType::kF32, {3},
               {3.5, 5.5, 7.5});
  // No axes: all of them.
  expectTensor(run1("ReduceMean", {&x}), DType::kF32, {1, 1, 1}, {5.5});
  expectTensor(run1("ReduceMean", {&x}, attrs({{"keepdims", I(0)}})), DType::kF32, {}, {5.5});
  // Empty axes with noop_with_empty_axes: identity.
  Tensor none = ints({});
  expectTensor(run1("ReduceMean", {&x, &none}, attrs({{"noop_with_empty_axes", I(1)}})),
               DType::kF32, {2, 3, 2}, values(x));
  expectTensor(run1("ReduceMean", {&x, &none}), DType::kF32, {1, 1, 1}, {5.5});
  Tensor xi = i64({2, 2}, {1, 2, 4, 4});
  Tensor ax1 = ints({1});
  expectTensor(run1("ReduceMean", {&xi, &ax1}), DType::kI64, {2, 1}, {1, 4});  // 1.5 truncates
}

TEST(OpsReduceMean, InferNeedsConstantAxes) {
  TensorType x{DType::kF32, {2, 3}};
  auto r = infer("ReduceMean", {x, {DType::kI64, {1}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 1 ('axes') must be a constant"), std::string::npos)
      << r.status().message();
  Tensor bad = ints({2});
  EXPECT_FALSE(infer("ReduceMean", {x, bad.type()}, {nullptr, &bad}).ok());
  Tensor dup = ints({1, -1});
  EXPECT_FALSE(infer("ReduceMean", {x, dup.type()}, {nullptr, &dup}).ok());
}

}  // namespace
}  // namespace pcc::testing
