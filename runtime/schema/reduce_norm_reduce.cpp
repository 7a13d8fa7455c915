// Type inference (the op schemas) of ReduceSum, ReduceMean, ReduceMax,
// ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp,
// ReduceSumSquare, ArgMax and ArgMin. Their reference kernels, and what the
// kernels compute, are runtime/ops/reduce_norm_reduce.cpp.
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/reduce_norm_reduce.h"

namespace pcc {

namespace ops::reduce_norm_reduce_schema {

StatusOr<std::vector<TensorType>> inferArg(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kNumericTypes, "input data"));
  if (x.rank() < 1) return invalidInput("input data must have rank >= 1, got ", x.str());
  const AttrMap& attrs = attrsOf(args);
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", 0), x.rank()));
  if (x.shape[axis] == 0) return invalidInput("cannot take the index of an extreme over empty axis ", axis, " of ", x.str());
  std::vector<bool> red(x.rank(), false);
  red[axis] = true;
  return std::vector<TensorType>{{DType::kI64, reducedShape(x.shape, red, attrs.getInt("keepdims", 1) != 0)}};
}

}  // namespace ops::reduce_norm_reduce_schema

namespace {
using namespace ops;
using namespace ops::reduce_norm_reduce_schema;

/// Dtypes of the arithmetic reductions.
constexpr std::initializer_list<DType> kReduceTypes = kNumericTypes;

/// ReduceMax / ReduceMin also order booleans (opset 20).
constexpr std::initializer_list<DType> kMinMaxTypes = {
    DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32,
    DType::kI64, DType::kI8,  DType::kU8,  DType::kBool};

template <Red kRed>
StatusOr<std::vector<TensorType>> inferReduce(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 2));
  const TensorType& x = args.inputs[0];
  constexpr bool kMinMax = kRed == Red::kMax || kRed == Red::kMin;
  RETURN_IF_ERROR(checkDType(x, kMinMax ? kMinMaxTypes : kReduceTypes, "input data"));
  ASSIGN_OR_RETURN(std::vector<bool> red, reducedDims(args));
  bool keep = attrsOf(args).getInt("keepdims", 1) != 0;
  return std::vector<TensorType>{{x.dtype, reducedShape(x.shape, red, keep)}};
}

}  // namespace

void registerReductionSchemas(SchemaRegistry& r) {
  r.add(OpKind::ReduceSum, &inferReduce<Red::kSum>);
  r.add(OpKind::ReduceMean, &inferReduce<Red::kMean>);
  r.add(OpKind::ReduceMax, &inferReduce<Red::kMax>);
  r.add(OpKind::ReduceMin, &inferReduce<Red::kMin>);
  r.add(OpKind::ReduceProd, &inferReduce<Red::kProd>);
  r.add(OpKind::ReduceL1, &inferReduce<Red::kL1>);
  r.add(OpKind::ReduceL2, &inferReduce<Red::kL2>);
  r.add(OpKind::ReduceLogSum, &inferReduce<Red::kLogSum>);
  r.add(OpKind::ReduceLogSumExp, &inferReduce<Red::kLogSumExp>);
  r.add(OpKind::ReduceSumSquare, &inferReduce<Red::kSumSquare>);
  r.add(OpKind::ArgMax, &inferArg);
  r.add(OpKind::ArgMin, &inferArg);
}

}  // namespace pcc
