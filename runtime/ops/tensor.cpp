// Reference kernels of the tensor op family.
#include "runtime/ops/op_util.h"

namespace pcc {

void registerTensorOps(OpRegistry& r) { (void)r; }

}  // namespace pcc
