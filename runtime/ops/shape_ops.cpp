// Ops that change only a tensor's shape or make one from a shape: Reshape,
// Flatten, Squeeze, Unsqueeze, Transpose, Shape, ConstantOfShape, Expand.
// They move bytes by element size and so work for every dtype.
// Their type inference is runtime/schema/shape_ops.cpp.
#include <algorithm>
#include <cstring>

#include "runtime/ops/op_util.h"
#include "runtime/schema/shape_ops.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::shape_ops_schema;

/// Compute for ops whose output is the input's bytes under the inferred shape.
template <InferFn kInfer>
Status computeReshapeLike(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                          std::vector<Tensor>& out) {
  if (planned(out, 0) && out[0].dtype() == in[0]->dtype() && out[0].numel() == in[0]->numel()) {
    // The planned output has the inferred shape already; planned in place it
    // is input 0's bytes (and the backend skips the call).
    Tensor r = out[0];
    if (r.raw() != in[0]->raw() && r.nbytes()) std::memmove(r.mutableData(), in[0]->raw(), r.nbytes());
    return Status::OK();
  }
  ASSIGN_OR_RETURN(std::vector<TensorType> types, kInfer(argsFromTensors(in, attrs)));
  out.assign(1, in[0]->clone().reshaped(types[0].shape));
  return Status::OK();
}

Status computeTranspose(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                        std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, transposePerm(x.type(), attrs));
  std::vector<int64_t> inStrides = stridesOf(x.shape()), strides;
  Dims shape;
  for (int64_t p : perm) {
    shape.push_back(x.shape()[p]);
    strides.push_back(inStrides[p]);
  }
  Tensor r = output(out, 0, x.dtype(), shape);
  copyStrided(x.raw(), 0, strides, shape, r.mutableData(), dtypeSize(x.dtype()));
  return Status::OK();
}

Status computeShape(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  auto [start, end] = shapeRange(in[0]->rank(), attrs);
  std::vector<int64_t> dims(in[0]->shape().begin() + start, in[0]->shape().begin() + end);
  Tensor r = output(out, 0, DType::kI64, {end - start});
  if (!dims.empty()) std::memcpy(r.mutableData(), dims.data(), dims.size() * sizeof(int64_t));
  return Status::OK();
}

Status computeConstantOfShape(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                              std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(Tensor v, fillValue(attrs));
  Tensor r = output(out, 0, v.dtype(), in[0]->toInts());
  size_t es = dtypeSize(v.dtype());
  char* o = static_cast<char*>(r.mutableData());
  for (int64_t i = 0; i < r.numel(); ++i) std::memcpy(o + i * es, v.raw(), es);
  return Status::OK();
}

Status computeExpand(const std::vector<const Tensor*>& in, const AttrMap&,
                     std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(x.shape(), in[1]->toInts()));
  Tensor r = output(out, 0, x.dtype(), shape);
  copyStrided(x.raw(), 0, broadcastStrides(x.shape(), shape), shape, r.mutableData(),
              dtypeSize(x.dtype()));
  return Status::OK();
}

}  // namespace

void registerShapeOps(OpRegistry& r) {
  r.add(OpKind::Reshape, &computeReshapeLike<&inferReshape>, kViewOfInput0 | kWritesOutputs);
  r.add(OpKind::Flatten, &computeReshapeLike<&inferFlatten>, kViewOfInput0 | kWritesOutputs);
  r.add(OpKind::Squeeze, &computeReshapeLike<&inferSqueeze>, kViewOfInput0 | kWritesOutputs);
  r.add(OpKind::Unsqueeze, &computeReshapeLike<&inferUnsqueeze>, kViewOfInput0 | kWritesOutputs);
  r.add(OpKind::Transpose, &computeTranspose, kWritesOutputs);
  r.add(OpKind::Shape, &computeShape, kWritesOutputs);
  r.add(OpKind::ConstantOfShape, &computeConstantOfShape, kWritesOutputs);
  r.add(OpKind::Expand, &computeExpand, kWritesOutputs);
}

}  // namespace pcc
