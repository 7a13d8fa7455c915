// Type inference (the op schemas) of TopK and Hardmax. Their reference kernels,
// and what the kernels compute, are runtime/ops/reduce_norm_select.cpp.
#include <algorithm>
#include <numeric>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/reduce_norm_select.h"

namespace pcc {

namespace ops::reduce_norm_select_schema {

StatusOr<int64_t> topK(const InferArgs& args, int64_t axisSize) {
  ASSIGN_OR_RETURN(std::vector<int64_t> k, constInts(args, 1, "K"));
  if (k.size() != 1) return invalidInput("K must hold one value, got ", k.size());
  if (k[0] < 0 || k[0] > axisSize)
    return invalidInput("K = ", k[0], " is out of range for axis of size ", axisSize);
  return k[0];
}

StatusOr<std::vector<TensorType>> inferTopK(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kNumericTypes, "input X"));
  if (x.rank() < 1) return invalidInput("input X must have rank >= 1, got ", x.str());
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrsOf(args).getInt("axis", -1), x.rank()));
  ASSIGN_OR_RETURN(int64_t k, topK(args, x.shape[axis]));
  Dims shape = x.shape;
  shape[axis] = k;
  return std::vector<TensorType>{{x.dtype, shape}, {DType::kI64, shape}};
}

}  // namespace ops::reduce_norm_select_schema

namespace {
using namespace ops;
using namespace ops::reduce_norm_select_schema;

// ---- Hardmax ---------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferHardmax(const InferArgs& args) {
  return inferFloatAlongAxis(args);
}

}  // namespace

void registerSelectionSchemas(SchemaRegistry& r) {
  r.add(OpKind::TopK, &inferTopK);
  r.add(OpKind::Hardmax, &inferHardmax);
}

}  // namespace pcc
