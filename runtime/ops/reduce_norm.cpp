// Reference kernels of the reduce_norm op family: the registration hook and
// the axis helpers shared by the reduce_norm*.cpp kernel files.
#include "runtime/ops/reduce_norm.h"

namespace pcc {
namespace ops {

void splitAround(const Dims& shape, int64_t axis, int64_t& outer, int64_t& n, int64_t& inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  n = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
}

}  // namespace ops

void registerReduceNormOps(OpRegistry& r) {
  registerReductionOps(r);
  registerSelectionOps(r);
  registerNormalizationOps(r);
  registerEinsumOps(r);
  registerAttentionOps(r);
}

}  // namespace pcc
