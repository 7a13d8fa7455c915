// Ops that read or write elements at positions given by an index tensor:
// GatherElements, GatherND, ScatterElements and ScatterND. Indices may be
// negative (counted from the end of their dim); out-of-range ones are errors.
#include <algorithm>
#include <cstring>

#include "runtime/ops/tensor_util.h"

namespace pcc {
namespace {
using namespace ops;

/// Element counts of `shape[from, to)`.
int64_t product(const Dims& shape, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < shape.size(); ++i) p *= shape[i];
  return p;
}

// ---- Scatter writes (shared) -----------------------------------------------------

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

StatusOr<Reduction> reductionOf(const AttrMap& attrs) {
  std::string r = attrs.getString("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return invalidInput("unknown reduction '", r, "' (expected none, add, mul, max or min)");
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

// ---- GatherElements / ScatterElements ------------------------------------------------

/// Checks the shared shape rules of GatherElements and ScatterElements: indices
/// of the data's rank, no larger than the data outside `axis`.
StatusOr<int64_t> elementsAxis(const InferArgs& args) {
  const TensorType &x = args.inputs[0], &idx = args.inputs[1];
  RETURN_IF_ERROR(checkIndexType(idx, "indices"));
  if (x.rank() < 1) return invalidInput("data must have rank >= 1, got ", x.str());
  if (idx.rank() != x.rank())
    return invalidInput("indices ", idx.str(), " must have the rank of data ", x.str());
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrsOrEmpty(args).getInt("axis", 0), x.rank()));
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis && idx.shape[d] > x.shape[d])
      return invalidInput("indices ", idx.str(), " exceed data ", x.str(), " in dim ", d);
  return axis;
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

StatusOr<std::vector<TensorType>> inferGatherElements(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  RETURN_IF_ERROR(elementsAxis(args).status());
  return std::vector<TensorType>{{args.inputs[0].dtype, args.inputs[1].shape}};
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

StatusOr<std::vector<TensorType>> inferScatterElements(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 3));
  RETURN_IF_ERROR(elementsAxis(args).status());
  RETURN_IF_ERROR(reductionOf(attrsOrEmpty(args)).status());
  const TensorType &x = args.inputs[0], &idx = args.inputs[1], &upd = args.inputs[2];
  if (upd.dtype != x.dtype || upd.shape != idx.shape)
    return invalidInput("updates ", upd.str(), " must have the shape of indices ", idx.str(),
                        " and the type of data ", x.str());
  return std::vector<TensorType>{x};
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

/// Shape checks shared by GatherND and ScatterND. \returns k, the tuple length.
StatusOr<int64_t> ndTupleLength(const TensorType& x, const TensorType& idx, int64_t batchDims) {
  RETURN_IF_ERROR(checkIndexType(idx, "indices"));
  if (x.rank() < 1 || idx.rank() < 1)
    return invalidInput("data ", x.str(), " and indices ", idx.str(), " must have rank >= 1");
  if (batchDims < 0 || batchDims >= std::min(x.rank(), idx.rank()))
    return invalidInput("batch_dims ", batchDims, " out of range for data ", x.str(), " and indices ",
                        idx.str());
  for (int64_t d = 0; d < batchDims; ++d)
    if (x.shape[d] != idx.shape[d])
      return invalidInput("batch dim ", d, " differs between data ", x.str(), " and indices ", idx.str());
  int64_t k = idx.shape.back();
  if (k < 1 || k > x.rank() - batchDims)
    return invalidInput("last dim of indices ", idx.str(), " must be in [1, ", x.rank() - batchDims,
                        "] for data ", x.str(), " with batch_dims ", batchDims);
  return k;
}

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

/// \returns the output shape of GatherND: indices.shape[:-1] + data.shape[b+k:].
Dims gatherNdShape(const TensorType& x, const TensorType& idx, int64_t b, int64_t k) {
  Dims out(idx.shape.begin(), idx.shape.end() - 1);
  out.insert(out.end(), x.shape.begin() + b + k, x.shape.end());
  return out;
}

StatusOr<std::vector<TensorType>> inferGatherND(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &x = args.inputs[0], &idx = args.inputs[1];
  int64_t b = attrsOrEmpty(args).getInt("batch_dims", 0);
  ASSIGN_OR_RETURN(int64_t k, ndTupleLength(x, idx, b));
  return std::vector<TensorType>{{x.dtype, gatherNdShape(x, idx, b, k)}};
}

Status computeGatherND(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                       std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferGatherND(argsFromTensors(in, attrs)));
  const Tensor &x = *in[0], &idx = *in[1];
  ASSIGN_OR_RETURN(NdPlan p, ndPlan(x, idx, attrs.getInt("batch_dims", 0)));
  Tensor r = Tensor::zeros(types[0]);
  size_t chunk = p.sliceLen * dtypeSize(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(r.mutableData());
  for (size_t i = 0; i < p.offsets.size(); ++i)
    std::memcpy(dst + i * chunk, src + p.offsets[i] * dtypeSize(x.dtype()), chunk);
  out.push_back(std::move(r));
  return Status::OK();
}

StatusOr<std::vector<TensorType>> inferScatterND(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 3));
  const TensorType &x = args.inputs[0], &idx = args.inputs[1], &upd = args.inputs[2];
  ASSIGN_OR_RETURN(int64_t k, ndTupleLength(x, idx, 0));
  RETURN_IF_ERROR(reductionOf(attrsOrEmpty(args)).status());
  Dims want = gatherNdShape(x, idx, 0, k);
  if (upd.dtype != x.dtype || upd.shape != want)
    return invalidInput("updates ", upd.str(), " must be ", TensorType{x.dtype, want}.str(),
                        " for data ", x.str(), " and indices ", idx.str());
  return std::vector<TensorType>{x};
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
  r.add({"GatherElements", &inferGatherElements, &computeGatherElements});
  r.add({"ScatterElements", &inferScatterElements, &computeScatterElements});
  r.add({"GatherND", &inferGatherND, &computeGatherND});
  r.add({"ScatterND", &inferScatterND, &computeScatterND});
}
}  // namespace ops

}  // namespace pcc
