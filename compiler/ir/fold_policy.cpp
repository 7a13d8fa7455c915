#include "compiler/ir/fold_policy.h"

namespace pcc {

bool shouldFold(const std::vector<Value*>& inputs, const std::vector<TensorType>& outputs,
                const FoldLimits& limits) {
  bool any = false, inputsSmall = true;
  for (const Value* v : inputs) {
    if (!v) continue;
    if (!v->isConstant()) return false;
    any = true;
    if (v->type().numel() > limits.maxElements) inputsSmall = false;
  }
  if (!any) return false;
  int64_t outElems = 0;
  for (const TensorType& t : outputs) outElems += t.numel();
  return outElems <= limits.maxElements || (inputsSmall && outElems <= limits.maxExpandElements);
}

}  // namespace pcc
