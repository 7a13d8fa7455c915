// Reference kernels of the math op family.
#include "runtime/ops/op_util.h"

namespace pcc {

void registerMathOps(OpRegistry& r) { (void)r; }

}  // namespace pcc
