#include "runtime/support/float_formats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace pcc {
namespace {

/// One small IEEE-like format: 1 sign bit, `expBits`, `manBits`.
struct Format {
  int expBits = 0, manBits = 0, bias = 0;
  bool fnuz = false;      ///< NaN is the code 1000...0; no infinity, no -0
  bool hasInf = false;    ///< all-ones exponent, zero mantissa is infinity (e5m2)
  bool nanAllOnes = false;  ///< exponent and mantissa all ones is NaN (e4m3fn)
  uint8_t nanCode = 0;    ///< positive NaN code (fnuz: 0x80); unused for e2m1
  uint8_t infCode = 0;    ///< positive infinity code (e5m2 only)

  int bits() const { return 1 + expBits + manBits; }
  uint8_t signBit() const { return static_cast<uint8_t>(1u << (expBits + manBits)); }
};

const Format& formatOf(DType t) {
  static const Format e4m3fn{4, 3, 7, false, false, true, 0x7f, 0};
  static const Format e4m3fnuz{4, 3, 8, true, false, false, 0x80, 0};
  static const Format e5m2{5, 2, 15, false, true, false, 0x7e, 0x7c};
  static const Format e5m2fnuz{5, 2, 16, true, false, false, 0x80, 0};
  static const Format e2m1{2, 1, 1, false, false, false, 0, 0};
  switch (t) {
    case DType::kF8E4M3FN: return e4m3fn;
    case DType::kF8E4M3FNUZ: return e4m3fnuz;
    case DType::kF8E5M2: return e5m2;
    case DType::kF8E5M2FNUZ: return e5m2fnuz;
    default: return e2m1;
  }
}

/// \returns the value of a code, or NaN/inf for special codes.
double decode(const Format& f, uint8_t code) {
  uint32_t manMask = (1u << f.manBits) - 1, expMask = (1u << f.expBits) - 1;
  bool neg = code & f.signBit();
  uint32_t exp = (code >> f.manBits) & expMask, man = code & manMask;
  if (f.fnuz && code == 0x80) return std::numeric_limits<double>::quiet_NaN();
  if (f.nanAllOnes && exp == expMask && man == manMask) return std::numeric_limits<double>::quiet_NaN();
  if (f.hasInf && exp == expMask)
    return man ? std::numeric_limits<double>::quiet_NaN() : (neg ? -INFINITY : INFINITY);
  double v = exp == 0 ? std::ldexp(static_cast<double>(man), 1 - f.bias - f.manBits)
                      : std::ldexp(1.0 + std::ldexp(static_cast<double>(man), -f.manBits),
                                   static_cast<int>(exp) - f.bias);
  return neg ? -v : v;
}

/// The finite non-negative values of a format in code order (which is value
/// order), followed by one value past the largest: what the largest would be
/// followed by with an unbounded exponent. Rounding to that one is overflow.
struct Magnitudes {
  std::vector<double> v;
  size_t finite = 0;  ///< codes 0 .. finite-1 are finite
};

Magnitudes buildMagnitudes(const Format& f) {
  Magnitudes m;
  for (uint32_t code = 0; code < f.signBit(); ++code) {
    double x = decode(f, static_cast<uint8_t>(code));
    if (!std::isfinite(x)) break;
    m.v.push_back(x);
  }
  m.finite = m.v.size();
  double ulp = m.v[m.finite - 1] - m.v[m.finite - 2];
  m.v.push_back(m.v[m.finite - 1] + ulp);
  return m;
}

const Magnitudes& magnitudesOf(DType t) {
  static const std::array<Magnitudes, 5> tables = {
      buildMagnitudes(formatOf(DType::kF8E4M3FN)), buildMagnitudes(formatOf(DType::kF8E4M3FNUZ)),
      buildMagnitudes(formatOf(DType::kF8E5M2)), buildMagnitudes(formatOf(DType::kF8E5M2FNUZ)),
      buildMagnitudes(formatOf(DType::kF4E2M1))};
  switch (t) {
    case DType::kF8E4M3FN: return tables[0];
    case DType::kF8E4M3FNUZ: return tables[1];
    case DType::kF8E5M2: return tables[2];
    case DType::kF8E5M2FNUZ: return tables[3];
    default: return tables[4];
  }
}

}  // namespace

float narrowToFloat(DType t, uint8_t bits) {
  if (t == DType::kF8E8M0)
    return bits == 0xff ? std::numeric_limits<float>::quiet_NaN()
                        : std::ldexp(1.0f, static_cast<int>(bits) - 127);
  return static_cast<float>(decode(formatOf(t), bits));
}

uint8_t floatToE8M0(float v, bool saturate, E8M0Round mode) {
  uint32_t x;
  std::memcpy(&x, &v, 4);
  uint32_t exp = (x >> 23) & 0xff, frac = x & 0x7fffff;
  if (exp == 0xff) return 0xff;
  if (exp == 0) {
    // Zero and float32 subnormals: below 2^-126, whose fraction reads as a
    // multiple of 2^-149. Code 0 is 2^-127 (fraction 0x400000) exactly.
    switch (mode) {
      case E8M0Round::kUp: return frac > 0x400000 ? 1 : 0;
      case E8M0Round::kDown: return 0;
      case E8M0Round::kNearest: return frac >= 0x600000 ? 1 : 0;
    }
  }
  bool up = false;
  if (mode == E8M0Round::kUp) {
    up = frac != 0;
  } else if (mode == E8M0Round::kNearest) {
    // On the linear fraction: 1.5 * 2^e and above goes up to 2^(e+1).
    up = frac & 0x400000;
  }
  if (up && saturate && exp == 0xfe) up = false;
  return static_cast<uint8_t>(std::min<uint32_t>(exp + (up ? 1 : 0), 0xff));
}

uint8_t floatToNarrow(DType t, double v, bool saturate) {
  if (t == DType::kF8E8M0) return floatToE8M0(static_cast<float>(v), saturate, E8M0Round::kUp);
  const Format& f = formatOf(t);
  const Magnitudes& m = magnitudesOf(t);
  bool e2m1 = t == DType::kF4E2M1;
  bool neg = std::signbit(v);
  uint8_t sign = neg ? f.signBit() : 0;
  if (std::isnan(v)) return e2m1 ? f.signBit() : f.fnuz ? f.nanCode : static_cast<uint8_t>(f.nanCode | sign);
  double a = std::fabs(v);
  uint8_t maxCode = static_cast<uint8_t>(m.finite - 1);
  auto overflow = [&]() -> uint8_t {
    if (saturate || e2m1) return static_cast<uint8_t>(maxCode | sign);
    if (f.hasInf) return static_cast<uint8_t>(f.infCode | sign);
    return f.fnuz ? f.nanCode : static_cast<uint8_t>(f.nanCode | sign);
  };
  if (std::isinf(a) || ((saturate || e2m1) && a > m.v[m.finite - 1])) return overflow();
  // Nearest of the magnitudes (the extra one past the largest included), ties
  // to the even code.
  size_t hi = static_cast<size_t>(std::upper_bound(m.v.begin(), m.v.end(), a) - m.v.begin());
  size_t code;
  if (hi == m.v.size()) {
    code = m.v.size() - 1;
  } else if (hi == 0) {
    code = 0;
  } else {
    size_t lo = hi - 1;
    double dl = a - m.v[lo], dh = m.v[hi] - a;
    code = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
  }
  if (code >= m.finite) return overflow();
  if (code == 0 && f.fnuz) return 0;  // no negative zero
  return static_cast<uint8_t>(code | sign);
}

}  // namespace pcc
