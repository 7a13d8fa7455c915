// The kernel registry. Every reference kernel file exposes a register function
// that this file calls once, on first use: the library is static, so a kernel
// file that registered itself through a static initializer could be dropped by
// the linker.
#include "runtime/ops/registry.h"

#include <algorithm>

#include "runtime/ops/kernel_call.h"
#include "runtime/ops/op_util.h"

namespace pcc {

std::string_view providerName(Provider p) {
  switch (p) {
    case Provider::kReference: return "reference";
    case Provider::kOneDnn: return "onednn";
    case Provider::kGenerated: return "generated";
  }
  return "?";
}

Status KernelRegistry::add(OpKind op, Provider provider, KernelEntry e) {
  size_t o = static_cast<size_t>(op), p = static_cast<size_t>(provider);
  if (o >= kNumOpKinds || p >= kNumProviders) return internalError("kernel registered for an unknown op or provider");
  if (provider == Provider::kReference ? !e.compute : !e.make)
    return internalError("the ", providerName(provider), " kernel of ", opName(op), " has no ",
                         provider == Provider::kReference ? "compute function" : "factory");
  if (table_[o][p])
    return internalError("the ", providerName(provider), " kernel of ", opName(op), " is registered twice");
  table_[o][p] = e;
  return Status::OK();
}

const KernelEntry* KernelRegistry::find(OpKind op, Provider provider) const {
  size_t o = static_cast<size_t>(op), p = static_cast<size_t>(provider);
  if (o >= kNumOpKinds || p >= kNumProviders || !table_[o][p]) return nullptr;
  return &*table_[o][p];
}

std::vector<OpKind> KernelRegistry::ops(Provider provider) const {
  std::vector<OpKind> r;
  for (size_t o = 0; o < kNumOpKinds; ++o)
    if (find(static_cast<OpKind>(o), provider)) r.push_back(static_cast<OpKind>(o));
  return r;
}

void OpRegistry::add(OpKind op, ComputeFn compute, unsigned traits) {
  KernelEntry e;
  e.compute = compute;
  e.viewOfInput0 = (traits & kViewOfInput0) != 0;
  e.writesOutputs = (traits & kWritesOutputs) != 0;
  Status st = r_.add(op, Provider::kReference, e);
  if (!st.ok() && status_.ok()) status_ = st;
}

namespace {
struct Filled {
  KernelRegistry* registry;
  Status status;
};

Filled& filled() {
  // Function-local static: initialized exactly once, thread-safe.
  static Filled f = [] {
    auto* k = new KernelRegistry();
    OpRegistry r(*k);
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
    return Filled{k, r.status()};
  }();
  return f;
}
}  // namespace

KernelRegistry& kernelRegistry() { return *filled().registry; }

Status kernelTableStatus() { return filled().status; }

const KernelEntry* referenceKernel(OpKind op) { return kernelRegistry().find(op, Provider::kReference); }

std::vector<std::string> registeredOps() {
  std::vector<std::string> names;
  for (OpKind op : kernelRegistry().ops(Provider::kReference)) names.emplace_back(opName(op));
  std::sort(names.begin(), names.end());
  return names;
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
