// Broadcasting logic, comparison, Mod, bitwise and variadic ops; hand-computed.
#include <cmath>
#include <limits>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

Tensor u8(Dims shape, std::vector<uint8_t> v) { return Tensor::fromVector(DType::kU8, std::move(shape), v); }
Tensor i8(Dims shape, std::vector<int8_t> v) { return Tensor::fromVector(DType::kI8, std::move(shape), v); }

TEST(OpsMathBinary, LogicBroadcasts) {
  Tensor a = boolean({2, 2}, {0, 0, 1, 1}), b = boolean({2}, {0, 1});
  expectTensor(run1("And", {&a, &b}), DType::kBool, {2, 2}, {0, 0, 0, 1});
  expectTensor(run1("Or", {&a, &b}), DType::kBool, {2, 2}, {0, 1, 1, 1});
  expectTensor(run1("Xor", {&a, &b}), DType::kBool, {2, 2}, {0, 1, 1, 0});
  EXPECT_FALSE(infer("And", {{DType::kF32, {2}}, {DType::kF32, {2}}}).ok());
}

TEST(OpsMathBinary, Comparisons) {
  Tensor a = f32({3}, {1.f, 2.f, 3.f}), b = f32({}, {2.f});
  expectTensor(run1("Less", {&a, &b}), DType::kBool, {3}, {1, 0, 0});
  expectTensor(run1("LessOrEqual", {&a, &b}), DType::kBool, {3}, {1, 1, 0});
  expectTensor(run1("Greater", {&a, &b}), DType::kBool, {3}, {0, 0, 1});
  expectTensor(run1("GreaterOrEqual", {&a, &b}), DType::kBool, {3}, {0, 1, 1});
  Tensor x = u8({2}, {200, 5}), y = u8({2}, {100, 6});
  expectTensor(run1("Greater", {&x, &y}), DType::kBool, {2}, {1, 0});  // unsigned compare
  Tensor n = f32({1}, {NAN});
  expectTensor(run1("GreaterOrEqual", {&n, &b}), DType::kBool, {1}, {0});
  EXPECT_FALSE(infer("Less", {{DType::kF32, {2}}, {DType::kI64, {2}}}).ok());
}

TEST(OpsMathBinary, ModFollowsDivisorOrDividend) {
  Tensor a = i64({4}, {7, -7, 7, -7}), b = i64({4}, {3, 3, -3, -3});
  expectTensor(run1("Mod", {&a, &b}), DType::kI64, {4}, {1, 2, -2, -1});  // sign of divisor
  expectTensor(run1("Mod", {&a, &b}, attrs({{"fmod", I(1)}})), DType::kI64, {4}, {1, -1, 1, -1});
  Tensor x = f32({2}, {5.5f, -5.5f}), y = f32({}, {2.f});
  expectTensor(run1("Mod", {&x, &y}, attrs({{"fmod", I(1)}})), DType::kF32, {2}, {1.5, -1.5});
  EXPECT_NE(runError("Mod", {&x, &y}).find("integer types only"), std::string::npos);
  Tensor z = i64({}, {0});
  EXPECT_NE(runError("Mod", {&a, &z}).find("by zero"), std::string::npos);
  Tensor s = i8({2}, {-128, 100}), d = i8({2}, {3, -7});
  expectTensor(run1("Mod", {&s, &d}), DType::kI8, {2}, {1, -5});
}

TEST(OpsMathBinary, ModOfTheMostNegativeByMinusOneIsZero) {
  // INT_MIN % -1 traps as a machine instruction; mathematically it is 0, in both modes.
  for (int64_t fmod : {0, 1}) {
    Tensor a = i64({2}, {std::numeric_limits<int64_t>::min(), 7}), m = i64({}, {-1});
    Tensor r = run1("Mod", {&a, &m}, attrs({{"fmod", I(fmod)}}));
    ASSERT_EQ(r.numel(), 2);
    EXPECT_EQ(r.data<int64_t>()[0], 0);
    EXPECT_EQ(r.data<int64_t>()[1], 0);
    Tensor c = i32({1}, {std::numeric_limits<int32_t>::min()}), n = i32({1}, {-1});
    Tensor r32 = run1("Mod", {&c, &n}, attrs({{"fmod", I(fmod)}}));
    ASSERT_EQ(r32.numel(), 1);
    EXPECT_EQ(r32.data<int32_t>()[0], 0);
  }
}

TEST(OpsMathBinary, Bitwise) {
  Tensor a = i32({2}, {0b1100, -1}), b = i32({2}, {0b1010, 5});
  expectTensor(run1("BitwiseAnd", {&a, &b}), DType::kI32, {2}, {0b1000, 5});
  expectTensor(run1("BitwiseOr", {&a, &b}), DType::kI32, {2}, {0b1110, -1});
  expectTensor(run1("BitwiseXor", {&a, &b}), DType::kI32, {2}, {0b0110, -6});
  Tensor x = u8({4}, {16, 4, 1, 255}), s = u8({4}, {1, 2, 8, 4});
  expectTensor(run1("BitShift", {&x, &s}, attrs({{"direction", S("LEFT")}})), DType::kU8, {4}, {32, 16, 0, 240});
  expectTensor(run1("BitShift", {&x, &s}, attrs({{"direction", S("RIGHT")}})), DType::kU8, {4}, {8, 1, 0, 15});
  EXPECT_FALSE(infer("BitShift", {{DType::kU8, {1}}, {DType::kU8, {1}}}).ok());  // no direction
  EXPECT_FALSE(infer("BitShift", {{DType::kI64, {1}}, {DType::kI64, {1}}}, {},
                     attrs({{"direction", S("LEFT")}})).ok());
  EXPECT_FALSE(infer("BitwiseAnd", {{DType::kF32, {1}}, {DType::kF32, {1}}}).ok());
}

TEST(OpsMathBinary, VariadicFoldsBroadcast) {
  Tensor a = f32({3}, {3.f, 2.f, 1.f}), b = f32({1}, {2.f}), c = f32({2, 1}, {0.f, 10.f});
  expectTensor(run1("Max", {&a, &b, &c}), DType::kF32, {2, 3}, {3, 2, 2, 10, 10, 10});
  expectTensor(run1("Min", {&a, &b, &c}), DType::kF32, {2, 3}, {0, 0, 0, 2, 2, 1});
  expectTensor(run1("Sum", {&a, &b, &c}), DType::kF32, {2, 3}, {5, 4, 3, 15, 14, 13});
  expectTensor(run1("Mean", {&a, &b, &c}), DType::kF32, {2, 3}, {5 / 3.0, 4 / 3.0, 1, 5, 14 / 3.0, 13 / 3.0});
  expectTensor(run1("Sum", {&a}), DType::kF32, {3}, {3, 2, 1});
  Tensor n = f32({3}, {NAN, 0.f, 5.f});
  expectTensor(run1("Max", {&a, &n}), DType::kF32, {3}, {NAN, 2, 5});
  Tensor i = i32({2}, {-1, 7}), j = i32({2}, {4, 2});
  expectTensor(run1("Min", {&i, &j}), DType::kI32, {2}, {-1, 2});
  EXPECT_FALSE(infer("Sum", {{DType::kI32, {2}}, {DType::kI32, {2}}}).ok());  // float only
  EXPECT_FALSE(infer("Max", {{DType::kF32, {2}}, {DType::kF32, {3}}}).ok());
  EXPECT_FALSE(infer("Max", {}).ok());
}

}  // namespace
}  // namespace pcc::testing
