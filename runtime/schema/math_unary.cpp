// Type inference (the op schemas) of Abs, Neg, Sign, Exp, Log, Reciprocal,
// Floor, Ceil, Round, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh,
// Acosh, Atanh, Softplus, Softsign, Not, BitwiseNot, IsNaN and IsInf. Their
// reference kernels, and what the kernels compute, are
// runtime/ops/math_unary.cpp.
#include <cfenv>
#include <cmath>
#include <limits>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/math_unary.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::math_unary_schema;

StatusOr<std::vector<TensorType>> inferFloat(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input"));
  return std::vector<TensorType>{args.inputs[0]};
}

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

// ---- Logic and classification ---------------------------------------------

StatusOr<std::vector<TensorType>> inferNot(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], {DType::kBool}, "input"));
  return std::vector<TensorType>{args.inputs[0]};
}

StatusOr<std::vector<TensorType>> inferBitwiseNot(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kIntTypes, "input"));
  return std::vector<TensorType>{args.inputs[0]};
}

StatusOr<std::vector<TensorType>> inferFloatPredicate(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input"));
  return std::vector<TensorType>{{DType::kBool, args.inputs[0].shape}};
}

}  // namespace

void registerMathUnarySchemas(SchemaRegistry& r) {
  r.add(OpKind::Abs, &inferSignFn<SignFn::kAbs>);
  r.add(OpKind::Neg, &inferSignFn<SignFn::kNeg>);
  r.add(OpKind::Sign, &inferSignFn<SignFn::kSign>);
  r.add(OpKind::Exp, &inferFloat);
  r.add(OpKind::Log, &inferFloat);
  r.add(OpKind::Reciprocal, &inferFloat);
  r.add(OpKind::Floor, &inferFloat);
  r.add(OpKind::Ceil, &inferFloat);
  r.add(OpKind::Round, &inferFloat);
  r.add(OpKind::Sin, &inferFloat);
  r.add(OpKind::Cos, &inferFloat);
  r.add(OpKind::Tan, &inferFloat);
  r.add(OpKind::Asin, &inferFloat);
  r.add(OpKind::Acos, &inferFloat);
  r.add(OpKind::Atan, &inferFloat);
  r.add(OpKind::Sinh, &inferFloat);
  r.add(OpKind::Cosh, &inferFloat);
  r.add(OpKind::Asinh, &inferFloat);
  r.add(OpKind::Acosh, &inferFloat);
  r.add(OpKind::Atanh, &inferFloat);
  r.add(OpKind::Softplus, &inferFloat);
  r.add(OpKind::Softsign, &inferFloat);
  r.add(OpKind::Not, &inferNot);
  r.add(OpKind::BitwiseNot, &inferBitwiseNot);
  r.add(OpKind::IsNaN, &inferFloatPredicate);
  r.add(OpKind::IsInf, &inferFloatPredicate);
}

}  // namespace pcc
