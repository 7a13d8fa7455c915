// Normalizations: Softmax and LogSoftmax, LayerNormalization and
// RMSNormalization, BatchNormalization (inference); the reductions are in reduce_norm_reduce.cpp. Sums accumulate in double:
// these kernels are the oracle the optimized ones are checked against.
// Their type inference is runtime/schema/norm_reduce.cpp.
#include <cmath>
#include <vector>

#include "runtime/ops/reduce_norm.h"

namespace pcc {
namespace {
using namespace ops;

/// Softmax, or its logarithm (LogSoftmax) computed as x - max - log(sum) so
/// that it stays finite where the softmax underflows.
template <bool kLog>
Status computeSoftmax(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                      std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeSoftmax<kLog>, in, attrs, out);
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", -1), x.rank()));
  int64_t outer, n, inner;
  splitAround(x.shape(), axis, outer, n, inner);
  Tensor r = output(out, 0, x.type());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T* px = x.data<T>();
    T* py = r.mutableData<T>();
    std::vector<double> e(n);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* xs = px + o * n * inner + i;
        T* ys = py + o * n * inner + i;
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<double>(xs[j * inner]));
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += e[j] = std::exp(xs[j * inner] - mx);
        for (int64_t j = 0; j < n; ++j)
          ys[j * inner] = static_cast<T>(kLog ? xs[j * inner] - mx - std::log(sum) : e[j] / sum);
      }
    return Status::OK();
  }));
  return Status::OK();
}

template <bool kRms>
Status computeLayerNorm(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                        std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeLayerNorm<kRms>, in, attrs, out);
  const Tensor& x = *in[0];
  const Tensor& scale = *in[1];
  const Tensor* bias = in.size() > 2 && in[2] && in[2]->defined() ? in[2] : nullptr;
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", -1), x.rank()));
  double eps = attrs.getFloat("epsilon", 1e-5f);
  Dims norm(x.shape().begin() + axis, x.shape().end());
  int64_t n = numElements(norm), outer = n ? x.numel() / n : 0;
  // Offsets of Scale and B for each position of the normalized block.
  std::vector<int64_t> so(n), bo(n);
  BroadcastWalker w(norm, {scale.shape(), bias ? bias->shape() : Dims{}});
  for (int64_t j = 0; j < n; ++j, w.next()) {
    so[j] = w.offset(0);
    bo[j] = w.offset(1);
  }
  Tensor r = output(out, 0, x.type());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T* ps = scale.data<T>();
    const T* pb = bias ? bias->data<T>() : nullptr;
    for (int64_t o = 0; o < outer; ++o) {
      const T* xs = x.data<T>() + o * n;
      T* ys = r.mutableData<T>() + o * n;
      double mean = 0, var = 0;
      if (!kRms) {
        for (int64_t j = 0; j < n; ++j) mean += xs[j];
        mean /= n;
      }
      for (int64_t j = 0; j < n; ++j) var += (xs[j] - mean) * (xs[j] - mean);
      var /= n;
      double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < n; ++j)
        ys[j] = static_cast<T>((xs[j] - mean) * inv * ps[so[j]] + (pb ? pb[bo[j]] : 0.0));
    }
    return Status::OK();
  }));
  return Status::OK();
}

Status computeBatchNorm(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                        std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeBatchNorm, in, attrs, out);
  const Tensor& x = *in[0];
  double eps = attrs.getFloat("epsilon", 1e-5f);
  int64_t n = x.shape()[0], c = x.shape()[1];
  int64_t inner = n * c != 0 ? x.numel() / (n * c) : 0;
  Tensor r = output(out, 0, x.type());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T *scale = in[1]->data<T>(), *bias = in[2]->data<T>(), *mean = in[3]->data<T>(),
            *var = in[4]->data<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        double k = scale[ch] / std::sqrt(static_cast<double>(var[ch]) + eps);
        const T* xs = x.data<T>() + (b * c + ch) * inner;
        T* ys = r.mutableData<T>() + (b * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i)
          ys[i] = static_cast<T>((xs[i] - static_cast<double>(mean[ch])) * k + bias[ch]);
      }
    return Status::OK();
  }));
  return Status::OK();
}

}  // namespace

void registerNormReduceOps(OpRegistry& r) {
  r.add(OpKind::Softmax, &computeSoftmax<false>, kWritesOutputs);
  r.add(OpKind::LogSoftmax, &computeSoftmax<true>, kWritesOutputs);
  r.add(OpKind::LayerNormalization, &computeLayerNorm<false>, kWritesOutputs);
  r.add(OpKind::RMSNormalization, &computeLayerNorm<true>, kWritesOutputs);
  r.add(OpKind::BatchNormalization, &computeBatchNorm, kWritesOutputs);
}

}  // namespace pcc
