// Slicing a tensor along one dimension and writing a slice back: how input
// slices are bound to ranks and output pieces are assembled.
#pragma once

#include <cstdint>

#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// \returns a new owning tensor holding rows [offset, offset+length) of `t`
/// along `dim`, or an invalid-input error when the range is outside `t`.
StatusOr<Tensor> sliceAlong(const Tensor& t, int dim, int64_t offset, int64_t length);

/// Copies `piece` into rows [offset, offset + piece extent) of `dst` along
/// `dim`; `dst` must own its buffer. \returns an invalid-input error when the
/// types or the range do not fit.
/// Copies rows [offset, offset + dst extent) of `src` along `dim` into `dst`,
/// a writable tensor of the slice's type (a staging buffer reused per batch).
/// \returns an invalid-input error when the types or the range do not fit.
Status copyAlong(const Tensor& src, int dim, int64_t offset, Tensor& dst);

Status insertAlong(Tensor& dst, const Tensor& piece, int dim, int64_t offset);

}  // namespace pcc
