// The one tensor slicer: copies a rectangular block out of a tensor. Used to
// give each rank its block of a weight (passes/partition/lower.cpp) and its
// rows of an input (sliceAlong, runtime/tensor_slice.h).
#pragma once

#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// \returns a new owning tensor holding the block of `t` that starts at
/// `start` and has extents `extent` (one entry per dimension), or an
/// invalid-input error when the block is not inside `t`.
StatusOr<Tensor> sliceBlock(const Tensor& t, const Dims& start, const Dims& extent);

}  // namespace pcc
