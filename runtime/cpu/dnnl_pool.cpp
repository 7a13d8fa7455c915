// MaxPool and AveragePool (1 to 3 spatial dims, strides, dilations, pads,
// ceil_mode, count_include_pad) on dnnl::pooling_v2_forward, in the plain
// layout.
//
//   1. The geometry comes from the reference's windowGeometry; the end pad
//      given to oneDNN is the one its output formula needs (ceil_mode windows
//      that overhang the padded input make it larger than the pads attribute).
//   2. AveragePool with count_include_pad counts the taps inside the explicitly
//      padded input. oneDNN counts those inside its own (possibly larger) pads,
//      so that case is taken only when no window reaches past the explicit pads.
//   3. A window with no tap in the input (possible only with pads as large as
//      the kernel, which ONNX does not allow) is declined, as is every dtype
//      but f32, and MaxPool's optional Indices output (never requested here:
//      the op has one output).
#include "runtime/cpu/dnnl_kernels.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/ops/op_util.h"

namespace pcc::cpu {
namespace {

using dnnl::memory;

class PoolKernel : public KernelOverride {
 public:
  PoolKernel(const AttrMap& attrs, bool max) : attrs_(attrs), max_(max) {}

  StatusOr<bool> run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) override {
    if (in.size() != 1 || !in[0] || !allF32(in)) return false;
    const Tensor& x = *in[0];
    if (!key_.matches({&x.shape()})) prepare(x.shape());
    if (!supported_) return false;
    Tensor& y = outputRef(out, 0, outShape_);
    prim_.set(DNNL_ARG_SRC, x.raw());
    prim_.set(DNNL_ARG_DST, y.mutableData());
    RETURN_IF_ERROR(prim_.run("pooling"));
    return true;
  }

 private:
  void prepare(const Dims& xs) {
    key_.set({&xs});
    supported_ = false;
    if (xs.size() < 3 || xs.size() > 5 || !attrs_.has("kernel_shape")) return;
    Dims spatial(xs.begin() + 2, xs.end());
    auto geo = ops::windowGeometry(spatial, attrs_.getInts("kernel_shape"), attrs_, true);
    if (!geo.ok()) return;
    const ops::WindowGeometry& g = *geo;
    outShape_ = {xs[0], xs[1]};
    outShape_.insert(outShape_.end(), g.out.begin(), g.out.end());
    for (int64_t d : outShape_)
      if (d <= 0) return;
    for (int64_t d : xs)
      if (d <= 0) return;
    bool includePad = attrs_.getInt("count_include_pad", 0) != 0;
    memory::dims strides, kernel, dil, padL, padR;
    for (int64_t i = 0; i < g.spatial; ++i) {
      int64_t ext = (g.kernel[i] - 1) * g.dilations[i] + 1;
      int64_t pr = (g.out[i] - 1) * g.strides[i] + ext - g.in[i] - g.padBegin[i];
      // Every window must hold at least one input element.
      if (g.padBegin[i] >= ext || (g.out[i] - 1) * g.strides[i] - g.padBegin[i] >= g.in[i]) return;
      if (!max_ && includePad && pr > g.padEnd[i]) return;
      strides.push_back(g.strides[i]);
      kernel.push_back(g.kernel[i]);
      dil.push_back(g.dilations[i] - 1);
      padL.push_back(g.padBegin[i]);
      padR.push_back(pr);
    }
    src_ = plainDesc(xs);
    dst_ = plainDesc(outShape_);
    dnnl::algorithm alg = max_         ? dnnl::algorithm::pooling_max
                          : includePad ? dnnl::algorithm::pooling_avg_include_padding
                                       : dnnl::algorithm::pooling_avg_exclude_padding;
    try {
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, src_, dst_, strides, kernel,
                                       dil, padL, padR);
      prim_ = BoundPrimitive(dnnl::pooling_v2_forward(dnnl::pooling_v2_forward::primitive_desc(d, cpuEngine())));
      prim_.bind(DNNL_ARG_SRC, src_);
      prim_.bind(DNNL_ARG_DST, dst_);
      supported_ = true;
    } catch (const dnnl::error&) {
    }
  }

  AttrMap attrs_;
  bool max_;
  ShapeKey key_;
  bool supported_ = false;
  Dims outShape_;
  memory::desc src_, dst_;
  BoundPrimitive prim_;
};

}  // namespace

std::unique_ptr<KernelOverride> makeMaxPoolKernel(const AttrMap& attrs, const std::vector<bool>&) {
  // The Indices output (num_outputs = 2) is the reference kernel's.
  if (attrs.getInt("num_outputs", 1) != 1) return nullptr;
  return std::make_unique<PoolKernel>(attrs, true);
}
std::unique_ptr<KernelOverride> makeAveragePoolKernel(const AttrMap& attrs, const std::vector<bool>&) {
  return std::make_unique<PoolKernel>(attrs, false);
}

}  // namespace pcc::cpu
