// Activations with attributes: LeakyRelu, Elu, Selu, Celu, HardSigmoid,
// HardSwish, Mish, ThresholdedRelu, Shrink; Clip and PRelu.
// Their type inference is runtime/schema/math_activation.cpp.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "runtime/ops/math.h"
#include "runtime/schema/math_activation.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::math_activation_schema;

/// The attributes of an activation with the ONNX defaults filled in.
struct ActParams {
  double alpha = 0, beta = 0, gamma = 0;
};

ActParams actParams(Act a, const AttrMap& attrs) {
  ActParams p;
  switch (a) {
    case Act::kLeakyRelu: p.alpha = attrs.getFloat("alpha", 0.01f); break;
    case Act::kElu: p.alpha = attrs.getFloat("alpha", 1.0f); break;
    case Act::kSelu:
      p.alpha = attrs.getFloat("alpha", 1.67326319217681884765625f);
      p.gamma = attrs.getFloat("gamma", 1.05070102214813232421875f);
      break;
    case Act::kCelu: p.alpha = attrs.getFloat("alpha", 1.0f); break;
    case Act::kHardSigmoid:
      p.alpha = attrs.getFloat("alpha", 0.2f);
      p.beta = attrs.getFloat("beta", 0.5f);
      break;
    case Act::kHardSwish: p.alpha = 1.0 / 6.0; p.beta = 0.5; break;
    case Act::kMish: break;
    case Act::kThresholdedRelu: p.alpha = attrs.getFloat("alpha", 1.0f); break;
    case Act::kShrink:  // alpha = lambd, beta = bias
      p.alpha = attrs.getFloat("lambd", 0.5f);
      p.beta = attrs.getFloat("bias", 0.0f);
      break;
  }
  return p;
}

double applyAct(Act a, const ActParams& p, double x) {
  switch (a) {
    case Act::kLeakyRelu: return x < 0 ? p.alpha * x : x;
    case Act::kElu: return x < 0 ? p.alpha * std::expm1(x) : x;
    case Act::kSelu: return x <= 0 ? p.gamma * p.alpha * std::expm1(x) : p.gamma * x;
    case Act::kCelu: return std::max(0.0, x) + std::min(0.0, p.alpha * std::expm1(x / p.alpha));
    case Act::kHardSigmoid: return std::clamp(p.alpha * x + p.beta, 0.0, 1.0);
    case Act::kHardSwish: return x * std::clamp(p.alpha * x + p.beta, 0.0, 1.0);
    case Act::kMish: {
      double sp = x > 30 ? x : std::log1p(std::exp(x));
      return x * std::tanh(sp);
    }
    case Act::kThresholdedRelu: return x > p.alpha ? x : 0.0;
    case Act::kShrink: return x < -p.alpha ? x + p.beta : (x > p.alpha ? x - p.beta : 0.0);
  }
  return x;
}

template <Act kAct>
Status computeAct(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeAct<kAct>, in, attrs, out);
  ActParams p = actParams(kAct, attrs);
  Tensor r = output(out, 0, in[0]->type());
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* x = in[0]->data<T>();
    T* o = r.mutableData<T>();
    for (int64_t i = 0; i < r.numel(); ++i) {
      double v = applyAct(kAct, p, static_cast<double>(x[i]));
      // Integer results (Shrink) wrap through int64 as integer arithmetic
      // would; a double out of T's range converts with undefined behavior.
      if constexpr (std::is_integral_v<T>) o[i] = static_cast<T>(static_cast<int64_t>(v));
      else o[i] = static_cast<T>(v);
    }
    return Status::OK();
  }));
  return Status::OK();
}

Status computeClip(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeClip, in, attrs, out);
  const Tensor* lo = in.size() > 1 ? in[1] : nullptr;
  const Tensor* hi = in.size() > 2 ? in[2] : nullptr;
  Tensor r = output(out, 0, in[0]->type());
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* x = in[0]->data<T>();
    T* o = r.mutableData<T>();
    // min > max gives max everywhere, as max(min(x, ...)) ordering implies.
    // The bounds are read once (the output may alias nothing but input 0).
    const bool hasLo = lo != nullptr, hasHi = hi != nullptr;
    const T l = hasLo ? lo->data<T>()[0] : T(0), h = hasHi ? hi->data<T>()[0] : T(0);
    const int64_t n = r.numel();
    for (int64_t i = 0; i < n; ++i) {
      T v = x[i];
      if (hasLo && v < l) v = l;
      if (hasHi && v > h) v = h;
      o[i] = v;
    }
    return Status::OK();
  }));
  return Status::OK();
}

Status computePRelu(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computePRelu, in, attrs, out);
  Tensor r = output(out, 0, in[0]->type());
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    broadcastMap<T, T, T>(*in[0], *in[1], r, [](T x, T s) { return x < T(0) ? T(s * x) : x; });
    return Status::OK();
  }));
  return Status::OK();
}

}  // namespace

void registerMathActivationOps(OpRegistry& r) {
  r.add(OpKind::LeakyRelu, &computeAct<Act::kLeakyRelu>, kWritesOutputs);
  r.add(OpKind::Elu, &computeAct<Act::kElu>, kWritesOutputs);
  r.add(OpKind::Selu, &computeAct<Act::kSelu>, kWritesOutputs);
  r.add(OpKind::Celu, &computeAct<Act::kCelu>, kWritesOutputs);
  r.add(OpKind::HardSigmoid, &computeAct<Act::kHardSigmoid>, kWritesOutputs);
  r.add(OpKind::HardSwish, &computeAct<Act::kHardSwish>, kWritesOutputs);
  r.add(OpKind::Mish, &computeAct<Act::kMish>, kWritesOutputs);
  r.add(OpKind::ThresholdedRelu, &computeAct<Act::kThresholdedRelu>, kWritesOutputs);
  r.add(OpKind::Shrink, &computeAct<Act::kShrink>, kWritesOutputs);
  r.add(OpKind::Clip, &computeClip, kWritesOutputs);
  r.add(OpKind::PRelu, &computePRelu, kWritesOutputs);
}

}  // namespace pcc
