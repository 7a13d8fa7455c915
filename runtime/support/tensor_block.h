// The one tensor slicer: copies a rectangular block out of a tensor. Used to
// give each rank its block of a weight (passes/partition/lower.cpp) and its
// rows of an input (sliceAlong, runtime/tensor_slice.h). Also the slicing and
// stacking of Scan and Loop (the evaluator and the runtime's regions).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

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

  /// \returns the block's type: the source's dtype, `extent`.
  TensorType type() const { return {source.dtype(), extent}; }
  size_t nbytes() const { return static_cast<size_t>(numElements(extent)) * dtypeSize(source.dtype()); }
};

/// \returns the block of `t` at `start` of extents `extent`, or an
/// invalid-input error when it is not inside `t` (the check sliceBlock makes).
StatusOr<TensorBlock> makeBlock(const Tensor& t, const Dims& start, const Dims& extent);

/// Calls `fn(data, nbytes)` for each contiguous run of bytes of `b` in the
/// source, in row-major order of the block: together they are exactly the
/// bytes sliceBlock would copy, in the same order. The innermost dimensions
/// the block takes whole form one run. Touches no byte itself.
void forEachRun(const TensorBlock& b, const std::function<void(const void* data, size_t nbytes)>& fn);

/// \returns a new tensor holding index `i` of `x` along `axis`, that dimension
/// removed (the caller checks axis < rank and 0 <= i < extent).
Tensor takeAlong(const Tensor& x, size_t axis, int64_t i);

/// \returns `parts` (each of type `partType`) stacked along a new dimension
/// `axis` (0..rank of partType) of extent parts.size().
Tensor stackAlong(const std::vector<Tensor>& parts, const TensorType& partType, size_t axis);

}  // namespace pcc
