#include "runtime/ops/nbits.h"

#include <algorithm>
#include <cmath>

namespace pcc::ops {

namespace {

/// \returns value `i` of a run of `bits`-bit unsigned values packed low bits first.
inline int unpacked(const uint8_t* p, int64_t i, int bits) {
  if (bits == 8) return p[i];
  const uint8_t byte = p[i / 2];
  return (i % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
}

}  // namespace

void dequantizeNBits(const NBitsShape& s, const Tensor& b, const Tensor& scales, const Tensor* zeros, float* w) {
  const uint8_t* q = b.data<uint8_t>();
  const uint8_t* z = zeros ? zeros->data<uint8_t>() : nullptr;
  const int mid = 1 << (s.bits - 1);
  for (int64_t n = 0; n < s.n; ++n) {
    const uint8_t* col = q + n * s.blocks * s.blobBytes;
    for (int64_t blk = 0; blk < s.blocks; ++blk) {
      const float scale = static_cast<float>(scales.getDouble(n * s.blocks + blk));
      const int zero = z ? unpacked(z + n * s.zeroBytes, blk, s.bits) : mid;
      const uint8_t* blob = col + blk * s.blobBytes;
      const int64_t k0 = blk * s.blockSize, k1 = std::min(s.k, k0 + s.blockSize);
      for (int64_t k = k0; k < k1; ++k)
        w[k * s.n + n] = static_cast<float>(unpacked(blob, k - k0, s.bits) - zero) * scale;
    }
  }
}

std::pair<Tensor, Tensor> quantizeNBits(const NBitsShape& s, const float* w) {
  Tensor b = Tensor::zeros(DType::kU8, {s.n, s.blocks, s.blobBytes});
  Tensor scales = Tensor::zeros(DType::kF32, {s.n, s.blocks});
  uint8_t* q = b.mutableData<uint8_t>();
  float* sc = scales.mutableData<float>();
  const int qmax = (1 << (s.bits - 1)) - 1, mid = 1 << (s.bits - 1);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t blk = 0; blk < s.blocks; ++blk) {
      const int64_t k0 = blk * s.blockSize, k1 = std::min(s.k, k0 + s.blockSize);
      float m = 0;
      for (int64_t k = k0; k < k1; ++k) m = std::max(m, std::fabs(w[k * s.n + n]));
      const float scale = m > 0 && std::isfinite(m) ? m / static_cast<float>(qmax) : 1.0f;
      sc[n * s.blocks + blk] = scale;
      uint8_t* blob = q + (n * s.blocks + blk) * s.blobBytes;
      for (int64_t k = k0; k < k1; ++k) {
        const float r = std::nearbyint(w[k * s.n + n] / scale);
        const int v = static_cast<int>(std::clamp(r, static_cast<float>(-qmax - 1), static_cast<float>(qmax))) + mid;
        const int64_t i = k - k0;
        if (s.bits == 8) blob[i] = static_cast<uint8_t>(v);
        else blob[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? v : v << 4);
      }
      // Padding past K in the last block holds the zero point's value (0 after dequantization).
      for (int64_t i = k1 - k0; i < s.blockSize; ++i) {
        if (s.bits == 8) blob[i] = static_cast<uint8_t>(mid);
        else blob[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? mid : mid << 4);
      }
    }
  return {b, scales};
}

}  // namespace pcc::ops
