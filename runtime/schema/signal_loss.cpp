// Type inference (the op schemas) of NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss. Their reference kernels, and what the kernels
// compute, are runtime/ops/signal_loss.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/signal_loss.h"

namespace pcc {

namespace ops::signal_loss_schema {

StatusOr<Reduction> reductionOf(const AttrMap& attrs) {
  std::string r = attrs.getString("reduction", "mean");
  if (r == "none") return Reduction::kNone;
  if (r == "sum") return Reduction::kSum;
  if (r == "mean") return Reduction::kMean;
  return invalidInput("reduction must be 'none', 'sum' or 'mean', got '", r, "'");
}

StatusOr<int64_t> sceOutputs(const AttrMap& attrs) {
  int64_t n = attrs.getInt("num_outputs", 1);
  if (n != 1 && n != 2) return invalidInput("num_outputs must be 1 or 2, got ", n);
  return n;
}

StatusOr<std::vector<TensorType>> inferLoss(const InferArgs& args, bool sce) {
  RETURN_IF_ERROR(checkArity(args, 2, 3));
  const AttrMap& attrs = attrsOf(args);
  const TensorType& x = args.inputs[0];
  const TensorType& t = args.inputs[1];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input scores"));
  RETURN_IF_ERROR(checkDType(t, {DType::kI32, DType::kI64}, "input target"));
  if (x.rank() < 2) return invalidInput("scores must be [N, C, d1, ...] (rank >= 2), got ", x.str());
  Dims expect = x.shape;
  expect.erase(expect.begin() + 1);
  if (t.shape != expect)
    return invalidInput("target must have the scores' shape without dim 1, ", dimsToString(expect), ", got ",
                        t.str());
  if (args.has(2)) {
    const TensorType& w = args.inputs[2];
    if (w.dtype != x.dtype || w.shape != Dims{x.shape[1]})
      return invalidInput("weights must be ", dtypeName(x.dtype), "[", x.shape[1], "] (one per class), got ", w.str());
  }
  ASSIGN_OR_RETURN(Reduction red, reductionOf(attrs));
  std::vector<TensorType> out{{x.dtype, red == Reduction::kNone ? t.shape : Dims{}}};
  if (sce) {
    ASSIGN_OR_RETURN(int64_t n, sceOutputs(attrs));
    if (n == 2) out.push_back(x);
  }
  return out;
}

}  // namespace ops::signal_loss_schema

namespace {
using namespace ops;
using namespace ops::signal_loss_schema;

StatusOr<std::vector<TensorType>> inferNll(const InferArgs& args) { return inferLoss(args, false); }

StatusOr<std::vector<TensorType>> inferSce(const InferArgs& args) { return inferLoss(args, true); }

}  // namespace

void registerLossSchemas(SchemaRegistry& r) {
  r.add(OpKind::NegativeLogLikelihoodLoss, &inferNll);
  r.add(OpKind::SoftmaxCrossEntropyLoss, &inferSce);
}

}  // namespace pcc
