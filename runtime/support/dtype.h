// Element types shared by the IR, the plan format and the kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
};

/// \returns the size of one element in bytes (0 for kUndefined).
size_t dtypeSize(DType t);
/// \returns the short printed name: f32, f64, f16, bf16, i8, u8, i32, i64, bool.
std::string_view dtypeName(DType t);
/// \returns the dtype with printed name `name`, or nullopt.
std::optional<DType> dtypeFromName(std::string_view name);
/// \returns the dtype for an ONNX TensorProto.DataType code, or nullopt if pcc has none.
std::optional<DType> dtypeFromOnnx(int32_t code);
bool isFloat(DType t);

using Dims = std::vector<int64_t>;

/// \returns the product of the dims (1 for a scalar).
int64_t numElements(const Dims& d);
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

}  // namespace pcc
