// Type inference (the op schemas) of QLinearMatMul, QLinearConv and
// ConvInteger. Their reference kernels, and what the kernels compute, are
// runtime/ops/vision_quant.cpp.
#include <algorithm>
#include <cmath>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/vision_quant.h"

namespace pcc {

namespace ops::vision_quant_schema {

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
  ASSIGN_OR_RETURN(std::vector<TensorType> t, inferFn(OpKind::MatMul)(mm));
  return std::vector<TensorType>{{args.inputs[7].dtype, t[0].shape}};
}

AttrMap convAttrs(const AttrMap& attrs) {
  AttrMap a;
  for (const auto& [name, value] : attrs.all())
    if (name == "auto_pad" || name == "dilations" || name == "group" || name == "kernel_shape" || name == "pads" ||
        name == "strides")
      a.set(name, value);
  return a;
}

StatusOr<Dims> convShape(const TensorType& x, const TensorType& w, const AttrMap* attrs) {
  InferArgs c;
  c.inputs = {{DType::kF64, x.shape}, {DType::kF64, w.shape}};
  c.constInputs = {nullptr, nullptr};
  static const AttrMap kNoAttrs;
  AttrMap a = convAttrs(attrs ? *attrs : kNoAttrs);
  c.attrs = &a;
  ASSIGN_OR_RETURN(std::vector<TensorType> t, inferFn(OpKind::Conv)(c));
  return t[0].shape;
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

}  // namespace ops::vision_quant_schema

namespace {
using namespace ops;
using namespace ops::vision_quant_schema;

}  // namespace

void registerVisionQuantSchemas(SchemaRegistry& r) {
  r.add(OpKind::QLinearMatMul, &inferQLinearMatMul);
  r.add(OpKind::QLinearConv, &inferQLinearConv);
  r.add(OpKind::ConvInteger, &inferConvInteger);
}

}  // namespace pcc
