#include "runtime/support/tensor.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <new>
#include <sstream>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "runtime/support/float_convert.h"
#include "runtime/support/float_formats.h"
#include "runtime/support/memory_account.h"

namespace pcc {

namespace {
// 64-byte aligned, zeroed buffer shared by its tensors.
std::shared_ptr<const void> allocAligned(size_t nbytes) {
  size_t n = (nbytes + 63) / 64 * 64;
  if (n == 0) n = 64;
  void* p = std::aligned_alloc(64, n);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, n);
  // Charged to the allocating thread's memory account, if it has one
  // (runtime/support/memory_account.h), and taken off when the last tensor goes.
  if (std::shared_ptr<MemoryAccount> account = chargeAllocation(static_cast<int64_t>(n)))
    return std::shared_ptr<const void>(p, [account, n](const void* q) {
      std::free(const_cast<void*>(q));
      account->sub(static_cast<int64_t>(n));
    });
  return std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
}
}  // namespace

Tensor Tensor::zeros(DType dtype, Dims shape) {
  // Types are checked against kMaxTensorBytes where they are read or inferred;
  // one that was not cannot be allocated (and its byte size may not even fit
  // size_t), which the tools report as an allocation failure.
  if (!checkedNumElements(shape, kMaxTensorBytes / std::max<size_t>(dtypeSize(dtype), 1))) throw std::bad_alloc();
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = allocAligned(t.nbytes());
  t.data_ = t.owner_.get();
  return t;
}

Tensor Tensor::view(DType dtype, Dims shape, const void* data, std::shared_ptr<const void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = std::move(owner);
  t.data_ = data;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = zeros(dtype_, shape_);
  if (nbytes()) std::memcpy(t.mutableData(), data_, nbytes());
  return t;
}

Tensor Tensor::reshaped(Dims shape) const {
  assert(numElements(shape) == numel());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

double Tensor::getDouble(int64_t i) const {
  switch (dtype_) {
    case DType::kF32: return data<float>()[i];
    case DType::kF64: return data<double>()[i];
    case DType::kF16: return halfToFloat(data<uint16_t>()[i]);
    case DType::kBF16: return bf16ToFloat(data<uint16_t>()[i]);
    case DType::kI8: case DType::kI4: return data<int8_t>()[i];
    case DType::kU8: case DType::kU4: return data<uint8_t>()[i];
    case DType::kI16: return data<int16_t>()[i];
    case DType::kU16: return data<uint16_t>()[i];
    case DType::kI32: return data<int32_t>()[i];
    case DType::kU32: return data<uint32_t>()[i];
    case DType::kI64: return static_cast<double>(data<int64_t>()[i]);
    case DType::kU64: return static_cast<double>(data<uint64_t>()[i]);
    case DType::kBool: return data<uint8_t>()[i] ? 1.0 : 0.0;
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
    case DType::kF8E8M0: case DType::kF4E2M1: return narrowToFloat(dtype_, data<uint8_t>()[i]);
    case DType::kUndefined: break;
  }
  return 0;
}

int64_t Tensor::getInt(int64_t i) const {
  switch (dtype_) {
    case DType::kI64: return data<int64_t>()[i];
    case DType::kU64: return static_cast<int64_t>(data<uint64_t>()[i]);
    case DType::kI32: return data<int32_t>()[i];
    case DType::kU32: return data<uint32_t>()[i];
    case DType::kI16: return data<int16_t>()[i];
    case DType::kU16: return data<uint16_t>()[i];
    case DType::kI8: case DType::kI4: return data<int8_t>()[i];
    case DType::kU8: case DType::kU4: case DType::kBool: return data<uint8_t>()[i];
    default: return static_cast<int64_t>(getDouble(i));
  }
}

namespace {
/// \returns `v` truncated toward zero as an int64 bit pattern: values beyond
/// int64 wrap through uint64 (so 2^64-1 stays all ones), NaN and inf give 0.
int64_t truncToInt(double v) {
  if (!std::isfinite(v)) return 0;
  v = std::trunc(v);
  if (v >= 0x1p63 && v < 0x1p64) return static_cast<int64_t>(static_cast<uint64_t>(v));
  if (v >= -0x1p63 && v < 0x1p63) return static_cast<int64_t>(v);
  return static_cast<int64_t>(static_cast<uint64_t>(std::fmod(v, 0x1p64) + (v < 0 ? 0x1p64 : 0)));
}
/// \returns the low 4 bits of v, sign-extended when `isSigned`.
int8_t wrap4(int64_t v, bool isSigned) {
  int v4 = static_cast<int>(v & 0xf);
  return static_cast<int8_t>(isSigned && v4 >= 8 ? v4 - 16 : v4);
}
}  // namespace

void Tensor::setDouble(int64_t i, double v) {
  void* p = mutableData();
  switch (dtype_) {
    case DType::kF32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::kF64: static_cast<double*>(p)[i] = v; return;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = floatToHalf(static_cast<float>(v)); return;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = floatToBf16(static_cast<float>(v)); return;
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
    case DType::kF8E8M0: case DType::kF4E2M1:
      static_cast<uint8_t*>(p)[i] = floatToNarrow(dtype_, v);
      return;
    case DType::kBool: static_cast<uint8_t*>(p)[i] = v != 0.0; return;
    case DType::kUndefined: return;
    default: setInt(i, truncToInt(v)); return;
  }
}

void Tensor::setInt(int64_t i, int64_t v) {
  void* p = mutableData();
  switch (dtype_) {
    case DType::kI8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case DType::kU8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case DType::kI16: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); return;
    case DType::kU16: static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); return;
    case DType::kI32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::kU32: static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); return;
    case DType::kI64: static_cast<int64_t*>(p)[i] = v; return;
    case DType::kU64: static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); return;
    case DType::kI4: static_cast<int8_t*>(p)[i] = wrap4(v, true); return;
    case DType::kU4: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(wrap4(v, false)); return;
    case DType::kBool: static_cast<uint8_t*>(p)[i] = v != 0; return;
    case DType::kUndefined: return;
    default: setDouble(i, static_cast<double>(v)); return;
  }
}

std::vector<int64_t> Tensor::toInts() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[i] = getInt(i);
  return v;
}

std::string Tensor::str(int64_t maxElems) const {
  std::ostringstream os;
  os << type().str() << " {";
  for (int64_t i = 0; i < numel() && i < maxElems; ++i) os << (i ? ", " : "") << getDouble(i);
  if (numel() > maxElems) os << ", ...";
  os << "}";
  return os.str();
}

float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do { ++e; man <<= 1; } while (!(man & 0x400));
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (man ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | static_cast<uint32_t>(exp) << 10 | man >> 13;
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

bool convertibleFloats(DType from, DType to) {
  auto ok = [](DType t) { return t == DType::kF64 || t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; };
  return ok(from) && ok(to);
}

namespace {

float loadFloat(const void* src, DType t, size_t i) {
  switch (t) {
    case DType::kF64: return static_cast<float>(static_cast<const double*>(src)[i]);
    case DType::kF16: return halfToFloat(static_cast<const uint16_t*>(src)[i]);
    case DType::kBF16: return bf16ToFloat(static_cast<const uint16_t*>(src)[i]);
    default: return static_cast<const float*>(src)[i];
  }
}

#if defined(__x86_64__)
// float16 <-> float32 eight at a time with the F16C instructions (IEEE
// conversions, rounding to nearest even), where the processor has them.
__attribute__((target("f16c,avx"))) void halfToFloatF16c(const uint16_t* h, float* f, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) f[i] = halfToFloat(h[i]);
}

__attribute__((target("f16c,avx"))) void floatToHalfF16c(const float* f, uint16_t* h, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) h[i] = floatToHalf(f[i]);
}

/// \returns whether the processor has F16C and AVX and the system saves the
/// AVX registers (CPUID leaf 1: ECX bits 27 OSXSAVE, 28 AVX, 29 F16C; XCR0
/// bits 1 and 2).
bool hasF16c() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    const unsigned need = (1u << 27) | (1u << 28) | (1u << 29);
    if ((c & need) != need) return false;
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6u) == 6u;
  }();
  return has;
}
#else
bool hasF16c() { return false; }
void halfToFloatF16c(const uint16_t*, float*, size_t) {}
void floatToHalfF16c(const float*, uint16_t*, size_t) {}
#endif

}  // namespace

void convertFloats(const void* src, DType from, void* dst, DType to, size_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * dtypeSize(from));
    return;
  }
  if (to == DType::kF64) {
    double* d = static_cast<double*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = loadFloat(src, from, i);
    return;
  }
  if (from == DType::kF64) {  // one rounding, straight from double
    const double* s = static_cast<const double*>(src);
    Tensor view = Tensor::view(to, {static_cast<int64_t>(n)}, dst, nullptr);
    for (size_t i = 0; i < n; ++i) view.setDouble(static_cast<int64_t>(i), s[i]);
    return;
  }
  // One loop per pair, the element conversion inlined (this file defines it).
  const uint16_t* h = static_cast<const uint16_t*>(src);
  const float* f = static_cast<const float*>(src);
  uint16_t* oh = static_cast<uint16_t*>(dst);
  float* of = static_cast<float*>(dst);
  if (from == DType::kF32 && to == DType::kF16 && hasF16c()) {
    floatToHalfF16c(f, oh, n);
  } else if (from == DType::kF16 && to == DType::kF32 && hasF16c()) {
    halfToFloatF16c(h, of, n);
  } else if (from == DType::kF32 && to == DType::kF16) {
    for (size_t i = 0; i < n; ++i) oh[i] = floatToHalf(f[i]);
  } else if (from == DType::kF32 && to == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) oh[i] = floatToBf16(f[i]);
  } else if (from == DType::kF16 && to == DType::kF32) {
    for (size_t i = 0; i < n; ++i) of[i] = halfToFloat(h[i]);
  } else if (from == DType::kBF16 && to == DType::kF32) {
    for (size_t i = 0; i < n; ++i) of[i] = bf16ToFloat(h[i]);
  } else if (to == DType::kF16) {  // bf16 -> f16
    for (size_t i = 0; i < n; ++i) oh[i] = floatToHalf(bf16ToFloat(h[i]));
  } else {  // f16 -> bf16
    for (size_t i = 0; i < n; ++i) oh[i] = floatToBf16(halfToFloat(h[i]));
  }
}

Tensor convertFloats(const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  Tensor out = Tensor::zeros(to, t.shape());
  convertFloats(t.raw(), t.dtype(), out.mutableData(), to, static_cast<size_t>(t.numel()));
  return out;
}

}  // namespace pcc
