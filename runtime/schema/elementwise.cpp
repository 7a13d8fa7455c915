// Type inference (the op schemas) of Add, Sub, Mul, Div, Pow, Equal, Where,
// Sqrt, Erf, Tanh, Sigmoid, Gelu, Relu, Cast and Identity. Their reference
// kernels, and what the kernels compute, are runtime/ops/elementwise.cpp.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/elementwise.h"
#include "runtime/support/float_formats.h"

namespace pcc {

namespace ops::elementwise_schema {

StatusOr<DType> castTarget(const AttrMap* attrs) {
  if (!attrs || !attrs->has("to")) return invalidInput("missing attribute 'to'");
  int64_t code = attrs->getInt("to", 0);
  auto t = dtypeFromOnnx(static_cast<int32_t>(code));
  if (!t) return unsupported("cast to ONNX dtype ", code, " is not supported");
  return *t;
}

}  // namespace ops::elementwise_schema

namespace {
using namespace ops;
using namespace ops::elementwise_schema;

StatusOr<std::vector<TensorType>> inferArith(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &a = args.inputs[0], &b = args.inputs[1];
  RETURN_IF_ERROR(checkDType(a, kNumericTypes, "input A"));
  if (a.dtype != b.dtype)
    return invalidInput("input types differ: ", a.str(), " and ", b.str());
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(a.shape, b.shape));
  return std::vector<TensorType>{{a.dtype, out}};
}

StatusOr<std::vector<TensorType>> inferPow(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &a = args.inputs[0], &b = args.inputs[1];
  RETURN_IF_ERROR(checkDType(a, kNumericTypes, "base"));
  RETURN_IF_ERROR(checkDType(b, kNumericTypes, "exponent"));
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(a.shape, b.shape));
  return std::vector<TensorType>{{a.dtype, out}};
}

StatusOr<std::vector<TensorType>> inferEqual(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &a = args.inputs[0], &b = args.inputs[1];
  if (a.dtype != b.dtype)
    return invalidInput("input types differ: ", a.str(), " and ", b.str());
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(a.shape, b.shape));
  return std::vector<TensorType>{{DType::kBool, out}};
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

StatusOr<std::vector<TensorType>> inferGelu(const InferArgs& args) {
  std::string approx = args.attrs ? args.attrs->getString("approximate", "none") : "none";
  if (approx != "none" && approx != "tanh")
    return invalidInput("approximate must be \"none\" or \"tanh\", got \"", approx, "\"");
  return inferFloatUnary(args);
}

StatusOr<std::vector<TensorType>> inferCast(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  ASSIGN_OR_RETURN(DType to, castTarget(args.attrs));
  return std::vector<TensorType>{{to, args.inputs[0].shape}};
}

}  // namespace

void registerElementwiseSchemas(SchemaRegistry& r) {
  r.add(OpKind::Add, &inferArith);
  r.add(OpKind::Sub, &inferArith);
  r.add(OpKind::Mul, &inferArith);
  r.add(OpKind::Div, &inferArith);
  r.add(OpKind::Pow, &inferPow);
  r.add(OpKind::Equal, &inferEqual);
  r.add(OpKind::Where, &inferWhere);
  r.add(OpKind::Sqrt, &inferFloatUnary);
  r.add(OpKind::Erf, &inferFloatUnary);
  r.add(OpKind::Tanh, &inferFloatUnary);
  r.add(OpKind::Sigmoid, &inferFloatUnary);
  r.add(OpKind::Gelu, &inferGelu);
  r.add(OpKind::Relu, &inferNumericUnary);
  r.add(OpKind::Cast, &inferCast);
  r.add(OpKind::Identity, &inferSameType);
}

}  // namespace pcc
