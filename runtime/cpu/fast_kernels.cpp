// The table of fast kernels, and the OpenMP thread count per rank.
#include "runtime/cpu/fast_kernels.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <map>
#include <string>

#include "runtime/cpu/dnnl_kernels.h"

namespace pcc::cpu {
namespace {

using Factory = std::unique_ptr<KernelOverride> (*)(const AttrMap&, const std::vector<bool>&);

struct Entry {
  Factory make;
  bool inPlace;  // computes correctly with output 0 over input 0 (oneDNN's dst = op(src0, ...))
};

const std::map<std::string_view, Entry>& factories() {
  static const std::map<std::string_view, Entry> t = {
      {"Add", {&makeAddKernel, true}},
      {"AveragePool", {&makeAveragePoolKernel, false}},
      {"Conv", {&makeConvKernel, false}},
      {"Div", {&makeDivKernel, true}},
      {"Gelu", {&makeGeluKernel, true}},
      {"Gemm", {&makeGemmKernel, false}},
      {"MatMul", {&makeMatMulKernel, false}},
      {"MaxPool", {&makeMaxPoolKernel, false}},
      {"Mul", {&makeMulKernel, true}},
      {"Pow", {&makePowKernel, true}},
      {"Relu", {&makeReluKernel, true}},
      {"Sub", {&makeSubKernel, true}},
      {"Swish", {&makeSwishKernel, true}},
      {"Tanh", {&makeTanhKernel, true}},
  };
  return t;
}

}  // namespace

std::unique_ptr<KernelOverride> makeFastKernel(std::string_view op, const AttrMap& attrs,
                                               const std::vector<bool>& constantInputs) {
  auto it = factories().find(op);
  if (it == factories().end()) return nullptr;
  return it->second.make(attrs, constantInputs);
}

bool fastKernelRunsInPlace(std::string_view op) {
  auto it = factories().find(op);
  return it != factories().end() && it->second.inPlace;
}

std::vector<std::string_view> fastKernelOps() {
  std::vector<std::string_view> names;
  for (const auto& [name, f] : factories()) names.push_back(name);
  return names;
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

}  // namespace pcc::cpu
