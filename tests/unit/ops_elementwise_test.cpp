// Elementwise ops. Transcendental values are from Python's math module.
#include <cmath>
#include <limits>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsElementwise, ArithmeticHandComputed) {
  Tensor a = f32({2, 2}, {1, 2, 3, 4}), b = f32({2, 2}, {10, 20, 30, 40});
  expectTensor(run1("Add", {&a, &b}), DType::kF32, {2, 2}, {11, 22, 33, 44});
  expectTensor(run1("Sub", {&a, &b}), DType::kF32, {2, 2}, {-9, -18, -27, -36});
  expectTensor(run1("Mul", {&a, &b}), DType::kF32, {2, 2}, {10, 40, 90, 160});
  expectTensor(run1("Div", {&b, &a}), DType::kF32, {2, 2}, {10, 10, 10, 10});
}

TEST(OpsElementwise, Broadcasting) {
  // [2,1,3] + [4,1] -> [2,4,3]
  Tensor a = f32({2, 1, 3}, {0, 1, 2, 100, 101, 102}), b = f32({4, 1}, {0, 10, 20, 30});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(100 * i + k + 10 * j);
  expectTensor(run1("Add", {&a, &b}), DType::kF32, {2, 4, 3}, want);
  // Scalar against a tensor, both ways round.
  Tensor s = f32({}, {2});
  expectTensor(run1("Sub", {&s, &b}), DType::kF32, {4, 1}, {2, -8, -18, -28});
  expectTensor(run1("Mul", {&b, &s}), DType::kF32, {4, 1}, {0, 20, 40, 60});
}

TEST(OpsElementwise, BroadcastMismatchIsAnError) {
  auto r = infer("Add", {{DType::kF32, {2, 3}}, {DType::kF32, {2, 4}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("[2,3]"), std::string::npos) << r.status().message();
  EXPECT_FALSE(infer("Mul", {{DType::kF32, {2}}, {DType::kI64, {2}}}).ok());  // dtype mismatch
  EXPECT_FALSE(infer("Add", {{DType::kBool, {2}}, {DType::kBool, {2}}}).ok());
}

TEST(OpsElementwise, IntegerDivisionTruncates) {
  Tensor a = i64({4}, {7, -7, 7, -7}), b = i64({4}, {2, 2, -2, -2});
  expectTensor(run1("Div", {&a, &b}), DType::kI64, {4}, {3, -3, -3, 3});
  Tensor c = i32({2}, {9, -9}), d = i32({}, {4});
  expectTensor(run1("Div", {&c, &d}), DType::kI32, {2}, {2, -2});
  Tensor z = i64({1}, {0});
  EXPECT_NE(runError("Div", {&a, &z}).find("division by zero"), std::string::npos);
  expectTensor(run1("Add", {&a, &b}), DType::kI64, {4}, {9, -5, 5, -9});
}

TEST(OpsElementwise, IntegerDivisionOfTheMostNegativeByMinusOneWraps) {
  // INT_MIN / -1 does not fit; it wraps to INT_MIN (numpy, onnxruntime) instead of trapping.
  const int64_t lo64 = std::numeric_limits<int64_t>::min();
  const int32_t lo32 = std::numeric_limits<int32_t>::min();
  Tensor a = i64({3}, {lo64, 6, lo64 + 1}), m = i64({}, {-1});
  Tensor q = run1("Div", {&a, &m});
  ASSERT_EQ(q.numel(), 3);
  EXPECT_EQ(q.data<int64_t>()[0], lo64);
  EXPECT_EQ(q.data<int64_t>()[1], -6);
  EXPECT_EQ(q.data<int64_t>()[2], std::numeric_limits<int64_t>::max());
  Tensor c = i32({2}, {lo32, -5}), n = i32({2}, {-1, -1});
  Tensor q32 = run1("Div", {&c, &n});
  ASSERT_EQ(q32.numel(), 2);
  EXPECT_EQ(q32.data<int32_t>()[0], lo32);
  EXPECT_EQ(q32.data<int32_t>()[1], 5);
}

TEST(OpsElementwise, Pow) {
  Tensor a = f32({3}, {2, 4, 9}), e = f32({}, {0.5f});
  expectTensor(run1("Pow", {&a, &e}), DType::kF32, {3}, {std::sqrt(2.0), 2, 3});
  Tensor ei = i64({3}, {3, -1, 0});  // integer exponent keeps the base type
  expectTensor(run1("Pow", {&a, &ei}), DType::kF32, {3}, {8, 0.25, 1});
  Tensor ai = i64({2}, {3, -2}), e2 = i64({}, {3});
  expectTensor(run1("Pow", {&ai, &e2}), DType::kI64, {2}, {27, -8});
}

TEST(OpsElementwise, EqualAndWhere) {
  Tensor a = f32({2, 2}, {1, 2, 3, 4}), b = f32({2}, {1, 4});
  Tensor eq = run1("Equal", {&a, &b});
  expectTensor(eq, DType::kBool, {2, 2}, {1, 0, 0, 1});
  Tensor ia = i64({3}, {5, 6, 7}), ib = i64({1}, {6});
  expectTensor(run1("Equal", {&ia, &ib}), DType::kBool, {3}, {0, 1, 0});
  Tensor ba = boolean({2}, {1, 0}), bb = boolean({2}, {1, 1});
  expectTensor(run1("Equal", {&ba, &bb}), DType::kBool, {2}, {1, 0});
  // Where broadcasts all three: cond [2,2], X [2,2], Y scalar.
  Tensor y = f32({}, {-1});
  expectTensor(run1("Where", {&eq, &a, &y}), DType::kF32, {2, 2}, {1, -1, -1, 4});
  Tensor c = boolean({3, 1}, {1, 0, 1}), xi = i64({2}, {10, 20}), yi = i64({3, 2}, {1, 2, 3, 4, 5, 6});
  expectTensor(run1("Where", {&c, &xi, &yi}), DType::kI64, {3, 2}, {10, 20, 3, 4, 10, 20});
  EXPECT_FALSE(infer("Where", {{DType::kF32, {2}}, {DType::kF32, {2}}, {DType::kF32, {2}}}).ok());
  EXPECT_FALSE(infer("Where", {{DType::kBool, {2}}, {DType::kF32, {2}}, {DType::kI64, {2}}}).ok());
  EXPECT_FALSE(infer("Equal", {{DType::kF32, {2}}, {DType::kF32, {3}}}).ok());
}

TEST(OpsElementwise, UnaryMath) {
  Tensor x = f32({6}, {-2, -0.5f, 0, 0.5f, 1, 3});
  expectTensor(run1("Erf", {&x}), DType::kF32, {6},
               {-0.9953223, -0.5204999, 0.0, 0.5204999, 0.8427008, 0.9999779});
  expectTensor(run1("Tanh", {&x}), DType::kF32, {6},
               {-0.9640276, -0.4621172, 0.0, 0.4621172, 0.7615942, 0.9950548});
  expectTensor(run1("Sigmoid", {&x}), DType::kF32, {6},
               {0.1192029, 0.3775407, 0.5, 0.6224593, 0.7310586, 0.9525741});
  expectTensor(run1("Gelu", {&x}), DType::kF32, {6},
               {-0.0455003, -0.1542688, 0.0, 0.3457312, 0.8413447, 2.9959503});
  expectTensor(run1("Gelu", {&x}, attrs({{"approximate", S("tanh")}})), DType::kF32, {6},
               {-0.0454023, -0.154286, 0.0, 0.345714, 0.841192, 2.9963626});
  expectTensor(run1("Relu", {&x}), DType::kF32, {6}, {0, 0, 0, 0.5, 1, 3});
  Tensor sq = f64({3}, {4, 2, 0});
  expectTensor(run1("Sqrt", {&sq}), DType::kF64, {3}, {2, std::sqrt(2.0), 0}, 1e-12);
  Tensor neg = f32({1}, {-1});
  EXPECT_TRUE(std::isnan(run1("Sqrt", {&neg}).data<float>()[0]));
  Tensor xi = i64({3}, {-3, 0, 5});
  expectTensor(run1("Relu", {&xi}), DType::kI64, {3}, {0, 0, 5});
  EXPECT_FALSE(infer("Tanh", {{DType::kI64, {3}}}).ok());
  EXPECT_FALSE(infer("Gelu", {{DType::kF32, {3}}}, {}, attrs({{"approximate", S("fast")}})).ok());
}

TEST(OpsElementwise, HalfTypesComputeThroughF32) {
  Tensor a = Tensor::zeros(DType::kBF16, {2}), b = Tensor::zeros(DType::kBF16, {2});
  a.mutableData<uint16_t>()[0] = floatToBf16(1.5f);
  a.mutableData<uint16_t>()[1] = floatToBf16(-2.0f);
  b.mutableData<uint16_t>()[0] = floatToBf16(0.25f);
  b.mutableData<uint16_t>()[1] = floatToBf16(4.0f);
  expectTensor(run1("Mul", {&a, &b}), DType::kBF16, {2}, {0.375, -8});
  expectTensor(run1("Relu", {&a}), DType::kBF16, {2}, {1.5, 0});
  expectTensor(run1("Equal", {&a, &a}), DType::kBool, {2}, {1, 1});
}

TEST(OpsElementwise, CastAndIdentity) {
  Tensor x = f32({5}, {-1.7f, -0.2f, 0, 2.9f, 3});
  expectTensor(run1("Cast", {&x}, attrs({{"to", I(7)}})), DType::kI64, {5}, {-1, 0, 0, 2, 3});
  expectTensor(run1("Cast", {&x}, attrs({{"to", I(9)}})), DType::kBool, {5}, {1, 1, 0, 1, 1});
  expectTensor(run1("Cast", {&x}, attrs({{"to", I(6)}})), DType::kI32, {5}, {-1, 0, 0, 2, 3});
  expectTensor(run1("Cast", {&x}, attrs({{"to", I(10)}})), DType::kF16, {5},
               {-1.7, -0.2, 0, 2.9, 3}, 1e-3);
  Tensor big = i64({2}, {(int64_t(1) << 53) + 1, -5});
  Tensor back = run1("Cast", {&big}, attrs({{"to", I(7)}}));
  EXPECT_EQ(back.data<int64_t>()[0], (int64_t(1) << 53) + 1);  // exact, not through double
  expectTensor(run1("Cast", {&big}, attrs({{"to", I(1)}})), DType::kF32, {2}, {9007199254740992.0, -5});
  Tensor bl = boolean({2}, {1, 0});
  expectTensor(run1("Cast", {&bl}, attrs({{"to", I(1)}})), DType::kF32, {2}, {1, 0});
  EXPECT_FALSE(infer("Cast", {{DType::kF32, {2}}}, {}, attrs({{"to", I(8)}})).ok());  // string
  EXPECT_FALSE(infer("Cast", {{DType::kF32, {2}}}).ok());                              // no 'to'

  // Narrow and wide integer targets.
  Tensor y = f32({6}, {-9, 8, 0.3f, 470, INFINITY, NAN});
  expectTensor(run1("Cast", {&y}, attrs({{"to", I(22)}})), DType::kI4, {6}, {7, -8, 0, 6, 0, 0});
  Tensor e4 = run1("Cast", {&y}, attrs({{"to", I(17)}}));  // f8e4m3fn, saturating
  EXPECT_EQ(values(e4)[2], 0.3125);
  EXPECT_EQ(values(e4)[3], 448);
  EXPECT_EQ(values(e4)[4], 448);
  Tensor e4n = run1("Cast", {&y}, attrs({{"to", I(17)}, {"saturate", I(0)}}));
  EXPECT_TRUE(std::isnan(values(e4n)[3]));
  EXPECT_TRUE(std::isnan(values(e4n)[4]));
  Tensor e5n = run1("Cast", {&y}, attrs({{"to", I(19)}, {"saturate", I(0)}}));
  EXPECT_EQ(values(e5n)[4], INFINITY);
  Tensor m = f32({2}, {1.1f, 3.f});
  expectTensor(run1("Cast", {&m}, attrs({{"to", I(24)}})), DType::kF8E8M0, {2}, {2, 4});
  expectTensor(run1("Cast", {&m}, attrs({{"to", I(24)}, {"round_mode", std::string("down")}})),
               DType::kF8E8M0, {2}, {1, 2});
  EXPECT_NE(runError("Cast", {&m}, attrs({{"to", I(24)}, {"round_mode", std::string("sideways")}})), "");
  Tensor u64 = Tensor::zeros(DType::kU64, {1});
  u64.setInt(0, -1);  // 2^64 - 1
  expectTensor(run1("Cast", {&u64}, attrs({{"to", I(11)}})), DType::kF64, {1}, {18446744073709551615.0});
  expectTensor(run1("Cast", {&u64}, attrs({{"to", I(5)}})), DType::kI16, {1}, {-1});

  Tensor id = run1("Identity", {&bl});
  expectTensor(id, DType::kBool, {2}, {1, 0});
  EXPECT_NE(id.raw(), bl.raw());
}

}  // namespace
}  // namespace pcc::testing
