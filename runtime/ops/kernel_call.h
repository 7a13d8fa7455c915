// The one way pcc runs an op's kernel on tensors. The reference evaluator
// (compiler/eval, with region bodies on top), the constant folder, the
// importer's folding, the cpu backend of the runtime and the unit tests all
// call kernels through OpKernel, so they share:
//  - absent optional inputs: nullptr (or an undefined tensor) at their
//    position; trailing absent inputs are dropped, as the importer drops them
//    from nodes, so a kernel sees the same argument list from every caller;
//  - type inference once per preparation, on the input types and the values
//    of the inputs known when it is prepared (every input, for a one-shot
//    call; the plan's weights, in the runtime), and again at run time only when
//    an op's type needs the value of an input that was not known;
//  - the kernel choice: the first provider's kernel (KernelOverride, the oneDNN
//    ones in the cpu backend) that takes the call, else the reference kernel;
//  - the checks of the results against the inferred types, and the error
//    context: "<where>: <Op> with inputs (<types>): <problem>".
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/ops/registry.h"

namespace pcc {

/// A provider's kernel for one instruction (see KernelRegistry).
struct ProviderKernel {
  Provider provider;
  std::shared_ptr<KernelOverride> kernel;
};

/// \returns the kernels of the providers of `preference` (in its order) that
/// have one for `op`, up to the first kReference, made for attributes `attrs`
/// and constant inputs `constantInputs` (see KernelFactory). With `inPlace`,
/// only kernels that accept output 0 over input 0.
std::vector<ProviderKernel> makeProviderKernels(OpKind op, const AttrMap& attrs,
                                                const std::vector<bool>& constantInputs,
                                                const std::vector<Provider>& preference, bool inPlace);

class OpKernel {
 public:
  /// Prepares op `op` with attributes `attrs` (kept by pointer: they must
  /// outlive the kernel) for inputs of types `inputs` (dtype kUndefined: an
  /// absent optional input). `known[i]` is input i's value where it is known
  /// now and on every run (else nullptr; shorter than `inputs` means the rest
  /// are unknown). The kernels of `providers` are tried in order, and the
  /// reference kernel last when `reference` (else a call no provider takes is
  /// an error). `where` prefixes every error (empty: none).
  /// \returns the kernel, or an error: no kernel for the op, or inputs the
  /// op's inference rejects although every input's value is known. A
  /// rejection while some input's value is unknown is not an error here: the
  /// kernel infers on every run instead (infersAtRun), and reports it there.
  static StatusOr<OpKernel> prepare(OpKind op, const AttrMap& attrs, std::vector<TensorType> inputs,
                                    std::vector<const Tensor*> known, std::string where = {},
                                    std::vector<ProviderKernel> providers = {}, bool reference = true);
  /// prepare by op name (tests, tools). \returns an error for an unknown name too.
  static StatusOr<OpKernel> prepare(std::string_view op, const AttrMap& attrs, std::vector<TensorType> inputs,
                                    std::vector<const Tensor*> known, std::string where = {},
                                    std::vector<ProviderKernel> providers = {}, bool reference = true);

  /// \returns the output types inferred at preparation (empty when the op
  /// infers at run time).
  const std::vector<TensorType>& outputTypes() const { return inferred_; }
  /// \returns whether type inference runs again on every call.
  bool infersAtRun() const { return inferAtRun_; }
  /// \returns the provider whose kernel ran the last call (kReference before any).
  Provider lastProvider() const { return lastProvider_; }
  /// \returns whether the last runInto copied an output into its planned
  /// place (a reference kernel without kWritesOutputs allocated it).
  bool lastCopied() const { return lastCopied_; }
  /// \returns how many outputs of op `op` runInto has copied into their
  /// planned place since the process started, over all kernels and threads.
  static uint64_t outputCopies(OpKind op);

  /// Checks the types a caller declared for the outputs (a node's, a plan's
  /// buffers') against the inferred ones; a declared type with dtype
  /// kUndefined is not checked, and there may be fewer declared than made.
  /// `name(i)` names declared output i in the message. Nothing is checked when
  /// the op infers at run time (run and runInto check then).
  /// \returns ok, or an error of code `code` naming `where`.
  Status checkDeclared(const std::vector<TensorType>& declared, StatusCode code,
                       const std::function<std::string(size_t)>& name) const;

  /// Runs the kernel on `inputs` (nullptr: absent), allocating the outputs.
  /// \returns one tensor per output of the op, of the inferred types.
  StatusOr<std::vector<Tensor>> run(const std::vector<const Tensor*>& inputs);

  /// Runs the kernel on `inputs`, writing `outputs`: tensors of the types the
  /// caller planned, contents undefined on entry, possibly over input 0 (in
  /// place); an undefined tensor for an output whose result is dropped. A
  /// provider kernel and a reference kernel registered with kWritesOutputs
  /// write them directly; another reference kernel's results are copied into
  /// them (lastCopied, outputCopies).
  Status runInto(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs);

 private:
  OpKernel() = default;
  /// \returns `inputs` with undefined tensors as nullptr and trailing absent ones dropped.
  static std::vector<const Tensor*> normalize(const std::vector<const Tensor*>& inputs);
  /// \returns whether normalize would return `inputs` unchanged.
  static bool isNormal(const std::vector<const Tensor*>& inputs);
  /// \returns "Op with inputs (types)", prefixed with where_.
  std::string describe(const std::vector<const Tensor*>& inputs) const;
  Status fail(const Status& st, const std::vector<const Tensor*>& inputs) const;
  /// \returns the output types for `inputs`: the prepared ones, or inferred now.
  StatusOr<std::vector<TensorType>> typesFor(const std::vector<const Tensor*>& inputs) const;
  /// Runs the first provider that takes the call, else the reference kernel.
  /// `got` arrives as the planned outputs (or empty). \returns ok with `got` filled.
  Status dispatch(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& planned,
                  std::vector<Tensor>& got);

  OpKind op_ = OpKind::kNumOps;
  std::string where_;
  const AttrMap* attrs_ = nullptr;
  InferFn infer_ = nullptr;
  const KernelEntry* reference_ = nullptr;
  std::vector<ProviderKernel> providers_;
  std::vector<TensorType> inferred_;
  bool inferAtRun_ = false;
  Provider lastProvider_ = Provider::kReference;
  bool lastCopied_ = false;
  /// runInto's results, kept for their capacity (emptied after every call:
  /// they hold no tensor between calls).
  std::vector<Tensor> got_;
  /// \returns the process's count of copied outputs per op.
  static std::array<std::atomic<uint64_t>, kNumOpKinds>& copyCounters();
};

/// Runs op `op` once on `inputs` (nullptr: absent), all of whose values are
/// known: OpKernel::prepare on their types and values, then run. `where`
/// prefixes errors; `fast` (borrowed, a kernel of `fastProvider`) is tried
/// before the reference kernel.
/// \returns the outputs, or an error "<where>: <Op> with inputs (...): ...".
StatusOr<std::vector<Tensor>> runKernel(OpKind op, const std::vector<const Tensor*>& inputs, const AttrMap& attrs,
                                        std::string_view where = {}, KernelOverride* fast = nullptr,
                                        Provider fastProvider = Provider::kOneDnn);
/// runKernel by op name. \returns an error for an unknown name too.
StatusOr<std::vector<Tensor>> runKernel(std::string_view op, const std::vector<const Tensor*>& inputs,
                                        const AttrMap& attrs, std::string_view where = {},
                                        KernelOverride* fast = nullptr, Provider fastProvider = Provider::kOneDnn);

}  // namespace pcc
