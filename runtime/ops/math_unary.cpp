// Attribute-free unary math: Abs, Neg, Sign (any numeric type); Exp, Log,
// Reciprocal, Floor, Ceil, Round, the trigonometric and hyperbolic functions,
// Softplus, Softsign (float types); Not, IsNaN, IsInf, BitwiseNot.
// Their type inference is runtime/schema/math_unary.cpp.
#include <cfenv>
#include <cmath>
#include <limits>

#include "runtime/ops/math.h"
#include "runtime/schema/math_unary.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::math_unary_schema;

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

template <FloatFn kFn>
Status computeFloat(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeFloat<kFn>, in, attrs, out);
  Tensor r = output(out, 0, in[0]->type());
  RETURN_IF_ERROR(visitFloat(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* p = in[0]->data<T>();
    T* o = r.mutableData<T>();
    for (int64_t i = 0; i < r.numel(); ++i) o[i] = static_cast<T>(applyFloatFn(kFn, p[i]));
    return Status::OK();
  }));
  return Status::OK();
}

template <SignFn kFn>
Status computeSignFn(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeSignFn<kFn>, in, attrs, out);
  Tensor r = output(out, 0, in[0]->type());
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
  return Status::OK();
}

Status computeNot(const std::vector<const Tensor*>& in, const AttrMap&, std::vector<Tensor>& out) {
  Tensor r = output(out, 0, in[0]->type());
  const uint8_t* p = in[0]->data<uint8_t>();
  uint8_t* o = r.mutableData<uint8_t>();
  for (int64_t i = 0; i < r.numel(); ++i) o[i] = p[i] ? 0 : 1;
  return Status::OK();
}

Status computeBitwiseNot(const std::vector<const Tensor*>& in, const AttrMap&,
                         std::vector<Tensor>& out) {
  Tensor r = output(out, 0, in[0]->type());
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
  return Status::OK();
}

/// IsNaN when `isInf` is false; else IsInf with its detect_* attributes.
Status classify(const Tensor& x, const AttrMap& attrs, bool isInf, std::vector<Tensor>& out) {
  bool pos = attrs.getInt("detect_positive", 1) != 0;
  bool neg = attrs.getInt("detect_negative", 1) != 0;
  Tensor r = output(out, 0, DType::kBool, x.shape());
  uint8_t* o = r.mutableData<uint8_t>();
  // getDouble widens every float type exactly, so one loop serves them all.
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.getDouble(i);
    if (!isInf) o[i] = std::isnan(v);
    else o[i] = std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
  }
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
  r.add(OpKind::Abs, &computeSignFn<SignFn::kAbs>, kWritesOutputs);
  r.add(OpKind::Neg, &computeSignFn<SignFn::kNeg>, kWritesOutputs);
  r.add(OpKind::Sign, &computeSignFn<SignFn::kSign>, kWritesOutputs);
  r.add(OpKind::Exp, &computeFloat<FloatFn::kExp>, kWritesOutputs);
  r.add(OpKind::Log, &computeFloat<FloatFn::kLog>, kWritesOutputs);
  r.add(OpKind::Reciprocal, &computeFloat<FloatFn::kReciprocal>, kWritesOutputs);
  r.add(OpKind::Floor, &computeFloat<FloatFn::kFloor>, kWritesOutputs);
  r.add(OpKind::Ceil, &computeFloat<FloatFn::kCeil>, kWritesOutputs);
  r.add(OpKind::Round, &computeFloat<FloatFn::kRound>, kWritesOutputs);
  r.add(OpKind::Sin, &computeFloat<FloatFn::kSin>, kWritesOutputs);
  r.add(OpKind::Cos, &computeFloat<FloatFn::kCos>, kWritesOutputs);
  r.add(OpKind::Tan, &computeFloat<FloatFn::kTan>, kWritesOutputs);
  r.add(OpKind::Asin, &computeFloat<FloatFn::kAsin>, kWritesOutputs);
  r.add(OpKind::Acos, &computeFloat<FloatFn::kAcos>, kWritesOutputs);
  r.add(OpKind::Atan, &computeFloat<FloatFn::kAtan>, kWritesOutputs);
  r.add(OpKind::Sinh, &computeFloat<FloatFn::kSinh>, kWritesOutputs);
  r.add(OpKind::Cosh, &computeFloat<FloatFn::kCosh>, kWritesOutputs);
  r.add(OpKind::Asinh, &computeFloat<FloatFn::kAsinh>, kWritesOutputs);
  r.add(OpKind::Acosh, &computeFloat<FloatFn::kAcosh>, kWritesOutputs);
  r.add(OpKind::Atanh, &computeFloat<FloatFn::kAtanh>, kWritesOutputs);
  r.add(OpKind::Softplus, &computeFloat<FloatFn::kSoftplus>, kWritesOutputs);
  r.add(OpKind::Softsign, &computeFloat<FloatFn::kSoftsign>, kWritesOutputs);
  r.add(OpKind::Not, &computeNot, kWritesOutputs);
  r.add(OpKind::BitwiseNot, &computeBitwiseNot, kWritesOutputs);
  r.add(OpKind::IsNaN, &computeIsNaN, kWritesOutputs);
  r.add(OpKind::IsInf, &computeIsInf, kWritesOutputs);
}

}  // namespace pcc
