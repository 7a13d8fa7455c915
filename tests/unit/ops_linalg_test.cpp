// MatMul and Gemm. Batched expected values are from numpy.
#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsMatMul, HandComputed2D) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  expectTensor(run1("MatMul", {&a, &b}), DType::kF32, {2, 2}, {58, 64, 139, 154});
  Tensor ai = i64({1, 2}, {2, 3}), bi = i64({2, 1}, {4, 5});
  expectTensor(run1("MatMul", {&ai, &bi}), DType::kI64, {1, 1}, {23});
}

TEST(OpsMatMul, OneDimensionalOperands) {
  Tensor v = f32({3}, {1, 2, 3}), m = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  expectTensor(run1("MatMul", {&v, &m}), DType::kF32, {2}, {4, 5});      // [3] x [3,2]
  Tensor mt = f32({2, 3}, {1, 0, 1, 0, 1, 1});
  expectTensor(run1("MatMul", {&mt, &v}), DType::kF32, {2}, {4, 5});     // [2,3] x [3]
  expectTensor(run1("MatMul", {&v, &v}), DType::kF32, {}, {14});         // dot product
  Tensor bm = iota({2, 3, 2});
  expectTensor(run1("MatMul", {&v, &bm}), DType::kF32, {2, 2}, {16, 22, 52, 58});
}

TEST(OpsMatMul, BatchBroadcast) {
  // numpy: (arange(24).reshape(2,3,4)/10) @ (arange(8).reshape(4,2)-3)
  Tensor a = iota({2, 3, 4}, 0, 0.1f), b = iota({4, 2}, -3);
  expectTensor(run1("MatMul", {&a, &b}), DType::kF32, {2, 3, 2},
               {1.0, 1.6, 1.0, 3.2, 1.0, 4.8, 1.0, 6.4, 1.0, 8.0, 1.0, 9.6}, 1e-5);
  // [2,1,1,2] x [3,2,1] -> [2,3,1,1]
  Tensor c = f32({2, 1, 1, 2}, {1, 2, 3, 4}), d = f32({3, 2, 1}, {1, 1, 0, 1, 1, 0});
  expectTensor(run1("MatMul", {&c, &d}), DType::kF32, {2, 3, 1, 1}, {3, 2, 1, 7, 4, 3});
}

TEST(OpsMatMul, InferErrors) {
  EXPECT_FALSE(infer("MatMul", {{DType::kF32, {2, 3}}, {DType::kF32, {4, 2}}}).ok());
  EXPECT_FALSE(infer("MatMul", {{DType::kF32, {2, 2, 3}}, {DType::kF32, {3, 3, 2}}}).ok());
  EXPECT_FALSE(infer("MatMul", {{DType::kF32, {}}, {DType::kF32, {3}}}).ok());
  EXPECT_FALSE(infer("MatMul", {{DType::kF32, {2, 3}}, {DType::kF64, {3, 2}}}).ok());
  auto r = infer("MatMul", {{DType::kF32, {5, 1, 2, 3}}, {DType::kF32, {4, 3, 6}}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0], (TensorType{DType::kF32, {5, 4, 2, 6}}));
}

TEST(OpsGemm, TransposeFlagsAlphaBeta) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor at = f32({3, 2}, {1, 4, 2, 5, 3, 6}), bt = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  std::vector<double> ab = {58, 64, 139, 154};
  expectTensor(run1("Gemm", {&a, &b}), DType::kF32, {2, 2}, ab);
  expectTensor(run1("Gemm", {&at, &b}, attrs({{"transA", I(1)}})), DType::kF32, {2, 2}, ab);
  expectTensor(run1("Gemm", {&a, &bt}, attrs({{"transB", I(1)}})), DType::kF32, {2, 2}, ab);
  expectTensor(run1("Gemm", {&at, &bt}, attrs({{"transA", I(1)}, {"transB", I(1)}})), DType::kF32,
               {2, 2}, ab);
  // C broadcast from [2] (a row) and from [2,1] (a column); alpha and beta scale.
  Tensor crow = f32({2}, {1, 2}), ccol = f32({2, 1}, {1, 2}), cs = f32({}, {10});
  AttrMap ab2 = attrs({{"alpha", F(0.5f)}, {"beta", F(2.0f)}});
  expectTensor(run1("Gemm", {&a, &b, &crow}, ab2), DType::kF32, {2, 2}, {31, 36, 71.5, 81});
  expectTensor(run1("Gemm", {&a, &b, &ccol}, ab2), DType::kF32, {2, 2}, {31, 34, 73.5, 81});
  expectTensor(run1("Gemm", {&a, &b, &cs}), DType::kF32, {2, 2}, {68, 74, 149, 164});
  expectTensor(run1("Gemm", {&a, &b, nullptr}), DType::kF32, {2, 2}, ab);  // C absent
}

TEST(OpsGemm, InferErrors) {
  TensorType a{DType::kF32, {2, 3}}, b{DType::kF32, {3, 4}};
  EXPECT_FALSE(infer("Gemm", {a, a}).ok());
  EXPECT_FALSE(infer("Gemm", {a, b}, {}, attrs({{"transA", I(1)}})).ok());
  EXPECT_FALSE(infer("Gemm", {a, b, {DType::kF32, {3}}}).ok());     // C not broadcastable
  EXPECT_FALSE(infer("Gemm", {a, b, {DType::kF32, {1, 2, 4}}}).ok());  // C rank too high
  EXPECT_FALSE(infer("Gemm", {{DType::kF32, {2, 3, 1}}, b}).ok());
  auto r = infer("Gemm", {a, b, {DType::kF32, {1, 4}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0], (TensorType{DType::kF32, {2, 4}}));
}

}  // namespace
}  // namespace pcc::testing
