// MatMulNBits on CPU ranks: the weight dequantized to float32
// (runtime/ops/nbits.h) and multiplied by the float32 oneDNN matmul
// (dnnl_matmul.cpp), the bias added after. A constant weight (the plan's) is
// dequantized by the first call and kept, its float32 copy charged to the
// rank's memory account, so the rank holds that copy besides the 4- or 8-bit
// weight: CPU ranks check a quantized plan, GPUs are what it saves memory on.
// float16 and bfloat16 operands are widened by fast_kernels.cpp's Widen16.
#include "runtime/cpu/dnnl_kernels.h"
#include "runtime/ops/nbits.h"
#include "runtime/support/memory_account.h"

namespace pcc::cpu {
namespace {

class MatMulNBitsKernel : public KernelOverride {
 public:
  MatMulNBitsKernel(const AttrMap& attrs, bool constB)
      : bits_(static_cast<int>(attrs.getInt("bits", 4))),
        blockSize_(attrs.getInt("block_size", 0)),
        constB_(constB),
        inner_(makeMatMulKernel(AttrMap(), {false, constB})) {}

  StatusOr<bool> run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) override {
    if (!inner_ || in.size() < 3 || !in[0] || in[0]->dtype() != DType::kF32) return false;
    const Tensor& a = *in[0];
    StatusOr<ops::NBitsShape> s = ops::linalg_schema::nbitsShape(a.shape().back(), in[1]->shape()[0], bits_,
                                                                  blockSize_);
    if (!s.ok()) return false;  // the reference kernel names the problem
    if (!constB_ || from_ != in[1]->raw() || w_.shape() != Dims{s->k, s->n}) {
      if (w_.shape() != Dims{s->k, s->n}) {
        charge_ = MemoryCharge(s->k * s->n * 4);
        w_ = Tensor::zeros(DType::kF32, {s->k, s->n});
      }
      const Tensor* zeros = in.size() > 3 && in[3] && in[3]->defined() ? in[3] : nullptr;
      ops::dequantizeNBits(*s, *in[1], *in[2], zeros, w_.mutableData<float>());
      from_ = in[1]->raw();
    }
    ASSIGN_OR_RETURN(bool ran, inner_->run({&a, &w_}, out));
    if (!ran) return false;
    if (in.size() > 4 && in[4] && in[4]->defined()) {
      const float* b = in[4]->data<float>();
      float* y = out[0].mutableData<float>();
      const int64_t rows = out[0].numel() / s->n;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < s->n; ++j) y[r * s->n + j] += b[j];
    }
    return true;
  }

 private:
  int bits_;
  int64_t blockSize_;
  bool constB_;
  std::unique_ptr<KernelOverride> inner_;
  const void* from_ = nullptr;
  Tensor w_;
  MemoryCharge charge_;
};

}  // namespace

std::unique_ptr<KernelOverride> makeMatMulNBitsKernel(const AttrMap& attrs, const std::vector<bool>& constant) {
  return std::make_unique<MatMulNBitsKernel>(attrs, constant.size() > 1 && constant[1]);
}

}  // namespace pcc::cpu
