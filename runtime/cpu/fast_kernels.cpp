// The oneDNN provider: its kernels registered by OpKind in the kernel
// registry, and the OpenMP thread count per rank.
#include "runtime/cpu/fast_kernels.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "runtime/cpu/dnnl_kernels.h"

namespace pcc::cpu {

Status registerOneDnnKernels() {
  // Function-local static: registered exactly once, thread-safe. The entries
  // marked in place compute correctly with output 0 over input 0 (oneDNN's
  // dst = op(src0, ...)).
  static const Status registered = [] {
    struct Row {
      OpKind op;
      KernelFactory make;
      bool inPlace;
    };
    const Row rows[] = {
        {OpKind::Add, &makeAddKernel, true},
        {OpKind::Attention, &makeAttentionKernel, false},
        {OpKind::AveragePool, &makeAveragePoolKernel, false},
        {OpKind::Conv, &makeConvKernel, false},
        {OpKind::Div, &makeDivKernel, true},
        {OpKind::Gelu, &makeGeluKernel, true},
        {OpKind::Gemm, &makeGemmKernel, false},
        {OpKind::MatMul, &makeMatMulKernel, false},
        {OpKind::MaxPool, &makeMaxPoolKernel, false},
        {OpKind::Mul, &makeMulKernel, true},
        {OpKind::Pow, &makePowKernel, true},
        {OpKind::Relu, &makeReluKernel, true},
        {OpKind::Sub, &makeSubKernel, true},
        {OpKind::Swish, &makeSwishKernel, true},
        {OpKind::Tanh, &makeTanhKernel, true},
    };
    KernelRegistry& r = kernelRegistry();
    for (const Row& row : rows) {
      KernelEntry e;
      e.make = row.make;
      e.inPlace = row.inPlace;
      RETURN_IF_ERROR(r.add(row.op, Provider::kOneDnn, e));
    }
    return Status::OK();
  }();
  return registered;
}

std::unique_ptr<KernelOverride> makeFastKernel(OpKind op, const AttrMap& attrs,
                                               const std::vector<bool>& constantInputs) {
  if (!registerOneDnnKernels().ok()) return nullptr;
  const KernelEntry* e = kernelRegistry().find(op, Provider::kOneDnn);
  return e ? e->make(attrs, constantInputs) : nullptr;
}

std::unique_ptr<KernelOverride> makeEpilogueKernel(std::string_view op, const AttrMap& attrs,
                                                   const std::vector<bool>& constantInputs,
                                                   const std::vector<TensorType>& inputs, size_t ownInputs,
                                                   const Epilogue& e) {
  if (e.steps.empty() || ownInputs > inputs.size()) return nullptr;
  for (const TensorType& t : inputs)
    if (t.dtype != DType::kF32 && t.dtype != DType::kUndefined) return nullptr;
  if (op == "MatMul") return makeMatMulEpilogueKernel(constantInputs, inputs, ownInputs, e);
  if (op == "Gemm") return makeGemmEpilogueKernel(attrs, constantInputs, inputs, ownInputs, e);
  if (op == "Conv") return makeConvEpilogueKernel(attrs, constantInputs, inputs, ownInputs, e);
  return nullptr;
}

int availableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, omp_get_num_procs());
}

int threadsPerRank(int ranksHere) { return std::max(1, availableCores() / std::max(1, ranksHere)); }

void setKernelThreads(int n) { omp_set_num_threads(std::max(1, n)); }

int kernelThreads() { return omp_get_max_threads(); }

void preferSleepingOpenMpThreads(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OMP_WAIT_POLICY");  // exec failed: run on, with OpenMP's default
}

}  // namespace pcc::cpu
