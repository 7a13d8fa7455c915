#include "runtime/tensor_slice.h"

#include <cstring>

#include "runtime/support/tensor_block.h"

namespace pcc {

namespace {
/// Bytes of one row below `dim`, and the count of rows above it.
void geometry(const Dims& shape, int dim, DType dt, int64_t* outer, size_t* rowBytes) {
  *outer = 1;
  for (int i = 0; i < dim; ++i) *outer *= shape[i];
  int64_t inner = 1;
  for (size_t i = dim + 1; i < shape.size(); ++i) inner *= shape[i];
  *rowBytes = static_cast<size_t>(inner) * dtypeSize(dt);
}
}  // namespace

StatusOr<Tensor> sliceAlong(const Tensor& t, int dim, int64_t offset, int64_t length) {
  if (dim < 0 || dim >= t.rank())
    return invalidInput("slice dim ", dim, " is out of range for ", t.type().str());
  Dims start(t.rank(), 0), extent = t.shape();
  start[dim] = offset;
  extent[dim] = length;
  return sliceBlock(t, start, extent);
}

Status copyAlong(const Tensor& src, int dim, int64_t offset, Tensor& dst) {
  if (dim < 0 || dim >= src.rank() || dst.rank() != src.rank() || dst.dtype() != src.dtype())
    return invalidInput("cannot take ", dst.type().str(), " from ", src.type().str(), " along dim ", dim);
  for (int i = 0; i < src.rank(); ++i)
    if (i != dim && dst.shape()[i] != src.shape()[i])
      return invalidInput("cannot take ", dst.type().str(), " from ", src.type().str(), " along dim ", dim,
                          ": dim ", i, " differs");
  int64_t extent = src.shape()[dim], length = dst.shape()[dim];
  if (offset < 0 || offset + length > extent)
    return invalidInput("slice [", offset, ", ", offset + length, ") along dim ", dim, " is outside ",
                        src.type().str());
  int64_t outer;
  size_t row;
  geometry(src.shape(), dim, src.dtype(), &outer, &row);
  const uint8_t* in = static_cast<const uint8_t*>(src.raw());
  uint8_t* out = dst.mutableData<uint8_t>();
  for (int64_t o = 0; o < outer; ++o)
    if (length > 0 && row > 0) std::memcpy(out + o * length * row, in + (o * extent + offset) * row, length * row);
  return Status::OK();
}

Status insertAlong(Tensor& dst, const Tensor& piece, int dim, int64_t offset) {
  if (dim < 0 || dim >= dst.rank() || piece.rank() != dst.rank() || piece.dtype() != dst.dtype())
    return invalidInput("cannot place ", piece.type().str(), " into ", dst.type().str(),
                        " along dim ", dim);
  for (int i = 0; i < dst.rank(); ++i)
    if (i != dim && piece.shape()[i] != dst.shape()[i])
      return invalidInput("cannot place ", piece.type().str(), " into ", dst.type().str(),
                          " along dim ", dim, ": dim ", i, " differs");
  int64_t extent = dst.shape()[dim], length = piece.shape()[dim];
  if (offset < 0 || offset + length > extent)
    return invalidInput("piece ", piece.type().str(), " at offset ", offset, " along dim ", dim,
                        " overruns ", dst.type().str());
  int64_t outer;
  size_t row;
  geometry(dst.shape(), dim, dst.dtype(), &outer, &row);
  const uint8_t* src = static_cast<const uint8_t*>(piece.raw());
  uint8_t* out = dst.mutableData<uint8_t>();
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + (o * extent + offset) * row, src + o * length * row, length * row);
  return Status::OK();
}

}  // namespace pcc
