// Linear quantization: QuantizeLinear, DequantizeLinear (per-tensor, per-axis
// and blocked), DynamicQuantizeLinear, MatMulInteger. Quantized types: int8,
// uint8, int16, uint16, int4, uint4 (saturated to their range), the four
// float8 formats (saturated unless saturate = 0) and float4 e2m1.
// Their type inference is runtime/schema/math_quant.cpp.
#include <algorithm>
#include <cmath>

#include "runtime/ops/math.h"
#include "runtime/support/float_formats.h"
#include "runtime/schema/math_quant.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::math_quant_schema;

/// \returns the range of integer quantized type `t`.
std::pair<int64_t, int64_t> quantRange(DType t) {
  switch (t) {
    case DType::kU8: return {0, 255};
    case DType::kI8: return {-128, 127};
    case DType::kU16: return {0, 65535};
    case DType::kI16: return {-32768, 32767};
    case DType::kU4: return {0, 15};
    case DType::kI4: return {-8, 7};
    default: return {0, 0};
  }
}

Status computeQuantize(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                       std::vector<Tensor>& out) {
  const Tensor &x = *in[0], &scale = *in[1];
  const Tensor* zp = in.size() > 2 ? in[2] : nullptr;
  InferArgs args = argsFromTensors(in, attrs);
  ASSIGN_OR_RETURN(QuantLayout l, quantLayout(x.type(), scale.type(), &attrs));
  ASSIGN_OR_RETURN(DType t, quantizedType(args));
  Tensor r = Tensor::zeros(t, x.shape());
  bool narrow = isNarrowFloat(t), saturate = attrs.getInt("saturate", 1) != 0;
  std::pair<int64_t, int64_t> range = quantRange(t);
  // x / scale is rounded as the reference does it: in the wider of x's type
  // and f32, then (for half x) to x's own type, before round-half-even.
  bool f64 = x.dtype() == DType::kF64;
  DType half = isHalf(x.dtype()) ? x.dtype() : DType::kUndefined;
  auto quotient = [&](int64_t i, int64_t si) -> double {
    if (f64) return x.getDouble(i) / scale.getDouble(si);
    float q = static_cast<float>(x.getDouble(i)) / static_cast<float>(scale.getDouble(si));
    if (half == DType::kF16) q = halfToFloat(floatToHalf(q));
    if (half == DType::kBF16) q = bf16ToFloat(floatToBf16(q));
    return q;
  };
  for (int64_t a = 0; a < l.outer; ++a)
    for (int64_t k = 0; k < l.extent; ++k)
      for (int64_t b = 0; b < l.inner; ++b) {
        int64_t i = (a * l.extent + k) * l.inner + b, si = l.scaleIndex(a, k, b);
        double q = quotient(i, si);
        if (narrow) {  // a float zero point is added before rounding (it is 0 in practice)
          double v = q + (zp ? zp->getDouble(si) : 0.0);
          r.mutableData<uint8_t>()[i] = floatToNarrow(t, v, saturate);
        } else {  // round half to even, add the zero point, saturate
          double v = std::nearbyint(q) + static_cast<double>(zp ? zp->getInt(si) : 0);
          r.setInt(i, static_cast<int64_t>(std::clamp(v, static_cast<double>(range.first),
                                                      static_cast<double>(range.second))));
        }
      }
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeDequantize(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                         std::vector<Tensor>& out) {
  const Tensor &x = *in[0], &scale = *in[1];
  const Tensor* zp = in.size() > 2 ? in[2] : nullptr;
  ASSIGN_OR_RETURN(QuantLayout l, quantLayout(x.type(), scale.type(), &attrs));
  ASSIGN_OR_RETURN(DType attr, attrDType(&attrs, "output_dtype"));
  DType t = attr == DType::kUndefined ? scale.dtype() : attr;
  // (x - zp) * scale in f32 (f64 for a f64 scale), as the reference computes it.
  bool f64 = scale.dtype() == DType::kF64;
  bool narrow = isNarrowFloat(x.dtype());
  Tensor wide = Tensor::zeros(f64 ? DType::kF64 : DType::kF32, x.shape());
  for (int64_t a = 0; a < l.outer; ++a)
    for (int64_t k = 0; k < l.extent; ++k)
      for (int64_t b = 0; b < l.inner; ++b) {
        int64_t i = (a * l.extent + k) * l.inner + b, si = l.scaleIndex(a, k, b);
        // Integers subtract exactly in int64; float8/float4 codes widen to float.
        double d = narrow ? x.getDouble(i) - (zp ? zp->getDouble(si) : 0.0)
                          : static_cast<double>(x.getInt(i) - (zp ? zp->getInt(si) : 0));
        if (f64) wide.mutableData<double>()[i] = d * scale.getDouble(si);
        else wide.mutableData<float>()[i] = static_cast<float>(d) * static_cast<float>(scale.getDouble(si));
      }
  if (wide.dtype() == t) {
    out.push_back(std::move(wide));
    return Status::OK();
  }
  const KernelEntry* cast = referenceKernel(OpKind::Cast);
  AttrMap to;
  to.set("to", static_cast<int64_t>(t));
  return cast->compute({&wide}, to, out);
}

Status computeDynamicQuantize(const std::vector<const Tensor*>& in, const AttrMap&,
                              std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const float* p = x.data<float>();
  // The range always includes 0 so that 0 is exactly representable.
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    lo = std::min(lo, p[i]);
    hi = std::max(hi, p[i]);
  }
  float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  float zpF = std::clamp(0.0f - lo / scale, 0.0f, 255.0f);
  float zp = std::nearbyint(zpF);
  Tensor y = Tensor::zeros(DType::kU8, x.shape());
  uint8_t* o = y.mutableData<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    o[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(p[i] / scale) + zp, 0.0f, 255.0f));
  out.push_back(std::move(y));
  out.push_back(Tensor::scalarF32(scale));
  out.push_back(Tensor::fromVector<uint8_t>(DType::kU8, {}, {static_cast<uint8_t>(zp)}));
  return Status::OK();
}

/// \returns `x` - zero point as i32; the zero point is per row (axis -2) for
/// A and per column (axis -1) for B when it is not a scalar.
Tensor centered(const Tensor& x, const Tensor* zp, bool perRow) {
  Tensor r = Tensor::zeros(DType::kI32, x.shape());
  int32_t* o = r.mutableData<int32_t>();
  int64_t cols = x.rank() == 0 ? 1 : x.shape().back();
  int64_t rows = x.rank() < 2 ? 1 : x.shape()[x.rank() - 2];
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t zi = 0;
    if (zp && zp->numel() > 1) zi = perRow ? (x.rank() == 1 ? 0 : (i / cols) % rows) : i % cols;
    o[i] = static_cast<int32_t>(x.getInt(i) - (zp ? zp->getInt(zi) : 0));
  }
  return r;
}

Status computeMatMulInteger(const std::vector<const Tensor*>& in, const AttrMap&,
                            std::vector<Tensor>& out) {
  Tensor a = centered(*in[0], in.size() > 2 ? in[2] : nullptr, true);
  Tensor b = centered(*in[1], in.size() > 3 ? in[3] : nullptr, false);
  return referenceKernel(OpKind::MatMul)->compute({&a, &b}, AttrMap(), out);
}

}  // namespace

void registerMathQuantOps(OpRegistry& r) {
  r.add(OpKind::QuantizeLinear, &computeQuantize);
  r.add(OpKind::DequantizeLinear, &computeDequantize);
  r.add(OpKind::DynamicQuantizeLinear, &computeDynamicQuantize);
  r.add(OpKind::MatMulInteger, &computeMatMulInteger);
}

}  // namespace pcc
