// Normalizations over channel groups and axes: InstanceNormalization,
// GroupNormalization (opset-21 form: scale and bias per channel),
// LpNormalization, MeanVarianceNormalization and LRN. Statistics accumulate in
// double. (LayerNormalization and RMSNormalization are in norm_reduce.cpp.)
// Their type inference is runtime/schema/reduce_norm_norms.cpp.
#include <algorithm>
#include <cmath>

#include "runtime/ops/reduce_norm.h"
#include "runtime/schema/reduce_norm_norms.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::reduce_norm_norms_schema;

template <bool kGroup>
Status computeGroupNorm(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeGroupNorm<kGroup>, in, attrs, out);
  const Tensor& x = *in[0];
  int64_t n = x.shape()[0], c = x.shape()[1];
  int64_t groups = kGroup ? attrs.getInt("num_groups", 1) : c;
  int64_t inner = n * c != 0 ? x.numel() / (n * c) : 0;
  int64_t perGroup = c / groups;
  double eps = attrs.getFloat("epsilon", 1e-5f);
  Tensor r = Tensor::zeros(x.type());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T *scale = in[1]->data<T>(), *bias = in[2]->data<T>();
    int64_t len = perGroup * inner;
    for (int64_t b = 0; b < n * groups; ++b) {
      const T* xs = x.data<T>() + b * len;
      T* ys = r.mutableData<T>() + b * len;
      double mean = 0, var = 0;
      for (int64_t j = 0; j < len; ++j) mean += xs[j];
      mean /= static_cast<double>(len);
      for (int64_t j = 0; j < len; ++j) var += (xs[j] - mean) * (xs[j] - mean);
      var /= static_cast<double>(len);
      double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < len; ++j) {
        int64_t ch = (b % groups) * perGroup + j / inner;
        ys[j] = static_cast<T>((xs[j] - mean) * inv * scale[ch] + bias[ch]);
      }
    }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeLpNorm(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeLpNorm, in, attrs, out);
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", -1), x.rank()));
  bool l1 = attrs.getInt("p", 2) == 1;
  int64_t outer, n, inner;
  splitAround(x.shape(), axis, outer, n, inner);
  Tensor r = Tensor::zeros(x.type());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* xs = x.data<T>() + o * n * inner + i;
        T* ys = r.mutableData<T>() + o * n * inner + i;
        double norm = 0;
        for (int64_t j = 0; j < n; ++j) {
          double v = xs[j * inner];
          norm += l1 ? std::fabs(v) : v * v;
        }
        if (!l1) norm = std::sqrt(norm);
        for (int64_t j = 0; j < n; ++j) ys[j * inner] = static_cast<T>(xs[j * inner] / norm);
      }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeMvn(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeMvn, in, attrs, out);
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(std::vector<bool> red, mvnDims(argsFromTensors(in, attrs)));
  Dims kept = reducedShape(x.shape(), red, true);
  int64_t slots = numElements(kept);
  double count = slots ? static_cast<double>(x.numel() / slots) : 0.0;
  std::vector<double> mean(slots, 0.0), var(slots, 0.0);
  Tensor r = Tensor::zeros(x.type());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T* px = x.data<T>();
    T* py = r.mutableData<T>();
    {
      BroadcastWalker w(x.shape(), {kept});
      for (int64_t i = 0; i < x.numel(); ++i, w.next()) mean[w.offset(0)] += px[i];
    }
    for (double& m : mean) m /= count;
    {
      BroadcastWalker w(x.shape(), {kept});
      for (int64_t i = 0; i < x.numel(); ++i, w.next()) {
        double d = px[i] - mean[w.offset(0)];
        var[w.offset(0)] += d * d;
      }
    }
    // The ONNX definition adds 1e-9 to the standard deviation, not the variance.
    BroadcastWalker w(x.shape(), {kept});
    for (int64_t i = 0; i < x.numel(); ++i, w.next()) {
      int64_t s = w.offset(0);
      py[i] = static_cast<T>((px[i] - mean[s]) / (std::sqrt(var[s] / count) + 1e-9));
    }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeLrn(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeLrn, in, attrs, out);
  const Tensor& x = *in[0];
  int64_t size = attrs.getInt("size", 1);
  double alpha = attrs.getFloat("alpha", 1e-4f), beta = attrs.getFloat("beta", 0.75f),
         bias = attrs.getFloat("bias", 1.0f);
  int64_t outer, c, inner;
  splitAround(x.shape(), 1, outer, c, inner);
  // The window around channel ch is [ch - floor((size-1)/2), ch + ceil((size-1)/2)].
  int64_t before = (size - 1) / 2, after = size / 2;
  Tensor r = Tensor::zeros(x.type());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t i = 0; i < inner; ++i) {
          const T* xs = x.data<T>() + o * c * inner + i;
          double sq = 0;
          for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k)
            sq += static_cast<double>(xs[k * inner]) * xs[k * inner];
          r.mutableData<T>()[(o * c + ch) * inner + i] =
              static_cast<T>(xs[ch * inner] / std::pow(bias + alpha / size * sq, beta));
        }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerNormalizationOps(OpRegistry& r) {
  r.add(OpKind::InstanceNormalization, &computeGroupNorm<false>);
  r.add(OpKind::GroupNormalization, &computeGroupNorm<true>);
  r.add(OpKind::LpNormalization, &computeLpNorm);
  r.add(OpKind::MeanVarianceNormalization, &computeMvn);
  r.add(OpKind::LRN, &computeLrn);
}

}  // namespace pcc
