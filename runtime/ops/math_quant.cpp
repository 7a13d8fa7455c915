// Linear quantization: QuantizeLinear, DequantizeLinear (per-tensor, per-axis
// and blocked), DynamicQuantizeLinear, MatMulInteger. Quantized types: int8,
// uint8, int16, uint16, int4, uint4 (saturated to their range), the four
// float8 formats (saturated unless saturate = 0) and float4 e2m1.
#include <algorithm>
#include <cmath>

#include "runtime/ops/math.h"
#include "runtime/support/float_formats.h"

namespace pcc {
namespace {
using namespace ops;

/// How a scale (and zero point) tensor maps onto the elements of x.
struct QuantLayout {
  enum Mode { kPerTensor, kPerAxis, kBlocked } mode = kPerTensor;
  int64_t axis = 0, blockSize = 0;
  int64_t outer = 1, extent = 1, inner = 1;  ///< x split at the axis
  int64_t scaleExtent = 1;                   ///< scale.shape[axis] when blocked

  /// \returns the scale index of x's element (a, k, b) (split at the axis).
  int64_t scaleIndex(int64_t a, int64_t k, int64_t b) const {
    switch (mode) {
      case kPerTensor: return 0;
      case kPerAxis: return k;
      case kBlocked: return (a * scaleExtent + k / blockSize) * inner + b;
    }
    return 0;
  }
};

/// \returns the layout of `scale` against `x` under attributes axis and
/// block_size, or an error naming the mismatch.
StatusOr<QuantLayout> quantLayout(const TensorType& x, const TensorType& scale, const AttrMap* attrs) {
  QuantLayout l;
  int64_t axis = attrs ? attrs->getInt("axis", 1) : 1;
  l.blockSize = attrs ? attrs->getInt("block_size", 0) : 0;
  if (l.blockSize < 0) return invalidInput("block_size must be >= 0, got ", l.blockSize);
  if (l.blockSize == 0 && scale.numel() == 1 && scale.rank() <= 1) {  // per-tensor
    l.extent = numElements(x.shape);
    return l;
  }
  ASSIGN_OR_RETURN(l.axis, normalizeAxis(axis, x.rank()));
  for (int64_t d = 0; d < l.axis; ++d) l.outer *= x.shape[d];
  l.extent = x.shape[l.axis];
  for (int64_t d = l.axis + 1; d < x.rank(); ++d) l.inner *= x.shape[d];
  if (l.blockSize == 0) {
    if (scale.rank() != 1 || scale.shape[0] != l.extent)
      return invalidInput("per-axis scale must be 1-D of size ", l.extent, " (x ", x.str(),
                          ", axis ", l.axis, "), got ", scale.str());
    l.mode = QuantLayout::kPerAxis;
    return l;
  }
  l.mode = QuantLayout::kBlocked;
  bool ok = scale.rank() == x.rank();
  for (int64_t d = 0; ok && d < x.rank(); ++d) {
    if (d == l.axis) {
      l.scaleExtent = scale.shape[d];
      ok = (l.extent + l.blockSize - 1) / l.blockSize == l.scaleExtent;
    } else {
      ok = scale.shape[d] == x.shape[d];
    }
  }
  if (!ok)
    return invalidInput("blocked scale ", scale.str(), " does not match x ", x.str(), " with axis ",
                        l.axis, " and block_size ", l.blockSize);
  return l;
}

/// Checks the optional zero point (input 2) against the scale.
Status checkZeroPoint(const InferArgs& args) {
  if (!args.has(2)) return Status::OK();
  // A one-element zero point matches a one-element scale whatever their ranks
  // (exporters write [] and [1] interchangeably).
  const TensorType &zp = args.inputs[2], &scale = args.inputs[1];
  bool bothScalar = zp.numel() == 1 && scale.numel() == 1 && zp.rank() <= 1 && scale.rank() <= 1;
  if (zp.shape != scale.shape && !bothScalar)
    return invalidInput("zero point ", args.inputs[2].str(), " and scale ", args.inputs[1].str(),
                        " must have the same shape");
  return Status::OK();
}

/// \returns the dtype of an ONNX dtype attribute, or an unsupported error.
StatusOr<DType> attrDType(const AttrMap* attrs, const char* name) {
  int64_t code = attrs ? attrs->getInt(name, 0) : 0;
  if (code == 0) return DType::kUndefined;
  auto t = dtypeFromOnnx(static_cast<int32_t>(code));
  if (!t) return unsupported(name, " = ", code, " is not a type pcc supports");
  return *t;
}

// ---- QuantizeLinear ------------------------------------------------------------

constexpr std::initializer_list<DType> kQuantTypes = {
    DType::kU8,      DType::kI8,        DType::kU16,    DType::kI16,        DType::kU4,
    DType::kI4,      DType::kF8E4M3FN,  DType::kF8E4M3FNUZ, DType::kF8E5M2, DType::kF8E5M2FNUZ,
    DType::kF4E2M1};

bool isQuantType(DType t) {
  for (DType q : kQuantTypes)
    if (q == t) return true;
  return false;
}

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

/// \returns the output dtype: the zero point's, else output_dtype, else uint8.
StatusOr<DType> quantizedType(const InferArgs& args) {
  ASSIGN_OR_RETURN(DType attr, attrDType(args.attrs, "output_dtype"));
  DType t = args.has(2) ? args.inputs[2].dtype : (attr != DType::kUndefined ? attr : DType::kU8);
  if (args.has(2) && attr != DType::kUndefined && attr != t)
    return invalidInput("output_dtype ", dtypeName(attr), " differs from the zero point type ",
                        dtypeName(t));
  if (!isQuantType(t))
    return unsupported("quantized type ", dtypeName(t),
                       " (pcc supports int8, uint8, int16, uint16, int4, uint4, float8 and float4)");
  return t;
}

StatusOr<std::vector<TensorType>> inferQuantize(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 3));
  RETURN_IF_ERROR(checkDType(args.inputs[0], {DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                                              DType::kI32},
                             "x"));
  RETURN_IF_ERROR(checkDType(args.inputs[1], kFloatTypes, "y_scale"));
  RETURN_IF_ERROR(checkZeroPoint(args));
  RETURN_IF_ERROR(quantLayout(args.inputs[0], args.inputs[1], args.attrs).status());
  ASSIGN_OR_RETURN(DType t, quantizedType(args));
  return std::vector<TensorType>{{t, args.inputs[0].shape}};
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

// ---- DequantizeLinear ----------------------------------------------------------

StatusOr<std::vector<TensorType>> inferDequantize(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 3));
  RETURN_IF_ERROR(checkDType(args.inputs[0],
                             {DType::kI8, DType::kU8, DType::kI32, DType::kI16, DType::kU16,
                              DType::kI4, DType::kU4, DType::kF8E4M3FN, DType::kF8E4M3FNUZ,
                              DType::kF8E5M2, DType::kF8E5M2FNUZ, DType::kF4E2M1},
                             "x"));
  RETURN_IF_ERROR(checkDType(args.inputs[1], kFloatTypes, "x_scale"));
  RETURN_IF_ERROR(checkZeroPoint(args));
  if (args.has(2) && args.inputs[2].dtype != args.inputs[0].dtype)
    return invalidInput("zero point ", args.inputs[2].str(), " must have the type of x ",
                        args.inputs[0].str());
  RETURN_IF_ERROR(quantLayout(args.inputs[0], args.inputs[1], args.attrs).status());
  ASSIGN_OR_RETURN(DType attr, attrDType(args.attrs, "output_dtype"));
  DType t = attr == DType::kUndefined ? args.inputs[1].dtype : attr;
  RETURN_IF_ERROR(checkDType({t, {}}, kFloatTypes, "output_dtype"));
  return std::vector<TensorType>{{t, args.inputs[0].shape}};
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
  const OpSchema* cast = findOpSchema("Cast");
  AttrMap to;
  to.set("to", static_cast<int64_t>(t));
  return cast->compute({&wide}, to, out);
}

// ---- DynamicQuantizeLinear -----------------------------------------------------

StatusOr<std::vector<TensorType>> inferDynamicQuantize(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], {DType::kF32}, "x"));
  return std::vector<TensorType>{
      {DType::kU8, args.inputs[0].shape}, {DType::kF32, {}}, {DType::kU8, {}}};
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

// ---- MatMulInteger -------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferMatMulInteger(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 4));
  const TensorType &a = args.inputs[0], &b = args.inputs[1];
  RETURN_IF_ERROR(checkDType(a, {DType::kI8, DType::kU8}, "A"));
  RETURN_IF_ERROR(checkDType(b, {DType::kI8, DType::kU8}, "B"));
  if (a.rank() < 1 || b.rank() < 1) return invalidInput("A and B must have rank >= 1");
  int64_t rows = a.rank() == 1 ? 1 : a.shape[a.rank() - 2];
  int64_t cols = b.rank() == 1 ? 1 : b.shape[b.rank() - 1];
  for (size_t i : {size_t(2), size_t(3)}) {
    if (!args.has(i)) continue;
    const TensorType& z = args.inputs[i];
    if (z.dtype != args.inputs[i - 2].dtype)
      return invalidInput("zero point ", z.str(), " must have the type of its operand ",
                          args.inputs[i - 2].str());
    int64_t per = i == 2 ? rows : cols;  // per row of A, per column of B
    if (z.numel() != 1 && !(z.rank() == 1 && z.shape[0] == per))
      return invalidInput(i == 2 ? "a" : "b", "_zero_point ", z.str(), " must be a scalar or 1-D of ",
                          per);
  }
  // The output shape is MatMul's: infer it with MatMul on i32 operands.
  const OpSchema* mm = findOpSchema("MatMul");
  InferArgs m;
  m.inputs = {{DType::kI32, a.shape}, {DType::kI32, b.shape}};
  m.constInputs = {nullptr, nullptr};
  return mm->infer(m);
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
  return findOpSchema("MatMul")->compute({&a, &b}, AttrMap(), out);
}

}  // namespace

void registerMathQuantOps(OpRegistry& r) {
  r.add({"QuantizeLinear", &inferQuantize, &computeQuantize});
  r.add({"DequantizeLinear", &inferDequantize, &computeDequantize});
  r.add({"DynamicQuantizeLinear", &inferDynamicQuantize, &computeDynamicQuantize});
  r.add({"MatMulInteger", &inferMatMulInteger, &computeMatMulInteger});
}

}  // namespace pcc
