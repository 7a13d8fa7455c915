// The one tensor slicer: copies a rectangular block out of a tensor. Used to
// give each rank its block of a weight (passes/partition/lower.cpp) and its
// rows of an input (sliceAlong, runtime/tensor_slice.h). Also the slicing and
// stacking of Scan and Loop (the evaluator and the runtime's regions).
#pragma once

#include <vector>

#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// \returns a new owning tensor holding the block of `t` that starts at
/// `start` and has extents `extent` (one entry per dimension), or an
/// invalid-input error when the block is not inside `t`.
StatusOr<Tensor> sliceBlock(const Tensor& t, const Dims& start, const Dims& extent);

/// \returns a new tensor holding index `i` of `x` along `axis`, that dimension
/// removed (the caller checks axis < rank and 0 <= i < extent).
Tensor takeAlong(const Tensor& x, size_t axis, int64_t i);

/// \returns `parts` (each of type `partType`) stacked along a new dimension
/// `axis` (0..rank of partType) of extent parts.size().
Tensor stackAlong(const std::vector<Tensor>& parts, const TensorType& partType, size_t axis);

}  // namespace pcc
