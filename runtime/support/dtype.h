// Element types shared by the IR, the plan format and the kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/support/status.h"

namespace pcc {

/// Element type of a tensor. The numeric values are ONNX's TensorProto.DataType
/// codes, so conversion to and from ONNX and the plan format is a cast.
enum class DType : int32_t {
  kUndefined = 0,
  kF32 = 1,
  kU8 = 2,
  kI8 = 3,
  kI32 = 6,
  kI64 = 7,
  kBool = 9,
  kF16 = 10,
  kF64 = 11,
  kBF16 = 16,
  // Integer types beyond the common ones.
  kU16 = 4,
  kI16 = 5,
  kU32 = 12,
  kU64 = 13,
  // Narrow storage types. Kernels compute on them through float32 (the floats)
  // or int8/uint8 (the 4-bit integers); only conversions, quantization and data
  // movement accept them.
  kF8E4M3FN = 17,
  kF8E4M3FNUZ = 18,
  kF8E5M2 = 19,
  kF8E5M2FNUZ = 20,
  kU4 = 21,   ///< held unpacked, one value (0..15) per byte; packed in ONNX files
  kI4 = 22,   ///< held unpacked, one value (-8..7) per byte; packed in ONNX files
  kF4E2M1 = 23,  ///< held unpacked, one code per byte; packed in ONNX files
  kF8E8M0 = 24,
};

/// Every dtype pcc has, in a fixed order (for tables and name lookup).
inline constexpr DType kAllDTypes[] = {
    DType::kF32,       DType::kF64,         DType::kF16,     DType::kBF16,        DType::kI8,
    DType::kU8,        DType::kI16,         DType::kU16,     DType::kI32,         DType::kU32,
    DType::kI64,       DType::kU64,         DType::kBool,    DType::kF8E4M3FN,    DType::kF8E4M3FNUZ,
    DType::kF8E5M2,    DType::kF8E5M2FNUZ,  DType::kF8E8M0,  DType::kF4E2M1,      DType::kI4,
    DType::kU4};

/// \returns the size of one element in memory in bytes (0 for kUndefined).
/// The 4-bit types take one byte each in memory (see isSubByte).
size_t dtypeSize(DType t);
/// \returns true for the 4-bit types, which ONNX files pack two to a byte.
bool isSubByte(DType t);
/// \returns the short printed name: f32, f64, f16, bf16, i8, u8, i16, u16, i32,
/// u32, i64, u64, bool, f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz, f8e8m0, f4e2m1,
/// i4, u4.
std::string_view dtypeName(DType t);
/// \returns the dtype with printed name `name`, or nullopt.
std::optional<DType> dtypeFromName(std::string_view name);
/// \returns the dtype for an ONNX TensorProto.DataType code, or nullopt if pcc has none.
std::optional<DType> dtypeFromOnnx(int32_t code);
/// \returns true for every floating-point type, narrow ones included.
bool isFloat(DType t);
/// \returns true for the float8 and float4 types (stored codes, computed in f32).
bool isNarrowFloat(DType t);
/// \returns true for the signed and unsigned integer types (not bool).
bool isInteger(DType t);
/// \returns true for the unsigned integer types.
bool isUnsigned(DType t);

using Dims = std::vector<int64_t>;

/// The largest tensor pcc accepts, in bytes (2^40 = 1 TiB): every tensor type
/// read from a file or inferred for a node is checked against it
/// (checkedNumElements, checkTensorSize in tensor.h) before anything is
/// allocated, so the element count and byte size of an accepted type never
/// overflow int64_t or size_t (docs/security.md).
inline constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 40;

/// \returns the product of the dims (1 for a scalar), saturated at INT64_MAX
/// when it overflows (0 when a dim is 0); a negative dim gives -1.
int64_t numElements(const Dims& d);
/// \returns the product of the dims when no dim is negative and the product
/// fits `limit`, else nullopt; computed without overflow.
std::optional<uint64_t> checkedNumElements(const Dims& d, uint64_t limit = kMaxTensorBytes);
/// \returns "[2,3,4]".
std::string dimsToString(const Dims& d);

/// The static type of a tensor: element type and shape.
struct TensorType {
  DType dtype = DType::kUndefined;
  Dims shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return numElements(shape); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype); }
  /// \returns "f32[8,512]".
  std::string str() const;
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};

/// \returns OK when `t` has no negative dim and its byte size is at most
/// kMaxTensorBytes, else an invalid-input error saying which (the message is
/// the type and the limit; callers add the node, op and file).
Status checkTensorSize(const TensorType& t);

}  // namespace pcc
