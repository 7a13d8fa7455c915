// Type inference (the op schemas) of Softmax, LogSoftmax, LayerNormalization,
// RMSNormalization and BatchNormalization. Their reference kernels, and what
// the kernels compute, are runtime/ops/norm_reduce.cpp.
#include <cmath>
#include <vector>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"

namespace pcc {
namespace {
using namespace ops;

// ---- Softmax ---------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferSoftmax(const InferArgs& args) {
  return inferFloatAlongAxis(args);
}

// ---- LayerNormalization -----------------------------------------------------

Status checkBroadcastsTo(const TensorType& t, const Dims& target, const char* what) {
  auto bc = broadcastShapes(t.shape, target);
  if (t.rank() > static_cast<int64_t>(target.size()) || !bc.ok() || *bc != target)
    return invalidInput(what, " ", t.str(), " does not broadcast to normalized shape ",
                        dimsToString(target));
  return Status::OK();
}

/// LayerNormalization, or RMSNormalization (kRms: no mean subtracted, no bias).
template <bool kRms>
StatusOr<std::vector<TensorType>> inferLayerNorm(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, kRms ? 2 : 3));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrsOf(args).getInt("axis", -1), x.rank()));
  Dims norm(x.shape.begin() + axis, x.shape.end());
  for (size_t i = 1; i < args.inputs.size(); ++i) {
    if (!args.has(i)) continue;
    const char* what = i == 1 ? "Scale" : "B";
    if (args.inputs[i].dtype != x.dtype)
      return invalidInput(what, " type ", args.inputs[i].str(), " differs from X ", x.str());
    RETURN_IF_ERROR(checkBroadcastsTo(args.inputs[i], norm, what));
  }
  return std::vector<TensorType>{x};
}

// ---- BatchNormalization -----------------------------------------------------

StatusOr<std::vector<TensorType>> inferBatchNorm(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 5, 5));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  if (attrsOf(args).getInt("training_mode", 0) != 0)
    return unsupported("training_mode=1 is not supported (inference only)");
  if (x.rank() < 2) return invalidInput("input X must be [N,C,...], got ", x.str());
  static const char* kNames[] = {"", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    const TensorType& t = args.inputs[i];
    if (t.dtype != x.dtype || t.shape != Dims{x.shape[1]})
      return invalidInput(kNames[i], " ", t.str(), " must be ", dtypeName(x.dtype), "[",
                          x.shape[1], "] for X ", x.str());
  }
  return std::vector<TensorType>{x};
}

}  // namespace

void registerNormReduceSchemas(SchemaRegistry& r) {
  r.add(OpKind::Softmax, &inferSoftmax);
  r.add(OpKind::LogSoftmax, &inferSoftmax);
  r.add(OpKind::LayerNormalization, &inferLayerNorm<false>);
  r.add(OpKind::RMSNormalization, &inferLayerNorm<true>);
  r.add(OpKind::BatchNormalization, &inferBatchNorm);
}

}  // namespace pcc
