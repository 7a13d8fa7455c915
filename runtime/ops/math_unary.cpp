// Attribute-free unary math: Abs, Neg, Sign (any numeric type); Exp, Log,
// Reciprocal, Floor, Ceil, Round, the trigonometric and hyperbolic functions,
// Softplus, Softsign (float types); Not, IsNaN, IsInf, BitwiseNot.
#include <cfenv>
#include <cmath>
#include <limits>

#include "runtime/ops/math.h"

namespace pcc {
namespace {
using namespace ops;

enum class FloatFn {
  kExp, kLog, kReciprocal, kFloor, kCeil, kRound, kSin, kCos, kTan, kAsin, kAcos, kAtan,
  kSinh, kCosh, kAsinh, kAcosh, kAtanh, kSoftplus, kSoftsign,
};

/// \returns f(x) computed in double, so that f32 results are correctly rounded.
double applyFloatFn(FloatFn f, double x) {
  switch (f) {
    case FloatFn::kExp: return std::exp(x);
    case FloatFn::kLog: return std::log(x);
    case FloatFn::kReciprocal: return 1.0 / x;
    case FloatFn::kFloor: return std::floor(x);
    case FloatFn::kCeil: return std::ceil(x);
    // nearbyint rounds in the current mode, which is round-half-to-even by
    // default; ONNX Round asks for exactly that.
    case FloatFn::kRound: return std::nearbyint(x);
    case FloatFn::kSin: return std::sin(x);
    case FloatFn::kCos: return std::cos(x);
    case FloatFn::kTan: return std::tan(x);
    case FloatFn::kAsin: return std::asin(x);
    case FloatFn::kAcos: return std::acos(x);
    case FloatFn::kAtan: return std::atan(x);
    case FloatFn::kSinh: return std::sinh(x);
    case FloatFn::kCosh: return std::cosh(x);
    case FloatFn::kAsinh: return std::asinh(x);
    case FloatFn::kAcosh: return std::acosh(x);
    case FloatFn::kAtanh: return std::atanh(x);
    // log1p(exp(x)) overflows for large x where the result is x itself.
    case FloatFn::kSoftplus: return x > 30 ? x : std::log1p(std::exp(x));
    case FloatFn::kSoftsign: return x / (1.0 + std::fabs(x));
  }
  return x;
}

StatusOr<std::vector<TensorType>> inferFloat(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input"));
  return std::vector<TensorType>{args.inputs[0]};
}

template <FloatFn kFn>
Status computeFloat(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeFloat<kFn>, in, attrs, out);
  Tensor r = Tensor::zeros(in[0]->type());
  RETURN_IF_ERROR(visitFloat(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* p = in[0]->data<T>();
    T* o = r.mutableData<T>();
    for (int64_t i = 0; i < r.numel(); ++i) o[i] = static_cast<T>(applyFloatFn(kFn, p[i]));
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Abs, Neg, Sign: every numeric type --------------------------------------

enum class SignFn { kAbs, kNeg, kSign };

template <SignFn kFn>
StatusOr<std::vector<TensorType>> inferSignFn(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  if constexpr (kFn == SignFn::kNeg) {  // ONNX Neg has no unsigned types
    RETURN_IF_ERROR(checkDType(args.inputs[0],
                               {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                                DType::kI16, DType::kI32, DType::kI64},
                               "input"));
  } else {
    RETURN_IF_ERROR(checkDType(args.inputs[0], kNumericTypes, "input"));
  }
  return std::vector<TensorType>{args.inputs[0]};
}

template <SignFn kFn>
Status computeSignFn(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeSignFn<kFn>, in, attrs, out);
  Tensor r = Tensor::zeros(in[0]->type());
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* p = in[0]->data<T>();
    T* o = r.mutableData<T>();
    for (int64_t i = 0; i < r.numel(); ++i) {
      T x = p[i];
      if constexpr (kFn == SignFn::kAbs) {
        if constexpr (std::is_unsigned_v<T>) o[i] = x;
        else o[i] = x < T(0) ? T(-x) : x;
      } else if constexpr (kFn == SignFn::kNeg) {
        o[i] = T(-x);
      } else {
        // NaN compares false both ways and stays NaN, as numpy's sign does.
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(x)) { o[i] = x; continue; }
        }
        o[i] = x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
      }
    }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Logic and classification ---------------------------------------------

StatusOr<std::vector<TensorType>> inferNot(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], {DType::kBool}, "input"));
  return std::vector<TensorType>{args.inputs[0]};
}

Status computeNot(const std::vector<const Tensor*>& in, const AttrMap&, std::vector<Tensor>& out) {
  Tensor r = Tensor::zeros(in[0]->type());
  const uint8_t* p = in[0]->data<uint8_t>();
  uint8_t* o = r.mutableData<uint8_t>();
  for (int64_t i = 0; i < r.numel(); ++i) o[i] = p[i] ? 0 : 1;
  out.push_back(std::move(r));
  return Status::OK();
}

StatusOr<std::vector<TensorType>> inferBitwiseNot(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kIntTypes, "input"));
  return std::vector<TensorType>{args.inputs[0]};
}

Status computeBitwiseNot(const std::vector<const Tensor*>& in, const AttrMap&,
                         std::vector<Tensor>& out) {
  Tensor r = Tensor::zeros(in[0]->type());
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    if constexpr (std::is_integral_v<T>) {
      const T* p = in[0]->data<T>();
      T* o = r.mutableData<T>();
      for (int64_t i = 0; i < r.numel(); ++i) o[i] = static_cast<T>(~p[i]);
      return Status::OK();
    } else {
      return internalError("BitwiseNot on a float type");
    }
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

StatusOr<std::vector<TensorType>> inferFloatPredicate(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input"));
  return std::vector<TensorType>{{DType::kBool, args.inputs[0].shape}};
}

/// IsNaN when `isInf` is false; else IsInf with its detect_* attributes.
Status classify(const Tensor& x, const AttrMap& attrs, bool isInf, std::vector<Tensor>& out) {
  bool pos = attrs.getInt("detect_positive", 1) != 0;
  bool neg = attrs.getInt("detect_negative", 1) != 0;
  Tensor r = Tensor::zeros(DType::kBool, x.shape());
  uint8_t* o = r.mutableData<uint8_t>();
  // getDouble widens every float type exactly, so one loop serves them all.
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.getDouble(i);
    if (!isInf) o[i] = std::isnan(v);
    else o[i] = std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
  }
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeIsNaN(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  return classify(*in[0], attrs, false, out);
}

Status computeIsInf(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  return classify(*in[0], attrs, true, out);
}

}  // namespace

void registerMathUnaryOps(OpRegistry& r) {
  r.add({"Abs", &inferSignFn<SignFn::kAbs>, &computeSignFn<SignFn::kAbs>});
  r.add({"Neg", &inferSignFn<SignFn::kNeg>, &computeSignFn<SignFn::kNeg>});
  r.add({"Sign", &inferSignFn<SignFn::kSign>, &computeSignFn<SignFn::kSign>});
  r.add({"Exp", &inferFloat, &computeFloat<FloatFn::kExp>});
  r.add({"Log", &inferFloat, &computeFloat<FloatFn::kLog>});
  r.add({"Reciprocal", &inferFloat, &computeFloat<FloatFn::kReciprocal>});
  r.add({"Floor", &inferFloat, &computeFloat<FloatFn::kFloor>});
  r.add({"Ceil", &inferFloat, &computeFloat<FloatFn::kCeil>});
  r.add({"Round", &inferFloat, &computeFloat<FloatFn::kRound>});
  r.add({"Sin", &inferFloat, &computeFloat<FloatFn::kSin>});
  r.add({"Cos", &inferFloat, &computeFloat<FloatFn::kCos>});
  r.add({"Tan", &inferFloat, &computeFloat<FloatFn::kTan>});
  r.add({"Asin", &inferFloat, &computeFloat<FloatFn::kAsin>});
  r.add({"Acos", &inferFloat, &computeFloat<FloatFn::kAcos>});
  r.add({"Atan", &inferFloat, &computeFloat<FloatFn::kAtan>});
  r.add({"Sinh", &inferFloat, &computeFloat<FloatFn::kSinh>});
  r.add({"Cosh", &inferFloat, &computeFloat<FloatFn::kCosh>});
  r.add({"Asinh", &inferFloat, &computeFloat<FloatFn::kAsinh>});
  r.add({"Acosh", &inferFloat, &computeFloat<FloatFn::kAcosh>});
  r.add({"Atanh", &inferFloat, &computeFloat<FloatFn::kAtanh>});
  r.add({"Softplus", &inferFloat, &computeFloat<FloatFn::kSoftplus>});
  r.add({"Softsign", &inferFloat, &computeFloat<FloatFn::kSoftsign>});
  r.add({"Not", &inferNot, &computeNot});
  r.add({"BitwiseNot", &inferBitwiseNot, &computeBitwiseNot});
  r.add({"IsNaN", &inferFloatPredicate, &computeIsNaN});
  r.add({"IsInf", &inferFloatPredicate, &computeIsInf});
}

}  // namespace pcc
