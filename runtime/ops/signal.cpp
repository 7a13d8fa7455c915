// Reference kernels of the losses, windows and spectral op family: the
// registration hook of the family and the helpers its files share.
#include "runtime/ops/signal.h"

namespace pcc {
namespace ops {

}  // namespace ops

void registerSignalOps(OpRegistry& r) {
  registerLossOps(r);
  registerWindowOps(r);
  registerSpectralOps(r);
}

}  // namespace pcc
