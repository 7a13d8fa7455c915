// The CPU runtime's fast kernels on oneDNN primitives, f32 only: MatMul, Gemm
// and Conv (the heavy ops), and MaxPool, AveragePool, Add, Sub, Mul, Div, Relu,
// Tanh and Pow with a scalar exponent (memory-bound ops whose reference loops were a large share of CNN
// and transformer run times). The executor prefers them over the reference kernels of
// runtime/ops; a call they cannot express (another dtype, a shape or
// attribute oneDNN does not take) falls back to the reference kernel. The
// reference evaluator, the constant folder and the plan's reference program
// (`pcc-run --check`) keep the reference kernels, so every check compares the
// fast path with the simple one.
//
// Beyond KernelOverride's contract, these kernels accept `outputs` arriving
// with one preallocated tensor per output (the CPU backend passes views into
// the rank's arena, contents undefined): they write every element of it
// instead of allocating, and the elementwise ones (Add, Sub, Mul, Div, Relu,
// Tanh, Pow) also accept output 0 sharing memory with input 0 (in place, as
// the memory plan allows for elementwise ops; oneDNN computes in place).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "runtime/ops/registry.h"
#include "runtime/support/attribute.h"
#include "runtime/support/epilogue.h"

namespace pcc::cpu {

/// Registers the oneDNN kernels in the kernel registry as provider kOneDnn,
/// by OpKind (once per process; later calls do nothing).
/// \returns ok, or the registry's error (a kernel registered twice).
Status registerOneDnnKernels();

/// \returns the oneDNN kernel for one instruction of `op` with attributes
/// `attrs` (copied), or nullptr when `op` has none: the registry's kOneDnn
/// factory (registering the kernels first). `constantInputs[k]` says that
/// input k holds the same data on every call (a plan weight), which lets the
/// kernel keep a reordered copy of it.
std::unique_ptr<KernelOverride> makeFastKernel(OpKind op, const AttrMap& attrs,
                                               const std::vector<bool>& constantInputs);

/// \returns the Attention kernel for heads of at least 2^18 multiply-adds
/// only (its oneDNN matmul/softmax path, runtime/cpu/attention.cpp): it
/// declines smaller ones. The CPU backend runs it ahead of a generated
/// Attention kernel, which is faster on small heads and slower on large ones.
std::unique_ptr<KernelOverride> makeLargeAttentionKernel(const AttrMap& attrs);

/// \returns a MatMul, Gemm or Conv kernel (`op`) that also computes epilogue
/// `e` (runtime/support/epilogue.h) as oneDNN post-ops, prepared for input
/// shapes `inputs`: the op's own `ownInputs` inputs, then the operands the
/// steps name. Its outputs are the op's, transformed by the epilogue. nullptr
/// when oneDNN has no fast form of it (a dtype, an operand broadcast no
/// post-op describes, or oneDNN falling back to its reference
/// implementation): the caller then runs the instructions unfolded.
std::unique_ptr<KernelOverride> makeEpilogueKernel(std::string_view op, const AttrMap& attrs,
                                                   const std::vector<bool>& constantInputs,
                                                   const std::vector<TensorType>& inputs, size_t ownInputs,
                                                   const Epilogue& e);

/// \returns the processors this process may run on (its affinity mask).
int availableCores();

/// \returns the OpenMP threads each rank should use when `ranksHere` ranks
/// share this machine: max(1, availableCores() / ranksHere).
int threadsPerRank(int ranksHere);

/// Sets the number of OpenMP threads the oneDNN kernels use when called from
/// this thread (OpenMP's nthreads-var is per thread, so each rank thread of a
/// process sets its own). n < 1 means 1.
void setKernelThreads(int n);

/// \returns the OpenMP threads the kernels would use if called from this thread.
int kernelThreads();

/// The spin count of OpenMP's idle threads on a quiet machine (GNU OpenMP's
/// GOMP_SPINCOUNT): tens of microseconds, long enough to span the gap
/// between two kernels of a run, short against a time slice.
inline constexpr const char* kQuietSpinCount = "30000";

/// \returns the tasks running or ready to run on this machine besides this
/// process: the least of five samples, 2 ms apart, of /proc/loadavg's count
/// of runnable tasks (this process among them); -1 when it cannot be read.
int otherRunnableTasks();

/// Chooses how OpenMP's idle threads wait, for this process, unless the
/// environment already chooses (OMP_WAIT_POLICY or GOMP_SPINCOUNT set): on
/// a quiet machine (other runnable tasks at most a quarter of this process's
/// cores) they spin kQuietSpinCount times before they sleep, else they sleep
/// at once (OMP_WAIT_POLICY=passive). The OpenMP runtime reads its settings
/// once, when it is loaded, so this sets the variable and executes the
/// program again (/proc/self/exe with `argv`); call it first thing in main.
/// \returns what the process runs with, when it does not execute again
/// ("set by the environment", or "OpenMP's default" when that failed).
/// Why (docs/runtime.md "Threads"): a team that sleeps pays a wake-up at
/// every kernel, which on a quiet machine made a second thread slower than
/// one (the MobileNetV2 export, batch 4: 0.95 ms at one thread, 3.23 ms at
/// two sleeping, 0.79 ms at two spinning); a team that spins long starves
/// its own members when other work shares the cores (the ResNet export, 2
/// threads on 2 busy cores: 17 to 190 ms per run spinning 300,000 times, 3
/// to 4 ms sleeping).
const char* chooseOpenMpWaitPolicy(char** argv);

}  // namespace pcc::cpu
