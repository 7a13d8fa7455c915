// Attention (opset 23) in float32 for the common inference case: one output
// (Y), no past key/value, no nonpad_kv_seqlen, no softcap; an optional float
// or bool mask (broadcast as the reference does) and is_causal. Anything else
// is declined and runs on the reference kernel (runtime/ops/
// reduce_norm_attention.cpp), which also states the semantics.
//
//   1. The shapes (heads, sequences, the layouts of 3-D and 4-D operands) are
//      worked out once per input shapes with the op's own shape function.
//   2. Per (batch, head, query row), in float: the scores q.k * scale over the
//      keys (contiguous along the head dimension in both layouts), the mask
//      and causal bias, a max-subtracted softmax, and Y = p . V accumulated
//      row by row; a row masked everywhere gives zeros, as in the reference.
//   3. The rows are split over the OpenMP threads when the work is large
//      enough to pay for waking them.
// The reference accumulates in double; this kernel in float (the unit test's
// tolerance is the float summation bound of tests/unit/cpu_dnnl_test.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cpu/dnnl_kernels.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/ops/op_util.h"
#include "runtime/schema/infer_util.h"
#include "runtime/schema/reduce_norm_attention.h"

namespace pcc::cpu {
namespace {

using ops::reduce_norm_attention_schema::AttentionShapes;

/// Work (multiply-adds) below which one thread does all rows.
constexpr int64_t kParallelWork = 1 << 20;

class AttentionKernel : public KernelOverride {
 public:
  explicit AttentionKernel(const AttrMap& attrs)
      : attrs_(attrs),
        causal_(attrs.getInt("is_causal", 0) != 0),
        plain_(attrs.getFloat("softcap", 0.0f) == 0.0f) {}

  StatusOr<bool> run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) override {
    if (!plain_ || in.size() < 3 || in.size() > 4) return false;  // past, nonpad: the reference's
    for (size_t i = 0; i < 3; ++i)
      if (!in[i] || in[i]->dtype() != DType::kF32) return false;
    const Tensor* mask = in.size() > 3 && in[3] && in[3]->defined() ? in[3] : nullptr;
    if (mask && mask->dtype() != DType::kF32 && mask->dtype() != DType::kBool) return false;
    if (!key_.matches({&in[0]->shape(), &in[1]->shape(), &in[2]->shape(), mask ? &mask->shape() : nullptr},
                      mask ? static_cast<double>(static_cast<int>(mask->dtype())) : -1.0))
      prepare(in, mask);
    if (!supported_) return false;
    Tensor& y = outputRef(out, 0, a_.outputs[0].shape);
    compute(*in[0], *in[1], *in[2], mask, y.mutableData<float>());
    return true;
  }

 private:
  void prepare(const std::vector<const Tensor*>& in, const Tensor* mask) {
    key_.set({&in[0]->shape(), &in[1]->shape(), &in[2]->shape(), mask ? &mask->shape() : nullptr},
             mask ? static_cast<double>(static_cast<int>(mask->dtype())) : -1.0);
    supported_ = false;
    auto shapes = ops::reduce_norm_attention_schema::attentionShapes(ops::argsFromTensors(in, attrs_));
    if (!shapes.ok()) return;  // the reference reports it
    a_ = std::move(shapes).value();
    if (a_.numOutputs != 1 || a_.past != 0 || a_.outputs.empty() || a_.outputs[0].dtype != DType::kF32) return;
    if (a_.q.h % a_.k.h != 0 || a_.total != a_.k.s || a_.v.s != a_.k.s) return;
    if (a_.q.b == 0 || a_.q.h == 0 || a_.q.s == 0 || a_.total == 0 || a_.vd == 0) return;
    scale_ = attrs_.has("scale") ? attrs_.getFloat("scale", 1.0f)
                                 : static_cast<float>(1.0 / std::sqrt(static_cast<double>(a_.q.d)));
    maskLen_ = 0;
    if (mask) {
      if (mask->rank() < 1 || mask->rank() > 4) return;
      maskLen_ = mask->shape().back();
      maskStrides_ = ops::broadcastStrides(mask->shape(), Dims{a_.q.b, a_.q.h, a_.q.s, maskLen_});
      if (maskStrides_.size() != 4) return;
    }
    supported_ = true;
  }

  void compute(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, float* y) const {
    const AttentionShapes& a = a_;
    const float *pq = q.data<float>(), *pk = k.data<float>(), *pv = v.data<float>();
    const float* maskF = mask && mask->dtype() == DType::kF32 ? mask->data<float>() : nullptr;
    const uint8_t* maskB = mask && mask->dtype() == DType::kBool ? mask->data<uint8_t>() : nullptr;
    const int64_t rows = a.q.b * a.q.h * a.q.s, T = a.total, D = a.q.d, VD = a.vd, group = a.q.h / a.k.h;
    ops::reduce_norm_attention_schema::HeadView yv = a.q;
    yv.d = VD;
    const bool parallel = rows * T * (D + VD) >= kParallelWork;
#pragma omp parallel if (parallel)
    {
      std::vector<float> score(static_cast<size_t>(T));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = r % a.q.s, h = (r / a.q.s) % a.q.h, b = r / (a.q.s * a.q.h), kh = h / group;
        const float* qi = pq + a.q.at(b, h, i, 0);
        float mx = -INFINITY;
        for (int64_t j = 0; j < T; ++j) {
          const float* kj = pk + a.k.at(b, kh, j, 0);
          float dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
          float s = dot * scale_;
          if (mask) {
            if (j >= maskLen_) {
              s = -INFINITY;
            } else {
              int64_t off = b * maskStrides_[0] + h * maskStrides_[1] + i * maskStrides_[2] + j * maskStrides_[3];
              s += maskF ? maskF[off] : (maskB[off] ? 0.0f : -INFINITY);
            }
          }
          if (causal_ && j > i) s = -INFINITY;
          score[j] = s;
          mx = std::max(mx, s);
        }
        float* yi = y + yv.at(b, h, i, 0);
        std::fill(yi, yi + VD, 0.0f);
        if (mx == -INFINITY) continue;  // masked everywhere: zeros
        float sum = 0;
        for (int64_t j = 0; j < T; ++j) sum += score[j] = std::exp(score[j] - mx);
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < T; ++j) {
          const float p = score[j] * inv;
          const float* vj = pv + a.v.at(b, kh, j, 0);
#pragma omp simd
          for (int64_t d = 0; d < VD; ++d) yi[d] += p * vj[d];
        }
      }
    }
  }

  AttrMap attrs_;
  bool causal_, plain_;
  ShapeKey key_;
  bool supported_ = false;
  AttentionShapes a_;
  float scale_ = 1;
  int64_t maskLen_ = 0;
  std::vector<int64_t> maskStrides_;
};

}  // namespace

std::unique_ptr<KernelOverride> makeAttentionKernel(const AttrMap& attrs, const std::vector<bool>&) {
  return std::make_unique<AttentionKernel>(attrs);
}

}  // namespace pcc::cpu
