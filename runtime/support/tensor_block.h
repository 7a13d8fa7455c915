// The one tensor slicer: copies a rectangular block out of a tensor. Used to
// give each rank its block of a weight (passes/partition/lower.cpp) and its
// rows of an input (sliceAlong, runtime/tensor_slice.h). Also the slicing and
// stacking of Scan and Loop (the evaluator and the runtime's regions).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "runtime/support/float_convert.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// \returns a new owning tensor holding the block of `t` that starts at
/// `start` and has extents `extent` (one entry per dimension), or an
/// invalid-input error when the block is not inside `t`.
StatusOr<Tensor> sliceBlock(const Tensor& t, const Dims& start, const Dims& extent);

/// A rectangular block of a tensor, described but not copied: the piece of a
/// weight a rank holds, which the plan writer streams from the source (often a
/// memory-mapped external-data file) without reading it at plan time.
struct TensorBlock {
  Tensor source;
  Dims start;   ///< first index along each dimension
  Dims extent;  ///< extent along each dimension
  /// The element type the block is stored as: kUndefined for the source's;
  /// else a float type (f32, f16, bf16) the source's floats are converted to,
  /// rounding to nearest even, when the block is read (readBlock) or written
  /// (forEachStoredRun): a weight converted by --precision is not read at
  /// plan time either.
  DType as = DType::kUndefined;

  DType dtype() const { return as == DType::kUndefined ? source.dtype() : as; }
  /// \returns the block's type: its stored dtype, `extent`.
  TensorType type() const { return {dtype(), extent}; }
  size_t nbytes() const { return static_cast<size_t>(numElements(extent)) * dtypeSize(dtype()); }
  /// \returns whether reading the block converts its elements.
  bool converts() const { return as != DType::kUndefined && as != source.dtype(); }
};

/// \returns the block of `t` at `start` of extents `extent`, or an
/// invalid-input error when it is not inside `t` (the check sliceBlock makes).
StatusOr<TensorBlock> makeBlock(const Tensor& t, const Dims& start, const Dims& extent);

/// Calls `fn(data, nbytes)` for each contiguous run of bytes of `b` in the
/// source, in row-major order of the block: together they are exactly the
/// bytes sliceBlock would copy, in the same order. The innermost dimensions
/// the block takes whole form one run. Touches no byte itself.
void forEachRun(const TensorBlock& b, const std::function<void(const void* data, size_t nbytes)>& fn);

/// Calls `fn(data, nbytes)` for consecutive pieces of the bytes of `b` as
/// stored: forEachRun's runs, or, when `b` converts, each run converted in
/// pieces of at most 1 MiB (`data` then points into a buffer valid during the
/// call). `source` is told the source bytes each piece came from.
void forEachStoredRun(const TensorBlock& b,
                      const std::function<void(const void* data, size_t nbytes, const void* source, size_t sourceBytes)>& fn);

/// \returns a new tensor holding block `b` as stored (sliceBlock, converted
/// when `b` converts).
Tensor readBlock(const TensorBlock& b);

/// \returns a new tensor holding index `i` of `x` along `axis`, that dimension
/// removed (the caller checks axis < rank and 0 <= i < extent).
Tensor takeAlong(const Tensor& x, size_t axis, int64_t i);

/// \returns `parts` (each of type `partType`) stacked along a new dimension
/// `axis` (0..rank of partType) of extent parts.size().
Tensor stackAlong(const std::vector<Tensor>& parts, const TensorType& partType, size_t axis);

}  // namespace pcc
