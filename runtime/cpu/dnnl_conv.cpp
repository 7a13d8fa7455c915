// Conv (1 to 3 spatial dims, groups, strides, dilations, asymmetric pads, bias)
// on dnnl::convolution_forward.
//
//   1. The geometry (output sizes, pads) comes from the same windowGeometry the
//      reference kernel uses. oneDNN wants the right pads that make its output
//      formula exact, so the end pad is recomputed from the output size (a pad
//      that no window reaches is dropped; the result is the same).
//   2. Source, weights and destination are left to oneDNN's choice of layout
//      (blocked layouts are what its fast implementations use); the plain
//      NCDHW input is reordered in, the output reordered back, through the
//      thread's two scratch blocks (threadScratch: no allocation per call).
//      The primitives, reorders included, are made once per input shapes.
//   3. A constant weight (a plan weight, same buffer every call) is reordered
//      once and kept; any other weight is reordered on every call.
//   4. A pointwise convolution (1x1 kernel, stride 1, no pads, one group) is a
//      batched matmul in the plain layout, W[M,C] x X[n][C, spatial], which
//      needs no reorder at all; the bias, when there is one, prefills the output
//      and is added by a sum post-op.
#include <algorithm>
#include <unordered_map>

#include "runtime/cpu/dnnl_epilogue.h"
#include "runtime/cpu/dnnl_kernels.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/ops/op_util.h"
#include "runtime/support/memory_account.h"

namespace pcc::cpu {
namespace {

using dnnl::memory;

class ConvKernel : public KernelOverride {
 public:
  ConvKernel(const AttrMap& attrs, const std::vector<bool>& constant, EpilogueInputs e = {})
      : attrs_(attrs), constWeight_(constant.size() > 1 && constant[1]), e_(std::move(e)) {}

  /// \returns whether oneDNN runs the shapes the kernel was made with. The
  /// primitive is made again by the first call: oneDNN fixes a primitive's
  /// thread count when it makes it, and this runs on the thread loading the plan.
  bool prepareEpilogue() {
    const bool withBias = e_.own > 2 && e_.present[2];
    prepare(e_.shapes[0], e_.shapes[1], withBias ? &e_.shapes[2] : nullptr);
    key_ = ShapeKey();  // made again by the first call, under the thread count it runs with
    return supported_;
  }

  StatusOr<bool> run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) override {
    if (in.size() < 2 || !in[0] || !in[1] || !allF32(in)) return false;
    if (e_.any() && in.size() != e_.shapes.size()) return false;
    const size_t own = e_.any() ? e_.own : in.size();
    const Tensor &x = *in[0], &w = *in[1];
    const Tensor* bias = own > 2 && in[2] && in[2]->defined() ? in[2] : nullptr;
    if (!key_.matches({&x.shape(), &w.shape(), bias ? &bias->shape() : nullptr}))
      prepare(x.shape(), w.shape(), bias ? &bias->shape() : nullptr);
    if (!supported_) return false;
    Tensor& y = outputRef(out, 0, outShape_);
    if (pointwise_) {
      if (bias) {
        float* py = y.mutableData<float>();
        const float* pb = bias->data<float>();
        int64_t n = outShape_[0], m = outShape_[1], spatial = y.numel() / (n * m);
        for (int64_t i = 0; i < n * m; ++i) std::fill(py + i * spatial, py + (i + 1) * spatial, pb[i % m]);
      }
      mm_.set(DNNL_ARG_SRC, w.raw());
      mm_.set(DNNL_ARG_WEIGHTS, x.raw());
      mm_.set(DNNL_ARG_DST, y.mutableData());
      post_.set(mm_, in);
      RETURN_IF_ERROR(mm_.run("matmul (pointwise convolution)"));
      return true;
    }
    // The reorder buffers are the thread's scratch blocks, charged to the
    // rank's memory account (if any) while the call uses them; the kept
    // weight for as long as the kernel keeps it.
    MemoryCharge srcCharge, weiCharge, dstCharge;
    try {
      dnnl::stream& s = threadStream();
      const void* src = x.raw();
      if (srcReorder_.defined()) {
        void* t = threadScratch(0, srcBytes_);
        if (!t)
          return environmentError("out of memory: cannot allocate ", srcBytes_, " bytes for a convolution's input");
        srcCharge = MemoryCharge(static_cast<int64_t>(srcBytes_));
        srcReorder_.set(DNNL_ARG_SRC, src);
        srcReorder_.set(DNNL_ARG_DST, t);
        srcReorder_.enqueue();
        src = t;
      }
      memory wei;
      if (constWeight_ && cachedWeightData_ == w.raw()) {
        wei = cachedWeight_;
      } else {
        wei = wrap(userWei_, w);
        if (pd_.weights_desc() != userWei_ || constWeight_) {
          // Keep a copy the kernel owns when the weight is constant: the plain
          // weight may be a view.
          weiCharge = MemoryCharge(static_cast<int64_t>(pd_.weights_desc().get_size()));
          memory t(pd_.weights_desc(), cpuEngine());
          dnnl::reorder(wei, t).execute(s, wei, t);
          wei = t;
        }
        if (constWeight_) {
          cachedWeight_ = wei;
          cachedWeightData_ = w.raw();
          cachedCharge_ = std::move(weiCharge);
        }
      }
      void* dst = y.mutableData();
      if (dstReorder_.defined()) {
        dst = threadScratch(1, dstBytes_);
        if (!dst)
          return environmentError("out of memory: cannot allocate ", dstBytes_, " bytes for a convolution's output");
        dstCharge = MemoryCharge(static_cast<int64_t>(dstBytes_));
      }
      prim_.set(DNNL_ARG_SRC, src);
      prim_.set(DNNL_ARG_WEIGHTS, wei.get_data_handle());
      prim_.set(DNNL_ARG_DST, dst);
      if (bias) prim_.set(DNNL_ARG_BIAS, bias->raw());
      post_.set(prim_, in);
      prim_.enqueue();
      if (dstReorder_.defined()) {
        dstReorder_.set(DNNL_ARG_SRC, dst);
        dstReorder_.set(DNNL_ARG_DST, y.mutableData());
        dstReorder_.enqueue();
      }
      s.wait();
    } catch (const dnnl::error& e) {
      return dnnlError("convolution", e);
    }
    return true;
  }

 private:
  void prepare(const Dims& xs, const Dims& ws, const Dims* bs) {
    key_.set({&xs, &ws, bs});
    bool withBias = bs != nullptr;
    supported_ = false;
    srcReorder_ = dstReorder_ = BoundPrimitive();
    cachedWeight_ = memory();
    cachedWeightData_ = nullptr;
    cachedCharge_.reset();
    Dims spatial(xs.begin() + 2, xs.end()), kernel(ws.begin() + 2, ws.end());
    auto geo = ops::windowGeometry(spatial, kernel, attrs_, false);
    if (!geo.ok()) return;  // inference accepted it, so this does not happen; the reference reports it
    const ops::WindowGeometry& g = *geo;
    int64_t n = xs[0], c = xs[1], m = ws[0], group = attrs_.getInt("group", 1);
    outShape_ = {n, m};
    outShape_.insert(outShape_.end(), g.out.begin(), g.out.end());
    for (int64_t d : outShape_)
      if (d <= 0) return;
    for (int64_t d : xs)
      if (d <= 0) return;
    Dims wdims = ws;
    if (group > 1) {
      wdims = {group, m / group, c / group};
      wdims.insert(wdims.end(), kernel.begin(), kernel.end());
    }
    memory::dims strides, dil, padL, padR;
    for (int64_t i = 0; i < g.spatial; ++i) {
      int64_t ext = (g.kernel[i] - 1) * g.dilations[i] + 1;
      strides.push_back(g.strides[i]);
      dil.push_back(g.dilations[i] - 1);
      padL.push_back(g.padBegin[i]);
      padR.push_back((g.out[i] - 1) * g.strides[i] + ext - g.in[i] - g.padBegin[i]);
    }
    pointwise_ = false;
    bool unit = group == 1;
    for (int64_t i = 0; i < g.spatial; ++i)
      unit = unit && g.kernel[i] == 1 && g.strides[i] == 1 && g.padBegin[i] == 0 && g.padEnd[i] == 0;
    if (unit) {
      int64_t spatialSize = 1;
      for (int64_t d : spatial) spatialSize *= d;
      mmW_ = plainDesc({1, m, c});
      mmX_ = plainDesc({n, c, spatialSize});
      mmY_ = plainDesc({n, m, spatialSize});
      try {
        dnnl::primitive_attr attr;
        dnnl::post_ops po;
        if (withBias) po.append_sum(1.0f);
        post_ = EpiloguePostOps();
        bool described = !e_.any() || post_.append(e_.epilogue, e_.shapes, outShape_, mmY_.dims(), po);
        if (po.len() > 0) attr.set_post_ops(po);
        const int threads = n * m * c * spatialSize < kSerialWork ? 1 : 0;  // small: one thread
        ScopedThreads scoped(threads);
        if (described) {
          dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(mmW_, mmX_, mmY_), attr, cpuEngine());
          if (!e_.any() || !isReferenceImpl(pd.impl_info_str())) {
            mm_ = BoundPrimitive(dnnl::matmul(pd), threads);
            mm_.bind(DNNL_ARG_SRC, mmW_);
            mm_.bind(DNNL_ARG_WEIGHTS, mmX_);
            mm_.bind(DNNL_ARG_DST, mmY_);
            post_.bind(mm_);
            pointwise_ = supported_ = true;
            return;
          }
        }
      } catch (const dnnl::error&) {
        // fall through to the convolution primitive
      }
    }
    userSrc_ = plainDesc(xs);
    userWei_ = plainDesc(wdims);
    userDst_ = plainDesc(outShape_);
    biasDesc_ = plainDesc({m});
    auto any = [](const Dims& d) {
      return memory::desc(memory::dims(d.begin(), d.end()), memory::data_type::f32, memory::format_tag::any);
    };
    try {
      dnnl::primitive_attr attr;
      post_ = EpiloguePostOps();
      if (e_.any()) {
        dnnl::post_ops po;
        if (!post_.append(e_.epilogue, e_.shapes, outShape_, memory::dims(outShape_.begin(), outShape_.end()), po))
          return;
        attr.set_post_ops(po);
      }
      dnnl::convolution_forward::desc d =
          withBias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                     dnnl::algorithm::convolution_direct, any(xs), any(wdims),
                                                     biasDesc_, any(outShape_), strides, dil, padL, padR)
                   : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                     dnnl::algorithm::convolution_direct, any(xs), any(wdims),
                                                     any(outShape_), strides, dil, padL, padR);
      pd_ = dnnl::convolution_forward::primitive_desc(d, attr, cpuEngine());
      if (e_.any() && isReferenceImpl(pd_.impl_info_str())) return;
      prim_ = BoundPrimitive(dnnl::convolution_forward(pd_));
      post_.bind(prim_);
      prim_.bind(DNNL_ARG_SRC, pd_.src_desc());
      prim_.bind(DNNL_ARG_WEIGHTS, pd_.weights_desc());
      prim_.bind(DNNL_ARG_DST, pd_.dst_desc());
      if (withBias) prim_.bind(DNNL_ARG_BIAS, biasDesc_);
      if (pd_.src_desc() != userSrc_) {
        srcReorder_ = BoundPrimitive(dnnl::reorder(dnnl::reorder::primitive_desc(cpuEngine(), userSrc_, cpuEngine(),
                                                                                 pd_.src_desc())));
        srcReorder_.bind(DNNL_ARG_SRC, userSrc_);
        srcReorder_.bind(DNNL_ARG_DST, pd_.src_desc());
        srcBytes_ = pd_.src_desc().get_size();
      }
      if (pd_.dst_desc() != userDst_) {
        dstReorder_ = BoundPrimitive(dnnl::reorder(dnnl::reorder::primitive_desc(cpuEngine(), pd_.dst_desc(),
                                                                                 cpuEngine(), userDst_)));
        dstReorder_.bind(DNNL_ARG_SRC, pd_.dst_desc());
        dstReorder_.bind(DNNL_ARG_DST, userDst_);
        dstBytes_ = pd_.dst_desc().get_size();
      }
      supported_ = true;
    } catch (const dnnl::error&) {
      supported_ = false;
    }
  }

  AttrMap attrs_;
  bool constWeight_;
  EpilogueInputs e_;
  EpiloguePostOps post_;
  ShapeKey key_;
  bool supported_ = false;
  Dims outShape_;
  memory::desc userSrc_, userWei_, userDst_, biasDesc_;
  dnnl::convolution_forward::primitive_desc pd_;
  BoundPrimitive prim_;
  BoundPrimitive srcReorder_, dstReorder_;  ///< plain to oneDNN's layout and back (undefined: same layout)
  size_t srcBytes_ = 0, dstBytes_ = 0;      ///< their scratch sizes
  bool pointwise_ = false;
  memory::desc mmW_, mmX_, mmY_;
  BoundPrimitive mm_;
  memory cachedWeight_;
  const void* cachedWeightData_ = nullptr;
  MemoryCharge cachedCharge_;  // cachedWeight_'s bytes
};

}  // namespace

std::unique_ptr<KernelOverride> makeConvKernel(const AttrMap& attrs, const std::vector<bool>& constant) {
  return std::make_unique<ConvKernel>(attrs, constant);
}

std::unique_ptr<KernelOverride> makeConvEpilogueKernel(const AttrMap& attrs, const std::vector<bool>& constant,
                                                       const std::vector<TensorType>& inputs, size_t ownInputs,
                                                       const Epilogue& e) {
  if (ownInputs < 2 || ownInputs > 3) return nullptr;
  auto k = std::make_unique<ConvKernel>(attrs, constant, EpilogueInputs(e, inputs, ownInputs));
  return k->prepareEpilogue() ? std::move(k) : nullptr;
}

}  // namespace pcc::cpu
