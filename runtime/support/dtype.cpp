#include "runtime/support/dtype.h"

namespace pcc {

size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kI8: case DType::kU8: case DType::kBool: return 1;
    case DType::kUndefined: return 0;
  }
  return 0;
}

std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kBool: return "bool";
    case DType::kUndefined: return "undef";
  }
  return "undef";
}

std::optional<DType> dtypeFromName(std::string_view name) {
  for (DType t : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8, DType::kU8,
                  DType::kI32, DType::kI64, DType::kBool})
    if (dtypeName(t) == name) return t;
  return std::nullopt;
}

std::optional<DType> dtypeFromOnnx(int32_t code) {
  switch (code) {
    case 1: case 2: case 3: case 6: case 7: case 9: case 10: case 11: case 16:
      return static_cast<DType>(code);
    default: return std::nullopt;
  }
}

bool isFloat(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16;
}

int64_t numElements(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
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
