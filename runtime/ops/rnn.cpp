// Reference kernels of the recurrent network op family.
#include "runtime/ops/op_util.h"

namespace pcc {

void registerRnnOps(OpRegistry& r) { (void)r; }

}  // namespace pcc
