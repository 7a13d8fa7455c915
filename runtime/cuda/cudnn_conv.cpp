// Conv on cuDNN (cudnn_conv.h).
//
// Algorithm:
//  1. makeDnn: cuDNN's table (loaded once per process), a handle per device
//     on its compute stream.
//  2. A kernel per Conv instruction: tensor, filter and convolution
//     descriptors from the ConvDesc; math type FMA for float32 (no TF32),
//     tensor ops for float16; cuDNN's output dims must equal the plan's.
//  3. The algorithm: cached per ConvDesc::key() on the device; else the
//     first of cudnnGetConvolutionForwardAlgorithm_v7's answers that
//     succeeds, needs at most kMaxWorkspace and, for float32, uses FMA math;
//     its workspace size from cudnnGetConvolutionForwardWorkspaceSize. One
//     workspace per device, grown to the largest choice.
//  4. run: cudnnConvolutionForward (alpha 1, beta 0: y is not read), then
//     cudnnAddTensor of the [1,K,1,...] bias (alpha 1, beta 1), both on the
//     compute stream.
#include "runtime/cuda/cudnn_conv.h"

#include <map>
#include <vector>

#include "runtime/cuda/cuda_api.h"

namespace pcc::cuda {

/// Step 1: the handle (on the compute stream), the algorithm and workspace
/// size chosen per convolution shape, and one workspace as large as the
/// largest choice.
struct Dnn {
  std::shared_ptr<Device> dev;
  std::shared_ptr<const CudnnApi> api;
  cudnnHandle_t handle = nullptr;
  struct Choice {
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    size_t workspace = 0;
  };
  std::map<std::string, Choice> choices;  // by ConvDesc::key()
  DeviceMemory workspace;
  std::vector<DeviceMemory> retired;  // outgrown workspaces, kept until the end
  /// The most workspace one convolution may ask for.
  static constexpr size_t kMaxWorkspace = 256ull << 20;
  ~Dnn() {
    if (handle && dev->makeCurrent().ok()) api->cudnnDestroy(handle);
  }
  /// Grows the workspace to at least `bytes`.
  Status reserve(size_t bytes) {
    if (bytes <= workspace.bytes) return Status::OK();
    ASSIGN_OR_RETURN(DeviceMemory m, dev->allocate(bytes));
    if (workspace.bytes) retired.push_back(std::move(workspace));
    workspace = std::move(m);
    return Status::OK();
  }
};

namespace {

Status checkDnn(const CudnnApi& a, cudnnStatus_t s, const char* call, std::string_view where) {
  if (s == CUDNN_STATUS_SUCCESS) return Status::OK();
  const char* text = a.cudnnGetErrorString ? a.cudnnGetErrorString(s) : nullptr;
  return environmentError(where, ": ", call, " failed: ", text ? text : "cuDNN status", " (", static_cast<int>(s),
                          ")");
}

cudnnDataType_t cudnnTypeOf(DType t) { return t == DType::kF16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT; }

/// Steps 2-4: one Conv.
class CudnnKernel : public DeviceKernel {
 public:
  /// \returns the kernel, or an unsupported error when cuDNN offers no
  /// algorithm for the convolution (the caller falls back), or an error.
  static StatusOr<std::unique_ptr<DeviceKernel>> make(std::shared_ptr<Device> dev, std::shared_ptr<Dnn> dnn,
                                                      const ConvDesc& d, const TensorType& planned,
                                                      std::string where) {
    std::unique_ptr<CudnnKernel> k(new CudnnKernel(std::move(dev), std::move(dnn), d, std::move(where)));
    RETURN_IF_ERROR(k->prepare(planned));
    return std::unique_ptr<DeviceKernel>(std::move(k));
  }
  ~CudnnKernel() override {
    const CudnnApi& a = *dnn_->api;
    for (cudnnTensorDescriptor_t t : {x_, y_, b_})
      if (t) a.cudnnDestroyTensorDescriptor(t);
    if (w_) a.cudnnDestroyFilterDescriptor(w_);
    if (conv_) a.cudnnDestroyConvolutionDescriptor(conv_);
  }
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    RETURN_IF_ERROR(dev_->makeCurrent());
    const CudnnApi& a = *dnn_->api;
    if (outputs.empty() || !outputs[0].defined()) return internalError(where_, ": no output");
    if (inputs.size() < 2 || !inputs[0] || !inputs[1]) return internalError(where_, ": missing operand");
    const Tensor* bias = inputs.size() > 2 ? inputs[2] : nullptr;
    if (d_.hasBias != (bias != nullptr)) return internalError(where_, ": the bias differs from the plan's");
    void* y = const_cast<void*>(outputs[0].raw());
    const float one = 1.0f, zero = 0.0f;  // float scaling for float and half data
    RETURN_IF_ERROR(checkDnn(a,
                             a.cudnnConvolutionForward(dnn_->handle, &one, x_, inputs[0]->raw(), w_, inputs[1]->raw(),
                                                       conv_, choice_.algo,
                                                       reinterpret_cast<void*>(dnn_->workspace.base),
                                                       choice_.workspace, &zero, y_, y),
                             "cudnnConvolutionForward", where_));
    if (!bias) return Status::OK();
    return checkDnn(a, a.cudnnAddTensor(dnn_->handle, &one, b_, bias->raw(), &one, y_, y), "cudnnAddTensor", where_);
  }
  std::string_view provider() const override { return "cudnn"; }

 private:
  CudnnKernel(std::shared_ptr<Device> dev, std::shared_ptr<Dnn> dnn, const ConvDesc& d, std::string where)
      : dev_(std::move(dev)), dnn_(std::move(dnn)), d_(d), where_(std::move(where)) {}

  Status tensor(cudnnTensorDescriptor_t* t, const std::vector<int>& dims, const std::vector<int>& strides) {
    const CudnnApi& a = *dnn_->api;
    RETURN_IF_ERROR(checkDnn(a, a.cudnnCreateTensorDescriptor(t), "cudnnCreateTensorDescriptor", where_));
    return checkDnn(a,
                    a.cudnnSetTensorNdDescriptor(*t, cudnnTypeOf(d_.dtype), static_cast<int>(dims.size()), dims.data(),
                                                 strides.data()),
                    "cudnnSetTensorNdDescriptor", where_);
  }

  /// Descriptors, a check of cuDNN's output dims against the plan's, then
  /// the algorithm (cached per shape) and the workspace.
  Status prepare(const TensorType& planned) {
    RETURN_IF_ERROR(dev_->makeCurrent());
    const CudnnApi& a = *dnn_->api;
    RETURN_IF_ERROR(tensor(&x_, d_.xDims, d_.xStrides));
    RETURN_IF_ERROR(tensor(&y_, d_.yDims, d_.yStrides));
    if (d_.hasBias) RETURN_IF_ERROR(tensor(&b_, d_.biasDims, d_.biasStrides));
    RETURN_IF_ERROR(checkDnn(a, a.cudnnCreateFilterDescriptor(&w_), "cudnnCreateFilterDescriptor", where_));
    RETURN_IF_ERROR(checkDnn(a,
                             a.cudnnSetFilterNdDescriptor(w_, cudnnTypeOf(d_.dtype), CUDNN_TENSOR_NCHW, d_.nbDims,
                                                          d_.wDims.data()),
                             "cudnnSetFilterNdDescriptor", where_));
    RETURN_IF_ERROR(
        checkDnn(a, a.cudnnCreateConvolutionDescriptor(&conv_), "cudnnCreateConvolutionDescriptor", where_));
    RETURN_IF_ERROR(checkDnn(a,
                             a.cudnnSetConvolutionNdDescriptor(conv_, d_.nbDims - 2, d_.pads.data(), d_.strides.data(),
                                                               d_.dilations.data(), CUDNN_CROSS_CORRELATION,
                                                               CUDNN_DATA_FLOAT),
                             "cudnnSetConvolutionNdDescriptor", where_));
    RETURN_IF_ERROR(
        checkDnn(a, a.cudnnSetConvolutionGroupCount(conv_, d_.groups), "cudnnSetConvolutionGroupCount", where_));
    // float32: FMA only (no TF32), so results stay within float32 tolerance.
    const cudnnMathType_t math = d_.dtype == DType::kF32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    RETURN_IF_ERROR(checkDnn(a, a.cudnnSetConvolutionMathType(conv_, math), "cudnnSetConvolutionMathType", where_));
    std::vector<int> out(static_cast<size_t>(d_.nbDims));
    RETURN_IF_ERROR(checkDnn(a, a.cudnnGetConvolutionNdForwardOutputDim(conv_, x_, w_, d_.nbDims, out.data()),
                             "cudnnGetConvolutionNdForwardOutputDim", where_));
    Dims plannedDims = planned.shape;
    if (d_.nbDims == 4 && plannedDims.size() == 3) plannedDims.insert(plannedDims.begin() + 2, 1);  // 1-D
    if (out != d_.yDims || Dims(out.begin(), out.end()) != plannedDims)
      return internalError(where_, ": cuDNN's output dims ", dimsToString(Dims(out.begin(), out.end())),
                           " differ from the plan's ", planned.str());
    const std::string key = d_.key();
    auto cached = dnn_->choices.find(key);
    if (cached != dnn_->choices.end()) {
      choice_ = cached->second;
      return dnn_->reserve(choice_.workspace);
    }
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {};
    int found = 0;
    RETURN_IF_ERROR(checkDnn(a,
                             a.cudnnGetConvolutionForwardAlgorithm_v7(dnn_->handle, x_, w_, conv_, y_,
                                                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf),
                             "cudnnGetConvolutionForwardAlgorithm_v7", where_));
    bool chosen = false;
    for (int i = 0; i < found && !chosen; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > Dnn::kMaxWorkspace) continue;
      if (d_.dtype == DType::kF32 && perf[i].mathType != CUDNN_FMA_MATH) continue;
      size_t bytes = 0;
      if (a.cudnnGetConvolutionForwardWorkspaceSize(dnn_->handle, x_, w_, conv_, y_, perf[i].algo, &bytes) !=
              CUDNN_STATUS_SUCCESS ||
          bytes > Dnn::kMaxWorkspace)
        continue;
      choice_.algo = perf[i].algo;
      choice_.workspace = bytes;
      chosen = true;
    }
    if (!chosen) return unsupported("cuDNN has no algorithm for this convolution within ", Dnn::kMaxWorkspace >> 20,
                                    " MiB of workspace");
    dnn_->choices[key] = choice_;
    return dnn_->reserve(choice_.workspace);
  }

  std::shared_ptr<Device> dev_;
  std::shared_ptr<Dnn> dnn_;
  Status dnnError_;  // why cuDNN did not load (kept: tried once)
  ConvDesc d_;
  std::string where_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, b_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  Dnn::Choice choice_;
};

}  // namespace

StatusOr<std::shared_ptr<Dnn>> makeDnn(std::shared_ptr<Device> dev) {
  ASSIGN_OR_RETURN(std::shared_ptr<const CudnnApi> api, cudnnApi());
  RETURN_IF_ERROR(dev->makeCurrent());
  auto d = std::make_shared<Dnn>();
  d->dev = dev;
  d->api = std::move(api);
  const std::string ctx = strCat("rank ", dev->rank());
  RETURN_IF_ERROR(checkDnn(*d->api, d->api->cudnnCreate(&d->handle), "cudnnCreate", ctx));
  RETURN_IF_ERROR(checkDnn(*d->api, d->api->cudnnSetStream(d->handle, dev->compute()), "cudnnSetStream", ctx));
  return d;
}

StatusOr<std::unique_ptr<DeviceKernel>> makeCudnnConv(std::shared_ptr<Device> dev, std::shared_ptr<Dnn> dnn,
                                                      const ConvDesc& d, const TensorType& planned, std::string where) {
  return CudnnKernel::make(std::move(dev), std::move(dnn), d, planned, std::move(where));
}

}  // namespace pcc::cuda
