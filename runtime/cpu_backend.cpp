// The cpu backend: device memory is host memory, kernels are the oneDNN
// kernels of runtime/cpu where an op has one and the reference kernels of
// runtime/ops otherwise, communicators are gloo's.
//
// Outputs: a oneDNN kernel writes straight into the planned output (a view
// into the rank's arena); a reference kernel allocates its result and the
// backend copies it into the planned output (the reference kernels keep their
// allocating contract, see docs/runtime.md).
// Types: the op's inference runs once, when the kernel is prepared, on the
// plan's types; at run time only ops whose inference needs the value of a
// computed input (none in the plans pcc writes today, whose shape operands are
// constants) infer again.
#include <cstdlib>
#include <cstring>

#include "runtime/backend.h"
#include "runtime/comm_gloo.h"
#include "runtime/cpu/fast_kernels.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/registry.h"

namespace pcc {

namespace {

/// Ops whose fast kernel computes correctly with output 0 over input 0.
bool fastKernelRunsInPlace(std::string_view op) {
  for (std::string_view k : {"Add", "Sub", "Mul", "Div", "Relu", "Tanh", "Pow"})
    if (op == k) return true;
  return false;
}

/// Ops whose output 0 is input 0's bytes under another shape: planned in
/// place, they have nothing to do.
bool renamesItsInput(std::string_view op) {
  for (std::string_view k : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    if (op == k) return true;
  return false;
}

/// A reshape-like op planned in place: its output already holds the bytes.
class NoOpKernel : public DeviceKernel {
 public:
  Status run(const std::vector<const Tensor*>&, const std::vector<Tensor>&) override { return Status::OK(); }
};

class CpuKernel : public DeviceKernel {
 public:
  CpuKernel(const KernelDesc& k, const OpSchema* schema, std::unique_ptr<KernelOverride> fast, bool inferAtRun)
      : op_(k.op), where_(k.where), attrs_(k.attrs), schema_(schema), fast_(std::move(fast)),
        inferAtRun_(inferAtRun) {}

  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    auto describe = [&] {
      std::vector<TensorType> ts;
      for (const Tensor* t : inputs) ts.push_back(t ? t->type() : TensorType{});
      return strCat(op_, " with inputs (", ops::typesToString(ts), ")");
    };
    if (inferAtRun_) {
      auto inferred = schema_->infer(ops::argsFromTensors(inputs, *attrs_));
      if (!inferred.ok()) return inferred.status().withContext(describe());
      for (size_t k = 0; k < outputs.size() && k < inferred->size(); ++k)
        if (outputs[k].defined() && (*inferred)[k] != outputs[k].type())
          return invalidInput(describe(), ": output ", k, " is ", (*inferred)[k].str(), " but the plan says ",
                              outputs[k].type().str());
    }
    std::vector<Tensor> got;
    if (fast_) {
      got = outputs;  // views: the kernel writes into the planned memory
      auto ran = fast_->run(inputs, got);
      if (!ran.ok()) return ran.status().withContext(describe());
      if (*ran) return place(got, outputs, describe);
      got.clear();
    }
    Status st = schema_->compute(inputs, *attrs_, got);
    if (!st.ok()) return st.withContext(describe());
    return place(got, outputs, describe);
  }

 private:
  /// Copies each kernel result into its planned output unless it is already there.
  template <typename D>
  Status place(const std::vector<Tensor>& got, const std::vector<Tensor>& outputs, const D& describe) {
    if (got.size() < outputs.size())
      return internalError(describe(), ": the kernel made ", got.size(), " outputs, the plan names ",
                           outputs.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!outputs[k].defined()) continue;  // an output the program does not use
      if (got[k].type() != outputs[k].type())
        return internalError(describe(), ": kernel output ", k, " is ", got[k].type().str(),
                             " but the plan says ", outputs[k].type().str());
      Tensor dst = outputs[k];
      if (got[k].raw() != dst.raw() && dst.nbytes()) std::memmove(dst.mutableData(), got[k].raw(), dst.nbytes());
    }
    return Status::OK();
  }

  std::string op_, where_;
  const AttrMap* attrs_;
  const OpSchema* schema_;
  std::unique_ptr<KernelOverride> fast_;
  bool inferAtRun_;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& o) : options_(o) {}

  std::string_view name() const override { return "cpu"; }

  StatusOr<DeviceMemory> allocate(uint64_t bytes) override {
    uint64_t n = std::max<uint64_t>((bytes + 63) / 64 * 64, 64);
    void* p = std::aligned_alloc(64, n);
    if (!p) return internalError("cannot allocate ", bytes, " bytes");
    DeviceMemory m;
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
    const OpSchema* s = findOpSchema(k.op);
    if (!s || !s->compute || !s->infer) return unsupported(k.where, ": op '", k.op, "' has no CPU kernel");
    InferArgs args;
    args.attrs = k.attrs;
    args.inputs = k.inputs;
    args.constInputs = k.constInputs;
    args.constInputs.resize(args.inputs.size(), nullptr);
    auto inferred = s->infer(args);
    bool inferAtRun = !inferred.ok();  // needs a computed input's value: infer when it is known
    if (inferred.ok()) {
      if (inferred->size() < k.outputs.size())
        return invalidInput(k.where, ": the op makes ", inferred->size(), " outputs, the plan names ",
                            k.outputs.size());
      for (size_t i = 0; i < k.outputs.size(); ++i)
        if (k.outputs[i].dtype != DType::kUndefined && (*inferred)[i] != k.outputs[i])
          return invalidInput(k.where, ": output ", i, " is ", (*inferred)[i].str(), " but the plan's ",
                              i < k.outputNames.size() ? k.outputNames[i] : std::string("buffer"), " is ",
                              k.outputs[i].str());
    }
    if (k.inPlace && !inferAtRun && renamesItsInput(k.op) && k.outputs.size() == 1)
      return std::unique_ptr<DeviceKernel>(new NoOpKernel);
    std::unique_ptr<KernelOverride> fast;
    if (options_.fastKernels && (!k.inPlace || fastKernelRunsInPlace(k.op))) {
      std::vector<bool> constant;
      for (const Tensor* t : k.constInputs) constant.push_back(t != nullptr);
      constant.resize(k.inputs.size(), false);
      fast = cpu::makeFastKernel(k.op, *k.attrs, constant);
    }
    return std::unique_ptr<DeviceKernel>(new CpuKernel(k, s, std::move(fast), inferAtRun));
  }

  std::unique_ptr<CommunicatorFactory> communicators(std::shared_ptr<GlooStore> store,
                                                     const GlooOptions& options) override {
    return glooCommunicatorFactory(std::move(store), options);
  }

 private:
  BackendOptions options_;
};

}  // namespace

std::unique_ptr<Backend> makeCpuBackend(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace pcc
