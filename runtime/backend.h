// Backend: what the executor needs from a device. It allocates the rank's
// memory (the arena the compiler planned, and the buffers outside it), moves
// tensors between the host and the device, prepares and runs one kernel
// instruction, and makes the communicators that carry the plan's collectives.
// The executor never reads or writes device memory itself: every byte goes
// through these calls, so a new device is a new Backend, not edits to the
// executor. `cpu` (runtime/cpu_backend.cpp) is the first implementation; the
// launcher picks one by name (see docs/runtime.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/kernel_library.h"
#include "runtime/ops/registry.h"
#include "runtime/support/attribute.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

class GlooStore;
struct GlooOptions;
struct LoadedPlan;

/// A block of a backend's memory. `base` is a device address: the executor
/// only offsets it, never dereferences it.
struct DeviceMemory {
  std::shared_ptr<const void> owner;  ///< releases the block
  uintptr_t base = 0;
  uint64_t bytes = 0;

  /// \returns a tensor of type `t` at `byteOffset` (the caller checks bounds).
  Tensor view(uint64_t byteOffset, const TensorType& t) const {
    return Tensor::view(t.dtype, t.shape, reinterpret_cast<const void*>(base + byteOffset), owner);
  }
};

/// One kernel instruction as the plan states it: types come from the plan's
/// buffers, so nothing is inferred while the program runs.
struct KernelDesc {
  std::string op;
  const AttrMap* attrs = nullptr;          ///< outlives the kernel
  std::vector<TensorType> inputs;          ///< dtype kUndefined: absent optional input
  /// Per input: the host value of a plan weight (same data on every run), or nullptr.
  std::vector<const Tensor*> constInputs;
  /// The outputs the program names (it may name fewer than the op makes);
  /// dtype kUndefined: an output the program does not use.
  std::vector<TensorType> outputs;
  std::vector<std::string> outputNames;    ///< "buffer 1 'y'" per output, for messages
  /// Output 0 is planned over input 0 (Buffer.in_place_of): the kernel must
  /// accept aliased memory. The compiler plans so only the ops its op table
  /// allows (Elementwise, and Injective ops whose output is input 0's bytes);
  /// the backend follows the plan and keeps no list of its own.
  bool inPlace = false;
  std::string where;                       ///< "rank R: node 'N' (Op)", for messages
  /// A LAUNCH instruction: the generated kernel's CPU entry (runtime/
  /// kernel_library.h) and name; null for a KERNEL instruction.
  CpuKernelEntry cpuEntry = nullptr;
  std::string kernelName;
  /// A LAUNCH instruction: the plan (its kernel table and bundle, where a
  /// device backend finds the kernel's CUDA images) and the kernel's index
  /// in Plan.kernels; null and -1 otherwise.
  const LoadedPlan* plan = nullptr;
  int kernelIndex = -1;
};

/// A kernel instruction prepared for one backend.
class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  /// Runs on `inputs` (device tensors of the planned types; nullptr for an
  /// absent input), writing `outputs`: device tensors of the planned types
  /// whose contents are undefined on entry (not zeroed); an undefined tensor
  /// for an output the program does not use (its result is dropped).
  /// \returns ok, or an error naming the op.
  virtual Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) = 0;
  /// \returns the name of the kernel provider that ran the last call
  /// ("reference", "onednn": see Provider), or "" where the backend has none.
  virtual std::string_view provider() const { return {}; }
  /// \returns true for a reshape-like op planned over its input: its output
  /// already holds the bytes, and the executor need not call it.
  virtual bool computesNothing() const { return false; }
};

/// A kernel that also computes instructions following its own
/// (Backend::prepareFolded): `folded` of them, 0 when the backend folds none.
struct FoldedKernel {
  std::unique_ptr<DeviceKernel> kernel;
  size_t folded = 0;
};

/// An instruction that may be folded into the kernel before it: `desc`,
/// and which of its inputs reads the previous instruction's only output
/// (its other inputs are operands of its own).
struct FoldCandidate {
  KernelDesc desc;
  size_t chainInput = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// \returns the name the launcher knows it by ("cpu").
  virtual std::string_view name() const = 0;

  /// \returns `bytes` of device memory, 64-byte aligned, contents undefined
  /// (the rank's arena is one such block, allocated once).
  virtual StatusOr<DeviceMemory> allocate(uint64_t bytes) = 0;
  /// \returns `host` on the device: a copy in device memory, or `host` itself
  /// where the device reads host memory (weights and model inputs, which stay
  /// outside the arena).
  virtual StatusOr<Tensor> toDevice(const Tensor& host) = 0;
  /// \returns the device tensor `t` as a host tensor that owns or shares its bytes.
  virtual StatusOr<Tensor> toHost(const Tensor& t) = 0;
  /// Copies device tensor `src` into device tensor `dst` (same type).
  virtual Status copy(const Tensor& src, const Tensor& dst) = 0;

  /// \returns a host tensor of type `t` for the input pipeline's staging
  /// buffers (runtime/input_pipeline.h): allocated once per run, written by
  /// the reader thread and given to toDevice for every batch. The default is
  /// ordinary host memory (what the cpu backend uses); a device backend
  /// overrides it to return page-locked memory its copies can start from.
  virtual StatusOr<Tensor> allocateStaging(const TensorType& t);

  /// \returns the kernel for `k`, or an error (unsupported op, or a plan whose
  /// types the op rejects) naming k.where.
  virtual StatusOr<std::unique_ptr<DeviceKernel>> prepareKernel(const KernelDesc& k) = 0;

  /// Folding (a GEMM with its bias and activation as one library call): `k`
  /// is a KERNEL instruction and `next` the KERNEL or LAUNCH instructions
  /// after it (a LAUNCH's KernelDesc names its kernel in the plan, whose
  /// Kernel.epilogue says whether it is an elementwise chain),
  /// each reading its predecessor's only output, which nothing else reads.
  /// A backend that computes `k` and the first `folded` of `next` in one
  /// kernel returns it: the kernel takes `k`'s inputs followed by the other
  /// inputs of each folded instruction (in order), and writes the last
  /// folded instruction's outputs; the executor then runs it in place of
  /// them all. \returns {nullptr, 0} (the default) to fold nothing.
  virtual StatusOr<FoldedKernel> prepareFolded(const KernelDesc& k, const std::vector<FoldCandidate>& next) {
    (void)k;
    (void)next;
    return FoldedKernel{};
  }

  /// \returns the factory of this backend's communicators; ranks meet through
  /// `store` and wait at most `options.timeout` (gloo on CPU ranks).
  virtual std::unique_ptr<CommunicatorFactory> communicators(std::shared_ptr<GlooStore> store,
                                                             const GlooOptions& options) = 0;
};

/// What a backend is made with.
struct BackendOptions {
  /// cpu: the kernel providers in order of preference. Each instruction runs
  /// the first one that has a kernel for its op and takes the call (a oneDNN
  /// kernel declines a dtype or attribute it does not handle); providers after
  /// kReference are never reached, and without kReference a call no provider
  /// takes is an error. `pcc-run --reference-kernels` is {kReference}.
  std::vector<Provider> kernelProviders = {Provider::kOneDnn, Provider::kReference};
  /// cpu: fill every allocation with 0xFF bytes (NaN for floats) instead of
  /// leaving it undefined, so that an output element a kernel never writes
  /// shows in the results (`pcc-run --poison-memory`, a check, not a mode to run in).
  bool poisonMemory = false;
  /// Fold a GEMM or convolution with the elementwise instructions after it
  /// into one library call where the backend can (Backend::prepareFolded:
  /// oneDNN post-ops on cpu, cuBLASLt epilogues on cuda). `pcc-run --no-fold`
  /// turns it off, to compare.
  bool foldEpilogues = true;
  /// The global rank the backend runs (a device backend picks its device by it).
  int rank = 0;
  /// A device backend waits for every kernel to finish before returning from
  /// DeviceKernel::run, so that per-instruction times (`pcc-run --profile`)
  /// are the device's, not the time to enqueue. The launcher sets it with
  /// RunOptions::profile; the cpu backend is synchronous anyway.
  bool synchronize = false;
};

using BackendMaker = std::function<std::unique_ptr<Backend>(const BackendOptions&)>;

/// Makes `name` known to makeBackend (a later registration of a name wins;
/// tests register their own backends).
void registerBackend(const std::string& name, BackendMaker make);

/// \returns a new backend `name` (one per rank), or an invalid-input error
/// listing the known names.
StatusOr<std::unique_ptr<Backend>> makeBackend(std::string_view name, const BackendOptions& options);

/// \returns the names makeBackend knows, sorted ("cpu" always).
std::vector<std::string> backendNames();

/// Checks that backend `name` can run on this machine (a device backend:
/// its driver, libraries and a device are there). \returns ok, or an error
/// saying what is missing.
using BackendProbe = std::function<Status()>;

/// Makes a backend or says why it cannot (a device backend without its device).
using BackendMakerOr = std::function<StatusOr<std::unique_ptr<Backend>>(const BackendOptions&)>;

/// Registers `name` with a maker that may fail and a probe that
/// resolveBackend asks before choosing it.
void registerBackendOr(const std::string& name, BackendMakerOr make, BackendProbe probe);

/// Resolves a `--backend` request to the backend the ranks run on:
///  - "auto": "cuda" when it is registered and its probe succeeds, else
///    "cpu", with `*note` set to one line saying why ("--backend auto: no
///    usable GPU (cannot load libcuda.so.1 (...)); running on CPU ranks");
///  - "cuda" (or any registered name): itself when its probe succeeds;
///  - "cpu": itself.
/// \returns the name, or an environment error saying what is missing
/// ("--backend cuda: this build has no CUDA backend (built without the CUDA
/// toolkit)", "--backend cuda: cuInit failed: ..."), or an invalid-input
/// error for an unknown name.
StatusOr<std::string> resolveBackend(const std::string& requested, std::string* note);

}  // namespace pcc
