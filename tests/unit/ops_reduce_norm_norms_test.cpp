// Instance/Group/Lp/MeanVariance/RMS normalization, LRN, Einsum, ConvTranspose,
// GlobalMaxPool and LpPool. Expected values are from numpy in double
// precision (ConvTranspose from the ONNX reference implementation).
#include <cmath>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsInstanceNorm, PerSampleAndChannel) {
  Tensor x = f32({1, 2, 4}, {-1, -0.5f, 0, 0.5f, 3, -1, 0, 2});
  Tensor s = f32({2}, {1, 2}), b = f32({2}, {0, 1});
  expectTensor(run1("InstanceNormalization", {&x, &s, &b}), DType::kF32, {1, 2, 4},
               {-1.341619, -0.4472064, 0.4472064, 1.341619, 3.529817, -1.529817, -0.2649086, 2.264909});
  Tensor s3 = f32({3}, {1, 2, 3});
  EXPECT_FALSE(runError("InstanceNormalization", {&x, &s3, &b}).empty());
}

TEST(OpsGroupNorm, ScaleAndBiasPerChannel) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = std::pow(static_cast<float>(i), 1.5f);
  Tensor x = f32({1, 4, 3}, v), s = f32({4}, {1, 2, 3, 4}), b = f32({4}, {0, 1, 0, -1});
  expectTensor(run1("GroupNormalization", {&x, &s, &b}, attrs({{"num_groups", I(2)}})), DType::kF32, {1, 4, 3},
               {-1.19779, -0.9429858, -0.4770942, 1.252426, 2.681292, 4.302022, -4.210629, -2.671779, -1.018687,
                -0.01168579, 2.469145, 5.077334},
               1e-4);
  EXPECT_FALSE(infer("GroupNormalization", {{DType::kF32, {1, 4, 3}}, {DType::kF32, {4}}, {DType::kF32, {4}}}, {},
                     attrs({{"num_groups", I(3)}}))
                   .ok());
  EXPECT_FALSE(infer("GroupNormalization", {{DType::kF32, {1, 4, 3}}, {DType::kF32, {2}}, {DType::kF32, {2}}}, {},
                     attrs({{"num_groups", I(2)}}))
                   .ok())
      << "scale per group is the opset-18 form, converted by the importer";
}

TEST(OpsLpNorm, L1AndL2) {
  Tensor x = f32({2, 2}, {3, -4, 1, 1});
  expectTensor(run1("LpNormalization", {&x}), DType::kF32, {2, 2}, {0.6, -0.8, M_SQRT1_2, M_SQRT1_2});
  expectTensor(run1("LpNormalization", {&x}, attrs({{"p", I(1)}, {"axis", I(0)}})), DType::kF32, {2, 2},
               {0.75, -0.8, 0.25, 0.2});
  EXPECT_FALSE(infer("LpNormalization", {{DType::kF32, {2}}}, {}, attrs({{"p", I(3)}})).ok());
}

TEST(OpsMeanVarianceNorm, DefaultAndExplicitAxes) {
  Tensor x = f32({2, 2, 2, 1}, {1, 2, 4, 7, 3, 3, 0, 8});
  expectTensor(run1("MeanVarianceNormalization", {&x}), DType::kF32, {2, 2, 2, 1},
               {-1.507557, -0.3015113, -0.2409658, 0.7228974, 0.904534, 0.904534, -1.526117, 1.044185});
  expectTensor(run1("MeanVarianceNormalization", {&x}, attrs({{"axes", Is({1, 2})}})), DType::kF32, {2, 2, 2, 1},
               {-1.091089, -0.6546537, 0.2182179, 1.527525, -0.1740777, -0.1740777, -1.218544, 1.566699});
  EXPECT_FALSE(infer("MeanVarianceNormalization", {{DType::kF32, {2, 3}}}).ok()) << "default axes need rank 4";
}

TEST(OpsRmsNorm, LastAxisAndBroadcastScale) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, -1, 0}), s = f32({3}, {1, 2, 0.5f});
  expectTensor(run1("RMSNormalization", {&x, &s}), DType::kF32, {2, 3},
               {0.4629096, 1.851638, 0.6943643, 1.680335, -0.8401673, 0});
  Tensor s1 = f32({1}, {2});
  expectTensor(run1("RMSNormalization", {&x, &s1}, attrs({{"axis", I(0)}})), DType::kF32, {2, 3},
               {0.8798818, 1.759764, 2.639646, 3.519527, -0.8798818, 0});
  EXPECT_FALSE(infer("RMSNormalization", {{DType::kF32, {2, 3}}, {DType::kF32, {2}}}).ok());
}

TEST(OpsLrn, WindowAcrossChannels) {
  Tensor x = iota({1, 4, 2, 1}, 1);
  expectTensor(run1("LRN", {&x}, attrs({{"size", I(3)}, {"alpha", F(0.1f)}, {"beta", F(0.5f)}, {"bias", F(2)}})),
               DType::kF32, {1, 4, 2, 1},
               {0.6546537, 1.224745, 1.685854, 2.034191, 2.290143, 2.477168, 3.312122, 3.464102});
  EXPECT_FALSE(infer("LRN", {{DType::kF32, {1, 4, 2, 1}}}).ok()) << "size is required";
}

TEST(OpsEinsum, MatmulBatchTraceDiagonalTranspose) {
  Tensor a = iota({2, 2, 3}), b = iota({2, 3, 2});
  expectTensor(run1("Einsum", {&a, &b}, attrs({{"equation", S("bij,bjk->bik")}})), DType::kF32, {2, 2, 2},
               {10, 13, 28, 40, 172, 193, 244, 274});
  Tensor sq = iota({3, 3});
  expectTensor(run1("Einsum", {&sq}, attrs({{"equation", S("ii")}})), DType::kF32, {}, {12});
  expectTensor(run1("Einsum", {&sq}, attrs({{"equation", S("ii->i")}})), DType::kF32, {3}, {0, 4, 8});
  Tensor m = iota({2, 3});
  expectTensor(run1("Einsum", {&m}, attrs({{"equation", S("ji")}})), DType::kF32, {3, 2}, {0, 3, 1, 4, 2, 5});
  expectTensor(run1("Einsum", {&m}, attrs({{"equation", S("ij->")}})), DType::kF32, {}, {15});
}

TEST(OpsEinsum, EllipsisAndImplicitOrder) {
  Tensor a = iota({2, 3, 4}), v = iota({4});
  expectTensor(run1("Einsum", {&a, &v}, attrs({{"equation", S("...ij,j->...i")}})), DType::kF32, {2, 3},
               {14, 38, 62, 86, 110, 134});
  // Implicit output: labels used once, upper case before lower case.
  Tensor p = iota({2, 3}), q = iota({3, 2});
  expectTensor(run1("Einsum", {&p, &q}, attrs({{"equation", S("Ba,ac")}})), DType::kF32, {2, 2}, {10, 13, 28, 40});
  Tensor i1 = i64({3}, {1, 2, 3}), i2 = i64({3}, {4, 5, 6});
  expectTensor(run1("Einsum", {&i1, &i2}, attrs({{"equation", S("i,i")}})), DType::kI64, {}, {32});
  expectTensor(run1("Einsum", {&i1, &i2}, attrs({{"equation", S("i,j->ij")}})), DType::kI64, {3, 3},
               {4, 5, 6, 8, 10, 12, 12, 15, 18});
  EXPECT_FALSE(runError("Einsum", {&p, &p}, attrs({{"equation", S("ij,ij->k")}})).empty());
  EXPECT_FALSE(runError("Einsum", {&p}, attrs({{"equation", S("ijk")}})).empty());
}

TEST(OpsConvTranspose, Basic2D) {
  Tensor x = iota({1, 1, 2, 3}, 1), w = iota({1, 2, 2, 2}, 1);
  expectTensor(run1("ConvTranspose", {&x, &w}), DType::kF32, {1, 2, 3, 4},
               {1, 4, 7, 6, 7, 23, 33, 24, 12, 31, 38, 24, 5, 16, 27, 18, 27, 71, 97, 60, 28, 67, 82, 48});
  expectTensor(run1("ConvTranspose", {&x, &w},
                    attrs({{"strides", Is({2, 2})}, {"pads", Is({1, 0, 0, 1})}, {"output_padding", Is({1, 0})}})),
               DType::kF32, {1, 2, 4, 5},
               {3, 4, 6, 8, 9, 4, 8, 5, 10, 6, 12, 16, 15, 20, 18, 0, 0, 0, 0, 0,
                7, 8, 14, 16, 21, 20, 24, 25, 30, 30, 28, 32, 35, 40, 42, 0, 0, 0, 0, 0});
}

TEST(OpsConvTranspose, OutputShapeAutoPadDilationGroup) {
  Tensor x = f32({1, 1, 3}, {1, 2, 3}), w = f32({1, 1, 3}, {1, -1, 2});
  expectTensor(run1("ConvTranspose", {&x, &w}, attrs({{"strides", Is({2})}, {"output_shape", Is({8})}})),
               DType::kF32, {1, 1, 8}, {1, -1, 4, -2, 7, -3, 6, 0});
  expectTensor(run1("ConvTranspose", {&x, &w}, attrs({{"strides", Is({2})}, {"auto_pad", S("SAME_UPPER")}})),
               DType::kF32, {1, 1, 6}, {1, -1, 4, -2, 7, -3});
  expectTensor(run1("ConvTranspose", {&x, &w}, attrs({{"dilations", Is({2})}})), DType::kF32, {1, 1, 7},
               {1, 2, 2, -2, -1, 4, 6});
  Tensor xg = f32({1, 2, 2}, {1, 2, 3, 4}), wg = f32({2, 1, 2}, {1, 2, 3, 4}), bg = f32({2}, {10, 20});
  expectTensor(run1("ConvTranspose", {&xg, &wg, &bg}, attrs({{"group", I(2)}})), DType::kF32, {1, 2, 3},
               {11, 14, 14, 29, 44, 36});  // by hand: [1,2]*[1,2] + 10, [3,4]*[3,4] + 20
  Tensor wbad = f32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_FALSE(runError("ConvTranspose", {&x, &wbad}).empty());
}

TEST(OpsGlobalMaxPool, PerPlane) {
  Tensor x = f32({1, 2, 2, 2}, {1, 5, -3, 2, -1, -7, -2, -9});
  expectTensor(run1("GlobalMaxPool", {&x}), DType::kF32, {1, 2, 1, 1}, {5, -1});
}

TEST(OpsLpPool, P2AndP1WithPadding) {
  Tensor x = f32({1, 1, 6}, {1, -2, 3, 4, 0, -1});
  expectTensor(run1("LpPool", {&x}, attrs({{"kernel_shape", Is({2})}, {"strides", Is({2})}})), DType::kF32, {1, 1, 3},
               {2.236068, 5, 1});
  expectTensor(run1("LpPool", {&x},
                    attrs({{"kernel_shape", Is({3})}, {"strides", Is({2})}, {"pads", Is({1, 1})}, {"p", I(1)}})),
               DType::kF32, {1, 1, 3}, {3, 9, 5});
  EXPECT_FALSE(infer("LpPool", {{DType::kI32, {1, 1, 6}}}, {}, attrs({{"kernel_shape", Is({2})}})).ok());
}

}  // namespace
}  // namespace pcc::testing
