// Activations with attributes: LeakyRelu, Elu, Selu, Celu, HardSigmoid,
// HardSwish, Mish, ThresholdedRelu, Shrink; Clip and PRelu.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "runtime/ops/math.h"

namespace pcc {
namespace {
using namespace ops;

enum class Act { kLeakyRelu, kElu, kSelu, kCelu, kHardSigmoid, kHardSwish, kMish, kThresholdedRelu, kShrink };

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
StatusOr<std::vector<TensorType>> inferAct(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  // Shrink is defined on every numeric type; the others on floats only.
  RETURN_IF_ERROR(checkDType(args.inputs[0], kAct == Act::kShrink ? kNumericTypes : kFloatTypes,
                             "input"));
  if (kAct == Act::kCelu && args.attrs && args.attrs->getFloat("alpha", 1.0f) == 0.0f)
    return invalidInput("alpha must not be 0");
  return std::vector<TensorType>{args.inputs[0]};
}

template <Act kAct>
Status computeAct(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeAct<kAct>, in, attrs, out);
  ActParams p = actParams(kAct, attrs);
  Tensor r = Tensor::zeros(in[0]->type());
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
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Clip ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferClip(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 3));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kNumericTypes, "input"));
  RETURN_IF_ERROR(checkSameDType(args));
  for (size_t i = 1; i < args.inputs.size(); ++i)
    if (args.has(i) && args.inputs[i].numel() != 1)
      return invalidInput(i == 1 ? "min" : "max", " must be a scalar, got ", args.inputs[i].str());
  return std::vector<TensorType>{args.inputs[0]};
}

Status computeClip(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeClip, in, attrs, out);
  const Tensor* lo = in.size() > 1 ? in[1] : nullptr;
  const Tensor* hi = in.size() > 2 ? in[2] : nullptr;
  Tensor r = Tensor::zeros(in[0]->type());
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* x = in[0]->data<T>();
    T* o = r.mutableData<T>();
    // min > max gives max everywhere, as max(min(x, ...)) ordering implies.
    for (int64_t i = 0; i < r.numel(); ++i) {
      T v = x[i];
      if (lo && v < lo->data<T>()[0]) v = lo->data<T>()[0];
      if (hi && v > hi->data<T>()[0]) v = hi->data<T>()[0];
      o[i] = v;
    }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- PRelu -----------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferPRelu(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kNumericTypes, "input X"));
  RETURN_IF_ERROR(checkSameDType(args));
  // The slope broadcasts to X, never the other way round.
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(args.inputs[0].shape, args.inputs[1].shape));
  if (out != args.inputs[0].shape)
    return invalidInput("slope ", args.inputs[1].str(), " does not broadcast to X ",
                        args.inputs[0].str());
  return std::vector<TensorType>{args.inputs[0]};
}

Status computePRelu(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computePRelu, in, attrs, out);
  Tensor r = Tensor::zeros(in[0]->type());
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    broadcastMap<T, T, T>(*in[0], *in[1], r, [](T x, T s) { return x < T(0) ? T(s * x) : x; });
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerMathActivationOps(OpRegistry& r) {
  r.add({"LeakyRelu", &inferAct<Act::kLeakyRelu>, &computeAct<Act::kLeakyRelu>});
  r.add({"Elu", &inferAct<Act::kElu>, &computeAct<Act::kElu>});
  r.add({"Selu", &inferAct<Act::kSelu>, &computeAct<Act::kSelu>});
  r.add({"Celu", &inferAct<Act::kCelu>, &computeAct<Act::kCelu>});
  r.add({"HardSigmoid", &inferAct<Act::kHardSigmoid>, &computeAct<Act::kHardSigmoid>});
  r.add({"HardSwish", &inferAct<Act::kHardSwish>, &computeAct<Act::kHardSwish>});
  r.add({"Mish", &inferAct<Act::kMish>, &computeAct<Act::kMish>});
  r.add({"ThresholdedRelu", &inferAct<Act::kThresholdedRelu>, &computeAct<Act::kThresholdedRelu>});
  r.add({"Shrink", &inferAct<Act::kShrink>, &computeAct<Act::kShrink>});
  r.add({"Clip", &inferClip, &computeClip});
  r.add({"PRelu", &inferPRelu, &computePRelu});
}

}  // namespace pcc
