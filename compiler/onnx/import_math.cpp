// Importers of the math op family. Most ops are canonical at every opset pcc
// reads; the differences resolved here:
//   - Clip < 11 takes min/max as float attributes: they become scalar
//     constant inputs of x's type;
#include "compiler/onnx/import_util.h"

namespace pcc {

namespace {

/// \returns a scalar constant of dtype `t` holding `v`, or nullptr when pcc
/// cannot hold a Clip bound of that type.
Value* scalarOfType(C& c, DType t, float v, std::string_view tag) {
  switch (t) {
    case DType::kF32: return c.constant(Tensor::scalarF32(v), tag);
    case DType::kF64: return c.constant(Tensor::fromVector<double>(t, {}, {v}), tag);
    case DType::kF16: return c.constant(Tensor::fromVector<uint16_t>(t, {}, {floatToHalf(v)}), tag);
    case DType::kBF16: return c.constant(Tensor::fromVector<uint16_t>(t, {}, {floatToBf16(v)}), tag);
    default: return nullptr;
  }
}

Status importClip(C& c) {
  if (c.opset() >= 11) return c.emitNode(OpKind::Clip, allInputs(c), {});
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  DType t = x->type().dtype;
  std::vector<Value*> ins = {x, nullptr, nullptr};
  const char* names[] = {"min", "max"};
  for (size_t i = 0; i < 2; ++i) {
    if (!c.attrs().has(names[i])) continue;
    ins[i + 1] = scalarOfType(c, t, c.attrs().getFloat(names[i], 0.f), names[i]);
    if (!ins[i + 1]) return c.invalid("Clip before opset 11 is defined on float types, got ", dtypeName(t));
  }
  // Trailing absent inputs are dropped so the node has the arity it needs.
  while (ins.size() > 1 && !ins.back()) ins.pop_back();
  return c.emitNode(OpKind::Clip, ins, {});
}

}  // namespace

std::vector<ImporterEntry> mathImporters() {
  return {
      // Unary math.
      {"Abs", 7, PCC_DIRECT(Abs)},
      {"Neg", 7, PCC_DIRECT(Neg)},
      {"Exp", 7, PCC_DIRECT(Exp)},
      {"Log", 7, PCC_DIRECT(Log)},
      {"Reciprocal", 7, PCC_DIRECT(Reciprocal)},
      {"Floor", 7, PCC_DIRECT(Floor)},
      {"Ceil", 7, PCC_DIRECT(Ceil)},
      {"Round", 11, PCC_DIRECT(Round)},
      {"Sign", 9, PCC_DIRECT(Sign)},
      {"Sin", 7, PCC_DIRECT(Sin)},
      {"Cos", 7, PCC_DIRECT(Cos)},
      {"Tan", 7, PCC_DIRECT(Tan)},
      {"Asin", 7, PCC_DIRECT(Asin)},
      {"Acos", 7, PCC_DIRECT(Acos)},
      {"Atan", 7, PCC_DIRECT(Atan)},
      {"Sinh", 9, PCC_DIRECT(Sinh)},
      {"Cosh", 9, PCC_DIRECT(Cosh)},
      {"Asinh", 9, PCC_DIRECT(Asinh)},
      {"Acosh", 9, PCC_DIRECT(Acosh)},
      {"Atanh", 9, PCC_DIRECT(Atanh)},
      {"Softplus", 7, PCC_DIRECT(Softplus)},
      {"Softsign", 7, PCC_DIRECT(Softsign)},
      {"Not", 7, PCC_DIRECT(Not)},
      {"IsNaN", 9, PCC_DIRECT(IsNaN)},
      {"IsInf", 10, PCC_DIRECT(IsInf, "detect_negative", "detect_positive")},
      {"BitwiseNot", 18, PCC_DIRECT(BitwiseNot)},
      // Activations.
      {"LeakyRelu", 7, PCC_DIRECT(LeakyRelu, "alpha")},
      {"Elu", 7, PCC_DIRECT(Elu, "alpha")},
      {"Selu", 7, PCC_DIRECT(Selu, "alpha", "gamma")},
      {"Celu", 12, PCC_DIRECT(Celu, "alpha")},
      {"HardSigmoid", 7, PCC_DIRECT(HardSigmoid, "alpha", "beta")},
      {"HardSwish", 14, PCC_DIRECT(HardSwish)},
      {"Mish", 18, PCC_DIRECT(Mish)},
      {"ThresholdedRelu", 10, PCC_DIRECT(ThresholdedRelu, "alpha")},
      {"Shrink", 9, PCC_DIRECT(Shrink, "bias", "lambd")},
      {"Clip", 7, importClip},
      {"PRelu", 7, PCC_DIRECT(PRelu)},
      // Binary and variadic.
      {"And", 7, PCC_DIRECT(And)},
      {"Or", 7, PCC_DIRECT(Or)},
      {"Xor", 7, PCC_DIRECT(Xor)},
      {"Less", 7, PCC_DIRECT(Less)},
      {"LessOrEqual", 12, PCC_DIRECT(LessOrEqual)},
      {"Greater", 7, PCC_DIRECT(Greater)},
      {"GreaterOrEqual", 12, PCC_DIRECT(GreaterOrEqual)},
      {"Mod", 10, PCC_DIRECT(Mod, "fmod")},
      {"BitShift", 11, PCC_DIRECT(BitShift, "direction")},
      {"BitwiseAnd", 18, PCC_DIRECT(BitwiseAnd)},
      {"BitwiseOr", 18, PCC_DIRECT(BitwiseOr)},
      {"BitwiseXor", 18, PCC_DIRECT(BitwiseXor)},
      {"Min", 7, PCC_DIRECT(Min)},
      {"Max", 7, PCC_DIRECT(Max)},
      {"Sum", 7, PCC_DIRECT(Sum)},
      {"Mean", 7, PCC_DIRECT(Mean)},
      // Generators and axis ops.
      {"CastLike", 15, PCC_DIRECT(CastLike, "saturate", "round_mode")},
      {"Range", 11, PCC_DIRECT(Range)},
      {"CumSum", 11, PCC_DIRECT(CumSum, "exclusive", "reverse")},
      {"Trilu", 14, PCC_DIRECT(Trilu, "upper")},
      {"OneHot", 9, PCC_DIRECT(OneHot, "axis")},
      {"EyeLike", 9, PCC_DIRECT(EyeLike, "dtype", "k")},
      // Quantization.
      {"QuantizeLinear", 10, PCC_DIRECT(QuantizeLinear, "axis", "block_size", "output_dtype", "saturate")},
      {"DequantizeLinear", 10, PCC_DIRECT(DequantizeLinear, "axis", "block_size", "output_dtype")},
      {"DynamicQuantizeLinear", 11, PCC_DIRECT(DynamicQuantizeLinear)},
      {"MatMulInteger", 10, PCC_DIRECT(MatMulInteger)},
  };
}

}  // namespace pcc
