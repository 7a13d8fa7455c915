#include "runtime/support/tensor_block.h"

#include <algorithm>
#include <cstring>

namespace pcc {

namespace {

Status checkBlock(const Tensor& t, const Dims& start, const Dims& extent) {
  const Dims& g = t.shape();
  size_t r = g.size();
  if (start.size() != r || extent.size() != r)
    return invalidInput("block of rank ", start.size(), "/", extent.size(), " for ", t.type().str());
  for (size_t d = 0; d < r; ++d)
    if (start[d] < 0 || extent[d] < 0 || start[d] + extent[d] > g[d])
      return invalidInput("block [", start[d], ", ", start[d] + extent[d], ") along dim ", d, " is outside ",
                          t.type().str());
  return Status::OK();
}

}  // namespace

StatusOr<TensorBlock> makeBlock(const Tensor& t, const Dims& start, const Dims& extent) {
  RETURN_IF_ERROR(checkBlock(t, start, extent));
  return TensorBlock{t, start, extent};
}

void forEachRun(const TensorBlock& b, const std::function<void(const void* data, size_t nbytes)>& fn) {
  const Dims& g = b.source.shape();
  const Dims& start = b.start;
  const Dims& extent = b.extent;
  size_t r = g.size();
  int64_t total = numElements(extent);
  if (total == 0) return;
  // The innermost dimensions the block takes whole (after the last one it
  // cuts) are one run.
  size_t es = dtypeSize(b.source.dtype());
  size_t inner = r;  // dims [inner, r) are taken whole
  while (inner > 0 && start[inner - 1] == 0 && extent[inner - 1] == g[inner - 1]) --inner;
  int64_t run = 1;
  for (size_t d = inner; d < r; ++d) run *= g[d];
  size_t runDims = inner;  // dims [0, runDims) are iterated; the last of them contributes to the run
  if (runDims > 0) {
    run *= extent[runDims - 1];
    --runDims;
  }
  const char* src = static_cast<const char*>(b.source.raw());
  int64_t rows = total / run;
  Dims idx(runDims, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) {
      int64_t i = d < runDims ? idx[d] : 0;
      off = off * g[d] + start[d] + i;
    }
    fn(src + off * es, static_cast<size_t>(run) * es);
    for (int d = static_cast<int>(runDims) - 1; d >= 0; --d) {
      if (++idx[d] < extent[d]) break;
      idx[d] = 0;
    }
  }
}

StatusOr<Tensor> sliceBlock(const Tensor& t, const Dims& start, const Dims& extent) {
  ASSIGN_OR_RETURN(TensorBlock b, makeBlock(t, start, extent));
  Tensor out = Tensor::zeros(t.dtype(), extent);
  char* dst = static_cast<char*>(out.mutableData());
  forEachRun(b, [&](const void* data, size_t n) {
    std::memcpy(dst, data, n);
    dst += n;
  });
  return out;
}

void forEachStoredRun(const TensorBlock& b,
                      const std::function<void(const void* data, size_t nbytes, const void* source, size_t sourceBytes)>& fn) {
  if (!b.converts()) {
    forEachRun(b, [&](const void* data, size_t n) { fn(data, n, data, n); });
    return;
  }
  const DType from = b.source.dtype(), to = b.as;
  const size_t inSize = dtypeSize(from), outSize = dtypeSize(to);
  constexpr size_t kPiece = size_t{1} << 20;
  const size_t perPiece = kPiece / std::max(inSize, outSize);
  std::vector<char> buf(perPiece * outSize);
  forEachRun(b, [&](const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    size_t elems = n / inSize;
    while (elems > 0) {
      size_t c = std::min(elems, perPiece);
      convertFloats(p, from, buf.data(), to, c);
      fn(buf.data(), c * outSize, p, c * inSize);
      p += c * inSize;
      elems -= c;
    }
  });
}

Tensor readBlock(const TensorBlock& b) {
  Tensor out = Tensor::zeros(b.type());
  char* dst = static_cast<char*>(out.mutableData());
  forEachStoredRun(b, [&](const void* data, size_t n, const void*, size_t) {
    std::memcpy(dst, data, n);
    dst += n;
  });
  return out;
}

namespace {

/// Splits `shape` at `axis` into the element counts before and after it.
void splitAt(const Dims& shape, size_t axis, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
}

}  // namespace

Tensor takeAlong(const Tensor& x, size_t axis, int64_t i) {
  Dims shape = x.shape();
  int64_t n = shape[axis];
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(axis));
  Tensor out = Tensor::zeros(x.dtype(), shape);
  int64_t outer, inner;
  splitAt(x.shape(), axis, outer, inner);
  size_t bytes = static_cast<size_t>(inner) * dtypeSize(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(out.mutableData());
  for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * bytes, src + (o * n + i) * bytes, bytes);
  return out;
}

Tensor stackAlong(const std::vector<Tensor>& parts, const TensorType& partType, size_t axis) {
  Dims shape = partType.shape;
  int64_t n = static_cast<int64_t>(parts.size());
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(axis), n);
  Tensor out = Tensor::zeros(partType.dtype, shape);
  int64_t outer, inner;
  splitAt(shape, axis, outer, inner);
  size_t bytes = static_cast<size_t>(inner) * dtypeSize(partType.dtype);
  char* dst = static_cast<char*>(out.mutableData());
  for (int64_t i = 0; i < n; ++i) {
    const char* src = static_cast<const char*>(parts[static_cast<size_t>(i)].raw());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + (o * n + i) * bytes, src + o * bytes, bytes);
  }
  return out;
}

}  // namespace pcc
