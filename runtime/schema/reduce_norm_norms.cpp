// Type inference (the op schemas) of InstanceNormalization, GroupNormalization,
// LpNormalization, MeanVarianceNormalization and LRN. Their reference kernels,
// and what the kernels compute, are runtime/ops/reduce_norm_norms.cpp.
#include <algorithm>
#include <cmath>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/reduce_norm_norms.h"

namespace pcc {

namespace ops::reduce_norm_norms_schema {

StatusOr<std::vector<bool>> mvnDims(const InferArgs& args) {
  if (attrsOf(args).has("axes")) return reducedDims(args);
  const TensorType& x = args.inputs[0];
  std::vector<bool> red(x.rank(), false);
  for (int64_t a : {0, 2, 3}) {
    if (a >= x.rank())
      return invalidInput("default axes [0,2,3] need an input of rank >= 4, got ", x.str());
    red[a] = true;
  }
  return red;
}

}  // namespace ops::reduce_norm_norms_schema

namespace {
using namespace ops;
using namespace ops::reduce_norm_norms_schema;

// ---- InstanceNormalization / GroupNormalization -------------------------------

/// Both normalize each of `groups` contiguous channel blocks of every sample
/// over the block's channels and spatial positions, then scale and shift per
/// channel. InstanceNormalization is the case groups == channels.
template <bool kGroup>
StatusOr<std::vector<TensorType>> inferGroupNorm(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 3));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  if (x.rank() < 2) return invalidInput("input X must be [N,C,...], got ", x.str());
  int64_t c = x.shape[1];
  if (kGroup) {
    int64_t g = attrsOf(args).getInt("num_groups", 0);
    if (g <= 0 || c % g != 0)
      return invalidInput("num_groups ", g, " must be positive and divide the ", c, " channels of ", x.str());
  }
  for (size_t i = 1; i < 3; ++i) {
    const TensorType& t = args.inputs[i];
    if (t.dtype != x.dtype || t.shape != Dims{c})
      return invalidInput(i == 1 ? "scale " : "bias ", t.str(), " must be ", dtypeName(x.dtype), "[", c,
                          "] for X ", x.str());
  }
  return std::vector<TensorType>{x};
}

// ---- LpNormalization ----------------------------------------------------------

StatusOr<std::vector<TensorType>> inferLpNorm(const InferArgs& args) {
  ASSIGN_OR_RETURN(auto types, inferFloatAlongAxis(args));
  int64_t p = attrsOf(args).getInt("p", 2);
  if (p != 1 && p != 2) return invalidInput("p must be 1 or 2, got ", p);
  return types;
}

StatusOr<std::vector<TensorType>> inferMvn(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input X"));
  RETURN_IF_ERROR(mvnDims(args).status());
  return std::vector<TensorType>{args.inputs[0]};
}

// ---- LRN ---------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferLrn(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  if (x.rank() < 3) return invalidInput("input X must be [N,C,D1,...], got ", x.str());
  int64_t size = attrsOf(args).getInt("size", 0);
  if (size <= 0) return invalidInput("attribute 'size' must be positive, got ", size);
  return std::vector<TensorType>{x};
}

}  // namespace

void registerNormalizationSchemas(SchemaRegistry& r) {
  r.add(OpKind::InstanceNormalization, &inferGroupNorm<false>);
  r.add(OpKind::GroupNormalization, &inferGroupNorm<true>);
  r.add(OpKind::LpNormalization, &inferLpNorm);
  r.add(OpKind::MeanVarianceNormalization, &inferMvn);
  r.add(OpKind::LRN, &inferLrn);
}

}  // namespace pcc
