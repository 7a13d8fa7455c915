// Conversions between the float types (f64, f32, f16, bf16) of whole runs of
// elements: a --precision plan's weights as they are written, and the 16-bit
// operands the CPU kernels widen to float32.
#pragma once

#include <cstddef>

#include "runtime/support/tensor.h"

namespace pcc {

/// \returns whether convertFloats converts between `from` and `to`.
bool convertibleFloats(DType from, DType to);

/// Converts `n` elements at `src` of float type `from` to float type `to` at
/// `dst` (f64, f32, f16, bf16; rounding to nearest even, overflow to infinity
/// as IEEE conversion does).
void convertFloats(const void* src, DType from, void* dst, DType to, size_t n);

/// \returns `t` converted to float type `to` (a new tensor; `t` itself when
/// it has that type already).
Tensor convertFloats(const Tensor& t, DType to);

}  // namespace pcc
