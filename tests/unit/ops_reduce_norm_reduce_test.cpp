// Reduce*, ArgMax/ArgMin, TopK, Hardmax and LogSoftmax. Expected values are
// worked out by hand (or with numpy in double precision where noted).
#include <cmath>
#include <limits>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

/// Expects `t` to be of `shape` with every element exactly `v` (infinities too,
/// which expectTensor's relative tolerance cannot compare).
void expectAllEqual(const Tensor& t, const Dims& shape, double v) {
  ASSERT_EQ(t.shape(), shape) << t.str();
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.getDouble(i), v) << "element " << i << " of " << t.str();
}

TEST(OpsReduce, EachKindOverOneAxis) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4}), ax = ints({1});
  expectTensor(run1("ReduceSum", {&x, &ax}), DType::kF32, {2, 1}, {3, 7});
  expectTensor(run1("ReduceMean", {&x, &ax}), DType::kF32, {2, 1}, {1.5, 3.5});
  expectTensor(run1("ReduceMax", {&x, &ax}), DType::kF32, {2, 1}, {2, 4});
  expectTensor(run1("ReduceMin", {&x, &ax}), DType::kF32, {2, 1}, {1, 3});
  expectTensor(run1("ReduceProd", {&x, &ax}), DType::kF32, {2, 1}, {2, 12});
  expectTensor(run1("ReduceSumSquare", {&x, &ax}), DType::kF32, {2, 1}, {5, 25});
  expectTensor(run1("ReduceLogSum", {&x, &ax}), DType::kF32, {2, 1}, {std::log(3.0), std::log(7.0)});
  Tensor neg = f32({2, 2}, {-3, 4, 6, -8});
  expectTensor(run1("ReduceL1", {&neg, &ax}), DType::kF32, {2, 1}, {7, 14});
  expectTensor(run1("ReduceL2", {&neg, &ax}), DType::kF32, {2, 1}, {5, 10});
  // LogSumExp stays finite for large inputs (the max is factored out).
  Tensor big = f32({2, 2}, {0, 0, 1000, 1000});
  expectTensor(run1("ReduceLogSumExp", {&big, &ax}), DType::kF32, {2, 1},
               {std::log(2.0), 1000 + std::log(2.0)});
}

TEST(OpsReduce, AxesKeepdimsAndNoop) {
  Tensor x = iota({2, 3, 2});
  Tensor ax = ints({0, -1});
  // Sum over dims 0 and 2: j=0: 0+1+6+7, j=1: 2+3+8+9, j=2: 4+5+10+11.
  expectTensor(run1("ReduceSum", {&x, &ax}, attrs({{"keepdims", I(0)}})), DType::kF32, {3}, {14, 22, 30});
  expectTensor(run1("ReduceSum", {&x, &ax}), DType::kF32, {1, 3, 1}, {14, 22, 30});
  // No axes: everything; empty axes with noop_with_empty_axes: the input.
  expectTensor(run1("ReduceMax", {&x}), DType::kF32, {1, 1, 1}, {11});
  Tensor none = i64({0}, {});
  expectTensor(run1("ReduceMin", {&x, &none}, attrs({{"keepdims", I(0)}})), DType::kF32, {}, {0});
  Tensor same = run1("ReduceSum", {&x, &none}, attrs({{"noop_with_empty_axes", I(1)}}));
  expectTensor(same, DType::kF32, {2, 3, 2}, values(x));
  EXPECT_FALSE(infer("ReduceSum", {{DType::kF32, {2, 3}}, {DType::kI64, {1}}}, {nullptr, nullptr}).ok())
      << "axes must be constant";
  Tensor twice = ints({1, -2});
  EXPECT_NE(runError("ReduceSum", {&x, &twice}).find("twice"), std::string::npos);
}

TEST(OpsReduce, EmptySetsGiveTheIdentity) {
  Tensor x = f32({2, 0}, {}), ax = ints({1});
  expectTensor(run1("ReduceSum", {&x, &ax}), DType::kF32, {2, 1}, {0, 0});
  expectTensor(run1("ReduceProd", {&x, &ax}), DType::kF32, {2, 1}, {1, 1});
  expectTensor(run1("ReduceSumSquare", {&x, &ax}), DType::kF32, {2, 1}, {0, 0});
  double inf = std::numeric_limits<double>::infinity();
  expectAllEqual(run1("ReduceMax", {&x, &ax}), {2, 1}, -inf);
  expectAllEqual(run1("ReduceMin", {&x, &ax}), {2, 1}, inf);
  expectAllEqual(run1("ReduceLogSumExp", {&x, &ax}), {2, 1}, -inf);
  expectAllEqual(run1("ReduceLogSum", {&x, &ax}), {2, 1}, -inf);
  Tensor xi = i32({1, 0}, {});
  expectTensor(run1("ReduceMin", {&xi, &ax}), DType::kI32, {1, 1}, {std::numeric_limits<int32_t>::max()});
  expectTensor(run1("ReduceMax", {&xi, &ax}), DType::kI32, {1, 1}, {std::numeric_limits<int32_t>::min()});
}

TEST(OpsReduce, IntegerBoolAndHalfTypes) {
  Tensor xi = i64({2, 2}, {5, -7, 2, 9}), ax = ints({0});
  expectTensor(run1("ReduceSum", {&xi, &ax}), DType::kI64, {1, 2}, {7, 2});
  expectTensor(run1("ReduceProd", {&xi, &ax}), DType::kI64, {1, 2}, {10, -63});
  Tensor u8 = Tensor::fromVector<uint8_t>(DType::kU8, {3}, {7, 200, 3});
  expectTensor(run1("ReduceMax", {&u8}), DType::kU8, {1}, {200});
  Tensor b = boolean({2, 2}, {1, 0, 0, 0}), ax1 = ints({1});
  expectTensor(run1("ReduceMax", {&b, &ax1}), DType::kBool, {2, 1}, {1, 0});
  expectTensor(run1("ReduceMin", {&b, &ax1}), DType::kBool, {2, 1}, {0, 0});
  Tensor h = f32({2}, {1.5f, 2.5f});
  Tensor hh = run1("Cast", {&h}, attrs({{"to", I(10)}}));
  expectTensor(run1("ReduceSum", {&hh}), DType::kF16, {1}, {4});
  EXPECT_FALSE(infer("ReduceSum", {{DType::kBool, {2}}}).ok());
  EXPECT_TRUE(infer("ReduceMax", {{DType::kBool, {2}}}).ok());
}

TEST(OpsReduce, NaNPropagatesThroughMaxAndMin) {
  Tensor x = f32({3}, {1, std::nanf(""), 5});
  EXPECT_TRUE(std::isnan(run1("ReduceMax", {&x}).getDouble(0)));
  EXPECT_TRUE(std::isnan(run1("ReduceMin", {&x}).getDouble(0)));
}

TEST(OpsArgMax, AxisKeepdimsAndLastIndex) {
  Tensor x = f32({2, 3}, {1, 5, 5, 7, 0, 7});
  expectTensor(run1("ArgMax", {&x}, attrs({{"axis", I(1)}})), DType::kI64, {2, 1}, {1, 0});
  expectTensor(run1("ArgMax", {&x}, attrs({{"axis", I(1)}, {"select_last_index", I(1)}})), DType::kI64,
               {2, 1}, {2, 2});
  expectTensor(run1("ArgMin", {&x}, attrs({{"axis", I(0)}, {"keepdims", I(0)}})), DType::kI64, {3}, {0, 1, 0});
  expectTensor(run1("ArgMin", {&x}, attrs({{"axis", I(-1)}})), DType::kI64, {2, 1}, {0, 1});
  Tensor xi = i32({4}, {3, -1, -1, 2});
  expectTensor(run1("ArgMin", {&xi}, attrs({{"select_last_index", I(1)}})), DType::kI64, {1}, {2});
  EXPECT_FALSE(infer("ArgMax", {{DType::kF32, {2, 0}}}, {}, attrs({{"axis", I(1)}})).ok());
  EXPECT_FALSE(infer("ArgMax", {{DType::kF32, {2, 3}}}, {}, attrs({{"axis", I(2)}})).ok());
}

TEST(OpsTopK, LargestSmallestTiesAndAxis) {
  Tensor x = f32({2, 4}, {1, 4, 4, 2, 9, 8, 7, 9});
  Tensor k2 = ints({2});
  auto r = run("TopK", {&x, &k2});
  ASSERT_EQ(r.size(), 2u);
  expectTensor(r[0], DType::kF32, {2, 2}, {4, 4, 9, 9});
  expectTensor(r[1], DType::kI64, {2, 2}, {1, 2, 0, 3});  // ties: lower index first
  r = run("TopK", {&x, &k2}, attrs({{"largest", I(0)}}));
  ASSERT_EQ(r.size(), 2u);
  expectTensor(r[0], DType::kF32, {2, 2}, {1, 2, 7, 8});
  expectTensor(r[1], DType::kI64, {2, 2}, {0, 3, 2, 1});
  Tensor k1 = ints({1});
  r = run("TopK", {&x, &k1}, attrs({{"axis", I(0)}}));
  ASSERT_EQ(r.size(), 2u);
  expectTensor(r[0], DType::kF32, {1, 4}, {9, 8, 7, 9});
  expectTensor(r[1], DType::kI64, {1, 4}, {1, 1, 1, 1});
  Tensor k5 = ints({5});
  EXPECT_FALSE(runError("TopK", {&x, &k5}).empty());
  Tensor xi = i64({3}, {3, 1, 2});
  r = run("TopK", {&xi, &k2});
  ASSERT_EQ(r.size(), 2u);
  expectTensor(r[0], DType::kI64, {2}, {3, 2});
}

TEST(OpsHardmax, FirstMaximumAlongAxis) {
  Tensor x = f32({2, 3}, {1, 3, 3, 0, -1, -2});
  expectTensor(run1("Hardmax", {&x}), DType::kF32, {2, 3}, {0, 1, 0, 1, 0, 0});
  expectTensor(run1("Hardmax", {&x}, attrs({{"axis", I(0)}})), DType::kF32, {2, 3}, {1, 1, 1, 0, 0, 0});
  EXPECT_FALSE(infer("Hardmax", {{DType::kI32, {2, 3}}}).ok());
}

TEST(OpsLogSoftmax, MatchesLogOfSoftmax) {
  Tensor x = f32({2, 3}, {1, 2, 3, 1000, 0, -1000});
  // Row 0: x - log(e + e^2 + e^3); row 1: the large entry dominates exactly.
  double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  expectTensor(run1("LogSoftmax", {&x}), DType::kF32, {2, 3}, {1 - lse, 2 - lse, 3 - lse, 0, -1000, -2000});
  expectTensor(run1("LogSoftmax", {&x}, attrs({{"axis", I(0)}})), DType::kF32, {2, 3},
               {-999, 2 - (2 + std::log1p(std::exp(-2.0))), 0, 0, -(2 + std::log1p(std::exp(-2.0))) , -1003},
               1e-4);
}

}  // namespace
}  // namespace pcc::testing
