// Tensor: a dtype, a shape and a buffer. The buffer is shared and immutable in
// spirit: a Tensor may be a view into an mmapped weight file, which is never
// copied; kernels write only into tensors they allocated.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/support/dtype.h"

namespace pcc {

class Tensor {
 public:
  Tensor() = default;
  /// \returns a zero-filled tensor that owns its buffer.
  static Tensor zeros(DType dtype, Dims shape);
  static Tensor zeros(const TensorType& t) { return zeros(t.dtype, t.shape); }
  /// \returns a tensor that views `data` (nbytes must match) and keeps `owner` alive.
  static Tensor view(DType dtype, Dims shape, const void* data, std::shared_ptr<const void> owner);
  /// \returns a view as view() makes, marked as lying in a read-only file
  /// mapping (MappedFile): a writer that streams it may release the pages it
  /// has read (releaseMappedPages) to keep its memory bounded.
  static Tensor mappedView(DType dtype, Dims shape, const void* data, std::shared_ptr<const void> mapping) {
    Tensor t = view(dtype, std::move(shape), data, std::move(mapping));
    t.mapped_ = true;
    return t;
  }
  /// \returns an owning tensor holding a copy of `values`.
  template <typename T>
  static Tensor fromVector(DType dtype, Dims shape, const std::vector<T>& values) {
    Tensor t = zeros(dtype, std::move(shape));
    if (t.nbytes()) std::memcpy(t.mutableData(), values.data(), t.nbytes());  // an empty vector's data() may be null
    return t;
  }
  static Tensor scalarI64(int64_t v) { return fromVector<int64_t>(DType::kI64, {}, {v}); }
  static Tensor scalarF32(float v) { return fromVector<float>(DType::kF32, {}, {v}); }

  bool defined() const { return dtype_ != DType::kUndefined; }
  DType dtype() const { return dtype_; }
  const Dims& shape() const { return shape_; }
  TensorType type() const { return {dtype_, shape_}; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype_); }

  const void* raw() const { return data_; }
  /// \returns whether the data lies in a read-only file mapping (mappedView).
  bool isMapped() const { return mapped_; }
  /// Writable access; only valid on tensors created by zeros()/fromVector()/clone().
  void* mutableData() { return const_cast<void*>(data_); }
  template <typename T> const T* data() const { return static_cast<const T*>(data_); }
  template <typename T> T* mutableData() { return static_cast<T*>(mutableData()); }

  /// \returns a deep copy that owns its buffer.
  /// Makes this tensor undefined, dropping its buffer but keeping its shape's
  /// storage, so that a tensor assigned to it later needs no allocation (the
  /// executor's per-instruction path).
  void reset() {
    dtype_ = DType::kUndefined;
    shape_.clear();
    owner_.reset();
    data_ = nullptr;
    mapped_ = false;
  }

  Tensor clone() const;
  /// \returns a tensor with the same buffer and a new shape of equal element count.
  Tensor reshaped(Dims shape) const;
  /// \returns element i converted to double / int64 (any dtype). A u64 above
  /// INT64_MAX comes back from getInt with its bits unchanged (negative).
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  /// Stores `v` as element i, converting as ONNX Cast does: floats round to
  /// nearest (narrow floats with Cast's saturation), integers take the value
  /// truncated toward zero and wrapped to their width (NaN and infinity give
  /// 0), bool is v != 0.
  void setDouble(int64_t i, double v);
  /// Stores integer `v` as element i: wrapped to an integer type's width, exact
  /// where the target can hold it.
  void setInt(int64_t i, int64_t v);
  /// \returns all elements as int64 (for shape-like tensors).
  std::vector<int64_t> toInts() const;
  /// \returns "f32[2,3] {1, 2, 3, ...}" with at most `maxElems` values.
  std::string str(int64_t maxElems = 8) const;

 private:
  DType dtype_ = DType::kUndefined;
  Dims shape_;
  std::shared_ptr<const void> owner_;
  const void* data_ = nullptr;
  bool mapped_ = false;
};

/// IEEE half / bfloat16 conversions (round to nearest even).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);

}  // namespace pcc
