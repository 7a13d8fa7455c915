// Elementwise ops: broadcasting binary arithmetic and comparison, Where, the
// unary math functions, Cast and Identity.
// Their type inference is runtime/schema/elementwise.cpp.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "runtime/ops/op_util.h"
#include "runtime/support/float_convert.h"
#include "runtime/support/float_formats.h"
#include "runtime/schema/elementwise.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::elementwise_schema;

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

enum class Arith { kAdd, kSub, kMul, kDiv };

template <Arith kOp>
Status computeArith(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeArith<kOp>, in, attrs, out);
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = output(out, 0, in[0]->dtype(), shape);
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
  return Status::OK();
}

Status computePow(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computePow, in, attrs, out);
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = output(out, 0, in[0]->dtype(), shape);
  const Tensor& e = *in[1];
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* pa = in[0]->data<T>();
    T* po = r.mutableData<T>();
    BroadcastWalker w(shape, {in[0]->shape(), e.shape()});
    for (int64_t i = 0; i < r.numel(); ++i, w.next())
      po[i] = static_cast<T>(std::pow(static_cast<double>(pa[w.offset(0)]), e.getDouble(w.offset(1))));
    return Status::OK();
  }));
  return Status::OK();
}

Status computeEqual(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeEqual, in, attrs, out);
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = output(out, 0, DType::kBool, shape);
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    broadcastBinary<T, T, uint8_t>(*in[0], *in[1], r, [](T x, T y) { return uint8_t(x == y); });
    return Status::OK();
  }));
  return Status::OK();
}

Status computeWhere(const std::vector<const Tensor*>& in, const AttrMap&, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(Dims xy, broadcastShapes(in[1]->shape(), in[2]->shape()));
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), xy));
  Tensor r = output(out, 0, in[1]->dtype(), shape);
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
  return Status::OK();
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
  Tensor r = output(out, 0, x.type());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T* p = x.data<T>();
    T* o = r.mutableData<T>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = static_cast<T>(applyUnary(op, p[i]));
    return Status::OK();
  }));
  return Status::OK();
}

template <Unary kOp>
Status computeUnary(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeUnary<kOp>, in, attrs, out);
  return runUnary(kOp, *in[0], out);
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
  Tensor r = output(out, 0, in[0]->type());
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* p = in[0]->data<T>();
    T* o = r.mutableData<T>();
    for (int64_t i = 0; i < r.numel(); ++i) o[i] = p[i] > T(0) ? p[i] : T(0);
    return Status::OK();
  }));
  return Status::OK();
}

Status computeIdentity(const std::vector<const Tensor*>& in, const AttrMap&,
                       std::vector<Tensor>& out) {
  if (!planned(out, 0)) {
    out.assign(1, in[0]->clone());
    return Status::OK();
  }
  Tensor r = out[0];  // planned in place it is input 0 already
  if (r.raw() != in[0]->raw() && r.nbytes()) std::memmove(r.mutableData(), in[0]->raw(), r.nbytes());
  return Status::OK();
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
  Tensor r = output(out, 0, to, x.shape());
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
  } else if (convertibleFloats(from, to)) {
    convertFloats(x.raw(), from, r.mutableData(), to, static_cast<size_t>(n));  // the same rounding, one loop
  } else if (isFloat(from) || (from == DType::kU64 && isFloat(to))) {
    for (int64_t i = 0; i < n; ++i) r.setDouble(i, x.getDouble(i));
  } else {
    // Integer sources go through int64 so that large values survive exactly.
    for (int64_t i = 0; i < n; ++i) r.setInt(i, x.getInt(i));
  }
  return Status::OK();
}

}  // namespace

void registerElementwiseOps(OpRegistry& r) {
  r.add(OpKind::Add, &computeArith<Arith::kAdd>, kWritesOutputs);
  r.add(OpKind::Sub, &computeArith<Arith::kSub>, kWritesOutputs);
  r.add(OpKind::Mul, &computeArith<Arith::kMul>, kWritesOutputs);
  r.add(OpKind::Div, &computeArith<Arith::kDiv>, kWritesOutputs);
  r.add(OpKind::Pow, &computePow, kWritesOutputs);
  r.add(OpKind::Equal, &computeEqual, kWritesOutputs);
  r.add(OpKind::Where, &computeWhere, kWritesOutputs);
  r.add(OpKind::Sqrt, &computeUnary<Unary::kSqrt>, kWritesOutputs);
  r.add(OpKind::Erf, &computeUnary<Unary::kErf>, kWritesOutputs);
  r.add(OpKind::Tanh, &computeUnary<Unary::kTanh>, kWritesOutputs);
  r.add(OpKind::Sigmoid, &computeUnary<Unary::kSigmoid>, kWritesOutputs);
  r.add(OpKind::Gelu, &computeGelu, kWritesOutputs);
  r.add(OpKind::Relu, &computeRelu, kWritesOutputs);
  r.add(OpKind::Cast, &computeCast, kWritesOutputs);
  r.add(OpKind::Identity, &computeIdentity, kViewOfInput0 | kWritesOutputs);
}

}  // namespace pcc
