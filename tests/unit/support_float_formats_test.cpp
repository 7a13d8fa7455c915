#include <gtest/gtest.h>

#include <cmath>

#include "runtime/support/float_formats.h"
#include "runtime/support/tensor.h"

namespace pcc {
namespace {

constexpr DType kFloat8[] = {DType::kF8E4M3FN, DType::kF8E4M3FNUZ, DType::kF8E5M2,
                             DType::kF8E5M2FNUZ};

// Every finite code decodes to a value that encodes back to the same code, and
// codes in increasing order give increasing magnitudes.
TEST(FloatFormats, EveryCodeRoundTrips) {
  for (DType t : {DType::kF8E4M3FN, DType::kF8E4M3FNUZ, DType::kF8E5M2, DType::kF8E5M2FNUZ,
                  DType::kF4E2M1}) {
    SCOPED_TRACE(dtypeName(t));
    int codes = t == DType::kF4E2M1 ? 16 : 256;
    uint8_t signBit = t == DType::kF4E2M1 ? 0x8 : 0x80;
    float prev = -1;
    int finite = 0;
    for (int c = 0; c < codes; ++c) {
      float v = narrowToFloat(t, static_cast<uint8_t>(c));
      if (!std::isfinite(v)) continue;
      if (c < signBit) {
        EXPECT_GT(v, prev) << "code " << c;
        prev = v;
      }
      ++finite;
      uint8_t back = floatToNarrow(t, v, /*saturate=*/false);
      if (v == 0 && c == signBit) {
        EXPECT_EQ(back, signBit);  // -0 keeps its sign where the format has one
      } else {
        EXPECT_EQ(back, c) << "value " << v;
      }
    }
    // Finite codes: e4m3fn lacks 2 NaN codes, the fnuz formats 1, e5m2 2x4
    // (inf and NaN), float4 none.
    int want = t == DType::kF8E4M3FN ? 254 : t == DType::kF8E5M2 ? 248 : t == DType::kF4E2M1 ? 16 : 255;
    EXPECT_EQ(finite, want);
  }
}

TEST(FloatFormats, LargestValuesAndSpecials) {
  EXPECT_EQ(narrowToFloat(DType::kF8E4M3FN, 0x7e), 448.f);
  EXPECT_EQ(narrowToFloat(DType::kF8E4M3FNUZ, 0x7f), 240.f);
  EXPECT_EQ(narrowToFloat(DType::kF8E5M2, 0x7b), 57344.f);
  EXPECT_EQ(narrowToFloat(DType::kF8E5M2FNUZ, 0x7f), 57344.f);
  EXPECT_EQ(narrowToFloat(DType::kF4E2M1, 0x7), 6.f);
  EXPECT_TRUE(std::isnan(narrowToFloat(DType::kF8E4M3FN, 0x7f)));
  EXPECT_TRUE(std::isnan(narrowToFloat(DType::kF8E4M3FNUZ, 0x80)));
  EXPECT_TRUE(std::isinf(narrowToFloat(DType::kF8E5M2, 0xfc)));
  EXPECT_LT(narrowToFloat(DType::kF8E5M2, 0xfc), 0);
  // Smallest subnormals.
  EXPECT_EQ(narrowToFloat(DType::kF8E4M3FN, 0x01), std::ldexp(1.f, -9));
  EXPECT_EQ(narrowToFloat(DType::kF8E5M2, 0x01), std::ldexp(1.f, -16));
  EXPECT_EQ(narrowToFloat(DType::kF8E4M3FNUZ, 0x01), std::ldexp(1.f, -10));
  EXPECT_EQ(narrowToFloat(DType::kF4E2M1, 0x01), 0.5f);
}

TEST(FloatFormats, RoundsToNearestEven) {
  // 0.3 lies between 0.296875 and 0.3125 in e4m3fn.
  EXPECT_EQ(narrowToFloat(DType::kF8E4M3FN, floatToNarrow(DType::kF8E4M3FN, 0.3)), 0.3125f);
  // e5m2 around 6: 5, 6, 7 are neighbours; 5.5 and 6.5 are ties that go to 6 (even code).
  EXPECT_EQ(narrowToFloat(DType::kF8E5M2, floatToNarrow(DType::kF8E5M2, 5.5)), 6.f);
  EXPECT_EQ(narrowToFloat(DType::kF8E5M2, floatToNarrow(DType::kF8E5M2, 6.5)), 6.f);
  // float4: 0.25 is a tie between 0 and 0.5 (-> 0), 0.75 between 0.5 and 1 (-> 1), 5 between 4 and 6 (-> 4).
  EXPECT_EQ(narrowToFloat(DType::kF4E2M1, floatToNarrow(DType::kF4E2M1, 0.25)), 0.f);
  EXPECT_EQ(narrowToFloat(DType::kF4E2M1, floatToNarrow(DType::kF4E2M1, 0.75)), 1.f);
  EXPECT_EQ(narrowToFloat(DType::kF4E2M1, floatToNarrow(DType::kF4E2M1, 5.0)), 4.f);
  // Tiny values round to zero; the fnuz formats have no -0.
  EXPECT_EQ(floatToNarrow(DType::kF8E4M3FN, -1e-9), 0x80);
  EXPECT_EQ(floatToNarrow(DType::kF8E4M3FNUZ, -1e-9), 0x00);
  EXPECT_EQ(floatToNarrow(DType::kF8E5M2FNUZ, -0.0), 0x00);
}

TEST(FloatFormats, SaturationAndOverflow) {
  // Between the largest value and the next one past it, a tie goes to the even
  // code: e4m3fn's 464 is halfway between 448 (even) and 480.
  EXPECT_EQ(floatToNarrow(DType::kF8E4M3FN, 464, false), 0x7e);
  EXPECT_TRUE(std::isnan(narrowToFloat(DType::kF8E4M3FN, floatToNarrow(DType::kF8E4M3FN, 470, false))));
  EXPECT_EQ(floatToNarrow(DType::kF8E4M3FN, 470, true), 0x7e);
  EXPECT_EQ(floatToNarrow(DType::kF8E4M3FN, -1e6, true), 0xfe);
  EXPECT_EQ(floatToNarrow(DType::kF8E4M3FN, INFINITY, true), 0x7e);
  EXPECT_TRUE(std::isnan(narrowToFloat(DType::kF8E4M3FN, floatToNarrow(DType::kF8E4M3FN, INFINITY, false))));
  // e5m2 has infinity: 61440 is halfway between 57344 and 65536 (even) -> inf.
  EXPECT_EQ(floatToNarrow(DType::kF8E5M2, 60000, false), 0x7b);
  EXPECT_EQ(floatToNarrow(DType::kF8E5M2, 61440, false), 0x7c);
  EXPECT_EQ(floatToNarrow(DType::kF8E5M2, -INFINITY, false), 0xfc);
  EXPECT_EQ(floatToNarrow(DType::kF8E5M2, -INFINITY, true), 0xfb);
  EXPECT_EQ(floatToNarrow(DType::kF8E5M2FNUZ, INFINITY, true), 0x7f);
  EXPECT_EQ(floatToNarrow(DType::kF8E5M2FNUZ, INFINITY, false), 0x80);
  EXPECT_EQ(floatToNarrow(DType::kF8E4M3FNUZ, 248, false), 0x80);
  // float4 always saturates; NaN becomes -0.
  EXPECT_EQ(floatToNarrow(DType::kF4E2M1, 1e6, false), 0x7);
  EXPECT_EQ(floatToNarrow(DType::kF4E2M1, -INFINITY, false), 0xf);
  EXPECT_EQ(floatToNarrow(DType::kF4E2M1, NAN), 0x8);
  for (DType t : kFloat8) EXPECT_TRUE(std::isnan(narrowToFloat(t, floatToNarrow(t, NAN)))) << dtypeName(t);
}

TEST(FloatFormats, E8M0) {
  EXPECT_EQ(narrowToFloat(DType::kF8E8M0, 127), 1.f);
  EXPECT_EQ(narrowToFloat(DType::kF8E8M0, 0), std::ldexp(1.f, -127));
  EXPECT_TRUE(std::isnan(narrowToFloat(DType::kF8E8M0, 0xff)));
  EXPECT_EQ(floatToE8M0(1.1f, true, E8M0Round::kUp), 128);       // -> 2
  EXPECT_EQ(floatToE8M0(1.1f, true, E8M0Round::kDown), 127);     // -> 1
  EXPECT_EQ(floatToE8M0(1.4f, true, E8M0Round::kNearest), 127);  // below 1.5 -> 1
  EXPECT_EQ(floatToE8M0(1.5f, true, E8M0Round::kNearest), 128);  // 1.5 and up -> 2
  EXPECT_EQ(floatToE8M0(-4.f, true, E8M0Round::kUp), 129);       // no sign: |x|
  EXPECT_EQ(floatToE8M0(0.f, true, E8M0Round::kUp), 0);
  for (int c = 0; c < 255; ++c)  // every power of two maps to its own code
    for (E8M0Round m : {E8M0Round::kUp, E8M0Round::kDown, E8M0Round::kNearest})
      EXPECT_EQ(floatToE8M0(narrowToFloat(DType::kF8E8M0, static_cast<uint8_t>(c)), true, m), c);
  EXPECT_EQ(floatToE8M0(std::ldexp(1.25f, -127), true, E8M0Round::kUp), 1);  // a float32 subnormal
  EXPECT_EQ(floatToE8M0(std::ldexp(1.25f, -127), true, E8M0Round::kNearest), 0);
  EXPECT_EQ(floatToE8M0(INFINITY, true, E8M0Round::kUp), 0xff);
  float big = std::ldexp(1.5f, 127);
  EXPECT_EQ(floatToE8M0(big, true, E8M0Round::kUp), 0xfe);   // saturates at 2^127
  EXPECT_EQ(floatToE8M0(big, false, E8M0Round::kUp), 0xff);  // overflows to NaN
}

TEST(FloatFormats, TensorSetAndGet) {
  Tensor t = Tensor::zeros(DType::kI4, {4});
  t.setDouble(0, -9.0);  // truncated and wrapped to 4 bits: -9 -> 7
  t.setDouble(1, 8.5);   // 8 -> -8
  t.setInt(2, 17);       // 17 -> 1
  t.setInt(3, -1);
  EXPECT_EQ(t.toInts(), (std::vector<int64_t>{7, -8, 1, -1}));
  Tensor u = Tensor::zeros(DType::kU4, {2});
  u.setDouble(0, -1.0);  // -> 15
  u.setInt(1, 16);       // -> 0
  EXPECT_EQ(u.toInts(), (std::vector<int64_t>{15, 0}));
  Tensor w = Tensor::zeros(DType::kU64, {2});
  w.setInt(0, -1);  // all ones
  w.setDouble(1, 1e19);
  EXPECT_EQ(w.data<uint64_t>()[0], ~uint64_t(0));
  EXPECT_EQ(w.data<uint64_t>()[1], uint64_t(10000000000000000000ull));
  EXPECT_EQ(w.getDouble(0), 18446744073709551615.0);
  Tensor f = Tensor::zeros(DType::kF8E5M2, {1});
  f.setDouble(0, 1e9);  // saturates, as Cast's default
  EXPECT_EQ(f.getDouble(0), 57344.0);
}

}  // namespace
}  // namespace pcc
