// Normalizations over channel groups and axes: InstanceNormalization,
// GroupNormalization (opset-21 form: scale and bias per channel),
// LpNormalization, MeanVarianceNormalization and LRN. Statistics accumulate in
// double. (LayerNormalization and RMSNormalization are in norm_reduce.cpp.)
#include <algorithm>
#include <cmath>

#include "runtime/ops/reduce_norm.h"

namespace pcc {
namespace {
using namespace ops;

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

// ---- LpNormalization ----------------------------------------------------------

StatusOr<std::vector<TensorType>> inferLpNorm(const InferArgs& args) {
  ASSIGN_OR_RETURN(auto types, inferFloatAlongAxis(args));
  int64_t p = attrsOf(args).getInt("p", 2);
  if (p != 1 && p != 2) return invalidInput("p must be 1 or 2, got ", p);
  return types;
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

// ---- MeanVarianceNormalization -------------------------------------------------

/// \returns the reduced dims of MVN: its `axes` attribute, [0, 2, 3] by default.
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

StatusOr<std::vector<TensorType>> inferMvn(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input X"));
  RETURN_IF_ERROR(mvnDims(args).status());
  return std::vector<TensorType>{args.inputs[0]};
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
  r.add({"InstanceNormalization", &inferGroupNorm<false>, &computeGroupNorm<false>});
  r.add({"GroupNormalization", &inferGroupNorm<true>, &computeGroupNorm<true>});
  r.add({"LpNormalization", &inferLpNorm, &computeLpNorm});
  r.add({"MeanVarianceNormalization", &inferMvn, &computeMvn});
  r.add({"LRN", &inferLrn, &computeLrn});
}

}  // namespace pcc
