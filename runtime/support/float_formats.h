// Narrow floating-point formats held as one code per byte: the four float8
// formats of ONNX (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), the scale format
// float8 e8m0 and float4 e2m1. Kernels widen them to float32 to compute.
#pragma once

#include <cstdint>

#include "runtime/support/dtype.h"

namespace pcc {

/// \returns the value of code `bits` of narrow float type `t` (NaN for the
/// NaN codes, +-inf for e5m2's infinities). `t` must satisfy isNarrowFloat.
float narrowToFloat(DType t, uint8_t bits);

/// Rounding of float8 e8m0, which keeps only an exponent (ONNX Cast round_mode).
enum class E8M0Round { kUp, kDown, kNearest };

/// \returns the code of `v` in narrow float type `t`, rounded to nearest with
/// ties to even (e8m0: rounded up, as ONNX Cast's default round_mode). With
/// `saturate` (ONNX Cast's default), infinities and values beyond the largest
/// finite value become that value, keeping their sign; without it they become
/// infinity (e5m2) or NaN (the formats without infinity). float4 e2m1 has
/// neither and always saturates; its NaN becomes -0, as ONNX's reference does.
/// The fnuz formats have no negative zero: -0 becomes +0.
uint8_t floatToNarrow(DType t, double v, bool saturate = true);

/// \returns the float8 e8m0 code of |v| (e8m0 has no sign) under `mode`; a
/// power of two in range maps to its own code. Rounding looks at the linear
/// fraction: up takes any fraction up, nearest from 1.5 * 2^e on. Zero maps to
/// the smallest code (2^-127), NaN and infinity to the NaN code; `saturate`
/// keeps rounding from overflowing past 2^127.
uint8_t floatToE8M0(float v, bool saturate, E8M0Round mode);

}  // namespace pcc
