// The cpu backend: device memory is host memory, kernels are the oneDNN
// kernels of runtime/cpu where an op has one and the reference kernels of
// runtime/ops otherwise (the providers kOneDnn and kReference of the kernel
// registry, in the order BackendOptions::kernelProviders gives), communicators
// are gloo's.
//
// Kernels run through the shared kernel entry (OpKernel, runtime/ops/
// kernel_call.h), which the evaluator and the constant folder use too, with
// the oneDNN kernel as its provider kernel:
// Outputs: a oneDNN kernel, and a reference kernel registered with
// kWritesOutputs, write straight into the planned output (a view into the
// rank's arena); any other reference kernel allocates its result and
// OpKernel::runInto copies it into the planned output (counted; `pcc-run
// --profile` shows such lines as "(reference, copied)", see docs/runtime.md).
// Types: the op's inference runs once, when the kernel is prepared, on the
// plan's types; at run time only ops whose inference needs the value of a
// computed input (none in the plans pcc writes today, whose shape operands are
// constants) infer again.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "runtime/backend.h"
#include "runtime/comm_gloo.h"
#include "runtime/cpu/fast_kernels.h"
#include "runtime/fold_epilogue.h"
#include "runtime/ops/kernel_call.h"
#include "runtime/ops/registry.h"
#include "runtime/support/memory_account.h"

namespace pcc {

namespace {

/// A reshape-like op planned in place: its output already holds the bytes.
class NoOpKernel : public DeviceKernel {
 public:
  Status run(const std::vector<const Tensor*>&, const std::vector<Tensor>&) override { return Status::OK(); }
  std::string_view provider() const override { return "none"; }
  bool computesNothing() const override { return true; }
};

/// An instruction on the shared kernel entry (runtime/ops/kernel_call.h):
/// prepared once from the plan's types, run into the planned outputs.
class CpuKernel : public DeviceKernel {
 public:
  explicit CpuKernel(OpKernel k) : k_(std::move(k)) {}
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    return k_.runInto(inputs, outputs);
  }
  /// "reference, copied" marks a reference kernel whose result was copied
  /// into its planned place (it allocates its outputs; see ComputeFn).
  std::string_view provider() const override {
    if (k_.lastCopied()) return "reference, copied";
    return providerName(k_.lastProvider());
  }

 private:
  OpKernel k_;
};

/// A LAUNCH instruction: the generated kernel of the plan's CPU library.
class GeneratedKernel : public DeviceKernel {
 public:
  GeneratedKernel(CpuKernelEntry entry, std::string where) : entry_(entry), where_(std::move(where)) {}
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    in_.clear();
    out_.clear();
    for (const Tensor* t : inputs) {
      if (!t) return internalError(where_, ": a generated kernel has no absent inputs");
      in_.push_back(t->raw());
    }
    for (const Tensor& t : outputs) {
      if (t.dtype() == DType::kUndefined) return internalError(where_, ": a generated kernel writes every output");
      out_.push_back(const_cast<void*>(t.raw()));  // a planned output: writable memory
    }
    entry_(in_.data(), out_.data());
    return Status::OK();
  }
  std::string_view provider() const override { return "generated"; }

 private:
  CpuKernelEntry entry_;
  std::string where_;
  std::vector<const void*> in_;
  std::vector<void*> out_;
};

/// A LAUNCH of a generated Attention kernel: large heads run on the runtime's
/// oneDNN Attention path (measured faster there: docs/runtime.md), the rest
/// on the generated kernel.
class AttentionLaunch : public DeviceKernel {
 public:
  AttentionLaunch(std::unique_ptr<KernelOverride> large, CpuKernelEntry entry, std::string where)
      : large_(std::move(large)), generated_(entry, std::move(where)) {}
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    outs_ = outputs;  // views of the planned outputs: the kernel writes into them
    StatusOr<bool> ran = large_->run(inputs, outs_);
    if (!ran.ok()) return ran.status();
    onednn_ = *ran;
    return onednn_ ? Status::OK() : generated_.run(inputs, outputs);
  }
  std::string_view provider() const override { return onednn_ ? "onednn" : "generated"; }

 private:
  std::unique_ptr<KernelOverride> large_;
  GeneratedKernel generated_;
  std::vector<Tensor> outs_;
  bool onednn_ = false;
};

/// A GEMM or convolution folded with the instructions after it (its
/// epilogue as oneDNN post-ops, Backend::prepareFolded).
class EpilogueKernel : public DeviceKernel {
 public:
  EpilogueKernel(std::unique_ptr<KernelOverride> k, std::string provider, std::string where)
      : k_(std::move(k)), provider_(std::move(provider)), where_(std::move(where)) {}
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    outs_ = outputs;  // views of the planned outputs: the kernel writes into them
    StatusOr<bool> ran = k_->run(inputs, outs_);
    if (!ran.ok()) return ran.status().withContext(where_);
    if (!*ran) return internalError(where_, ": the folded kernel declined the planned types it was prepared for");
    return Status::OK();
  }
  std::string_view provider() const override { return provider_; }

 private:
  std::unique_ptr<KernelOverride> k_;
  std::string provider_, where_;
  std::vector<Tensor> outs_;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& o) : options_(o) { registered_ = cpu::registerOneDnnKernels(); }

  std::string_view name() const override { return "cpu"; }

  StatusOr<DeviceMemory> allocate(uint64_t bytes) override {
    uint64_t n = std::max<uint64_t>((bytes + 63) / 64 * 64, 64);
    void* p = std::aligned_alloc(64, n);
    // Out of memory is the machine's limit, not a bug: exit 4, as for any
    // other allocation that fails (tools/cli.h guardedMain).
    if (!p) return environmentError("out of memory: cannot allocate ", bytes, " bytes");
    if (options_.poisonMemory) std::memset(p, 0xFF, n);
    DeviceMemory m;
    // Charged to the allocating thread's memory account, if any (the rank's).
    if (std::shared_ptr<MemoryAccount> account = chargeAllocation(static_cast<int64_t>(n)))
      m.owner = std::shared_ptr<const void>(p, [account, n](const void* q) {
        std::free(const_cast<void*>(q));
        account->sub(static_cast<int64_t>(n));
      });
    else
      m.owner = std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
    m.base = reinterpret_cast<uintptr_t>(p);
    m.bytes = bytes;
    return m;
  }

  StatusOr<Tensor> toDevice(const Tensor& host) override { return host; }
  StatusOr<Tensor> toHost(const Tensor& t) override { return t; }

  Status copy(const Tensor& src, const Tensor& dst) override {
    if (src.type() != dst.type())
      return internalError("copy of ", src.type().str(), " into ", dst.type().str());
    Tensor d = dst;
    if (src.raw() != d.raw() && d.nbytes()) std::memmove(d.mutableData(), src.raw(), d.nbytes());
    return Status::OK();
  }

  StatusOr<std::unique_ptr<DeviceKernel>> prepareKernel(const KernelDesc& k) override {
    RETURN_IF_ERROR(registered_);
    // Planned in place (Y over Q), the oneDNN path is safe as the generated
    // kernel is: a tile of Y rows is written only after the product that
    // reads the same tile of Q.
    if (k.cpuEntry && k.op == "Attention" && k.attrs)
      return std::unique_ptr<DeviceKernel>(new AttentionLaunch(cpu::makeLargeAttentionKernel(*k.attrs), k.cpuEntry, k.where));
    if (k.cpuEntry) {
      // validatePlan checked the operands' types against the kernel table.
      return std::unique_ptr<DeviceKernel>(new GeneratedKernel(k.cpuEntry, k.where));
    }
    std::optional<OpKind> op = opFromName(k.op);
    if (!op) return unsupported(k.where, ": op '", k.op, "' has no CPU kernel");
    const KernelEntry* reference = referenceKernel(*op);
    // Per instruction: the kernels of the preferred providers, in order (an
    // instruction planned in place takes only those that compute in place).
    std::vector<bool> constant;
    for (const Tensor* t : k.constInputs) constant.push_back(t != nullptr);
    constant.resize(k.inputs.size(), false);
    const std::vector<Provider>& order = options_.kernelProviders;
    std::vector<ProviderKernel> providers = makeProviderKernels(*op, *k.attrs, constant, order, k.inPlace);
    bool useReference = std::find(order.begin(), order.end(), Provider::kReference) != order.end();
    if (!useReference && providers.empty())
      return unsupported(k.where, ": op '", k.op, "' has no kernel of the preferred providers");
    // Errors of the op name the op and its inputs; the executor prefixes k.where.
    auto prepared = OpKernel::prepare(*op, *k.attrs, k.inputs, k.constInputs, {}, std::move(providers), useReference);
    if (!prepared.ok()) return prepared.status().withContext(k.where);
    OpKernel kernel = std::move(prepared).value();
    RETURN_IF_ERROR(kernel.checkDeclared(k.outputs, StatusCode::kInvalidInput, [&](size_t i) {
      return strCat("the plan's ", i < k.outputNames.size() ? k.outputNames[i] : std::string("buffer"));
    }).withContext(k.where));
    // Planned in place, an op whose output is its input's bytes has nothing to do.
    if (k.inPlace && !kernel.infersAtRun() && reference && reference->viewOfInput0 && k.outputs.size() == 1)
      return std::unique_ptr<DeviceKernel>(new NoOpKernel);
    return std::unique_ptr<DeviceKernel>(new CpuKernel(std::move(kernel)));
  }

  /// Folding: a MatMul, Gemm or Conv on oneDNN computes the elementwise
  /// chain after it (runtime/fold_epilogue.h: generated kernels the plan
  /// describes as a chain, and single elementwise KERNELs) as post-ops. The
  /// longest prefix of the chain oneDNN takes without falling back to its
  /// reference implementation is folded.
  StatusOr<FoldedKernel> prepareFolded(const KernelDesc& k, const std::vector<FoldCandidate>& next) override {
    RETURN_IF_ERROR(registered_);
    const std::vector<Provider>& order = options_.kernelProviders;
    if (!options_.foldEpilogues || order.empty() || order.front() != Provider::kOneDnn) return FoldedKernel{};
    if (k.cpuEntry || !k.attrs || (k.op != "MatMul" && k.op != "Gemm" && k.op != "Conv") || k.outputs.size() != 1 ||
        k.outputs[0].dtype != DType::kF32 || k.outputs[0].numel() == 0)
      return FoldedKernel{};
    // Each instruction of the chain is checked as it would be unfolded (its
    // op's inference on the plan's types) before oneDNN sees any of it.
    RETURN_IF_ERROR(prepareKernel(k).status());
    for (const FoldCandidate& c : next) {
      if (c.desc.cpuEntry) continue;  // a generated kernel: validatePlan checked its types
      RETURN_IF_ERROR(prepareKernel(c.desc).status());
    }
    std::vector<TensorType> types = k.inputs;
    std::vector<bool> constant;
    for (size_t i = 0; i < k.inputs.size(); ++i) constant.push_back(i < k.constInputs.size() && k.constInputs[i]);
    // The epilogue of each prefix of the chain that is one, with its inputs.
    std::vector<std::pair<Epilogue, std::vector<TensorType>>> prefixes;
    Epilogue e;
    for (const FoldCandidate& c : next) {
      if (!appendEpilogue(c, static_cast<int>(types.size()), &e)) break;
      for (size_t a = 0; a < c.desc.inputs.size(); ++a)
        if (a != c.chainInput) types.push_back(c.desc.inputs[a]);
      prefixes.push_back({e, types});
    }
    for (size_t n = prefixes.size(); n > 0; --n) {
      const auto& [epi, ins] = prefixes[n - 1];
      std::vector<bool> constants = constant;
      constants.resize(ins.size(), false);
      std::unique_ptr<KernelOverride> made =
          cpu::makeEpilogueKernel(k.op, *k.attrs, constants, ins, k.inputs.size(), epi);
      if (!made) continue;
      std::unique_ptr<DeviceKernel> kernel(
          new EpilogueKernel(std::move(made), strCat("onednn, epilogue ", epilogueSummary(epi)), k.where));
      return FoldedKernel{std::move(kernel), n};
    }
    return FoldedKernel{};
  }

  std::unique_ptr<CommunicatorFactory> communicators(std::shared_ptr<GlooStore> store,
                                                     const GlooOptions& options) override {
    return glooCommunicatorFactory(std::move(store), options);
  }

 private:
  BackendOptions options_;
  Status registered_;
};

}  // namespace

std::unique_ptr<Backend> makeCpuBackend(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace pcc
