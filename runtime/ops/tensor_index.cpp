// Ops that read or write elements at positions given by an index tensor:
// GatherElements, GatherND, ScatterElements and ScatterND. Indices may be
// negative (counted from the end of their dim); out-of-range ones are errors.
// Their type inference is runtime/schema/tensor_index.cpp.
#include <algorithm>
#include <cstring>

#include "runtime/ops/tensor_util.h"
#include "runtime/schema/tensor_index.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::tensor_index_schema;

/// Element counts of `shape[from, to)`.
int64_t product(const Dims& shape, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < shape.size(); ++i) p *= shape[i];
  return p;
}

template <typename T>
T combine(T a, T b, Reduction r) {
  switch (r) {
    case Reduction::kAdd: return static_cast<T>(a + b);
    case Reduction::kMul: return static_cast<T>(a * b);
    case Reduction::kMax: return std::max(a, b);
    case Reduction::kMin: return std::min(a, b);
    case Reduction::kNone: break;
  }
  return b;
}

/// One scatter write: `len` elements from updates[src] onto out[dst].
struct Write {
  int64_t dst, src;
};

/// Applies `writes` in order onto `out`, combining with `r`; each write moves
/// `len` consecutive elements.
Status applyWrites(Tensor& out, const Tensor& updates, const std::vector<Write>& writes, int64_t len,
                   Reduction r) {
  size_t es = dtypeSize(out.dtype());
  char* o = static_cast<char*>(out.mutableData());
  const char* u = static_cast<const char*>(updates.raw());
  if (r == Reduction::kNone) {
    for (const Write& w : writes) std::memcpy(o + w.dst * es, u + w.src * es, len * es);
    return Status::OK();
  }
  if (isHalf(out.dtype())) {  // combined in f32, rounded once per write
    for (const Write& w : writes)
      for (int64_t i = 0; i < len; ++i) {
        float a = static_cast<float>(out.getDouble(w.dst + i));
        float b = static_cast<float>(updates.getDouble(w.src + i));
        storeDouble(out, w.dst + i, combine(a, b, r));
      }
    return Status::OK();
  }
  bool isBool = out.dtype() == DType::kBool;
  return visitNumeric(out.dtype(), [&]<typename T>() {
    T* ot = out.mutableData<T>();
    const T* ut = updates.data<T>();
    for (const Write& w : writes)
      for (int64_t i = 0; i < len; ++i) {
        T v = combine(ot[w.dst + i], ut[w.src + i], r);
        ot[w.dst + i] = isBool ? static_cast<T>(v != 0) : v;
      }
    return Status::OK();
  });
}

/// \returns for each element of `idx` (row-major) the offset into data of
/// shape `data` it addresses along `axis`.
StatusOr<std::vector<int64_t>> elementOffsets(const Dims& data, const Tensor& idx, int64_t axis) {
  std::vector<int64_t> ids = idx.toInts(), strides = stridesOf(data), pos(idx.rank(), 0);
  std::vector<int64_t> offs(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t a, normalizeIndex(ids[i], data[axis], "index"));
    int64_t off = 0;
    for (int64_t d = 0; d < idx.rank(); ++d) off += (d == axis ? a : pos[d]) * strides[d];
    offs[i] = off;
    for (int64_t d = idx.rank(); d-- > 0;) {
      if (++pos[d] < idx.shape()[d]) break;
      pos[d] = 0;
    }
  }
  return offs;
}

Status computeGatherElements(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                             std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(int64_t axis, elementsAxis(argsFromTensors(in, attrs)));
  const Tensor &x = *in[0], &idx = *in[1];
  ASSIGN_OR_RETURN(std::vector<int64_t> offs, elementOffsets(x.shape(), idx, axis));
  Tensor r = Tensor::zeros(x.dtype(), idx.shape());
  size_t es = dtypeSize(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(r.mutableData());
  for (size_t i = 0; i < offs.size(); ++i) std::memcpy(dst + i * es, src + offs[i] * es, es);
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeScatterElements(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                              std::vector<Tensor>& out) {
  RETURN_IF_ERROR(inferScatterElements(argsFromTensors(in, attrs)).status());
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", 0), in[0]->rank()));
  ASSIGN_OR_RETURN(Reduction red, reductionOf(attrs));
  const Tensor &x = *in[0], &idx = *in[1], &upd = *in[2];
  ASSIGN_OR_RETURN(std::vector<int64_t> offs, elementOffsets(x.shape(), idx, axis));
  std::vector<Write> writes(offs.size());
  for (size_t i = 0; i < offs.size(); ++i) writes[i] = {offs[i], static_cast<int64_t>(i)};
  Tensor r = x.clone();
  RETURN_IF_ERROR(applyWrites(r, upd, writes, 1, red));
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- GatherND / ScatterND --------------------------------------------------------

/// Index tuples of GatherND/ScatterND: the data offset of each tuple and the
/// element count of the slice each one addresses.
struct NdPlan {
  std::vector<int64_t> offsets;
  int64_t sliceLen = 1;
};

StatusOr<NdPlan> ndPlan(const Tensor& x, const Tensor& idx, int64_t batchDims) {
  ASSIGN_OR_RETURN(int64_t k, ndTupleLength(x.type(), idx.type(), batchDims));
  const Dims& xs = x.shape();
  std::vector<int64_t> ids = idx.toInts(), strides = stridesOf(xs);
  NdPlan p;
  p.sliceLen = product(xs, batchDims + k, xs.size());
  int64_t batch = product(xs, 0, batchDims);
  int64_t perBatch = batch == 0 ? 0 : static_cast<int64_t>(ids.size()) / k / batch;
  int64_t batchStride = product(xs, batchDims, xs.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < perBatch; ++j) {
      const int64_t* tuple = ids.data() + (b * perBatch + j) * k;
      int64_t off = b * batchStride;
      for (int64_t t = 0; t < k; ++t) {
        ASSIGN_OR_RETURN(int64_t i, normalizeIndex(tuple[t], xs[batchDims + t], "index"));
        off += i * strides[batchDims + t];
      }
      p.offsets.push_back(off);
    }
  return p;
}

Status computeGatherND(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                       std::vector<Tensor>& out) {
  TensorType type;
  if (planned(out, 0)) {
    type = out[0].type();  // inferred when the kernel was prepared
  } else {
    ASSIGN_OR_RETURN(std::vector<TensorType> types, inferGatherND(argsFromTensors(in, attrs)));
    type = types[0];
  }
  const Tensor &x = *in[0], &idx = *in[1];
  ASSIGN_OR_RETURN(NdPlan p, ndPlan(x, idx, attrs.getInt("batch_dims", 0)));
  Tensor r = output(out, 0, type);
  size_t chunk = p.sliceLen * dtypeSize(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(r.mutableData());
  for (size_t i = 0; i < p.offsets.size(); ++i)
    std::memcpy(dst + i * chunk, src + p.offsets[i] * dtypeSize(x.dtype()), chunk);
  return Status::OK();
}

Status computeScatterND(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                        std::vector<Tensor>& out) {
  RETURN_IF_ERROR(inferScatterND(argsFromTensors(in, attrs)).status());
  ASSIGN_OR_RETURN(Reduction red, reductionOf(attrs));
  const Tensor &x = *in[0], &idx = *in[1], &upd = *in[2];
  ASSIGN_OR_RETURN(NdPlan p, ndPlan(x, idx, 0));
  std::vector<Write> writes(p.offsets.size());
  for (size_t i = 0; i < writes.size(); ++i)
    writes[i] = {p.offsets[i], static_cast<int64_t>(i) * p.sliceLen};
  Tensor r = x.clone();
  RETURN_IF_ERROR(applyWrites(r, upd, writes, p.sliceLen, red));
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

namespace ops {
void registerTensorIndexOps(OpRegistry& r) {
  r.add(OpKind::GatherElements, &computeGatherElements);
  r.add(OpKind::ScatterElements, &computeScatterElements);
  r.add(OpKind::GatherND, &computeGatherND, kWritesOutputs);
  r.add(OpKind::ScatterND, &computeScatterND);
}
}  // namespace ops

}  // namespace pcc
