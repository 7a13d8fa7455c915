// Quantized linear algebra: QLinearMatMul, QLinearConv and ConvInteger. Each
// subtracts the zero points, runs the float MatMul or Conv kernel on f64
// copies (exact for every integer sum these ops can produce in practice), and
// requantizes. Scales multiply in their own dtype, as the reference does, so
// that results round the same way.
#include <algorithm>
#include <cmath>

#include "runtime/ops/vision.h"

namespace pcc {
namespace {
using namespace ops;

constexpr std::initializer_list<DType> kQuantTypes = {DType::kI8, DType::kU8};

/// \returns `x` minus its zero point as an f64 tensor. A zero point with more
/// than one element applies per index `i / inner % count` of the flat input.
Tensor centered(const Tensor& x, const Tensor* zp, int64_t inner) {
  Tensor r = Tensor::zeros(DType::kF64, x.shape());
  double* o = r.mutableData<double>();
  int64_t count = zp ? zp->numel() : 1;
  for (int64_t i = 0; i < x.numel(); ++i)
    o[i] = x.getDouble(i) - (zp ? zp->getDouble(count == 1 ? 0 : (i / inner) % count) : 0.0);
  return r;
}

/// \returns a * b / c evaluated in dtype `t` (f32, or f16/bf16 rounding after each step).
double scaleProduct(DType t, double a, double b, double c) {
  auto round = [t](double v) -> double {
    if (t == DType::kF16) return halfToFloat(floatToHalf(static_cast<float>(v)));
    if (t == DType::kBF16) return bf16ToFloat(floatToBf16(static_cast<float>(v)));
    if (t == DType::kF32) return static_cast<float>(v);
    return v;
  };
  return round(round(round(a) * round(b)) / round(c));
}

/// \returns `v` rounded half to even and saturated to `t` (i8 or u8).
double requantize(double v, DType t) {
  double lo = t == DType::kI8 ? -128 : 0, hi = t == DType::kI8 ? 127 : 255;
  return std::clamp(std::nearbyint(v), lo, hi);
}

Status checkScale(const TensorType& s, const char* what, int64_t perCount) {
  RETURN_IF_ERROR(checkDType(s, kFloatTypes, what));
  if (s.numel() != 1 && !(s.rank() == 1 && s.shape[0] == perCount))
    return invalidInput(what, " ", s.str(), " must be a scalar or 1-D of ", perCount);
  return Status::OK();
}

Status checkZeroPoint(const InferArgs& args, size_t i, DType want, const char* what, int64_t perCount) {
  if (!args.has(i)) return Status::OK();
  const TensorType& z = args.inputs[i];
  if (z.dtype != want) return invalidInput(what, " ", z.str(), " must be ", dtypeName(want));
  if (z.numel() != 1 && !(z.rank() == 1 && z.shape[0] == perCount))
    return invalidInput(what, " ", z.str(), " must be a scalar or 1-D of ", perCount);
  return Status::OK();
}

// ---- QLinearMatMul ---------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferQLinearMatMul(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 8, 8));
  const TensorType &a = args.inputs[0], &b = args.inputs[3];
  RETURN_IF_ERROR(checkDType(a, kQuantTypes, "QLinearMatMul a"));
  RETURN_IF_ERROR(checkDType(b, kQuantTypes, "QLinearMatMul b"));
  RETURN_IF_ERROR(checkDType(args.inputs[7], kQuantTypes, "QLinearMatMul y_zero_point"));
  if (a.rank() < 2 || b.rank() < 2)
    return unsupported("QLinearMatMul: operands of rank < 2 are not supported, got ", a.str(), " and ", b.str());
  int64_t m = a.shape[a.rank() - 2], n = b.shape[b.rank() - 1];
  RETURN_IF_ERROR(checkScale(args.inputs[1], "a_scale", m));
  RETURN_IF_ERROR(checkScale(args.inputs[4], "b_scale", n));
  RETURN_IF_ERROR(checkScale(args.inputs[6], "y_scale", 1));
  RETURN_IF_ERROR(checkZeroPoint(args, 2, a.dtype, "a_zero_point", m));
  RETURN_IF_ERROR(checkZeroPoint(args, 5, b.dtype, "b_zero_point", n));
  RETURN_IF_ERROR(checkZeroPoint(args, 7, args.inputs[7].dtype, "y_zero_point", 1));
  InferArgs mm;
  mm.inputs = {{DType::kF64, a.shape}, {DType::kF64, b.shape}};
  mm.constInputs = {nullptr, nullptr};
  ASSIGN_OR_RETURN(std::vector<TensorType> t, findOpSchema("MatMul")->infer(mm));
  return std::vector<TensorType>{{args.inputs[7].dtype, t[0].shape}};
}

Status computeQLinearMatMul(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferQLinearMatMul(argsFromTensors(in, attrs)));
  const Tensor &a = *in[0], &b = *in[3], &as = *in[1], &bs = *in[4], &ys = *in[6], &yzp = *in[7];
  int64_t k = a.shape().back(), m = a.shape()[a.rank() - 2], n = b.shape().back();
  Tensor ac = centered(a, optionalInput(in, 2), k);  // per row of a
  Tensor bc = centered(b, optionalInput(in, 5), 1);  // per column of b
  std::vector<Tensor> prod;
  RETURN_IF_ERROR(findOpSchema("MatMul")->compute({&ac, &bc}, AttrMap(), prod));
  Tensor y = Tensor::zeros(types[0]);
  const double* acc = prod[0].data<double>();
  for (int64_t i = 0; i < y.numel(); ++i) {
    int64_t row = (i / n) % m, col = i % n;
    double mult = scaleProduct(as.dtype(), as.getDouble(as.numel() == 1 ? 0 : row),
                               bs.getDouble(bs.numel() == 1 ? 0 : col), ys.getDouble(0));
    storeDouble(y, i, requantize(acc[i] * mult + yzp.getDouble(0), y.dtype()));
  }
  out.push_back(std::move(y));
  return Status::OK();
}

// ---- ConvInteger and QLinearConv --------------------------------------------------

/// \returns the Conv attributes of a quantized convolution.
AttrMap convAttrs(const AttrMap& attrs) {
  AttrMap a;
  for (const auto& [name, value] : attrs.all())
    if (name == "auto_pad" || name == "dilations" || name == "group" || name == "kernel_shape" || name == "pads" ||
        name == "strides")
      a.set(name, value);
  return a;
}

/// \returns the output shape of Conv on `x` and `w` with `attrs` (types f64).
StatusOr<Dims> convShape(const TensorType& x, const TensorType& w, const AttrMap* attrs) {
  InferArgs c;
  c.inputs = {{DType::kF64, x.shape}, {DType::kF64, w.shape}};
  c.constInputs = {nullptr, nullptr};
  static const AttrMap kNoAttrs;
  AttrMap a = convAttrs(attrs ? *attrs : kNoAttrs);
  c.attrs = &a;
  ASSIGN_OR_RETURN(std::vector<TensorType> t, findOpSchema("Conv")->infer(c));
  return t[0].shape;
}

/// Runs the f64 Conv kernel on `x` and `w` minus their zero points (the
/// weight's per output channel when 1-D), plus `bias` when given.
StatusOr<Tensor> integerConv(const Tensor& x, const Tensor* xzp, const Tensor& w, const Tensor* wzp,
                             const Tensor* bias, const AttrMap& attrs) {
  Tensor xc = centered(x, xzp, 1);
  int64_t perChannel = w.shape()[0] ? w.numel() / w.shape()[0] : 1;
  Tensor wc = centered(w, wzp, perChannel);
  std::vector<const Tensor*> ins = {&xc, &wc};
  Tensor bc;
  if (bias) {
    bc = centered(*bias, nullptr, 1);
    ins.push_back(&bc);
  }
  std::vector<Tensor> r;
  RETURN_IF_ERROR(findOpSchema("Conv")->compute(ins, convAttrs(attrs), r));
  return std::move(r[0]);
}

StatusOr<std::vector<TensorType>> inferConvInteger(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 4));
  const TensorType &x = args.inputs[0], &w = args.inputs[1];
  RETURN_IF_ERROR(checkDType(x, kQuantTypes, "ConvInteger x"));
  RETURN_IF_ERROR(checkDType(w, kQuantTypes, "ConvInteger w"));
  RETURN_IF_ERROR(checkZeroPoint(args, 2, x.dtype, "x_zero_point", 1));
  RETURN_IF_ERROR(checkZeroPoint(args, 3, w.dtype, "w_zero_point", w.rank() ? w.shape[0] : 1));
  ASSIGN_OR_RETURN(Dims out, convShape(x, w, args.attrs));
  return std::vector<TensorType>{{DType::kI32, out}};
}

Status computeConvInteger(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferConvInteger(argsFromTensors(in, attrs)));
  ASSIGN_OR_RETURN(Tensor acc, integerConv(*in[0], optionalInput(in, 2), *in[1], optionalInput(in, 3), nullptr, attrs));
  Tensor y = Tensor::zeros(types[0]);
  for (int64_t i = 0; i < y.numel(); ++i) y.mutableData<int32_t>()[i] = static_cast<int32_t>(acc.data<double>()[i]);
  out.push_back(std::move(y));
  return Status::OK();
}

StatusOr<std::vector<TensorType>> inferQLinearConv(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 8, 9));
  const TensorType &x = args.inputs[0], &w = args.inputs[3];
  RETURN_IF_ERROR(checkDType(x, kQuantTypes, "QLinearConv x"));
  RETURN_IF_ERROR(checkDType(w, kQuantTypes, "QLinearConv w"));
  RETURN_IF_ERROR(checkDType(args.inputs[7], kQuantTypes, "QLinearConv y_zero_point"));
  int64_t m = w.rank() ? w.shape[0] : 1;
  RETURN_IF_ERROR(checkScale(args.inputs[1], "x_scale", 1));
  RETURN_IF_ERROR(checkScale(args.inputs[4], "w_scale", m));
  RETURN_IF_ERROR(checkScale(args.inputs[6], "y_scale", 1));
  RETURN_IF_ERROR(checkZeroPoint(args, 2, x.dtype, "x_zero_point", 1));
  RETURN_IF_ERROR(checkZeroPoint(args, 5, w.dtype, "w_zero_point", m));
  RETURN_IF_ERROR(checkZeroPoint(args, 7, args.inputs[7].dtype, "y_zero_point", 1));
  if (args.has(8) && (args.inputs[8].dtype != DType::kI32 || args.inputs[8].shape != Dims{m}))
    return invalidInput("QLinearConv: bias ", args.inputs[8].str(), " must be i32[", m, "]");
  ASSIGN_OR_RETURN(Dims out, convShape(x, w, args.attrs));
  return std::vector<TensorType>{{args.inputs[7].dtype, out}};
}

Status computeQLinearConv(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferQLinearConv(argsFromTensors(in, attrs)));
  const Tensor &xs = *in[1], &ws = *in[4], &ys = *in[6], &yzp = *in[7];
  ASSIGN_OR_RETURN(Tensor acc, integerConv(*in[0], optionalInput(in, 2), *in[3], optionalInput(in, 5), optionalInput(in, 8), attrs));
  Tensor y = Tensor::zeros(types[0]);
  int64_t m = types[0].shape[1], plane = m ? y.numel() / (types[0].shape[0] * m) : 1;
  for (int64_t i = 0; i < y.numel(); ++i) {
    int64_t oc = (i / plane) % m;
    double mult = scaleProduct(xs.dtype(), xs.getDouble(0), ws.getDouble(ws.numel() == 1 ? 0 : oc), ys.getDouble(0));
    storeDouble(y, i, requantize(acc.data<double>()[i] * mult + yzp.getDouble(0), y.dtype()));
  }
  out.push_back(std::move(y));
  return Status::OK();
}

}  // namespace

void registerVisionQuantOps(OpRegistry& r) {
  r.add({"QLinearMatMul", &inferQLinearMatMul, &computeQLinearMatMul});
  r.add({"QLinearConv", &inferQLinearConv, &computeQLinearConv});
  r.add({"ConvInteger", &inferConvInteger, &computeConvInteger});
}

}  // namespace pcc
