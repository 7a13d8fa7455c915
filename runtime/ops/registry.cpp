// The op table. Every kernel file exposes a register function that this file
// calls once, on first use: the library is static, so a kernel file that
// registered itself through a static initializer could be dropped by the linker.
#include "runtime/ops/registry.h"

#include <algorithm>
#include <map>

#include "runtime/ops/kernel_call.h"
#include "runtime/ops/op_util.h"

namespace pcc {

namespace {
using Table = std::map<std::string, OpSchema, std::less<>>;

Table& mutableTable() {
  static Table t;
  return t;
}

const Table& table() {
  // Function-local static: initialized exactly once, thread-safe.
  static const bool filled = [] {
    OpRegistry r;
    registerElementwiseOps(r);
    registerLinalgOps(r);
    registerConvPoolOps(r);
    registerNormReduceOps(r);
    registerShapeOps(r);
    registerDataMovementOps(r);
    registerCollectiveOps(r);
    registerMathOps(r);
    registerReduceNormOps(r);
    registerTensorOps(r);
    registerSignalOps(r);
    registerRnnOps(r);
    registerVisionOps(r);
    registerTextOps(r);
    return true;
  }();
  (void)filled;
  return mutableTable();
}
}  // namespace

void OpRegistry::add(OpSchema s) {
  std::string name = s.name;
  mutableTable()[name] = std::move(s);
}

const OpSchema* findOpSchema(std::string_view name) {
  const Table& t = table();
  auto it = t.find(name);
  return it == t.end() ? nullptr : &it->second;
}

InferFn findInferFn(std::string_view name) {
  const OpSchema* s = findOpSchema(name);
  return s ? s->infer : nullptr;
}

std::vector<std::string> registeredOps() {
  std::vector<std::string> names;
  for (const auto& [name, s] : table()) names.push_back(name);
  return names;  // std::map keeps them sorted
}

StatusOr<std::vector<Tensor>> runOp(std::string_view op, const std::vector<const Tensor*>& inputs,
                                    const AttrMap& attrs) {
  return runOp(op, inputs, attrs, nullptr);
}

StatusOr<std::vector<Tensor>> runOp(std::string_view op, const std::vector<const Tensor*>& inputs,
                                    const AttrMap& attrs, KernelOverride* fast) {
  return runKernel(op, inputs, attrs, {}, fast);
}

}  // namespace pcc
