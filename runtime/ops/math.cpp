// Reference kernels of the math op family: the register hook and the helpers
// of math.h. The kernels themselves live in math_*.cpp, one file per concept.
#include "runtime/ops/math.h"

namespace pcc {

namespace ops {

Status checkSameDType(const InferArgs& args) {
  for (size_t i = 1; i < args.inputs.size(); ++i)
    if (args.has(i) && args.inputs[i].dtype != args.inputs[0].dtype)
      return invalidInput("input types differ: ", args.inputs[0].str(), " and ",
                          args.inputs[i].str(), " (input ", i, ")");
  return Status::OK();
}

}  // namespace ops

void registerMathOps(OpRegistry& r) {
  registerMathUnaryOps(r);
  registerMathActivationOps(r);
  registerMathBinaryOps(r);
  registerMathGenerateOps(r);
  registerMathQuantOps(r);
}

}  // namespace pcc
