// The weight format of MatMulNBits (onnxruntime's, docs/precision.md#weight-only-quantization):
// a weight W [K, N] stored per output column n as ceil(K / block_size)
// blocks of block_size values of `bits` (4 or 8) bits, unsigned, packed low
// bits first (two 4-bit values per byte, the even one in the low nibble);
// each block has a scale and a zero point, and W[k, n] = (q - zero) * scale.
// The zero points, when given, are packed the same way per column; absent,
// each is 2^(bits-1) (the format of a symmetric quantization).
#pragma once

#include <cstdint>

#include "runtime/schema/linalg.h"
#include "runtime/support/tensor.h"

namespace pcc::ops {

using linalg_schema::NBitsShape;

/// Writes W [K, N] (row-major float32) dequantized from `b` (uint8 [N,
/// blocks, blobBytes]), `scales` ([N, blocks], any float type) and `zeros`
/// (uint8 [N, zeroBytes], or null) into `w`.
void dequantizeNBits(const NBitsShape& s, const Tensor& b, const Tensor& scales, const Tensor* zeros, float* w);

/// Quantizes W [K, N] (row-major float32) symmetrically: per column and block,
/// scale = max|w| / (2^(bits-1) - 1), q = round(w / scale) clamped to
/// [-2^(bits-1), 2^(bits-1) - 1], stored as q + 2^(bits-1) (no zero points).
/// A block of zeros gets scale 1. \returns B (uint8 [N, blocks, blobBytes])
/// and its scales (float32 [N, blocks]).
std::pair<Tensor, Tensor> quantizeNBits(const NBitsShape& s, const float* w);

}  // namespace pcc::ops
