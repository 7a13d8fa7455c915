// Type inference (the op schemas) of GatherElements, ScatterElements, GatherND
// and ScatterND. Their reference kernels, and what the kernels compute, are
// runtime/ops/tensor_index.cpp.
#include <algorithm>
#include <cstring>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/tensor_index.h"

namespace pcc {

namespace ops::tensor_index_schema {

StatusOr<Reduction> reductionOf(const AttrMap& attrs) {
  std::string r = attrs.getString("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return invalidInput("unknown reduction '", r, "' (expected none, add, mul, max or min)");
}

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

}  // namespace ops::tensor_index_schema

namespace {
using namespace ops;
using namespace ops::tensor_index_schema;

StatusOr<std::vector<TensorType>> inferGatherElements(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  RETURN_IF_ERROR(elementsAxis(args).status());
  return std::vector<TensorType>{{args.inputs[0].dtype, args.inputs[1].shape}};
}

}  // namespace

void registerTensorIndexSchemas(SchemaRegistry& r) {
  r.add(OpKind::GatherElements, &inferGatherElements);
  r.add(OpKind::ScatterElements, &inferScatterElements);
  r.add(OpKind::GatherND, &inferGatherND);
  r.add(OpKind::ScatterND, &inferScatterND);
}

}  // namespace pcc
