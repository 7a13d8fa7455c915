// Linear quantization ops; hand-computed.
#include <cmath>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

Tensor u8(Dims shape, std::vector<uint8_t> v) { return Tensor::fromVector(DType::kU8, std::move(shape), v); }
Tensor i8(Dims shape, std::vector<int8_t> v) { return Tensor::fromVector(DType::kI8, std::move(shape), v); }

TEST(OpsMathQuant, QuantizePerTensorRoundsHalfToEvenAndSaturates) {
  Tensor x = f32({6}, {0.f, 1.f, 3.f, 5.f, 1000.f, -10.f}), s = f32({}, {2.f}), zp = u8({}, {128});
  // 1/2 = 0.5 -> 0, 3/2 = 1.5 -> 2, 5/2 = 2.5 -> 2.
  expectTensor(run1("QuantizeLinear", {&x, &s, &zp}), DType::kU8, {6}, {128, 128, 130, 130, 255, 123});
  expectTensor(run1("QuantizeLinear", {&x, &s}), DType::kU8, {6}, {0, 0, 2, 2, 255, 0});  // uint8 default
  Tensor zi = i8({}, {-1});
  expectTensor(run1("QuantizeLinear", {&x, &s, &zi}), DType::kI8, {6}, {-1, -1, 1, 1, 127, -6});
  expectTensor(run1("QuantizeLinear", {&x, &s}, attrs({{"output_dtype", I(3)}})), DType::kI8, {6},
               {0, 0, 2, 2, 127, -5});
  auto bad = infer("QuantizeLinear", {{DType::kF32, {2}}, {DType::kF32, {}}}, {}, attrs({{"output_dtype", I(6)}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnsupported);  // int32 is not a quantized type
}

TEST(OpsMathQuant, QuantizeWideNarrowAndFloatTypes) {
  Tensor x = f32({5}, {0.f, 3.f, 5.f, 1e6f, -1e6f}), s = f32({}, {2.f});
  // int16 / uint16 / int4 / uint4 saturate to their ranges; half to even as for int8.
  expectTensor(run1("QuantizeLinear", {&x, &s}, attrs({{"output_dtype", I(5)}})), DType::kI16, {5},
               {0, 2, 2, 32767, -32768});
  expectTensor(run1("QuantizeLinear", {&x, &s}, attrs({{"output_dtype", I(4)}})), DType::kU16, {5},
               {0, 2, 2, 65535, 0});
  expectTensor(run1("QuantizeLinear", {&x, &s}, attrs({{"output_dtype", I(22)}})), DType::kI4, {5},
               {0, 2, 2, 7, -8});
  expectTensor(run1("QuantizeLinear", {&x, &s}, attrs({{"output_dtype", I(21)}})), DType::kU4, {5},
               {0, 2, 2, 15, 0});
  // float8: x / scale rounded to the format, saturating unless saturate = 0.
  expectTensor(run1("QuantizeLinear", {&x, &s}, attrs({{"output_dtype", I(17)}})), DType::kF8E4M3FN,
               {5}, {0, 1.5, 2.5, 448, -448});
  Tensor q = run1("QuantizeLinear", {&x, &s}, attrs({{"output_dtype", I(17)}, {"saturate", I(0)}}));
  EXPECT_TRUE(std::isnan(q.getDouble(3)));
  // And back: codes widen to float, times the scale.
  Tensor d = run1("DequantizeLinear", {&q, &s});
  EXPECT_EQ(d.getDouble(2), 5.0);
  Tensor i4 = run1("QuantizeLinear", {&x, &s}, attrs({{"output_dtype", I(22)}}));
  expectTensor(run1("DequantizeLinear", {&i4, &s}), DType::kF32, {5}, {0, 4, 4, 14, -16});
}

TEST(OpsMathQuant, QuantizePerAxisAndBlocked) {
  Tensor x = f32({2, 4}, {1, 2, 3, 4, 10, 20, 30, 40});
  Tensor s = f32({2}, {1.f, 10.f}), zp = u8({2}, {0, 100});
  expectTensor(run1("QuantizeLinear", {&x, &s, &zp}, attrs({{"axis", I(0)}})), DType::kU8, {2, 4},
               {1, 2, 3, 4, 101, 102, 103, 104});
  // Blocks of 2 along axis 1: scale [2,2].
  Tensor sb = f32({2, 2}, {1.f, 2.f, 10.f, 20.f});
  expectTensor(run1("QuantizeLinear", {&x, &sb}, attrs({{"axis", I(1)}, {"block_size", I(2)}})), DType::kU8,
               {2, 4}, {1, 2, 2, 2, 1, 2, 2, 2});
  EXPECT_FALSE(infer("QuantizeLinear", {{DType::kF32, {2, 4}}, {DType::kF32, {3}}}).ok());
  EXPECT_FALSE(infer("QuantizeLinear", {{DType::kF32, {2, 4}}, {DType::kF32, {2, 3}}}, {},
                     attrs({{"block_size", I(2)}})).ok());
}

TEST(OpsMathQuant, Dequantize) {
  Tensor x = u8({4}, {0, 3, 128, 255}), s = f32({}, {0.5f}), zp = u8({}, {128});
  expectTensor(run1("DequantizeLinear", {&x, &s, &zp}), DType::kF32, {4}, {-64, -62.5, 0, 63.5});
  Tensor xa = i8({2, 2}, {-1, 1, -2, 2}), sa = f32({2}, {1.f, 3.f}), za = i8({2}, {0, 1});
  expectTensor(run1("DequantizeLinear", {&xa, &sa, &za}, attrs({{"axis", I(1)}})), DType::kF32, {2, 2},
               {-1, 0, -2, 3});
  Tensor x32 = i32({2}, {-5, 7});
  expectTensor(run1("DequantizeLinear", {&x32, &s}), DType::kF32, {2}, {-2.5, 3.5});
  Tensor sh = Tensor::fromVector<uint16_t>(DType::kF16, {}, {floatToHalf(0.5f)});
  expectTensor(run1("DequantizeLinear", {&x, &sh}), DType::kF16, {4}, {0, 1.5, 64, 127.5});
  EXPECT_FALSE(infer("DequantizeLinear", {{DType::kU8, {4}}, {DType::kF32, {}}, {DType::kI8, {}}}).ok());
}

TEST(OpsMathQuant, DynamicQuantize) {
  Tensor x = f32({4}, {0.f, 2.f, -3.f, 2.55f});
  auto r = run("DynamicQuantizeLinear", {&x});
  ASSERT_EQ(r.size(), 3u);
  // range [-3, 2.55] -> scale 5.55 / 255, zero point round(3 / scale) = round(137.83) = 138.
  double scale = 5.55f / 255.0;
  expectTensor(r[1], DType::kF32, {}, {scale});
  expectTensor(r[2], DType::kU8, {}, {138});
  expectTensor(r[0], DType::kU8, {4}, {138, 230, 0, 255});
}

TEST(OpsMathQuant, MatMulIntegerWithZeroPoints) {
  Tensor a = u8({2, 2}, {1, 2, 3, 4}), b = u8({2, 2}, {5, 6, 7, 8});
  expectTensor(run1("MatMulInteger", {&a, &b}), DType::kI32, {2, 2}, {19, 22, 43, 50});
  Tensor az = u8({}, {1}), bz = u8({2}, {5, 0});
  // A - 1 = [[0,1],[2,3]], B - [5,0] per column = [[0,6],[2,8]].
  expectTensor(run1("MatMulInteger", {&a, &b, &az, &bz}), DType::kI32, {2, 2}, {2, 8, 6, 36});
  Tensor azRow = u8({2}, {1, 3});  // per row of A: [[0,1],[0,1]]
  expectTensor(run1("MatMulInteger", {&a, &b, &azRow}), DType::kI32, {2, 2}, {7, 8, 7, 8});
  Tensor s = i8({2, 2}, {-1, 2, 3, -4});
  expectTensor(run1("MatMulInteger", {&s, &b}), DType::kI32, {2, 2}, {9, 10, -13, -14});
  EXPECT_FALSE(infer("MatMulInteger", {{DType::kF32, {2, 2}}, {DType::kU8, {2, 2}}}).ok());
}

}  // namespace
}  // namespace pcc::testing
