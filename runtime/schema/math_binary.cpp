// Type inference (the op schemas) of And, Or, Xor, Less, LessOrEqual, Greater,
// GreaterOrEqual, Mod, BitShift, BitwiseAnd, BitwiseOr, BitwiseXor, Min, Max,
// Sum and Mean. Their reference kernels, and what the kernels compute, are
// runtime/ops/math_binary.cpp.
#include <cmath>
#include <type_traits>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/math_binary.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::math_binary_schema;

/// Checks a two-input op whose inputs share one of `allowed` dtypes.
/// \returns the output type: `outType` (or the input dtype when undefined) at the broadcast shape.
StatusOr<std::vector<TensorType>> inferBinary(const InferArgs& args,
                                              std::initializer_list<DType> allowed, DType outType) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  RETURN_IF_ERROR(checkDType(args.inputs[0], allowed, "input A"));
  RETURN_IF_ERROR(checkSameDType(args));
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(args.inputs[0].shape, args.inputs[1].shape));
  return std::vector<TensorType>{
      {outType == DType::kUndefined ? args.inputs[0].dtype : outType, out}};
}

template <Logic kOp>
StatusOr<std::vector<TensorType>> inferLogic(const InferArgs& args) {
  return inferBinary(args, {DType::kBool}, DType::kBool);
}

template <Cmp kOp>
StatusOr<std::vector<TensorType>> inferCmp(const InferArgs& args) {
  return inferBinary(args, kNumericTypes, DType::kBool);
}

// ---- Mod -------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferMod(const InferArgs& args) {
  ASSIGN_OR_RETURN(std::vector<TensorType> t, inferBinary(args, kNumericTypes, DType::kUndefined));
  int64_t fmod = args.attrs ? args.attrs->getInt("fmod", 0) : 0;
  if (fmod != 0 && fmod != 1) return invalidInput("fmod must be 0 or 1, got ", fmod);
  if (fmod == 0 && isFloat(args.inputs[0].dtype))
    return invalidInput("fmod = 0 is defined for integer types only, got ", args.inputs[0].str());
  return t;
}

template <Bit kOp>
StatusOr<std::vector<TensorType>> inferBit(const InferArgs& args) {
  if constexpr (kOp == Bit::kShift) {
    // ONNX BitShift is defined on the unsigned types.
    std::string dir = args.attrs ? args.attrs->getString("direction", "") : "";
    if (dir != "LEFT" && dir != "RIGHT")
      return invalidInput("direction must be \"LEFT\" or \"RIGHT\", got \"", dir, "\"");
    return inferBinary(args, {DType::kU8, DType::kU16, DType::kU32, DType::kU64}, DType::kUndefined);
  } else {
    return inferBinary(args, kIntTypes, DType::kUndefined);
  }
}

template <Fold kOp>
StatusOr<std::vector<TensorType>> inferFold(const InferArgs& args) {
  if (args.inputs.empty()) return invalidInput("expects at least 1 input, got 0");
  for (size_t i = 0; i < args.inputs.size(); ++i)
    if (!args.has(i)) return invalidInput("input ", i, " is missing");
  bool floatOnly = kOp == Fold::kSum || kOp == Fold::kMean;
  RETURN_IF_ERROR(checkDType(args.inputs[0], floatOnly ? kFloatTypes : kNumericTypes, "input 0"));
  RETURN_IF_ERROR(checkSameDType(args));
  Dims shape = args.inputs[0].shape;
  for (size_t i = 1; i < args.inputs.size(); ++i) {
    ASSIGN_OR_RETURN(shape, broadcastShapes(shape, args.inputs[i].shape));
  }
  return std::vector<TensorType>{{args.inputs[0].dtype, shape}};
}

}  // namespace

void registerMathBinarySchemas(SchemaRegistry& r) {
  r.add(OpKind::And, &inferLogic<Logic::kAnd>);
  r.add(OpKind::Or, &inferLogic<Logic::kOr>);
  r.add(OpKind::Xor, &inferLogic<Logic::kXor>);
  r.add(OpKind::Less, &inferCmp<Cmp::kLess>);
  r.add(OpKind::LessOrEqual, &inferCmp<Cmp::kLessOrEqual>);
  r.add(OpKind::Greater, &inferCmp<Cmp::kGreater>);
  r.add(OpKind::GreaterOrEqual, &inferCmp<Cmp::kGreaterOrEqual>);
  r.add(OpKind::Mod, &inferMod);
  r.add(OpKind::BitShift, &inferBit<Bit::kShift>);
  r.add(OpKind::BitwiseAnd, &inferBit<Bit::kAnd>);
  r.add(OpKind::BitwiseOr, &inferBit<Bit::kOr>);
  r.add(OpKind::BitwiseXor, &inferBit<Bit::kXor>);
  r.add(OpKind::Min, &inferFold<Fold::kMin>);
  r.add(OpKind::Max, &inferFold<Fold::kMax>);
  r.add(OpKind::Sum, &inferFold<Fold::kSum>);
  r.add(OpKind::Mean, &inferFold<Fold::kMean>);
}

}  // namespace pcc
