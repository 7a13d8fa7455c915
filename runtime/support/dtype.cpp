#include "runtime/support/dtype.h"

#include <algorithm>
#include <limits>

namespace pcc {

size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: case DType::kU32: return 4;
    case DType::kF64: case DType::kI64: case DType::kU64: return 8;
    case DType::kF16: case DType::kBF16: case DType::kI16: case DType::kU16: return 2;
    case DType::kI8: case DType::kU8: case DType::kBool: return 1;
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
    case DType::kF8E8M0: case DType::kF4E2M1: case DType::kI4: case DType::kU4: return 1;
    case DType::kUndefined: return 0;
  }
  return 0;
}

bool isSubByte(DType t) { return t == DType::kI4 || t == DType::kU4 || t == DType::kF4E2M1; }

std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kI16: return "i16";
    case DType::kU16: return "u16";
    case DType::kI32: return "i32";
    case DType::kU32: return "u32";
    case DType::kI64: return "i64";
    case DType::kU64: return "u64";
    case DType::kBool: return "bool";
    case DType::kF8E4M3FN: return "f8e4m3fn";
    case DType::kF8E4M3FNUZ: return "f8e4m3fnuz";
    case DType::kF8E5M2: return "f8e5m2";
    case DType::kF8E5M2FNUZ: return "f8e5m2fnuz";
    case DType::kF8E8M0: return "f8e8m0";
    case DType::kF4E2M1: return "f4e2m1";
    case DType::kI4: return "i4";
    case DType::kU4: return "u4";
    case DType::kUndefined: return "undef";
  }
  return "undef";
}

std::optional<DType> dtypeFromName(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtypeName(t) == name) return t;
  return std::nullopt;
}

std::optional<DType> dtypeFromOnnx(int32_t code) {
  for (DType t : kAllDTypes)
    if (static_cast<int32_t>(t) == code) return t;
  return std::nullopt;
}

bool isNarrowFloat(DType t) {
  switch (t) {
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
    case DType::kF8E8M0: case DType::kF4E2M1: return true;
    default: return false;
  }
}

bool isFloat(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16 ||
         isNarrowFloat(t);
}

bool isUnsigned(DType t) {
  return t == DType::kU8 || t == DType::kU16 || t == DType::kU32 || t == DType::kU64 ||
         t == DType::kU4;
}

bool isInteger(DType t) {
  return isUnsigned(t) || t == DType::kI8 || t == DType::kI16 || t == DType::kI32 ||
         t == DType::kI64 || t == DType::kI4;
}

int64_t numElements(const Dims& d) {
  int64_t n = 1;
  bool saturated = false;
  for (int64_t x : d) {
    if (x < 0) return -1;
    if (x == 0) return 0;
    if (saturated || __builtin_mul_overflow(n, x, &n)) saturated = true;
  }
  return saturated ? std::numeric_limits<int64_t>::max() : n;
}

std::optional<uint64_t> checkedNumElements(const Dims& d, uint64_t limit) {
  uint64_t n = 1;
  bool over = false;
  for (int64_t x : d) {
    if (x < 0) return std::nullopt;
    if (x == 0) return 0;
    if (over || __builtin_mul_overflow(n, static_cast<uint64_t>(x), &n) || n > limit) over = true;
  }
  if (over) return std::nullopt;
  return n;
}

Status checkTensorSize(const TensorType& t) {
  for (int64_t x : t.shape)
    if (x < 0) return invalidInput(t.str(), " has a negative dimension");
  uint64_t esize = std::max<uint64_t>(dtypeSize(t.dtype), 1);
  auto n = checkedNumElements(t.shape, kMaxTensorBytes / esize);
  if (!n) return invalidInput(t.str(), " is larger than ", kMaxTensorBytes >> 30, " GiB, the limit of one tensor");
  return Status::OK();
}

std::string dimsToString(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(d[i]);
  }
  return s + "]";
}

std::string TensorType::str() const { return std::string(dtypeName(dtype)) + dimsToString(shape); }

}  // namespace pcc
