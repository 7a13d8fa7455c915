// Classification losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
//
// Both read scores X [N, C, d1, ..., dk] and class indices T [N, d1, ..., dk]:
//   1. (SCE only) X becomes log_softmax(X) over the class axis 1; that is the
//      optional second output log_prob;
//   2. loss[n, d] = -w[T[n, d]] * X[n, T[n, d], d], with w the optional class
//      weights (1 when absent) and 0 where T equals ignore_index;
//   3. reduction "none" keeps the [N, d1, ..., dk] losses, "sum" adds them and
//      "mean" divides that sum by the sum of the weights of the counted
//      elements (their count when there are no weights).
// Sums are accumulated in double and written in X's dtype.
// Their type inference is runtime/schema/signal_loss.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/ops/reduce_norm.h"
#include "runtime/ops/signal.h"
#include "runtime/schema/signal_loss.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::signal_loss_schema;

/// Writes log_softmax over axis 1 of `x` ([outer=N, C, inner]) into `y`.
template <typename T>
void logSoftmaxAxis1(const T* x, T* y, int64_t outer, int64_t classes, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T* xs = x + o * classes * inner + i;
      T* ys = y + o * classes * inner + i;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, static_cast<double>(xs[c * inner]));
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(xs[c * inner]) - mx);
      double lse = mx + std::log(sum);
      for (int64_t c = 0; c < classes; ++c) ys[c * inner] = static_cast<T>(static_cast<double>(xs[c * inner]) - lse);
    }
}

/// Steps 2 and 3 of the file comment on log-probabilities `lp` (shape of X).
/// \returns the loss tensor, or an error for a class index out of range.
template <typename T, typename I>
StatusOr<Tensor> gatherLoss(const T* lp, const Tensor& target, const Tensor* weight, const Dims& xShape,
                            const AttrMap& attrs, Reduction red) {
  int64_t n = xShape[0], classes = xShape[1];
  int64_t inner = 1;
  for (size_t k = 2; k < xShape.size(); ++k) inner *= xShape[k];
  bool hasIgnore = attrs.has("ignore_index");
  int64_t ignore = attrs.getInt("ignore_index", 0);
  const I* tp = target.data<I>();
  const T* wp = weight ? weight->data<T>() : nullptr;
  Tensor perElem = Tensor::zeros(DType::kF64, target.shape());
  double* pe = perElem.mutableData<double>();
  double lossSum = 0, weightSum = 0;
  for (int64_t o = 0; o < n; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t idx = o * inner + i;
      int64_t cls = static_cast<int64_t>(tp[idx]);
      if (hasIgnore && cls == ignore) continue;  // loss and weight 0
      if (cls < 0 || cls >= classes)
        return invalidInput("target value ", cls, " at element ", idx, " is out of range [0, ", classes, ")");
      double w = wp ? static_cast<double>(wp[cls]) : 1.0;
      double l = -w * static_cast<double>(lp[(o * classes + cls) * inner + i]);
      pe[idx] = l;
      lossSum += l;
      weightSum += w;
    }
  if (red == Reduction::kNone) return perElem;
  // With neither weights nor ignore_index every element counts once, so the
  // mean divides by the element count (weightSum equals it then).
  double v = red == Reduction::kSum ? lossSum : lossSum / weightSum;
  return Tensor::fromVector<double>(DType::kF64, {}, {v});
}

/// \returns `t` (f64) converted to the float dtype `to` (f32 or f64).
Tensor narrowTo(const Tensor& t, DType to) {
  if (to == DType::kF64) return t;
  Tensor r = Tensor::zeros(to, t.shape());
  const double* s = t.data<double>();
  float* d = r.mutableData<float>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(s[i]);
  return r;
}

Status computeLoss(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out, bool sce) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferLoss(argsFromTensors(in, attrs), sce));
  ASSIGN_OR_RETURN(Reduction red, reductionOf(attrs));
  const Tensor& x = *in[0];
  const Tensor& target = *in[1];
  const Tensor* weight = in.size() > 2 ? in[2] : nullptr;
  int64_t outer, classes, inner;
  splitAround(x.shape(), 1, outer, classes, inner);
  return visitFloat(x.dtype(), [&]<typename T>() -> Status {
    Tensor logProb;
    const T* lp = x.data<T>();
    if (sce) {
      logProb = Tensor::zeros(x.type());
      logSoftmaxAxis1(x.data<T>(), logProb.mutableData<T>(), outer, classes, inner);
      lp = logProb.data<T>();
    }
    StatusOr<Tensor> loss = target.dtype() == DType::kI64
                                ? gatherLoss<T, int64_t>(lp, target, weight, x.shape(), attrs, red)
                                : gatherLoss<T, int32_t>(lp, target, weight, x.shape(), attrs, red);
    if (!loss.ok()) return loss.status();
    out.push_back(narrowTo(*loss, x.dtype()));
    if (types.size() == 2) out.push_back(std::move(logProb));
    return Status::OK();
  });
}

Status computeNll(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeNll, in, attrs, out);
  return computeLoss(in, attrs, out, false);
}

Status computeSce(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeSce, in, attrs, out);
  return computeLoss(in, attrs, out, true);
}

}  // namespace

void registerLossOps(OpRegistry& r) {
  r.add(OpKind::NegativeLogLikelihoodLoss, &computeNll);
  r.add(OpKind::SoftmaxCrossEntropyLoss, &computeSce);
}

}  // namespace pcc
