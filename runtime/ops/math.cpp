// Reference kernels of the math op family: the register hook and the helpers
// of math.h. The kernels themselves live in math_*.cpp, one file per concept.
#include "runtime/ops/math.h"

namespace pcc {

namespace ops {

}  // namespace ops

void registerMathOps(OpRegistry& r) {
  registerMathUnaryOps(r);
  registerMathActivationOps(r);
  registerMathBinaryOps(r);
  registerMathGenerateOps(r);
  registerMathQuantOps(r);
}

}  // namespace pcc
