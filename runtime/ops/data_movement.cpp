// Ops that move elements between tensors: Concat, Split, Slice, Gather. They
// copy by element size and so work for every dtype.
// Their type inference is runtime/schema/data_movement.cpp.
#include <algorithm>
#include <cstring>

#include "runtime/ops/op_util.h"
#include "runtime/schema/data_movement.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::data_movement_schema;

/// Element counts before and after `axis` in `shape`.
void outerInner(const Dims& shape, int64_t axis, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
}

Status computeConcat(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  // Planned, the output's type is known (inferred when the kernel was prepared).
  TensorType type;
  if (planned(out, 0)) {
    type = out[0].type();
  } else {
    ASSIGN_OR_RETURN(std::vector<TensorType> types, inferConcat(argsFromTensors(in, attrs)));
    type = types[0];
  }
  int64_t axis = attrs.getInt("axis", 0);
  if (axis < 0) axis += in[0]->rank();
  Tensor r = output(out, 0, type);
  size_t es = dtypeSize(r.dtype());
  int64_t outer, inner;
  outerInner(r.shape(), axis, outer, inner);
  char* o = static_cast<char*>(r.mutableData());
  for (int64_t b = 0; b < outer; ++b)
    for (const Tensor* t : in) {
      size_t chunk = t->shape()[axis] * inner * es;
      std::memcpy(o, static_cast<const char*>(t->raw()) + b * chunk, chunk);
      o += chunk;
    }
  return Status::OK();
}

Status computeSplit(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  // Planned (every output), the types are known; a dropped output (undefined)
  // needs inference for its extent.
  std::vector<TensorType> types;
  for (const Tensor& t : out) types.push_back(t.type());
  if (types.empty() || std::any_of(out.begin(), out.end(), [](const Tensor& t) { return !t.defined(); })) {
    ASSIGN_OR_RETURN(types, inferSplit(argsFromTensors(in, attrs)));
  }
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", 0), x.rank()));
  size_t es = dtypeSize(x.dtype());
  int64_t outer, inner;
  outerInner(x.shape(), axis, outer, inner);
  size_t rowBytes = x.shape()[axis] * inner * es;
  int64_t start = 0;
  for (size_t k = 0; k < types.size(); ++k) {
    const TensorType& t = types[k];
    Tensor r = output(out, k, t);
    size_t chunk = t.shape[axis] * inner * es;
    const char* src = static_cast<const char*>(x.raw()) + start * inner * es;
    for (int64_t b = 0; b < outer; ++b)
      std::memcpy(static_cast<char*>(r.mutableData()) + b * chunk, src + b * rowBytes, chunk);
    start += t.shape[axis];
  }
  return Status::OK();
}

Status computeSlice(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(SlicePlan p, slicePlan(argsFromTensors(in, attrs)));
  std::vector<int64_t> inStrides = stridesOf(x.shape()), strides(x.rank());
  int64_t base = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (p.size[d] > 0) base += p.start[d] * inStrides[d];
    strides[d] = inStrides[d] * p.step[d];
  }
  Tensor r = output(out, 0, x.dtype(), p.size);
  copyStrided(x.raw(), base, strides, p.size, r.mutableData(), dtypeSize(x.dtype()));
  return Status::OK();
}

Status computeGather(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  TensorType type;
  if (planned(out, 0)) {
    type = out[0].type();
  } else {
    ASSIGN_OR_RETURN(std::vector<TensorType> types, inferGather(argsFromTensors(in, attrs)));
    type = types[0];
  }
  const Tensor &x = *in[0], &idx = *in[1];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", 0), x.rank()));
  int64_t outer, inner, dim = x.shape()[axis];
  outerInner(x.shape(), axis, outer, inner);
  std::vector<int64_t> ids = idx.toInts();
  for (int64_t& i : ids) {
    if (i < -dim || i >= dim)
      return invalidInput("index ", i, " out of range for axis ", axis, " of size ", dim);
    if (i < 0) i += dim;
  }
  Tensor r = output(out, 0, type);
  size_t chunk = inner * dtypeSize(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* o = static_cast<char*>(r.mutableData());
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t i : ids) {
      std::memcpy(o, src + (b * dim + i) * chunk, chunk);
      o += chunk;
    }
  return Status::OK();
}

}  // namespace

void registerDataMovementOps(OpRegistry& r) {
  r.add(OpKind::Concat, &computeConcat, kWritesOutputs);
  r.add(OpKind::Split, &computeSplit, kWritesOutputs);
  r.add(OpKind::Slice, &computeSlice, kWritesOutputs);
  r.add(OpKind::Gather, &computeGather, kWritesOutputs);
}

}  // namespace pcc
