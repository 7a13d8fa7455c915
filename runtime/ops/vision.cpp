// Reference kernels of the vision, detection and quantized op family: the
// family's register function and the helpers its files share.
#include "runtime/ops/vision.h"

namespace pcc {

namespace ops {

Tensor fromDoubles(DType dt, const Dims& shape, const std::vector<double>& v) {
  Tensor r = Tensor::zeros(dt, shape);
  for (int64_t i = 0; i < r.numel(); ++i) storeDouble(r, i, v[static_cast<size_t>(i)]);
  return r;
}

}  // namespace ops

void registerVisionOps(OpRegistry& r) {
  registerVisionSampleOps(r);
  registerVisionSelectOps(r);
  registerVisionQuantOps(r);
}

}  // namespace pcc
