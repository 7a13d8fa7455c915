// Unary math and activations. Transcendental values are from Python's math
// module; the rest are hand-computed.
#include <cmath>
#include <limits>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

Tensor f16(Dims shape, const std::vector<float>& v) {
  std::vector<uint16_t> h;
  for (float x : v) h.push_back(floatToHalf(x));
  return Tensor::fromVector(DType::kF16, std::move(shape), h);
}
Tensor i8(Dims shape, std::vector<int8_t> v) { return Tensor::fromVector(DType::kI8, std::move(shape), v); }
Tensor u8(Dims shape, std::vector<uint8_t> v) { return Tensor::fromVector(DType::kU8, std::move(shape), v); }

TEST(OpsMathUnary, FloatFunctions) {
  Tensor x = f32({3}, {0.5f, 1.f, 2.f});
  expectTensor(run1("Exp", {&x}), DType::kF32, {3}, {1.6487212707001282, 2.718281828459045, 7.38905609893065});
  expectTensor(run1("Log", {&x}), DType::kF32, {3}, {-0.6931471805599453, 0, 0.6931471805599453});
  expectTensor(run1("Reciprocal", {&x}), DType::kF32, {3}, {2, 1, 0.5});
  expectTensor(run1("Sin", {&x}), DType::kF32, {3}, {0.479425538604203, 0.8414709848078965, 0.9092974268256817});
  expectTensor(run1("Cos", {&x}), DType::kF32, {3}, {0.8775825618903728, 0.5403023058681398, -0.4161468365471424});
  expectTensor(run1("Tan", {&x}), DType::kF32, {3}, {0.5463024898437905, 1.5574077246549023, -2.185039863261519});
  expectTensor(run1("Atan", {&x}), DType::kF32, {3}, {0.4636476090008061, 0.7853981633974483, 1.1071487177940904});
  expectTensor(run1("Sinh", {&x}), DType::kF32, {3}, {0.5210953054937474, 1.1752011936438014, 3.626860407847019});
  expectTensor(run1("Cosh", {&x}), DType::kF32, {3}, {1.1276259652063807, 1.5430806348152437, 3.7621956910836314});
  expectTensor(run1("Asinh", {&x}), DType::kF32, {3}, {0.48121182505960347, 0.881373587019543, 1.4436354751788103});
  expectTensor(run1("Acosh", {&x}), DType::kF32, {3}, {NAN, 0, 1.3169578969248166});
  expectTensor(run1("Softplus", {&x}), DType::kF32, {3}, {0.9740769841801067, 1.3132616875182228, 2.1269280110429727});
  expectTensor(run1("Softsign", {&x}), DType::kF32, {3}, {1 / 3.0, 0.5, 2 / 3.0});
  Tensor h = f32({3}, {-0.5f, 0.f, 0.5f});
  expectTensor(run1("Asin", {&h}), DType::kF32, {3}, {-0.5235987755982989, 0, 0.5235987755982989});
  expectTensor(run1("Acos", {&h}), DType::kF32, {3}, {2.0943951023931957, 1.5707963267948966, 1.0471975511965979});
  expectTensor(run1("Atanh", {&h}), DType::kF32, {3}, {-0.5493061443340549, 0, 0.5493061443340549});
  // Softplus must not overflow where exp(x) does.
  Tensor big = f32({1}, {1000.f});
  expectTensor(run1("Softplus", {&big}), DType::kF32, {1}, {1000});
}

TEST(OpsMathUnary, RoundingHalfToEven) {
  Tensor x = f32({8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f, 3.f});
  expectTensor(run1("Round", {&x}), DType::kF32, {8}, {0, 2, 2, -0, -2, 2, -3, 3});
  expectTensor(run1("Floor", {&x}), DType::kF32, {8}, {0, 1, 2, -1, -2, 2, -3, 3});
  expectTensor(run1("Ceil", {&x}), DType::kF32, {8}, {1, 2, 3, -0, -1, 3, -2, 3});
}

TEST(OpsMathUnary, SignFunctionsOnEveryNumericType) {
  Tensor x = f32({4}, {-2.5f, 0.f, 3.f, NAN});
  expectTensor(run1("Abs", {&x}), DType::kF32, {4}, {2.5, 0, 3, NAN});
  expectTensor(run1("Neg", {&x}), DType::kF32, {4}, {2.5, 0, -3, NAN});
  expectTensor(run1("Sign", {&x}), DType::kF32, {4}, {-1, 0, 1, NAN});
  Tensor i = i64({3}, {-7, 0, 5});
  expectTensor(run1("Abs", {&i}), DType::kI64, {3}, {7, 0, 5});
  expectTensor(run1("Neg", {&i}), DType::kI64, {3}, {7, 0, -5});
  expectTensor(run1("Sign", {&i}), DType::kI64, {3}, {-1, 0, 1});
  Tensor s = i8({2}, {-128, 127});
  expectTensor(run1("Abs", {&s}), DType::kI8, {2}, {-128, 127});  // wraps as in two's complement
  Tensor u = u8({2}, {0, 200});
  expectTensor(run1("Abs", {&u}), DType::kU8, {2}, {0, 200});
  expectTensor(run1("Sign", {&u}), DType::kU8, {2}, {0, 1});
  EXPECT_NE(runError("Neg", {&u}).find("unsupported type"), std::string::npos);
  Tensor h = f16({2}, {-1.5f, 2.f});
  expectTensor(run1("Abs", {&h}), DType::kF16, {2}, {1.5, 2});
}

TEST(OpsMathUnary, FloatOnlyOpsRejectIntegers) {
  Tensor i = i32({2}, {1, 2});
  EXPECT_NE(runError("Exp", {&i}).find("unsupported type i32"), std::string::npos);
  EXPECT_FALSE(infer("Floor", {{DType::kI64, {2}}}).ok());
  EXPECT_FALSE(infer("Sin", {{DType::kBool, {2}}}).ok());
}

TEST(OpsMathUnary, HalfTypesComputeInF32) {
  Tensor h = f16({3}, {0.f, 1.f, -1.f});
  Tensor e = run1("Exp", {&h});
  expectTensor(e, DType::kF16, {3}, {1, 2.718281828459045, 0.36787944117144233}, 1e-3);
  Tensor b = Tensor::fromVector<uint16_t>(DType::kBF16, {2}, {floatToBf16(4.f), floatToBf16(0.25f)});
  expectTensor(run1("Reciprocal", {&b}), DType::kBF16, {2}, {0.25, 4});
}

TEST(OpsMathUnary, LogicAndClassification) {
  Tensor b = boolean({3}, {1, 0, 1});
  expectTensor(run1("Not", {&b}), DType::kBool, {3}, {0, 1, 0});
  EXPECT_FALSE(infer("Not", {{DType::kF32, {3}}}).ok());
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = f32({5}, {1.f, NAN, inf, -inf, 0.f});
  expectTensor(run1("IsNaN", {&x}), DType::kBool, {5}, {0, 1, 0, 0, 0});
  expectTensor(run1("IsInf", {&x}), DType::kBool, {5}, {0, 0, 1, 1, 0});
  expectTensor(run1("IsInf", {&x}, attrs({{"detect_negative", I(0)}})), DType::kBool, {5}, {0, 0, 1, 0, 0});
  expectTensor(run1("IsInf", {&x}, attrs({{"detect_positive", I(0)}})), DType::kBool, {5}, {0, 0, 0, 1, 0});
  Tensor h = f16({2}, {inf, 1.f});
  expectTensor(run1("IsInf", {&h}), DType::kBool, {2}, {1, 0});
  Tensor u = u8({2}, {0, 0xF0});
  expectTensor(run1("BitwiseNot", {&u}), DType::kU8, {2}, {255, 0x0F});
  Tensor i = i32({2}, {0, -1});
  expectTensor(run1("BitwiseNot", {&i}), DType::kI32, {2}, {-1, 0});
  EXPECT_FALSE(infer("BitwiseNot", {{DType::kF32, {2}}}).ok());
}

TEST(OpsMathUnary, Activations) {
  Tensor x = f32({4}, {-2.f, -0.5f, 0.5f, 2.f});
  expectTensor(run1("LeakyRelu", {&x}), DType::kF32, {4}, {-0.02, -0.005, 0.5, 2});
  expectTensor(run1("LeakyRelu", {&x}, attrs({{"alpha", F(0.5f)}})), DType::kF32, {4}, {-1, -0.25, 0.5, 2});
  // Elu: alpha * (exp(x) - 1) below zero.
  expectTensor(run1("Elu", {&x}, attrs({{"alpha", F(2.f)}})), DType::kF32, {4},
               {2 * (std::exp(-2.0) - 1), 2 * (std::exp(-0.5) - 1), 0.5, 2});
  const double sa = 1.67326319217681884765625, sg = 1.05070102214813232421875;
  expectTensor(run1("Selu", {&x}), DType::kF32, {4},
               {sg * sa * (std::exp(-2.0) - 1), sg * sa * (std::exp(-0.5) - 1), sg * 0.5, sg * 2});
  expectTensor(run1("Celu", {&x}, attrs({{"alpha", F(2.f)}})), DType::kF32, {4},
               {2 * (std::exp(-1.0) - 1), 2 * (std::exp(-0.25) - 1), 0.5, 2});
  expectTensor(run1("HardSigmoid", {&x}), DType::kF32, {4}, {0.1, 0.4, 0.6, 0.9});
  expectTensor(run1("HardSigmoid", {&x}, attrs({{"alpha", F(1.f)}, {"beta", F(0.f)}})), DType::kF32, {4},
               {0, 0, 0.5, 1});
  Tensor y = f32({4}, {-4.f, -1.f, 1.f, 4.f});
  expectTensor(run1("HardSwish", {&y}), DType::kF32, {4}, {0, -1 / 3.0, 2 / 3.0, 4});
  expectTensor(run1("Mish", {&y}), DType::kF32, {4},
               {-4 * std::tanh(std::log1p(std::exp(-4.0))), -1 * std::tanh(std::log1p(std::exp(-1.0))),
                std::tanh(std::log1p(std::exp(1.0))), 4 * std::tanh(std::log1p(std::exp(4.0)))});
  expectTensor(run1("ThresholdedRelu", {&y}), DType::kF32, {4}, {0, 0, 0, 4});
  expectTensor(run1("ThresholdedRelu", {&y}, attrs({{"alpha", F(0.5f)}})), DType::kF32, {4}, {0, 0, 1, 4});
  expectTensor(run1("Shrink", {&y}, attrs({{"lambd", F(1.5f)}})), DType::kF32, {4}, {-4, 0, 0, 4});
  expectTensor(run1("Shrink", {&y}, attrs({{"lambd", F(0.5f)}, {"bias", F(1.f)}})), DType::kF32, {4},
               {-3, 0, 0, 3});
  Tensor i = i64({3}, {-5, 0, 5});
  expectTensor(run1("Shrink", {&i}, attrs({{"lambd", F(1.f)}, {"bias", F(2.f)}})), DType::kI64, {3}, {-3, 0, 3});
  EXPECT_FALSE(infer("Elu", {{DType::kI32, {2}}}).ok());
  EXPECT_FALSE(infer("Celu", {{DType::kF32, {2}}}, {}, attrs({{"alpha", F(0.f)}})).ok());
}

TEST(OpsMathUnary, ClipWithOptionalBounds) {
  Tensor x = f32({5}, {-3.f, -1.f, 0.f, 1.f, 3.f});
  Tensor lo = f32({}, {-1.5f}), hi = f32({}, {2.f});
  expectTensor(run1("Clip", {&x, &lo, &hi}), DType::kF32, {5}, {-1.5, -1, 0, 1, 2});
  expectTensor(run1("Clip", {&x, nullptr, &hi}), DType::kF32, {5}, {-3, -1, 0, 1, 2});
  expectTensor(run1("Clip", {&x, &lo}), DType::kF32, {5}, {-1.5, -1, 0, 1, 3});
  expectTensor(run1("Clip", {&x}), DType::kF32, {5}, {-3, -1, 0, 1, 3});
  // min > max: every element becomes max.
  Tensor lo2 = f32({}, {2.f}), hi2 = f32({}, {1.f});
  expectTensor(run1("Clip", {&x, &lo2, &hi2}), DType::kF32, {5}, {1, 1, 1, 1, 1});
  Tensor xi = i8({3}, {-100, 0, 100}), loi = i8({}, {-10}), hii = i8({}, {10});
  expectTensor(run1("Clip", {&xi, &loi, &hii}), DType::kI8, {3}, {-10, 0, 10});
  EXPECT_FALSE(infer("Clip", {{DType::kF32, {3}}, {DType::kF64, {}}}).ok());
  EXPECT_FALSE(infer("Clip", {{DType::kF32, {3}}, {DType::kF32, {2}}}).ok());
}

TEST(OpsMathUnary, PReluBroadcastsSlopeToX) {
  Tensor x = f32({2, 3}, {-1.f, 2.f, -3.f, 4.f, -5.f, 6.f}), s = f32({3}, {0.1f, 0.2f, 0.3f});
  expectTensor(run1("PRelu", {&x, &s}), DType::kF32, {2, 3}, {-0.1, 2, -0.9, 4, -1.0, 6});
  EXPECT_FALSE(infer("PRelu", {{DType::kF32, {3}}, {DType::kF32, {2, 3}}}).ok());
}

}  // namespace
}  // namespace pcc::testing
