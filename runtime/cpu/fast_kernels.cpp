// The oneDNN provider: its kernels registered by OpKind in the kernel
// registry, and the OpenMP thread count per rank.
#include "runtime/cpu/fast_kernels.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/cpu/dnnl_kernels.h"
#include "runtime/support/memory_account.h"
#include "runtime/support/tensor_block.h"

namespace pcc::cpu {

namespace {

/// \returns true when a present input or a preallocated output holds no
/// element. oneDNN divides by dimensions while it makes a primitive (a
/// batched matmul with an empty batch traps with SIGFPE), so an empty tensor
/// never reaches it: the reference kernel, which loops over nothing, runs it.
bool anyEmpty(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) {
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->numel() == 0) return true;
  for (const Tensor& t : outputs)
    if (t.defined() && t.numel() == 0) return true;
  return false;
}

/// A oneDNN kernel that declines calls on empty tensors (anyEmpty) before
/// the kernel sees them.
class NonEmptyOnly : public KernelOverride {
 public:
  explicit NonEmptyOnly(std::unique_ptr<KernelOverride> k) : k_(std::move(k)) {}
  StatusOr<bool> run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs) override {
    if (anyEmpty(inputs, outputs)) return false;
    return k_->run(inputs, outputs);
  }

 private:
  std::unique_ptr<KernelOverride> k_;
};

/// The registry's factory for `Make`: its kernel behind NonEmptyOnly.
template <KernelFactory Make>
std::unique_ptr<KernelOverride> nonEmptyOnly(const AttrMap& attrs, const std::vector<bool>& constant) {
  return declineEmpty(Make(attrs, constant));
}

/// Runs a float32 kernel on float16 or bfloat16 operands (a --precision
/// plan's MatMul, Gemm, Conv, Attention, pools): each is widened to float32 (a
/// constant one once, kept with its memory charged), the kernel computes and
/// accumulates in float32 as the reference kernels of those types do, and
/// its result is rounded to the operands' type. Operands of other types, or
/// of both 16-bit types at once, are left to the next provider.
class Widen16 : public KernelOverride {
 public:
  Widen16(std::unique_ptr<KernelOverride> k, std::vector<bool> constant)
      : k_(std::move(k)), constant_(std::move(constant)) {}

  StatusOr<bool> run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs) override {
    DType half = DType::kUndefined;
    for (const Tensor* t : inputs) {
      if (!t || !t->defined()) continue;
      const DType d = t->dtype();
      if (d == DType::kF16 || d == DType::kBF16) {
        if (half != DType::kUndefined && half != d) return false;
        half = d;
      } else if (d == DType::kF64) {
        return false;  // other operands (masks, indices) pass as they are
      }
    }
    if (half == DType::kUndefined) return k_->run(inputs, outputs);
    if (kept_.size() < inputs.size()) kept_.resize(inputs.size());
    std::vector<Tensor> own(inputs.size());
    std::vector<const Tensor*> wide(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor* t = inputs[i];
      if (!t || !t->defined() || t->dtype() != half) {
        wide[i] = t;
      } else if (i < constant_.size() && constant_[i]) {
        Kept& k = kept_[i];
        if (k.from != t->raw()) {
          k.charge = MemoryCharge(static_cast<int64_t>(t->numel()) * 4);
          k.wide = convertFloats(*t, DType::kF32);
          k.from = t->raw();
        }
        wide[i] = &k.wide;
      } else {
        own[i] = convertFloats(*t, DType::kF32);
        wide[i] = &own[i];
      }
    }
    std::vector<Tensor> wideOut;
    ASSIGN_OR_RETURN(bool ran, k_->run(wide, wideOut));
    if (!ran) return false;
    for (size_t k = 0; k < wideOut.size(); ++k) {
      const Tensor& o = wideOut[k];
      if (k < outputs.size() && outputs[k].defined()) {
        // The executor's buffer for this output (its arena): rounded into it.
        Tensor& dst = outputs[k];
        if (o.dtype() != DType::kF32 || dst.dtype() != half || dst.shape() != o.shape())
          return internalError("a widened kernel's output ", k, " is ", o.type().str(), ", its buffer ",
                               dst.type().str());
        convertFloats(o.raw(), DType::kF32, dst.mutableData(), half, static_cast<size_t>(o.numel()));
      } else {
        outputs.push_back(o.dtype() == DType::kF32 ? convertFloats(o, half) : o);
      }
    }
    return true;
  }

 private:
  struct Kept {
    const void* from = nullptr;
    Tensor wide;
    MemoryCharge charge;
  };
  std::unique_ptr<KernelOverride> k_;
  std::vector<bool> constant_;
  std::vector<Kept> kept_;
};

/// nonEmptyOnly, also taking float16 and bfloat16 operands (Widen16).
template <KernelFactory Make>
std::unique_ptr<KernelOverride> widened(const AttrMap& attrs, const std::vector<bool>& constant) {
  std::unique_ptr<KernelOverride> k = Make(attrs, constant);
  if (!k) return nullptr;
  return declineEmpty(std::make_unique<Widen16>(std::move(k), constant));
}

}  // namespace

std::unique_ptr<KernelOverride> declineEmpty(std::unique_ptr<KernelOverride> k) {
  if (!k) return nullptr;
  return std::make_unique<NonEmptyOnly>(std::move(k));
}

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
        {OpKind::Add, &nonEmptyOnly<&makeAddKernel>, true},
        {OpKind::Attention, &widened<&makeAttentionKernel>, false},
        {OpKind::AveragePool, &widened<&makeAveragePoolKernel>, false},
        {OpKind::Conv, &widened<&makeConvKernel>, false},
        {OpKind::Div, &nonEmptyOnly<&makeDivKernel>, true},
        {OpKind::Gelu, &nonEmptyOnly<&makeGeluKernel>, true},
        {OpKind::Gemm, &widened<&makeGemmKernel>, false},
        {OpKind::MatMul, &widened<&makeMatMulKernel>, false},
        {OpKind::MatMulNBits, &widened<&makeMatMulNBitsKernel>, false},
        {OpKind::MaxPool, &widened<&makeMaxPoolKernel>, false},
        {OpKind::Mul, &nonEmptyOnly<&makeMulKernel>, true},
        {OpKind::Pow, &nonEmptyOnly<&makePowKernel>, true},
        {OpKind::Relu, &nonEmptyOnly<&makeReluKernel>, true},
        {OpKind::Sub, &nonEmptyOnly<&makeSubKernel>, true},
        {OpKind::Swish, &nonEmptyOnly<&makeSwishKernel>, true},
        {OpKind::Tanh, &nonEmptyOnly<&makeTanhKernel>, true},
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
  for (const TensorType& t : inputs) {
    if (t.dtype != DType::kF32 && t.dtype != DType::kUndefined) return nullptr;
    if (t.dtype != DType::kUndefined && t.numel() == 0) return nullptr;  // empty: see anyEmpty
  }
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

int otherRunnableTasks() {
  int least = -1;
  for (int sample = 0; sample < 5; ++sample) {
    if (sample) usleep(2000);
    std::FILE* f = std::fopen("/proc/loadavg", "r");
    if (!f) return -1;
    double a = 0, b = 0, c = 0;
    int running = 0, total = 0;
    const int got = std::fscanf(f, "%lf %lf %lf %d/%d", &a, &b, &c, &running, &total);
    std::fclose(f);
    if (got != 5) return -1;
    const int others = std::max(0, running - 1);  // this process is running
    least = least < 0 ? others : std::min(least, others);
  }
  return least;
}

const char* chooseOpenMpWaitPolicy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return "set by the environment";
  const int others = otherRunnableTasks();
  const bool quiet = others >= 0 && others * 4 <= availableCores();
  const char* name = quiet ? "GOMP_SPINCOUNT" : "OMP_WAIT_POLICY";
  if (setenv(name, quiet ? kQuietSpinCount : "passive", 1) != 0) return "OpenMP's default";
  execv("/proc/self/exe", argv);
  unsetenv(name);  // exec failed: run on, with OpenMP's default
  return "OpenMP's default";
}

}  // namespace pcc::cpu
