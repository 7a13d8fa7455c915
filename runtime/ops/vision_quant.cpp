// Quantized linear algebra: QLinearMatMul, QLinearConv and ConvInteger. Each
// subtracts the zero points, runs the float MatMul or Conv kernel on f64
// copies (exact for every integer sum these ops can produce in practice), and
// requantizes. Scales multiply in their own dtype, as the reference does, so
// that results round the same way.
// Their type inference is runtime/schema/vision_quant.cpp.
#include <algorithm>
#include <cmath>

#include "runtime/ops/vision.h"
#include "runtime/schema/vision_quant.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::vision_quant_schema;

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

Status computeQLinearMatMul(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferQLinearMatMul(argsFromTensors(in, attrs)));
  const Tensor &a = *in[0], &b = *in[3], &as = *in[1], &bs = *in[4], &ys = *in[6], &yzp = *in[7];
  int64_t k = a.shape().back(), m = a.shape()[a.rank() - 2], n = b.shape().back();
  Tensor ac = centered(a, optionalInput(in, 2), k);  // per row of a
  Tensor bc = centered(b, optionalInput(in, 5), 1);  // per column of b
  std::vector<Tensor> prod;
  RETURN_IF_ERROR(referenceKernel(OpKind::MatMul)->compute({&ac, &bc}, AttrMap(), prod));
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
  RETURN_IF_ERROR(referenceKernel(OpKind::Conv)->compute(ins, convAttrs(attrs), r));
  return std::move(r[0]);
}

Status computeConvInteger(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferConvInteger(argsFromTensors(in, attrs)));
  ASSIGN_OR_RETURN(Tensor acc, integerConv(*in[0], optionalInput(in, 2), *in[1], optionalInput(in, 3), nullptr, attrs));
  Tensor y = Tensor::zeros(types[0]);
  for (int64_t i = 0; i < y.numel(); ++i) y.mutableData<int32_t>()[i] = static_cast<int32_t>(acc.data<double>()[i]);
  out.push_back(std::move(y));
  return Status::OK();
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
  r.add(OpKind::QLinearMatMul, &computeQLinearMatMul);
  r.add(OpKind::QLinearConv, &computeQLinearConv);
  r.add(OpKind::ConvInteger, &computeConvInteger);
}

}  // namespace pcc
