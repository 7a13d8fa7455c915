// Ops that rearrange or select whole elements: Pad, Tile, DepthToSpace,
// SpaceToDepth, ReverseSequence, Compress, NonZero and Size. They copy by
// element size and so work for every dtype.
// Their type inference is runtime/schema/tensor_layout.cpp.
#include <algorithm>
#include <cstring>

#include "runtime/ops/tensor_util.h"
#include "runtime/schema/tensor_layout.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::tensor_layout_schema;

/// \returns the input index that output position `o` of a padded axis reads,
/// or -1 for the constant. `n` is the input dim, `begin` its begin pad.
int64_t padSource(int64_t o, int64_t n, int64_t begin, const std::string& mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return std::clamp<int64_t>(i, 0, n - 1);
  if (mode == "wrap") return ((i % n) + n) % n;
  // reflect: mirror without repeating the edge; the pattern has period 2(n-1).
  if (n == 1) return 0;
  int64_t period = 2 * (n - 1);
  int64_t k = ((i % period) + period) % period;
  return k < n ? k : period - k;
}

/// Pad's copy into `r` (the output, of the maps' shape): gatherAxisMaps a
/// row of the last axis at a time. The last axis' map is cut once into runs
/// (consecutive input elements, or the constant), and each row is copied run
/// by run: linear in the output with the constant of a copy, where an index
/// computed per element made a pad of millions of elements take a minute.
void padRows(const Tensor& x, const std::vector<std::vector<int64_t>>& maps, const Tensor& fill, Tensor& r) {
  const size_t es = dtypeSize(x.dtype());
  char* dst = static_cast<char*>(r.mutableData());
  if (maps.empty()) {  // a scalar
    std::memcpy(dst, x.raw(), es);
    return;
  }
  const size_t rank = maps.size();
  const Dims& shape = r.shape();
  const int64_t n = r.numel(), inner = shape.back();
  if (n == 0) return;
  struct Run {
    int64_t at, src, len;  // output position, first input element (-1: the constant), length
  };
  std::vector<Run> runs;
  for (int64_t o = 0; o < inner; ++o) {
    const int64_t m = maps.back()[o];
    if (!runs.empty()) {
      Run& b = runs.back();
      if ((m < 0 && b.src < 0) || (m >= 0 && b.src >= 0 && m == b.src + b.len)) {
        ++b.len;
        continue;
      }
    }
    runs.push_back({o, m < 0 ? -1 : m, 1});
  }
  const std::vector<int64_t> strides = stridesOf(x.shape());  // the last one is 1
  const char* src = static_cast<const char*>(x.raw());
  // Fills `count` elements at `d` with the constant, doubling what is copied.
  auto constant = [&](char* d, int64_t count) {
    std::memcpy(d, fill.raw(), es);
    for (int64_t done = 1; done < count;) {
      const int64_t c = std::min(done, count - done);
      std::memcpy(d + done * es, d, static_cast<size_t>(c) * es);
      done += c;
    }
  };
  std::vector<int64_t> idx(rank - 1, 0);
  for (int64_t row = 0; row < n / inner; ++row) {
    int64_t off = 0;
    bool outside = false;
    for (size_t d = 0; d + 1 < rank; ++d) {
      const int64_t m = maps[d][idx[d]];
      outside |= m < 0;
      off += m * strides[d];
    }
    char* out = dst + row * inner * es;
    if (outside) {
      constant(out, inner);
    } else {
      for (const Run& run : runs) {
        if (run.src < 0)
          constant(out + run.at * es, run.len);
        else
          std::memcpy(out + run.at * es, src + (off + run.src) * es, static_cast<size_t>(run.len) * es);
      }
    }
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

Status computePad(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(PadPlan p, padPlan(argsFromTensors(in, attrs)));
  std::vector<std::vector<int64_t>> maps(x.rank());
  for (int64_t d = 0; d < x.rank(); ++d) {
    int64_t n = x.shape()[d], size = n + p.begin[d] + p.end[d];
    for (int64_t o = 0; o < size; ++o) maps[d].push_back(padSource(o, n, p.begin[d], p.mode));
  }
  Tensor fill = in.size() > 2 && in[2] ? *in[2] : Tensor::zeros(x.dtype(), {});
  Dims shape;
  for (const auto& m : maps) shape.push_back(static_cast<int64_t>(m.size()));
  Tensor r = Tensor::zeros(x.dtype(), shape);
  padRows(x, maps, fill, r);
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeTile(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferTile(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  std::vector<std::vector<int64_t>> maps(x.rank());
  for (int64_t d = 0; d < x.rank(); ++d)
    for (int64_t o = 0; o < types[0].shape[d]; ++o) maps[d].push_back(o % x.shape()[d]);
  out.push_back(gatherAxisMaps(x, maps, Tensor::zeros(x.dtype(), {})));
  return Status::OK();
}

/// Copies `x` viewed with the 6-D shape `view` and transposed by `perm` into a
/// tensor of shape `outShape` (same element count).
Tensor permuteView(const Tensor& x, const Dims& view, const std::vector<int64_t>& perm,
                   const Dims& outShape) {
  std::vector<int64_t> viewStrides = stridesOf(view), strides;
  Dims shape;
  for (int64_t p : perm) {
    shape.push_back(view[p]);
    strides.push_back(viewStrides[p]);
  }
  Tensor r = Tensor::zeros(x.dtype(), outShape);
  copyStrided(x.raw(), 0, strides, shape, r.mutableData(), dtypeSize(x.dtype()));
  return r;
}

Status computeDepthToSpace(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                           std::vector<Tensor>& out) {
  InferArgs args = argsFromTensors(in, attrs);
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferDepthToSpace(args));
  ASSIGN_OR_RETURN(int64_t b, blockSize(args));
  const Tensor& x = *in[0];
  int64_t n = x.shape()[0], c = x.shape()[1] / (b * b), h = x.shape()[2], w = x.shape()[3];
  // DCR: depth is split as (b, b, C'); CRD: as (C', b, b).
  if (attrs.getString("mode", "DCR") == "DCR")
    out.push_back(permuteView(x, {n, b, b, c, h, w}, {0, 3, 4, 1, 5, 2}, types[0].shape));
  else
    out.push_back(permuteView(x, {n, c, b, b, h, w}, {0, 1, 4, 2, 5, 3}, types[0].shape));
  return Status::OK();
}

Status computeSpaceToDepth(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                           std::vector<Tensor>& out) {
  InferArgs args = argsFromTensors(in, attrs);
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferSpaceToDepth(args));
  ASSIGN_OR_RETURN(int64_t b, blockSize(args));
  const Tensor& x = *in[0];
  int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2] / b, w = x.shape()[3] / b;
  out.push_back(permuteView(x, {n, c, h, b, w, b}, {0, 3, 5, 1, 2, 4}, types[0].shape));
  return Status::OK();
}

Status computeReverseSequence(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                              std::vector<Tensor>& out) {
  RETURN_IF_ERROR(inferReverseSequence(argsFromTensors(in, attrs)).status());
  const Tensor &x = *in[0], &lensT = *in[1];
  int64_t tAx = attrs.getInt("time_axis", 0), bAx = attrs.getInt("batch_axis", 1);
  int64_t steps = x.shape()[tAx];
  std::vector<int64_t> lens = lensT.toInts();
  for (int64_t& l : lens) {
    if (l < 0 || l > steps)
      return invalidInput("sequence length ", l, " out of range [0, ", steps, "]");
  }
  Tensor r = Tensor::zeros(x.type());
  if (x.numel() == 0) {
    out.push_back(std::move(r));
    return Status::OK();
  }
  // Rows of `inner` contiguous elements after the first two axes.
  int64_t inner = x.numel() / std::max<int64_t>(1, x.shape()[0] * x.shape()[1]);
  size_t row = inner * dtypeSize(x.dtype());
  std::vector<int64_t> strides = stridesOf(x.shape());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(r.mutableData());
  for (int64_t b = 0; b < x.shape()[bAx]; ++b)
    for (int64_t t = 0; t < steps; ++t) {
      int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
      int64_t o = b * strides[bAx] + t * strides[tAx], i = b * strides[bAx] + from * strides[tAx];
      std::memcpy(dst + o / inner * row, src + i / inner * row, row);
    }
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeCompress(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                       std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferCompress(argsFromTensors(in, attrs)));
  const Tensor &x = *in[0], &cond = *in[1];
  // Without an axis the input is flattened: one "axis" of numel elements.
  int64_t axis = attrs.has("axis") ? attrs.getInt("axis", 0) : -1;
  if (axis < 0 && attrs.has("axis")) axis += x.rank();
  int64_t outer = 1, dim = x.numel(), inner = 1;
  if (axis >= 0) {
    dim = x.shape()[axis];
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
  }
  size_t chunk = inner * dtypeSize(x.dtype());
  Tensor r = Tensor::zeros(types[0]);
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(r.mutableData());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < cond.numel(); ++i)
      if (cond.data<uint8_t>()[i]) {
        std::memcpy(dst, src + (o * dim + i) * chunk, chunk);
        dst += chunk;
      }
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeNonZero(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                      std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferNonZero(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  int64_t rank = x.rank(), nnz = types[0].shape[1];
  Tensor r = Tensor::zeros(types[0]);
  int64_t* o = r.mutableData<int64_t>();
  std::vector<int64_t> idx(rank, 0);
  int64_t k = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.getDouble(i) != 0) {
      for (int64_t d = 0; d < rank; ++d) o[d * nnz + k] = idx[d];
      ++k;
    }
    for (int64_t d = rank; d-- > 0;) {
      if (++idx[d] < x.shape()[d]) break;
      idx[d] = 0;
    }
  }
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeSize(const std::vector<const Tensor*>& in, const AttrMap&, std::vector<Tensor>& out) {
  out.push_back(Tensor::scalarI64(in[0]->numel()));
  return Status::OK();
}

}  // namespace

namespace ops {
void registerTensorLayoutOps(OpRegistry& r) {
  r.add(OpKind::Pad, &computePad);
  r.add(OpKind::Tile, &computeTile);
  r.add(OpKind::DepthToSpace, &computeDepthToSpace);
  r.add(OpKind::SpaceToDepth, &computeSpaceToDepth);
  r.add(OpKind::ReverseSequence, &computeReverseSequence);
  r.add(OpKind::Compress, &computeCompress);
  r.add(OpKind::NonZero, &computeNonZero);
  r.add(OpKind::Size, &computeSize);
}
}  // namespace ops

}  // namespace pcc
