// Add, Sub, Mul, Div on dnnl::binary; Relu, Tanh, Gelu, Swish and Pow (scalar exponent) on
// dnnl::eltwise. (Clip is not here: oneDNN's clip maps NaN to a bound where
// ONNX and the reference keep it.) The arithmetic is exact in float32 (one
// rounding per element, as in the reference kernels), so the unit tests expect
// equality up to one ulp; Tanh and Pow to two.
//
// Broadcasting: dnnl::binary broadcasts its second source only, so the first
// must already have the output's shape. When it does not and the op commutes
// (Add, Mul), the operands are swapped; otherwise (a Sub or Div whose first
// operand is the broadcast one, or both operands broadcast) the call is
// declined and the reference kernel does it.
#include <cmath>

#include "runtime/cpu/dnnl_kernels.h"
#include "runtime/cpu/dnnl_util.h"

namespace pcc::cpu {
namespace {

using dnnl::memory;

class BinaryKernel : public KernelOverride {
 public:
  BinaryKernel(dnnl::algorithm alg, bool commutes) : alg_(alg), commutes_(commutes) {}

  StatusOr<bool> run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) override {
    if (in.size() != 2 || !in[0] || !in[1] || !allF32(in)) return false;
    if (!key_.matches({&in[0]->shape(), &in[1]->shape()})) prepare(in[0]->shape(), in[1]->shape());
    if (!supported_) return false;
    const Tensor& s0 = swap_ ? *in[1] : *in[0];
    const Tensor& s1 = swap_ ? *in[0] : *in[1];
    Tensor& y = outputRef(out, 0, outShape_);
    prim_.set(DNNL_ARG_SRC_0, s0.raw());
    prim_.set(DNNL_ARG_SRC_1, s1.raw());
    prim_.set(DNNL_ARG_DST, y.mutableData());
    RETURN_IF_ERROR(prim_.run("binary"));
    return true;
  }

 private:
  void prepare(const Dims& a, const Dims& b) {
    key_.set({&a, &b});
    supported_ = swap_ = false;
    size_t r = std::max<size_t>({a.size(), b.size(), 1});
    Dims pa = a, pb = b;
    pa.insert(pa.begin(), r - a.size(), 1);
    pb.insert(pb.begin(), r - b.size(), 1);
    Dims o(r);
    for (size_t i = 0; i < r; ++i) o[i] = std::max(pa[i], pb[i]);
    outShape_.clear();  // the op's output: the broadcast of the unpadded shapes
    for (size_t i = r - std::max(a.size(), b.size()); i < r; ++i) outShape_.push_back(o[i]);
    if (r > DNNL_MAX_NDIMS || numElements(o) == 0) return;
    if (pa != o) {
      if (!commutes_ || pb != o) return;
      std::swap(pa, pb);
      swap_ = true;
    }
    d0_ = plainDesc(pa);
    d1_ = plainDesc(pb);
    try {
      dnnl::binary::primitive_desc pd(dnnl::binary::desc(alg_, d0_, d1_, d0_), cpuEngine());
      prim_ = BoundPrimitive(dnnl::binary(pd));
      prim_.bind(DNNL_ARG_SRC_0, d0_);
      prim_.bind(DNNL_ARG_SRC_1, d1_);
      prim_.bind(DNNL_ARG_DST, d0_);
      supported_ = true;
    } catch (const dnnl::error&) {
    }
  }

  dnnl::algorithm alg_;
  bool commutes_;
  ShapeKey key_;
  bool supported_ = false, swap_ = false;
  Dims outShape_;
  memory::desc d0_, d1_;
  BoundPrimitive prim_;
};

/// A unary dnnl::eltwise op: Relu (NaN-compatible with the reference, tested),
/// Tanh, Gelu, Swish (its `alpha`), and Pow with a scalar f32 exponent (within a
/// few ulp of the reference, see the tests).
class EltwiseKernel : public KernelOverride {
 public:
  EltwiseKernel(dnnl::algorithm alg, bool pow, float alpha = 0.0f) : alg_(alg), pow_(pow), alpha_(alpha) {}

  StatusOr<bool> run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) override {
    if (in.size() != (pow_ ? 2u : 1u) || !in[0] || !allF32(in)) return false;
    const Tensor& x = *in[0];
    if (x.numel() == 0) return false;
    float beta = 0.0f;
    if (pow_) {
      // A scalar exponent that leaves the shape alone.
      if (!in[1] || in[1]->numel() != 1 || in[1]->rank() > x.rank()) return false;
      beta = in[1]->data<float>()[0];
      if (!std::isfinite(beta)) return false;
    }
    if (!key_.matches({&x.shape()}, beta)) {
      key_.set({&x.shape()}, beta);
      supported_ = false;
      desc_ = plainDesc(x.rank() ? x.shape() : Dims{1});
      try {
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg_, desc_, pow_ ? 1.0f : alpha_,
                                      beta);
        prim_ = BoundPrimitive(dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, cpuEngine())));
        prim_.bind(DNNL_ARG_SRC, desc_);
        prim_.bind(DNNL_ARG_DST, desc_);
        supported_ = true;
      } catch (const dnnl::error&) {
      }
    }
    if (!supported_) return false;
    Tensor& y = outputRef(out, 0, x.shape());
    prim_.set(DNNL_ARG_SRC, x.raw());
    prim_.set(DNNL_ARG_DST, y.mutableData());
    RETURN_IF_ERROR(prim_.run("eltwise"));
    return true;
  }

 private:
  dnnl::algorithm alg_;
  bool pow_;
  float alpha_;
  ShapeKey key_;
  bool supported_ = false;
  memory::desc desc_;
  BoundPrimitive prim_;
};

}  // namespace

std::unique_ptr<KernelOverride> makeAddKernel(const AttrMap&, const std::vector<bool>&) {
  return std::make_unique<BinaryKernel>(dnnl::algorithm::binary_add, true);
}
std::unique_ptr<KernelOverride> makeSubKernel(const AttrMap&, const std::vector<bool>&) {
  return std::make_unique<BinaryKernel>(dnnl::algorithm::binary_sub, false);
}
std::unique_ptr<KernelOverride> makeMulKernel(const AttrMap&, const std::vector<bool>&) {
  return std::make_unique<BinaryKernel>(dnnl::algorithm::binary_mul, true);
}
std::unique_ptr<KernelOverride> makeDivKernel(const AttrMap&, const std::vector<bool>&) {
  return std::make_unique<BinaryKernel>(dnnl::algorithm::binary_div, false);
}
std::unique_ptr<KernelOverride> makeReluKernel(const AttrMap&, const std::vector<bool>&) {
  return std::make_unique<EltwiseKernel>(dnnl::algorithm::eltwise_relu, false);
}
std::unique_ptr<KernelOverride> makeTanhKernel(const AttrMap&, const std::vector<bool>&) {
  return std::make_unique<EltwiseKernel>(dnnl::algorithm::eltwise_tanh, false);
}
std::unique_ptr<KernelOverride> makeGeluKernel(const AttrMap& attrs, const std::vector<bool>&) {
  bool tanh = attrs.getString("approximate", "none") == "tanh";
  return std::make_unique<EltwiseKernel>(tanh ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf,
                                         false);
}
std::unique_ptr<KernelOverride> makeSwishKernel(const AttrMap& attrs, const std::vector<bool>&) {
  return std::make_unique<EltwiseKernel>(dnnl::algorithm::eltwise_swish, false, attrs.getFloat("alpha", 1.0f));
}
std::unique_ptr<KernelOverride> makePowKernel(const AttrMap&, const std::vector<bool>&) {
  return std::make_unique<EltwiseKernel>(dnnl::algorithm::eltwise_pow, true);
}

}  // namespace pcc::cpu
