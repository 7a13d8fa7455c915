// Type inference (the op schemas) of QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear and MatMulInteger. Their reference kernels, and what
// the kernels compute, are runtime/ops/math_quant.cpp.
#include <algorithm>
#include <cmath>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/math_quant.h"
#include "runtime/support/float_formats.h"

namespace pcc {

namespace ops::math_quant_schema {

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

StatusOr<DType> attrDType(const AttrMap* attrs, const char* name) {
  int64_t code = attrs ? attrs->getInt(name, 0) : 0;
  if (code == 0) return DType::kUndefined;
  auto t = dtypeFromOnnx(static_cast<int32_t>(code));
  if (!t) return unsupported(name, " = ", code, " is not a type pcc supports");
  return *t;
}

bool isQuantType(DType t) {
  for (DType q : kQuantTypes)
    if (q == t) return true;
  return false;
}

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

}  // namespace ops::math_quant_schema

namespace {
using namespace ops;
using namespace ops::math_quant_schema;

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

// ---- DynamicQuantizeLinear -----------------------------------------------------

StatusOr<std::vector<TensorType>> inferDynamicQuantize(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], {DType::kF32}, "x"));
  return std::vector<TensorType>{
      {DType::kU8, args.inputs[0].shape}, {DType::kF32, {}}, {DType::kU8, {}}};
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
  InferFn mm = inferFn(OpKind::MatMul);
  InferArgs m;
  m.inputs = {{DType::kI32, a.shape}, {DType::kI32, b.shape}};
  m.constInputs = {nullptr, nullptr};
  return mm(m);
}

}  // namespace

void registerMathQuantSchemas(SchemaRegistry& r) {
  r.add(OpKind::QuantizeLinear, &inferQuantize);
  r.add(OpKind::DequantizeLinear, &inferDequantize);
  r.add(OpKind::DynamicQuantizeLinear, &inferDynamicQuantize);
  r.add(OpKind::MatMulInteger, &inferMatMulInteger);
}

}  // namespace pcc
