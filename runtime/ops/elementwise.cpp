// Elementwise ops: broadcasting binary arithmetic and comparison, Where, the
// unary math functions, Cast and Identity.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "runtime/ops/op_util.h"
#include "runtime/support/float_formats.h"

namespace pcc {
namespace {
using namespace ops;

// ---- broadcasting ----------------------------------------------------------

/// Applies `f(a[i], b[j])` over the broadcast of the shapes of `a` and `b`.
template <typename TA, typename TB, typename TO, typename F>
void broadcastBinary(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TO* po = out.mutableData<TO>();
  int64_t n = out.numel();
  if (a.shape() == out.shape() && b.shape() == out.shape()) {  // common case: no broadcast
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    return;
  }
  BroadcastWalker w(out.shape(), {a.shape(), b.shape()});
  for (int64_t i = 0; i < n; ++i, w.next()) po[i] = f(pa[w.offset(0)], pb[w.offset(1)]);
}

StatusOr<std::vector<TensorType>> inferArith(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &a = args.inputs[0], &b = args.inputs[1];
  RETURN_IF_ERROR(checkDType(a, kNumericTypes, "input A"));
  if (a.dtype != b.dtype)
    return invalidInput("input types differ: ", a.str(), " and ", b.str());
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(a.shape, b.shape));
  return std::vector<TensorType>{{a.dtype, out}};
}

enum class Arith { kAdd, kSub, kMul, kDiv };

template <Arith kOp>
Status computeArith(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeArith<kOp>, in, attrs, out);
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = Tensor::zeros(in[0]->dtype(), shape);
  Status st = visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    if constexpr (kOp == Arith::kAdd) {
      broadcastBinary<T, T, T>(*in[0], *in[1], r, [](T x, T y) { return T(x + y); });
    } else if constexpr (kOp == Arith::kSub) {
      broadcastBinary<T, T, T>(*in[0], *in[1], r, [](T x, T y) { return T(x - y); });
    } else if constexpr (kOp == Arith::kMul) {
      broadcastBinary<T, T, T>(*in[0], *in[1], r, [](T x, T y) { return T(x * y); });
    } else {
      if constexpr (std::is_integral_v<T>) {
        const T* pb = in[1]->data<T>();
        for (int64_t i = 0; i < in[1]->numel(); ++i)
          if (pb[i] == 0) return invalidInput("integer division by zero");
      }
      // Integer division truncates toward zero, as C does. x / -1 is the
      // two's-complement negation (INT_MIN / -1 wraps to INT_MIN, as numpy
      // and onnxruntime give), never the trapping machine division.
      broadcastBinary<T, T, T>(*in[0], *in[1], r, [](T x, T y) {
        if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
          if (y == T(-1)) return T(T(0) - static_cast<std::make_unsigned_t<T>>(x));
        }
        return T(x / y);
      });
    }
    return Status::OK();
  });
  RETURN_IF_ERROR(st);
  out.push_back(std::move(r));
  return Status::OK();
}

StatusOr<std::vector<TensorType>> inferPow(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &a = args.inputs[0], &b = args.inputs[1];
  RETURN_IF_ERROR(checkDType(a, kNumericTypes, "base"));
  RETURN_IF_ERROR(checkDType(b, kNumericTypes, "exponent"));
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(a.shape, b.shape));
  return std::vector<TensorType>{{a.dtype, out}};
}

Status computePow(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computePow, in, attrs, out);
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = Tensor::zeros(in[0]->dtype(), shape);
  const Tensor& e = *in[1];
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* pa = in[0]->data<T>();
    T* po = r.mutableData<T>();
    BroadcastWalker w(shape, {in[0]->shape(), e.shape()});
    for (int64_t i = 0; i < r.numel(); ++i, w.next())
      po[i] = static_cast<T>(std::pow(static_cast<double>(pa[w.offset(0)]), e.getDouble(w.offset(1))));
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

StatusOr<std::vector<TensorType>> inferEqual(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &a = args.inputs[0], &b = args.inputs[1];
  if (a.dtype != b.dtype)
    return invalidInput("input types differ: ", a.str(), " and ", b.str());
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(a.shape, b.shape));
  return std::vector<TensorType>{{DType::kBool, out}};
}

Status computeEqual(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeEqual, in, attrs, out);
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = Tensor::zeros(DType::kBool, shape);
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    broadcastBinary<T, T, uint8_t>(*in[0], *in[1], r, [](T x, T y) { return uint8_t(x == y); });
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

StatusOr<std::vector<TensorType>> inferWhere(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 3));
  const TensorType &c = args.inputs[0], &x = args.inputs[1], &y = args.inputs[2];
  if (c.dtype != DType::kBool) return invalidInput("condition must be bool, got ", c.str());
  if (x.dtype != y.dtype) return invalidInput("X and Y types differ: ", x.str(), " and ", y.str());
  ASSIGN_OR_RETURN(Dims xy, broadcastShapes(x.shape, y.shape));
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(c.shape, xy));
  return std::vector<TensorType>{{x.dtype, out}};
}

Status computeWhere(const std::vector<const Tensor*>& in, const AttrMap&, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(Dims xy, broadcastShapes(in[1]->shape(), in[2]->shape()));
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), xy));
  Tensor r = Tensor::zeros(in[1]->dtype(), shape);
  size_t es = dtypeSize(r.dtype());
  const uint8_t* c = in[0]->data<uint8_t>();
  const char* x = static_cast<const char*>(in[1]->raw());
  const char* y = static_cast<const char*>(in[2]->raw());
  char* o = static_cast<char*>(r.mutableData());
  BroadcastWalker w(shape, {in[0]->shape(), in[1]->shape(), in[2]->shape()});
  for (int64_t i = 0; i < r.numel(); ++i, w.next()) {
    const char* src = c[w.offset(0)] ? x + w.offset(1) * es : y + w.offset(2) * es;
    std::memcpy(o + i * es, src, es);
  }
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- unary -----------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferFloatUnary(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input"));
  return std::vector<TensorType>{args.inputs[0]};
}

StatusOr<std::vector<TensorType>> inferNumericUnary(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kNumericTypes, "input"));
  return std::vector<TensorType>{args.inputs[0]};
}

StatusOr<std::vector<TensorType>> inferSameType(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  return std::vector<TensorType>{args.inputs[0]};
}

enum class Unary { kSqrt, kErf, kTanh, kSigmoid, kGeluErf, kGeluTanh };

/// \returns f(x), computed in double so the f32 result is correctly rounded
/// wherever the math library is.
double applyUnary(Unary op, double x) {
  switch (op) {
    case Unary::kSqrt: return std::sqrt(x);
    case Unary::kErf: return std::erf(x);
    case Unary::kTanh: return std::tanh(x);
    case Unary::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Unary::kGeluErf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Unary::kGeluTanh: {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
  }
  return x;
}

Status runUnary(Unary op, const Tensor& x, std::vector<Tensor>& out) {
  Tensor r = Tensor::zeros(x.type());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T* p = x.data<T>();
    T* o = r.mutableData<T>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = static_cast<T>(applyUnary(op, p[i]));
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

template <Unary kOp>
Status computeUnary(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeUnary<kOp>, in, attrs, out);
  return runUnary(kOp, *in[0], out);
}

StatusOr<std::vector<TensorType>> inferGelu(const InferArgs& args) {
  std::string approx = args.attrs ? args.attrs->getString("approximate", "none") : "none";
  if (approx != "none" && approx != "tanh")
    return invalidInput("approximate must be \"none\" or \"tanh\", got \"", approx, "\"");
  return inferFloatUnary(args);
}

Status computeGelu(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeGelu, in, attrs, out);
  bool tanh = attrs.getString("approximate", "none") == "tanh";
  return runUnary(tanh ? Unary::kGeluTanh : Unary::kGeluErf, *in[0], out);
}

Status computeRelu(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeRelu, in, attrs, out);
  Tensor r = Tensor::zeros(in[0]->type());
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* p = in[0]->data<T>();
    T* o = r.mutableData<T>();
    for (int64_t i = 0; i < r.numel(); ++i) o[i] = p[i] > T(0) ? p[i] : T(0);
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeIdentity(const std::vector<const Tensor*>& in, const AttrMap&,
                       std::vector<Tensor>& out) {
  out.push_back(in[0]->clone());
  return Status::OK();
}

// ---- Cast ------------------------------------------------------------------

StatusOr<DType> castTarget(const AttrMap* attrs) {
  if (!attrs || !attrs->has("to")) return invalidInput("missing attribute 'to'");
  int64_t code = attrs->getInt("to", 0);
  auto t = dtypeFromOnnx(static_cast<int32_t>(code));
  if (!t) return unsupported("cast to ONNX dtype ", code, " is not supported");
  return *t;
}

StatusOr<std::vector<TensorType>> inferCast(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  ASSIGN_OR_RETURN(DType to, castTarget(args.attrs));
  return std::vector<TensorType>{{to, args.inputs[0].shape}};
}

/// \returns Cast's round_mode attribute (float8 e8m0 targets only).
StatusOr<E8M0Round> castRoundMode(const AttrMap& attrs) {
  std::string mode = attrs.getString("round_mode", "up");
  if (mode == "up") return E8M0Round::kUp;
  if (mode == "down") return E8M0Round::kDown;
  if (mode == "nearest") return E8M0Round::kNearest;
  return invalidInput("round_mode must be up, down or nearest, got '", mode, "'");
}

Status computeCast(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(DType to, castTarget(&attrs));
  ASSIGN_OR_RETURN(E8M0Round round, castRoundMode(attrs));
  bool saturate = attrs.getInt("saturate", 1) != 0;
  const Tensor& x = *in[0];
  Tensor r = Tensor::zeros(to, x.shape());
  DType from = x.dtype();
  int64_t n = x.numel();
  if (isNarrowFloat(to) && (to == DType::kF8E8M0 || !saturate)) {
    // The attributes only change conversions to float8.
    uint8_t* o = r.mutableData<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      double v = x.getDouble(i);
      o[i] = to == DType::kF8E8M0 ? floatToE8M0(static_cast<float>(v), saturate, round)
                                  : floatToNarrow(to, v, saturate);
    }
  } else if (isFloat(from) || (from == DType::kU64 && isFloat(to))) {
    for (int64_t i = 0; i < n; ++i) r.setDouble(i, x.getDouble(i));
  } else {
    // Integer sources go through int64 so that large values survive exactly.
    for (int64_t i = 0; i < n; ++i) r.setInt(i, x.getInt(i));
  }
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerElementwiseOps(OpRegistry& r) {
  r.add({"Add", &inferArith, &computeArith<Arith::kAdd>});
  r.add({"Sub", &inferArith, &computeArith<Arith::kSub>});
  r.add({"Mul", &inferArith, &computeArith<Arith::kMul>});
  r.add({"Div", &inferArith, &computeArith<Arith::kDiv>});
  r.add({"Pow", &inferPow, &computePow});
  r.add({"Equal", &inferEqual, &computeEqual});
  r.add({"Where", &inferWhere, &computeWhere});
  r.add({"Sqrt", &inferFloatUnary, &computeUnary<Unary::kSqrt>});
  r.add({"Erf", &inferFloatUnary, &computeUnary<Unary::kErf>});
  r.add({"Tanh", &inferFloatUnary, &computeUnary<Unary::kTanh>});
  r.add({"Sigmoid", &inferFloatUnary, &computeUnary<Unary::kSigmoid>});
  r.add({"Gelu", &inferGelu, &computeGelu});
  r.add({"Relu", &inferNumericUnary, &computeRelu});
  r.add({"Cast", &inferCast, &computeCast});
  r.add({"Identity", &inferSameType, &computeIdentity, /*viewOfInput0=*/true});
}

}  // namespace pcc
