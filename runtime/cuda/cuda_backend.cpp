// The cuda backend (cuda_backend.h).
//
// Algorithm:
//  1. makeBackend("cuda") opens the rank's device (device.h): the driver
//     loaded at run time, the device by LOCAL_RANK or rank, its primary
//     context, compute / copy / communication streams.
//  2. Memory: allocate() is cuMemAlloc (the executor allocates the rank's
//     arena once, sized by the plan's memory plan, and the model outputs);
//     toDevice / toHost copy on the copy stream after the compute stream's
//     work and wait for the copy; copy() is a device-to-device copy on the
//     compute stream, in order with the kernels.
//  3. Kernels (placementOf): a LAUNCH with CUDA images loads the image for
//     the device's arch (cubin, else PTX JIT) once per kernel and rank, and launches it on the
//     compute stream with the kernel table's configuration; MatMul / Gemm
//     that gemm_desc.h describes run on cuBLASLt, with a following bias Add
//     and Relu / tanh Gelu folded in as its epilogue (prepareFolded); Conv
//     that conv_desc.h describes runs on cuDNN (cudnn_conv.h; without
//     libcudnn.so.9, one stderr line and the CPU fallback);
//     everything else runs on the CPU fallback: the compute stream is
//     drained, the inputs copied to the host (plan weights are read from
//     their host mapping), the cpu backend's kernel runs, and the outputs are
//     copied back.
//  4. Communicators: NCCL (comm_nccl.h), the unique ids through the
//     rendezvous store.
#include "runtime/cuda/cuda_backend.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "runtime/cuda/comm_nccl.h"
#include "runtime/cuda/conv_desc.h"
#include "runtime/cuda/cudnn_conv.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/gemm_desc.h"
#include "runtime/cuda/launch.h"
#include "runtime/fold_epilogue.h"
#include "runtime/plan_io.h"
#include "runtime/support/confined_path.h"

namespace pcc::cuda {

const char* placementName(Placement p) {
  switch (p) {
    case Placement::kGenerated: return "generated";
    case Placement::kCublasLt: return "cublaslt";
    case Placement::kCudnn: return "cudnn";
    case Placement::kCpuFallback: return "cpu fallback";
  }
  return "?";
}

PlacementChoice placementOf(const KernelDesc& k, bool hasCudaImages) {
  if (k.kernelIndex >= 0 || k.cpuEntry) {
    if (hasCudaImages) return {Placement::kGenerated, ""};
    return {Placement::kCpuFallback, "the plan has no CUDA image of this kernel (compile with pcc --target cuda)"};
  }
  const TensorType none;
  auto in = [&](size_t i) -> const TensorType& { return i < k.inputs.size() ? k.inputs[i] : none; };
  if (k.op == "MatMul") {
    auto d = matmulDesc(in(0), in(1));
    if (d.ok()) return {Placement::kCublasLt, ""};
    return {Placement::kCpuFallback, d.status().message()};
  }
  if (k.op == "Gemm" && k.attrs) {
    auto d = gemmDesc(in(0), in(1), in(2), *k.attrs);
    if (d.ok()) return {Placement::kCublasLt, ""};
    return {Placement::kCpuFallback, d.status().message()};
  }
  if (k.op == "Conv" && k.attrs) {
    auto d = convDesc(in(0), in(1), in(2), *k.attrs);
    if (d.ok()) return {Placement::kCudnn, ""};
    return {Placement::kCpuFallback, d.status().message()};
  }
  return {Placement::kCpuFallback, strCat("op '", k.op, "' has no CUDA kernel yet")};
}

namespace {

/// \returns the device address of `t` (a tensor of device memory).
CUdeviceptr dptr(const Tensor& t) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(t.raw())); }

/// A reshape-like op planned in place: its output already holds the bytes.
class NoOpKernel : public DeviceKernel {
 public:
  Status run(const std::vector<const Tensor*>&, const std::vector<Tensor>&) override { return Status::OK(); }
  std::string_view provider() const override { return "none"; }
  bool computesNothing() const override { return true; }
};

/// A kernel that waits for the device after each run (BackendOptions::synchronize).
class SyncKernel : public DeviceKernel {
 public:
  SyncKernel(std::shared_ptr<Device> dev, std::unique_ptr<DeviceKernel> k, std::string where)
      : dev_(std::move(dev)), k_(std::move(k)), where_(std::move(where)) {}
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    RETURN_IF_ERROR(k_->run(inputs, outputs));
    return dev_->synchronize(dev_->compute(), where_);
  }
  std::string_view provider() const override { return k_->provider(); }

 private:
  std::shared_ptr<Device> dev_;
  std::unique_ptr<DeviceKernel> k_;
  std::string where_;
};

/// A kernel's CUDA image loaded on one device, shared by the LAUNCH
/// instructions of that kernel (the layers of a transformer share theirs).
struct LoadedModule {
  std::shared_ptr<Device> dev;
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  ~LoadedModule() {
    if (module && dev->makeCurrent().ok()) dev->api().cuModuleUnload(module);
  }
};

/// Step 3: a LAUNCH of the plan's CUDA image.
class GeneratedKernel : public DeviceKernel {
 public:
  GeneratedKernel(std::shared_ptr<Device> dev, std::shared_ptr<LoadedModule> module, LaunchConfig cfg, size_t params,
                  std::string where)
      : dev_(std::move(dev)), module_(std::move(module)), fn_(module_->fn), cfg_(cfg), params_(params),
        where_(std::move(where)) {}
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    RETURN_IF_ERROR(dev_->makeCurrent());
    ptrs_.clear();
    for (const Tensor* t : inputs) {
      if (!t) return internalError(where_, ": a generated kernel has no absent inputs");
      ptrs_.push_back(dptr(*t));
    }
    for (const Tensor& t : outputs) {
      if (t.dtype() == DType::kUndefined) return internalError(where_, ": a generated kernel writes every output");
      ptrs_.push_back(dptr(t));
    }
    if (ptrs_.size() != params_)
      return invalidInput(where_, ": the kernel takes ", params_, " pointers, the instruction gives ", ptrs_.size());
    args_.clear();
    for (CUdeviceptr& p : ptrs_) args_.push_back(&p);
    return dev_->check(dev_->api().cuLaunchKernel(fn_, cfg_.grid, 1, 1, cfg_.block, 1, 1, 0, dev_->compute(),
                                                  args_.data(), nullptr),
                       "cuLaunchKernel", where_);
  }
  std::string_view provider() const override { return "generated"; }

 private:
  std::shared_ptr<Device> dev_;
  std::shared_ptr<LoadedModule> module_;
  CUfunction fn_;
  LaunchConfig cfg_;
  size_t params_;
  std::string where_;
  std::vector<CUdeviceptr> ptrs_;
  std::vector<void*> args_;
};

/// cuBLASLt state of one device: the handle and a workspace.
struct Blas {
  std::shared_ptr<Device> dev;
  std::shared_ptr<const CublasLtApi> api;
  cublasLtHandle_t handle = nullptr;
  DeviceMemory workspace;
  static constexpr uint64_t kWorkspace = 32ull << 20;
  ~Blas() {
    if (handle && dev->makeCurrent().ok()) api->cublasLtDestroy(handle);
  }
};

Status checkBlas(cublasStatus_t s, const char* call, std::string_view where) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::OK();
  return environmentError(where, ": ", call, " failed: cuBLAS status ", static_cast<int>(s));
}

cudaDataType_t blasTypeOf(DType t) {
  return t == DType::kF16 ? CUDA_R_16F : t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/// \returns the name cublasLt.h gives epilogue `e` (those epilogueOf makes).
const char* epilogueName(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_RELU: return "RELU";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU: return "GELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    default: return "DEFAULT";
  }
}

/// \returns cuBLASLt's epilogue for `d`'s bias and activation.
cublasLtEpilogue_t epilogueOf(const GemmDesc& d) {
  const bool bias = d.addend == GemmDesc::Addend::kBias;
  switch (d.activation) {
    case GemmDesc::Activation::kRelu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case GemmDesc::Activation::kGeluTanh: return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    case GemmDesc::Activation::kNone: break;
  }
  return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

/// Step 3: MatMul / Gemm on cuBLASLt.
class BlasKernel : public DeviceKernel {
 public:
  /// `provider`: what `pcc-run --profile` shows ("cublaslt", or with the
  /// epilogue of folded instructions).
  static StatusOr<std::unique_ptr<DeviceKernel>> make(std::shared_ptr<Device> dev, std::shared_ptr<Blas> blas,
                                                      const GemmDesc& d, std::string where,
                                                      std::string provider = "cublaslt") {
    std::unique_ptr<BlasKernel> k(new BlasKernel(std::move(dev), std::move(blas), d, std::move(where)));
    k->provider_ = std::move(provider);
    RETURN_IF_ERROR(k->prepare());
    return std::unique_ptr<DeviceKernel>(std::move(k));
  }
  ~BlasKernel() override {
    const CublasLtApi& a = *blas_->api;
    if (pref_) a.cublasLtMatmulPreferenceDestroy(pref_);
    for (cublasLtMatrixLayout_t l : {la_, lb_, lc_})
      if (l) a.cublasLtMatrixLayoutDestroy(l);
    if (op_) a.cublasLtMatmulDescDestroy(op_);
  }
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    RETURN_IF_ERROR(dev_->makeCurrent());
    const CublasLtApi& a = *blas_->api;
    if (outputs.empty() || !outputs[0].defined()) return internalError(where_, ": no output");
    const Tensor* A = inputs.size() > size_t(d_.onnxA) ? inputs[d_.onnxA] : nullptr;
    const Tensor* B = inputs.size() > size_t(d_.onnxB) ? inputs[d_.onnxB] : nullptr;
    if (!A || !B) return internalError(where_, ": missing operand");
    CUdeviceptr c = dptr(outputs[0]);
    float beta = 0;
    if (d_.addend == GemmDesc::Addend::kMatrix) {
      if (inputs.size() < 3 || !inputs[2]) return internalError(where_, ": missing C");
      c = dptr(*inputs[2]);
      beta = d_.beta;
    } else if (d_.addend == GemmDesc::Addend::kBias) {
      if (inputs.size() < 3 || !inputs[2]) return internalError(where_, ": missing bias");
      const void* bias = inputs[2]->raw();
      RETURN_IF_ERROR(checkBlas(a.cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                                 sizeof bias),
                                "cublasLtMatmulDescSetAttribute", where_));
    }
    float alpha = d_.alpha;
    return checkBlas(a.cublasLtMatmul(blas_->handle, op_, &alpha, A->raw(), la_, B->raw(), lb_, &beta,
                                      reinterpret_cast<const void*>(c), lc_, const_cast<void*>(outputs[0].raw()), lc_, &algo_, reinterpret_cast<void*>(blas_->workspace.base), Blas::kWorkspace,
                                      dev_->compute()),
                     "cublasLtMatmul", where_);
  }
  std::string_view provider() const override { return provider_; }

 private:
  BlasKernel(std::shared_ptr<Device> dev, std::shared_ptr<Blas> blas, const GemmDesc& d, std::string where)
      : dev_(std::move(dev)), blas_(std::move(blas)), d_(d), where_(std::move(where)) {}

  Status layout(cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
    const CublasLtApi& a = *blas_->api;
    RETURN_IF_ERROR(checkBlas(a.cublasLtMatrixLayoutCreate(l, blasTypeOf(d_.dtype), rows, cols, ld),
                              "cublasLtMatrixLayoutCreate", where_));
    if (d_.batch == 1) return Status::OK();
    int32_t count = static_cast<int32_t>(d_.batch);
    RETURN_IF_ERROR(checkBlas(a.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                                 sizeof count),
                              "cublasLtMatrixLayoutSetAttribute", where_));
    return checkBlas(a.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                        sizeof stride),
                     "cublasLtMatrixLayoutSetAttribute", where_);
  }

  Status prepare() {
    RETURN_IF_ERROR(dev_->makeCurrent());
    const CublasLtApi& a = *blas_->api;
    RETURN_IF_ERROR(checkBlas(a.cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                              "cublasLtMatmulDescCreate", where_));
    cublasOperation_t ta = d_.transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = d_.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    RETURN_IF_ERROR(checkBlas(a.cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                              "cublasLtMatmulDescSetAttribute", where_));
    RETURN_IF_ERROR(checkBlas(a.cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                              "cublasLtMatmulDescSetAttribute", where_));
    const cublasLtEpilogue_t e = epilogueOf(d_);
    if (e != CUBLASLT_EPILOGUE_DEFAULT)
      RETURN_IF_ERROR(checkBlas(a.cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e),
                                "cublasLtMatmulDescSetAttribute", where_));
    if (d_.addend == GemmDesc::Addend::kBias) {
      cudaDataType_t bt = blasTypeOf(d_.dtype);
      RETURN_IF_ERROR(checkBlas(a.cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt),
                                "cublasLtMatmulDescSetAttribute", where_));
    }
    RETURN_IF_ERROR(layout(&la_, d_.rowsA, d_.colsA, d_.lda, d_.strideA));
    RETURN_IF_ERROR(layout(&lb_, d_.rowsB, d_.colsB, d_.ldb, d_.strideB));
    RETURN_IF_ERROR(layout(&lc_, d_.m, d_.n, d_.ldc, d_.strideC));
    RETURN_IF_ERROR(checkBlas(a.cublasLtMatmulPreferenceCreate(&pref_), "cublasLtMatmulPreferenceCreate", where_));
    uint64_t ws = Blas::kWorkspace;
    RETURN_IF_ERROR(checkBlas(a.cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                     &ws, sizeof ws),
                              "cublasLtMatmulPreferenceSetAttribute", where_));
    cublasLtMatmulHeuristicResult_t h{};
    int found = 0;
    RETURN_IF_ERROR(checkBlas(a.cublasLtMatmulAlgoGetHeuristic(blas_->handle, op_, la_, lb_, lc_, lc_, pref_, 1, &h,
                                                               &found),
                              "cublasLtMatmulAlgoGetHeuristic", where_));
    if (found < 1) return unsupported(where_, ": cuBLASLt has no algorithm for this GEMM");
    algo_ = h.algo;
    return Status::OK();
  }

  std::shared_ptr<Device> dev_;
  std::shared_ptr<Blas> blas_;
  GemmDesc d_;
  std::string where_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  std::string provider_;
};

/// Step 3: the cpu backend's kernel on host copies of the operands.
class FallbackKernel : public DeviceKernel {
 public:
  /// `reason`: why a library does not run it ("" for ops no library runs),
  /// shown by `pcc-run --profile` after the provider.
  FallbackKernel(std::shared_ptr<Device> dev, std::unique_ptr<DeviceKernel> cpu, const KernelDesc& k,
                 const std::string& reason)
      : dev_(std::move(dev)), cpu_(std::move(cpu)), where_(k.where), inPlace_(k.inPlace),
        provider_(reason.empty() ? std::string("cpu fallback") : strCat("cpu fallback: ", reason)) {
    for (const Tensor* t : k.constInputs) hostConst_.push_back(t && t->defined() ? *t : Tensor());
  }
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    std::vector<Tensor> hostIn(inputs.size());
    std::vector<const Tensor*> args(inputs.size(), nullptr);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]) continue;
      if (i < hostConst_.size() && hostConst_[i].defined()) {
        args[i] = &hostConst_[i];  // a plan weight: its host mapping
        continue;
      }
      hostIn[i] = Tensor::zeros(inputs[i]->type());
      RETURN_IF_ERROR(dev_->download(hostIn[i].mutableData(), dptr(*inputs[i]), hostIn[i].nbytes(), where_));
      args[i] = &hostIn[i];
    }
    std::vector<Tensor> hostOut(outputs.size());
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (!outputs[o].defined()) continue;
      // Planned in place: output 0 is input 0's bytes on the host too.
      if (o == 0 && inPlace_ && !inputs.empty() && hostIn[0].defined() && hostIn[0].type() == outputs[0].type())
        hostOut[0] = hostIn[0];
      else
        hostOut[o] = Tensor::zeros(outputs[o].type());
    }
    RETURN_IF_ERROR(cpu_->run(args, hostOut));
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (!outputs[o].defined()) continue;
      RETURN_IF_ERROR(dev_->upload(dptr(outputs[o]), hostOut[o].raw(), hostOut[o].nbytes(), where_));
    }
    return Status::OK();
  }
  std::string_view provider() const override { return provider_; }

 private:
  std::shared_ptr<Device> dev_;
  std::unique_ptr<DeviceKernel> cpu_;
  std::string where_;
  bool inPlace_;
  std::string provider_;
  std::vector<Tensor> hostConst_;
};

/// \returns the bytes of bundle file `name` (confined to `dir`) after
/// checking its crc32.
StatusOr<std::string> readImage(const std::string& dir, const std::string& name, uint32_t crc) {
  ASSIGN_OR_RETURN(std::string path, confinedPath(dir, name, strCat(dir, "/plan.pb: CUDA image")));
  std::ifstream f(path, std::ios::binary);
  if (!f) return invalidInput(dir, "/", name, ": the plan's CUDA image is missing");
  std::ostringstream s;
  s << f.rdbuf();
  std::string bytes = s.str();
  uint32_t got = crc32Of(bytes.data(), bytes.size());
  if (got != crc) return invalidInput(dir, "/", name, ": checksum mismatch (stored ", crc, ", computed ", got, ")");
  return bytes;
}

class CudaBackend : public Backend {
 public:
  CudaBackend(std::shared_ptr<Device> dev, const BackendOptions& o, std::unique_ptr<Backend> cpu)
      : dev_(std::move(dev)), options_(o), cpu_(std::move(cpu)) {}

  std::string_view name() const override { return "cuda"; }

  StatusOr<DeviceMemory> allocate(uint64_t bytes) override { return dev_->allocate(bytes, options_.poisonMemory); }

  StatusOr<Tensor> toDevice(const Tensor& host) override {
    ASSIGN_OR_RETURN(DeviceMemory m, dev_->allocate(host.nbytes()));
    RETURN_IF_ERROR(dev_->upload(static_cast<CUdeviceptr>(m.base), host.raw(), host.nbytes(), "copy to the device"));
    return m.view(0, host.type());
  }

  StatusOr<Tensor> toHost(const Tensor& t) override {
    Tensor h = Tensor::zeros(t.type());
    RETURN_IF_ERROR(dev_->download(h.mutableData(), dptr(t), h.nbytes(), "copy to the host"));
    return h;
  }

  Status copy(const Tensor& src, const Tensor& dst) override {
    if (src.type() != dst.type()) return internalError("copy of ", src.type().str(), " into ", dst.type().str());
    if (src.raw() == dst.raw() || dst.nbytes() == 0) return Status::OK();
    RETURN_IF_ERROR(dev_->makeCurrent());
    return dev_->check(dev_->api().cuMemcpyDtoDAsync(dptr(dst), dptr(src), dst.nbytes(), dev_->compute()),
                       "cuMemcpyDtoDAsync");
  }

  StatusOr<std::unique_ptr<DeviceKernel>> prepareKernel(const KernelDesc& k) override {
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceKernel> kernel, prepareAsync(k));
    if (!options_.synchronize) return kernel;
    return std::unique_ptr<DeviceKernel>(new SyncKernel(dev_, std::move(kernel), k.where));
  }

  /// Step 3, folding: a MatMul / Gemm on cuBLASLt followed by an Add of a
  /// row of N values (the bias epilogue) and/or Relu or tanh-form Gelu (the
  /// activation epilogue) is one cublasLtMatmul.
  StatusOr<FoldedKernel> prepareFolded(const KernelDesc& k, const std::vector<FoldCandidate>& next) override {
    if (!options_.foldEpilogues || (k.op != "MatMul" && k.op != "Gemm") || !k.attrs || k.outputs.size() != 1 ||
        next.empty())
      return FoldedKernel{};
    if (placementOf(k, false).where != Placement::kCublasLt) return FoldedKernel{};
    const TensorType none;
    auto in = [&](size_t i) -> const TensorType& { return i < k.inputs.size() ? k.inputs[i] : none; };
    ASSIGN_OR_RETURN(GemmDesc d, k.op == "MatMul" ? matmulDesc(in(0), in(1)) : gemmDesc(in(0), in(1), in(2), *k.attrs));
    // Each instruction of the chain (a KERNEL Add or activation, or a
    // generated kernel the plan describes as a chain) folds whole or not at
    // all: first x + b with b a row of N values (cuBLASLt's bias, which must
    // be the kernel's input 2), then Relu or tanh-form Gelu.
    size_t folded = 0;
    int inputs = static_cast<int>(k.inputs.size());
    for (const FoldCandidate& c : next) {
      Epilogue e;
      if (!appendEpilogue(c, inputs, &e)) break;
      GemmDesc trial = d;
      bool ok = true;
      for (const EpilogueStep& st : e.steps) {
        StatusOr<GemmDesc> got = unsupported("no cuBLASLt epilogue");
        if (st.op == EpilogueOp::kAdd && st.operand == 2 && k.inputs.size() == 2 &&
            c.desc.outputs[0] == k.outputs[0]) {
          size_t other = c.chainInput == 0 ? 1 : 0;  // the candidate's input that st.operand names
          if (c.desc.inputs.size() == 2) got = withBias(trial, c.desc.inputs[other]);
        } else if (st.op == EpilogueOp::kRelu) {
          got = withActivation(trial, "Relu", AttrMap());
        } else if (st.op == EpilogueOp::kGeluTanh) {
          AttrMap tanh;
          tanh.set("approximate", Attribute(std::string("tanh")));
          got = withActivation(trial, "Gelu", tanh);
        }
        if (!got.ok()) {
          ok = false;
          break;
        }
        trial = *got;
      }
      if (!ok) break;
      d = trial;
      ++folded;
      inputs += static_cast<int>(c.desc.inputs.size()) - 1;
    }
    if (folded == 0) return FoldedKernel{};
    RETURN_IF_ERROR(dev_->makeCurrent());
    ASSIGN_OR_RETURN(std::shared_ptr<Blas> blas, blasState());
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceKernel> kernel,
                     BlasKernel::make(dev_, std::move(blas), d, k.where,
                                      strCat("cublaslt, epilogue ", epilogueName(epilogueOf(d)))));
    if (options_.synchronize) kernel.reset(new SyncKernel(dev_, std::move(kernel), k.where));
    return FoldedKernel{std::move(kernel), folded};
  }

  /// \returns the kernel for `k`, enqueued on the compute stream when it runs.
  StatusOr<std::unique_ptr<DeviceKernel>> prepareAsync(const KernelDesc& k) {
    RETURN_IF_ERROR(dev_->makeCurrent());
    const plan::Kernel* entry = nullptr;
    if (k.plan && k.kernelIndex >= 0 && k.kernelIndex < k.plan->plan.kernels_size())
      entry = &k.plan->plan.kernels(k.kernelIndex);
    PlacementChoice where = placementOf(k, entry && entry->cuda_size() > 0);
    if (where.where == Placement::kGenerated) return prepareLaunch(k, *entry);
    if (where.where == Placement::kCublasLt) {
      ASSIGN_OR_RETURN(std::shared_ptr<Blas> blas, blasState());
      const TensorType none;
      auto in = [&](size_t i) -> const TensorType& { return i < k.inputs.size() ? k.inputs[i] : none; };
      ASSIGN_OR_RETURN(GemmDesc d, k.op == "MatMul" ? matmulDesc(in(0), in(1)) : gemmDesc(in(0), in(1), in(2), *k.attrs));
      return BlasKernel::make(dev_, std::move(blas), d, k.where);
    }
    std::string reason = where.reason;
    if (where.where == Placement::kCudnn) {
      auto dnn = dnnState();
      if (dnn.ok()) {
        const TensorType none;
        auto in = [&](size_t i) -> const TensorType& { return i < k.inputs.size() ? k.inputs[i] : none; };
        ASSIGN_OR_RETURN(ConvDesc d, convDesc(in(0), in(1), in(2), *k.attrs));
        if (k.outputs.empty()) return internalError(k.where, ": Conv has no output");
        auto conv = makeCudnnConv(dev_, std::move(dnn).value(), d, k.outputs[0], k.where);
        if (conv.ok() || conv.status().code() != StatusCode::kUnsupported) return conv;
        reason = conv.status().message();
      } else {
        reason = "cuDNN is not available";
      }
    } else if (k.op != "MatMul" && k.op != "Gemm" && k.op != "Conv") {
      reason.clear();  // no library runs the op: nothing to explain per op
    }
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceKernel> cpu, cpu_->prepareKernel(k));
    if (cpu->provider() == "none") return std::unique_ptr<DeviceKernel>(new NoOpKernel);
    return std::unique_ptr<DeviceKernel>(new FallbackKernel(dev_, std::move(cpu), k, reason));
  }

  std::unique_ptr<CommunicatorFactory> communicators(std::shared_ptr<GlooStore> store,
                                                     const GlooOptions& options) override {
    return ncclCommunicatorFactory(dev_, std::move(store), options);
  }

 private:
  StatusOr<std::unique_ptr<DeviceKernel>> prepareLaunch(const KernelDesc& k, const plan::Kernel& entry) {
    auto cfg = launchConfig(entry.cuda_block(), entry.cuda_grid(), dev_->maxThreadsPerBlock());
    if (!cfg.ok()) return cfg.status().withContext(strCat(k.where, ": kernel '", entry.name(), "'"));
    const size_t params = static_cast<size_t>(entry.inputs_size() + entry.outputs_size());
    auto cached = modules_.find(k.kernelIndex);
    if (cached != modules_.end())
      return std::unique_ptr<DeviceKernel>(new GeneratedKernel(dev_, cached->second, *cfg, params, k.where));
    std::vector<ImageChoice> choices;
    for (const plan::CudaImage& im : entry.cuda())
      choices.push_back({im.arch(), !im.cubin_file().empty(), !im.ptx_file().empty()});
    auto chosen = selectImage(choices, dev_->major(), dev_->minor());
    if (!chosen.ok()) return chosen.status().withContext(k.where);
    const plan::CudaImage& im = entry.cuda(chosen->index);
    auto bytes = chosen->ptx ? readImage(k.plan->dir, im.ptx_file(), im.ptx_crc32())
                             : readImage(k.plan->dir, im.cubin_file(), im.cubin_crc32());
    if (!bytes.ok()) return bytes.status().withContext(k.where);
    std::string image = std::move(bytes).value();
    image.push_back('\0');  // PTX is text: cuModuleLoadData reads up to the NUL
    auto loaded = std::make_shared<LoadedModule>();
    loaded->dev = dev_;
    RETURN_IF_ERROR(dev_->check(dev_->api().cuModuleLoadData(&loaded->module, image.data()),
                                chosen->ptx ? "cuModuleLoadData (PTX JIT)" : "cuModuleLoadData (cubin)", k.where));
    RETURN_IF_ERROR(dev_->check(dev_->api().cuModuleGetFunction(&loaded->fn, loaded->module, entry.name().c_str()),
                                "cuModuleGetFunction", k.where));
    modules_[k.kernelIndex] = loaded;
    return std::unique_ptr<DeviceKernel>(new GeneratedKernel(dev_, std::move(loaded), *cfg, params, k.where));
  }

  StatusOr<std::shared_ptr<Blas>> blasState() {
    if (blas_) return blas_;
    auto api = cublasLtApi();
    if (!api.ok()) return api.status().withContext(strCat("rank ", dev_->rank()));
    auto b = std::make_shared<Blas>();
    b->dev = dev_;
    b->api = *api;
    RETURN_IF_ERROR(checkBlas(b->api->cublasLtCreate(&b->handle), "cublasLtCreate", strCat("rank ", dev_->rank())));
    ASSIGN_OR_RETURN(b->workspace, dev_->allocate(Blas::kWorkspace));
    blas_ = std::move(b);
    return blas_;
  }

  /// \returns the device's cuDNN state, made on first use; an error when
  /// cuDNN does not load (said once per process on stderr: Conv then runs on
  /// the CPU fallback, which is not an error).
  StatusOr<std::shared_ptr<Dnn>> dnnState() {
    if (dnn_) return dnn_;
    if (!dnnError_.ok()) return dnnError_;
    auto made = makeDnn(dev_);
    if (made.ok()) return dnn_ = std::move(made).value();
    dnnError_ = made.status();
    static std::once_flag said;
    std::string why = dnnError_.message();
    std::call_once(said, [&why] { std::fprintf(stderr, "cuda backend: %s: Conv runs on the CPU fallback\n", why.c_str()); });
    return dnnError_;
  }

  std::shared_ptr<Device> dev_;
  BackendOptions options_;
  std::unique_ptr<Backend> cpu_;
  std::shared_ptr<Blas> blas_;
  std::shared_ptr<Dnn> dnn_;
  Status dnnError_;  // why cuDNN did not load (kept: tried once)
  std::map<int, std::shared_ptr<LoadedModule>> modules_;  // by kernel index
};

}  // namespace

Status probeCudaBackend() {
  ASSIGN_OR_RETURN(CudaProbe p, probeCuda(driverLibraryName()));
  (void)p;
  auto blas = cublasLtApi();
  if (!blas.ok()) return blas.status();
  return Status::OK();
}

void registerCudaBackend() {
  registerBackendOr(
      "cuda",
      [](const BackendOptions& o) -> StatusOr<std::unique_ptr<Backend>> {
        ASSIGN_OR_RETURN(std::shared_ptr<Device> dev, Device::open(o.rank));
        ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu, makeBackend("cpu", o));
        return std::unique_ptr<Backend>(new CudaBackend(std::move(dev), o, std::move(cpu)));
      },
      probeCudaBackend);
}

}  // namespace pcc::cuda
