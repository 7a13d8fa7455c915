// Type inference (the op schemas) of LeakyRelu, Elu, Selu, Celu, HardSigmoid,
// HardSwish, Mish, ThresholdedRelu, Shrink, Clip and PRelu. Their reference
// kernels, and what the kernels compute, are runtime/ops/math_activation.cpp.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/math_activation.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::math_activation_schema;

template <Act kAct>
StatusOr<std::vector<TensorType>> inferAct(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  // Shrink is defined on every numeric type; the others on floats only.
  RETURN_IF_ERROR(checkDType(args.inputs[0], kAct == Act::kShrink ? kNumericTypes : kFloatTypes,
                             "input"));
  if (kAct == Act::kCelu && args.attrs && args.attrs->getFloat("alpha", 1.0f) == 0.0f)
    return invalidInput("alpha must not be 0");
  return std::vector<TensorType>{args.inputs[0]};
}

// ---- Clip ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferClip(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 3));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kNumericTypes, "input"));
  RETURN_IF_ERROR(checkSameDType(args));
  for (size_t i = 1; i < args.inputs.size(); ++i)
    if (args.has(i) && args.inputs[i].numel() != 1)
      return invalidInput(i == 1 ? "min" : "max", " must be a scalar, got ", args.inputs[i].str());
  return std::vector<TensorType>{args.inputs[0]};
}

// ---- PRelu -----------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferPRelu(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kNumericTypes, "input X"));
  RETURN_IF_ERROR(checkSameDType(args));
  // The slope broadcasts to X, never the other way round.
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(args.inputs[0].shape, args.inputs[1].shape));
  if (out != args.inputs[0].shape)
    return invalidInput("slope ", args.inputs[1].str(), " does not broadcast to X ",
                        args.inputs[0].str());
  return std::vector<TensorType>{args.inputs[0]};
}

}  // namespace

void registerMathActivationSchemas(SchemaRegistry& r) {
  r.add(OpKind::LeakyRelu, &inferAct<Act::kLeakyRelu>);
  r.add(OpKind::Elu, &inferAct<Act::kElu>);
  r.add(OpKind::Selu, &inferAct<Act::kSelu>);
  r.add(OpKind::Celu, &inferAct<Act::kCelu>);
  r.add(OpKind::HardSigmoid, &inferAct<Act::kHardSigmoid>);
  r.add(OpKind::HardSwish, &inferAct<Act::kHardSwish>);
  r.add(OpKind::Mish, &inferAct<Act::kMish>);
  r.add(OpKind::ThresholdedRelu, &inferAct<Act::kThresholdedRelu>);
  r.add(OpKind::Shrink, &inferAct<Act::kShrink>);
  r.add(OpKind::Clip, &inferClip);
  r.add(OpKind::PRelu, &inferPRelu);
}

}  // namespace pcc
