// Conv and pooling. Expected values come from onnxruntime 1.23 (opset 19) on
// the same inputs, pasted in.
#include <cmath>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

/// x = arange(50)/10 as [1,2,5,5]; w = (arange(54) % 7 - 3)/4 as [3,2,3,3].
Tensor convX() {
  std::vector<float> v(50);
  for (int i = 0; i < 50; ++i) v[i] = static_cast<float>(i) / 10;
  return f32({1, 2, 5, 5}, v);
}
Tensor convW() {
  std::vector<float> v(54);
  for (int i = 0; i < 54; ++i) v[i] = static_cast<float>(i % 7 - 3) / 4;
  return f32({3, 2, 3, 3}, v);
}
/// (arange(25) * 7 % 11) as [1,1,5,5].
Tensor poolX() {
  std::vector<float> v(25);
  for (int i = 0; i < 25; ++i) v[i] = static_cast<float>(i * 7 % 11);
  return f32({1, 1, 5, 5}, v);
}

TEST(OpsConv, HandComputed1x1AndBias) {
  // 1x1 conv = per-pixel channel mix: y[m] = sum_c w[m,c] x[c] + b[m].
  Tensor x = f32({1, 2, 1, 2}, {1, 2, 3, 4}), w = f32({1, 2, 1, 1}, {10, 100}), b = f32({1}, {5});
  expectTensor(run1("Conv", {&x, &w, &b}), DType::kF32, {1, 1, 1, 2}, {315, 425});
}

TEST(OpsConv, PadsStridesBias) {
  Tensor x = convX(), w = convW(), b = f32({3}, {0.5f, -1, 2});
  Tensor y = run1("Conv", {&x, &w, &b}, attrs({{"pads", Is({1, 0, 1, 2})}, {"strides", Is({2, 1})}}));
  expectTensor(y, DType::kF32, {1, 3, 3, 5},
               {-0.9000001, -0.9, -0.9000001, 1.6, 0.925, -1.7, -1.85, -2, 0.475, 0.15, 2, 1.975,
                1.95, 3.8, 0.425, 0.875, 0.8499999, 0.8249999, 2.3, -0.325, -0.1000001,
                -0.02500033, 0.05000031, 2.875, 1.95, -3.775, -3.825, -3.875, -3.8, -0.25,
                -0.0250001, -0.07500005, -0.125, 0.325, 2.75, 1.45, 1.4, 1.35, -0.2000003, 2.3,
                4.75, 4.85, 4.95, 3.425, 5.325},
               1e-5);
}

TEST(OpsConv, GroupsAndDilations) {
  std::vector<float> xv(64), wv(16);
  for (int i = 0; i < 64; ++i) xv[i] = static_cast<float>(i % 5 - 2);
  for (int i = 0; i < 16; ++i) wv[i] = static_cast<float>(i % 3 - 1);
  Tensor x = f32({1, 4, 4, 4}, xv), w = f32({2, 2, 2, 2}, wv);
  Tensor y = run1("Conv", {&x, &w}, attrs({{"group", I(2)}, {"dilations", Is({2, 2})}}));
  expectTensor(y, DType::kF32, {1, 2, 2, 2}, {4, 8, -5, 4, -5, 0, -5, -5});
}

TEST(OpsConv, AutoPadSame) {
  Tensor x = convX(), w = convW();
  std::vector<double> want = {-1.45, -1.4,   1.1,    -1.825, -2.35,  -0.025, 1.35,  1.475, 3.3,
                              0.975, 1.85,   3.3,    -1.875, 0.975,  3.875,  -3.475, -2.825, -2.8,
                              -2.725, -2.075, -1.675, -1.05, -0.6,   -2.2,   -0.425, 2.85,  1.425};
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    Tensor y = run1("Conv", {&x, &w}, attrs({{"auto_pad", S(mode)}, {"strides", Is({2, 2})}}));
    expectTensor(y, DType::kF32, {1, 3, 3, 3}, want, 1e-5);
  }
  // Stride 1, even kernel: SAME_UPPER puts the extra pad at the end, SAME_LOWER at the start.
  Tensor x1 = f32({1, 1, 4}, {1, 2, 3, 4}), w1 = f32({1, 1, 2}, {1, 10});
  expectTensor(run1("Conv", {&x1, &w1}, attrs({{"auto_pad", S("SAME_UPPER")}})), DType::kF32,
               {1, 1, 4}, {21, 32, 43, 4});
  expectTensor(run1("Conv", {&x1, &w1}, attrs({{"auto_pad", S("SAME_LOWER")}})), DType::kF32,
               {1, 1, 4}, {10, 21, 32, 43});
  expectTensor(run1("Conv", {&x1, &w1}, attrs({{"auto_pad", S("VALID")}})), DType::kF32,
               {1, 1, 3}, {21, 32, 43});
}

TEST(OpsConv, OneAndThreeSpatialDims) {
  Tensor x = iota({1, 1, 7}), w = f32({1, 1, 3}, {1, -1, 2});
  expectTensor(run1("Conv", {&x, &w}, attrs({{"pads", Is({1, 1})}})), DType::kF32, {1, 1, 7},
               {2, 3, 5, 7, 9, 11, -1});
  // 3-D: a 2x2x2 kernel of ones sums each 2x2x2 cube of a 3x3x3 iota.
  Tensor x3 = iota({1, 1, 3, 3, 3}), w3 = f32({1, 1, 2, 2, 2}, std::vector<float>(8, 1));
  Tensor y = run1("Conv", {&x3, &w3});
  // cube at (d,h,w): sum of 9d+3h+w offsets over the cube = 8*(9d+3h+w) + 4*(9+3+1).
  std::vector<double> want;
  for (int d = 0; d < 2; ++d)
    for (int h = 0; h < 2; ++h)
      for (int ww = 0; ww < 2; ++ww) want.push_back(8 * (9 * d + 3 * h + ww) + 52);
  expectTensor(y, DType::kF32, {1, 1, 2, 2, 2}, want);
}

TEST(OpsConv, F64AndF16) {
  Tensor x = f64({1, 1, 1, 3}, {1, 2, 3}), w = f64({1, 1, 1, 2}, {1, -1});
  expectTensor(run1("Conv", {&x, &w}), DType::kF64, {1, 1, 1, 2}, {-1, -1});
  Tensor xh = Tensor::zeros(DType::kF16, {1, 1, 1, 3}), wh = Tensor::zeros(DType::kF16, {1, 1, 1, 2});
  for (int i = 0; i < 3; ++i) xh.mutableData<uint16_t>()[i] = floatToHalf(static_cast<float>(i + 1));
  wh.mutableData<uint16_t>()[0] = floatToHalf(0.5f);
  wh.mutableData<uint16_t>()[1] = floatToHalf(2.0f);
  expectTensor(run1("Conv", {&xh, &wh}), DType::kF16, {1, 1, 1, 2}, {4.5, 7});
}

TEST(OpsConv, InferErrors) {
  TensorType x{DType::kF32, {1, 4, 8, 8}};
  EXPECT_FALSE(infer("Conv", {x, {DType::kF32, {2, 3, 3, 3}}}).ok());  // C/group mismatch
  EXPECT_FALSE(infer("Conv", {x, {DType::kF32, {3, 2, 3, 3}}}, {}, attrs({{"group", I(2)}})).ok());
  EXPECT_FALSE(infer("Conv", {x, {DType::kF32, {2, 4, 3}}}).ok());  // rank mismatch
  EXPECT_FALSE(infer("Conv", {x, {DType::kF32, {2, 4, 9, 9}}}).ok());  // kernel larger than input
  EXPECT_FALSE(infer("Conv", {x, {DType::kF32, {2, 4, 3, 3}}, {DType::kF32, {3}}}).ok());  // bias
  EXPECT_FALSE(infer("Conv", {x, {DType::kF32, {2, 4, 3, 3}}}, {},
                     attrs({{"kernel_shape", Is({5, 5})}})).ok());
  EXPECT_FALSE(infer("Conv", {x, {DType::kF32, {2, 4, 3, 3}}}, {},
                     attrs({{"pads", Is({1, 1})}})).ok());
  auto ok = infer("Conv", {x, {DType::kF32, {6, 2, 3, 3}}}, {},
                  attrs({{"group", I(2)}, {"pads", Is({1, 1, 1, 1})}, {"strides", Is({2, 2})}}));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)[0], (TensorType{DType::kF32, {1, 6, 4, 4}}));
}

TEST(OpsPool, MaxPoolCeilMode) {
  Tensor x = poolX();
  Tensor y = run1("MaxPool", {&x},
                  attrs({{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}, {"ceil_mode", I(1)}}));
  expectTensor(y, DType::kF32, {1, 1, 3, 3}, {9, 10, 8, 6, 9, 10, 8, 7, 3});
  Tensor y0 = run1("MaxPool", {&x}, attrs({{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}}));
  expectTensor(y0, DType::kF32, {1, 1, 2, 2}, {9, 10, 6, 9});
  // A ceil-mode window that would start in the end padding is dropped.
  Tensor x5 = f32({1, 1, 5}, {1, 2, 3, 4, 5});
  AttrMap a = attrs({{"kernel_shape", Is({2})}, {"strides", Is({2})}, {"pads", Is({1, 1})},
                     {"ceil_mode", I(1)}});
  expectTensor(run1("MaxPool", {&x5}, a), DType::kF32, {1, 1, 3}, {1, 3, 5});
  expectTensor(run1("AveragePool", {&x5}, a), DType::kF32, {1, 1, 3}, {1, 2.5, 4.5});
}

TEST(OpsPool, MaxPoolIndices) {
  // Two planes of 2x3; windows 2x2 at stride 1 -> 1x2 per plane. The first
  // maximum wins a tie (plane 1 holds only 7s).
  Tensor x = f32({2, 1, 2, 3}, {1, 9, 2, 3, 4, 8, 7, 7, 7, 7, 7, 7});
  AttrMap a = attrs({{"kernel_shape", Is({2, 2})}, {"num_outputs", I(2)}});
  auto r = run("MaxPool", {&x}, a);
  ASSERT_EQ(r.size(), 2u);
  expectTensor(r[0], DType::kF32, {2, 1, 1, 2}, {9, 9, 7, 7});
  expectTensor(r[1], DType::kI64, {2, 1, 1, 2}, {1, 1, 6, 7});
  // Column-major: (h, w) -> h + w * H within the plane.
  a.set("storage_order", I(1));
  r = run("MaxPool", {&x}, a);
  ASSERT_EQ(r.size(), 2u);
  expectTensor(r[1], DType::kI64, {2, 1, 1, 2}, {2, 2, 6, 8});
  // Without num_outputs only Y comes out.
  EXPECT_EQ(run("MaxPool", {&x}, attrs({{"kernel_shape", Is({2, 2})}})).size(), 1u);
  EXPECT_FALSE(infer("MaxPool", {{DType::kF32, {2, 1, 2, 3}}}, {},
                     attrs({{"kernel_shape", Is({2, 2})}, {"num_outputs", I(3)}})).ok());
}

TEST(OpsPool, MaxPoolPadsDilations) {
  Tensor x = poolX();
  Tensor y = run1("MaxPool", {&x},
                  attrs({{"kernel_shape", Is({2, 2})}, {"pads", Is({1, 1, 1, 1})},
                         {"dilations", Is({2, 2})}}));
  expectTensor(y, DType::kF32, {1, 1, 5, 5},
               {9, 5, 9, 8, 1, 7, 7, 10, 10, 10, 9, 9, 9, 9, 5, 4, 8, 7, 10, 7, 2, 9, 5, 9, 5});
}

TEST(OpsPool, MaxPoolIntAndNegative) {
  Tensor x = i64({1, 1, 2, 2}, {-5, -3, -9, -4});
  expectTensor(run1("MaxPool", {&x}, attrs({{"kernel_shape", Is({2, 2})}})), DType::kI64,
               {1, 1, 1, 1}, {-3});
}

TEST(OpsPool, AveragePoolCountIncludePad) {
  Tensor x = poolX();
  AttrMap a = attrs({{"kernel_shape", Is({3, 3})}, {"pads", Is({1, 1, 1, 1})}, {"strides", Is({2, 2})}});
  expectTensor(run1("AveragePool", {&x}, a), DType::kF32, {1, 1, 3, 3},
               {4.5, 5.833333, 6.25, 3.833333, 4.555555, 4.666667, 5, 4.5, 4});
  a.set("count_include_pad", I(1));
  std::vector<double> incl = {2, 3.888889, 2.777778, 2.555556, 4.555555, 3.111111, 2.222222, 3, 1.777778};
  expectTensor(run1("AveragePool", {&x}, a), DType::kF32, {1, 1, 3, 3}, incl);
  a.set("ceil_mode", I(1));  // same output size here, still counts only explicit pads
  expectTensor(run1("AveragePool", {&x}, a), DType::kF32, {1, 1, 3, 3}, incl);
}

TEST(OpsPool, AveragePoolCeilAndSame) {
  Tensor x = poolX();
  std::vector<double> want = {4.5, 4.75, 7, 3, 6, 5.5, 6, 3.5, 3};
  expectTensor(run1("AveragePool", {&x},
                    attrs({{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})}, {"ceil_mode", I(1)}})),
               DType::kF32, {1, 1, 3, 3}, want);
  expectTensor(run1("AveragePool", {&x},
                    attrs({{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})},
                           {"auto_pad", S("SAME_UPPER")}})),
               DType::kF32, {1, 1, 3, 3}, want);
}

TEST(OpsPool, GlobalAveragePool) {
  Tensor x = iota({2, 2, 2, 2});
  expectTensor(run1("GlobalAveragePool", {&x}), DType::kF32, {2, 2, 1, 1}, {1.5, 5.5, 9.5, 13.5});
  Tensor x1 = iota({1, 3, 4});
  expectTensor(run1("GlobalAveragePool", {&x1}), DType::kF32, {1, 3, 1}, {1.5, 5.5, 9.5});
}

TEST(OpsPool, InferErrors) {
  TensorType x{DType::kF32, {1, 1, 4, 4}};
  EXPECT_FALSE(infer("MaxPool", {x}).ok());  // no kernel_shape
  EXPECT_FALSE(infer("MaxPool", {x}, {}, attrs({{"kernel_shape", Is({2})}})).ok());
  EXPECT_FALSE(infer("MaxPool", {x}, {}, attrs({{"kernel_shape", Is({5, 5})}})).ok());
  EXPECT_FALSE(infer("MaxPool", {{DType::kF32, {4, 4}}}, {}, attrs({{"kernel_shape", Is({2, 2})}})).ok());
  EXPECT_FALSE(infer("AveragePool", {{DType::kI64, {1, 1, 4, 4}}}, {},
                     attrs({{"kernel_shape", Is({2, 2})}})).ok());
  EXPECT_FALSE(infer("GlobalAveragePool", {{DType::kF32, {4, 4}}}).ok());
  EXPECT_FALSE(infer("MaxPool", {x}, {}, attrs({{"kernel_shape", Is({2, 2})}, {"auto_pad", S("BOGUS")}})).ok());
}

}  // namespace
}  // namespace pcc::testing
