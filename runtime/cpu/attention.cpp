// Attention (opset 23) in float32 for the common inference case: one output
// (Y), no past key/value, no nonpad_kv_seqlen, no softcap; an optional float
// or bool mask (broadcast as the reference does) and is_causal. Anything else
// is declined and runs on the reference kernel (runtime/ops/
// reduce_norm_attention.cpp), which also states the semantics.
//
//   1. The shapes (heads, sequences, the layouts of 3-D and 4-D operands) are
//      worked out once per input shapes with the op's own shape function.
//   2. Below kGemmWork multiply-adds per head: per query row in plain loops
//      (scores, max-subtracted softmax, Y = p . V). From there, per (batch,
//      head) and tile of query rows, on oneDNN: the scores
//      S = Q K^T * scale as one matmul (K read through strides, no copy) into
//      a per-thread scratch tile of at most kTileFloats, the mask and causal
//      bias added in a loop, the softmax over the keys as a oneDNN softmax
//      in place, and Y = P V as a second matmul writing straight into Y's
//      rows (strided in the 3-D layout). A row masked everywhere gives zeros,
//      as in the reference (its scores are set finite before the softmax and
//      its probabilities to zero after).
//   3. The (batch, head, tile) units are split over the OpenMP threads when
//      the work is large enough to pay for waking them; the primitives are
//      made for one thread and run concurrently (oneDNN primitives are
//      immutable; each thread binds its own argument memories).
// The reference accumulates in double; this kernel in float (the unit test's
// tolerance is the float summation bound of tests/unit/cpu_dnnl_test.cpp).
#include <omp.h>

#include <algorithm>
#include <array>
#include <new>
#include <cmath>
#include <vector>

#include "runtime/cpu/dnnl_kernels.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/ops/op_util.h"
#include "runtime/schema/infer_util.h"
#include "runtime/schema/reduce_norm_attention.h"
#include "runtime/support/memory_account.h"

namespace pcc::cpu {
namespace {

using ops::reduce_norm_attention_schema::AttentionShapes;

/// Work (multiply-adds) below which one thread does all rows.
constexpr int64_t kParallelWork = 1 << 20;
/// Multiply-adds per (batch, head) from which the oneDNN path runs.
constexpr int64_t kGemmWork = 1 << 18;
/// The most scores one tile holds (a thread's scratch: 256 KiB).
constexpr int64_t kTileFloats = 1 << 16;

/// \returns the largest of row[0, n) (NaNs ignored), -inf when n = 0. Eight
/// running maxima, kept in registers: the simd reduction inlined into the
/// kernel's parallel body kept its accumulator on the stack.
[[gnu::noinline]] float rowMax(const float* row, int64_t n) {
  float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) m[k] = row[j + k] > m[k] ? row[j + k] : m[k];
  for (; j < n; ++j) m[0] = row[j] > m[0] ? row[j] : m[0];
  float mx = m[0];
  for (int k = 1; k < 8; ++k) mx = m[k] > mx ? m[k] : mx;
  return mx;
}

class AttentionKernel : public KernelOverride {
 public:
  AttentionKernel(const AttrMap& attrs, bool largeOnly)
      : largeOnly_(largeOnly),
        attrs_(attrs),
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
    if (!gemm_ && largeOnly_) return false;
    if (!gemm_) {
      computeRows(*in[0], *in[1], *in[2], mask, y.mutableData<float>());
      return true;
    }
    RETURN_IF_ERROR(compute(*in[0], *in[1], *in[2], mask, y.mutableData<float>()));
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
    gemm_ = a_.q.s * a_.total * (a_.q.d + a_.vd) >= kGemmWork;
    if (!gemm_) {
      supported_ = true;
      return;
    }
    const int64_t S = a_.q.s, rowsPerTile = std::clamp<int64_t>(kTileFloats / a_.total, 1, S);
    const int64_t tiles = (S + rowsPerTile - 1) / rowsPerTile, m = (S + tiles - 1) / tiles;
    tile_ = TilePrims{};
    tail_ = TilePrims{};
    if (!makeTile(tile_, m)) return;
    if (S % m != 0 && !makeTile(tail_, S % m)) return;
    supported_ = true;
  }

  /// The three primitives of a tile of `m` query rows.
  struct TilePrims {
    int64_t m = 0;
    dnnl::primitive qk, softmax, pv;
    dnnl::memory::desc q, kt, s, v, y;
    /// The primitives' scratchpads (user mode: each thread passes its own,
    /// since the units run concurrently).
    dnnl::memory::desc qkPad, softmaxPad, pvPad;
  };

  /// \returns false when oneDNN has no implementation for a tile of `m` rows.
  bool makeTile(TilePrims& t, int64_t m) {
    using dnnl::memory;
    const AttentionShapes& a = a_;
    const int64_t T = a.total, D = a.q.d, VD = a.vd;
    auto rowStride = [](const ops::reduce_norm_attention_schema::HeadView& h, int64_t d) {
      return h.packed ? h.h * d : d;
    };
    t.m = m;
    t.q = stridedDesc({m, D}, {rowStride(a.q, D), 1});
    t.kt = stridedDesc({D, T}, {1, rowStride(a.k, D)});
    t.s = plainDesc({m, T});
    t.v = stridedDesc({T, VD}, {rowStride(a.v, VD), 1});
    t.y = stridedDesc({m, VD}, {rowStride(a.q, VD), 1});
    try {
      ScopedThreads one(1);
      dnnl::primitive_attr scaled, plain;
      scaled.set_output_scales(0, {scale_});
      scaled.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      plain.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::matmul::primitive_desc qk(dnnl::matmul::desc(t.q, t.kt, t.s), scaled, cpuEngine());
      dnnl::softmax_forward::primitive_desc sm(
          dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, t.s, 1), plain, cpuEngine());
      dnnl::matmul::primitive_desc pv(dnnl::matmul::desc(t.s, t.v, t.y), plain, cpuEngine());
      t.qk = dnnl::matmul(qk);
      t.softmax = dnnl::softmax_forward(sm);
      t.pv = dnnl::matmul(pv);
      t.qkPad = qk.scratchpad_desc();
      t.softmaxPad = sm.scratchpad_desc();
      t.pvPad = pv.scratchpad_desc();
    } catch (const dnnl::error&) {
      return false;
    }
    return true;
  }

  /// Adds the mask and causal bias to the scores of rows [i0, i0 + m) of
  /// (b, h), then makes the rows masked everywhere finite. \returns a bit per
  /// row: masked everywhere (its probabilities must become zeros).
  void bias(float* s, int64_t m, int64_t b, int64_t h, int64_t i0, const float* maskF, const uint8_t* maskB,
            std::vector<uint8_t>& dead) const {
    const int64_t T = a_.total;
    dead.assign(static_cast<size_t>(m), 0);
    for (int64_t r = 0; r < m; ++r) {
      float* row = s + r * T;
      const int64_t i = i0 + r;
      // Keys from `lim` on are -inf (past the mask's length, after the query
      // when causal); the mask applies before it, and the max is over it.
      int64_t lim = causal_ ? std::min(T, i + 1) : T;
      if (maskF || maskB) {
        lim = std::min(lim, maskLen_);
        const int64_t base = b * maskStrides_[0] + h * maskStrides_[1] + i * maskStrides_[2], js = maskStrides_[3];
        if (maskF) {
#pragma omp simd
          for (int64_t j = 0; j < lim; ++j) row[j] += maskF[base + j * js];
        } else if (js == 1) {
          const uint8_t* keep = maskB + base;
#pragma omp simd
          for (int64_t j = 0; j < lim; ++j) row[j] = keep[j] ? row[j] : -INFINITY;
        } else {
          for (int64_t j = 0; j < lim; ++j)
            if (!maskB[base + j * js]) row[j] = -INFINITY;
        }
      }
      lim = std::max<int64_t>(lim, 0);
      std::fill(row + lim, row + T, -INFINITY);
      const float mx = rowMax(row, lim);
      if (mx == -INFINITY) {
        dead[r] = 1;
        std::fill(row, row + T, 0.0f);
      }
    }
  }

  Status compute(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, float* y) const {
    const AttentionShapes& a = a_;
    const float *pq = q.data<float>(), *pk = k.data<float>(), *pv = v.data<float>();
    const float* maskF = mask && mask->dtype() == DType::kF32 ? mask->data<float>() : nullptr;
    const uint8_t* maskB = mask && mask->dtype() == DType::kBool ? mask->data<uint8_t>() : nullptr;
    const int64_t T = a.total, D = a.q.d, VD = a.vd, group = a.q.h / a.k.h, S = a.q.s;
    const int64_t tiles = (S + tile_.m - 1) / tile_.m, units = a.q.b * a.q.h * tiles;
    ops::reduce_norm_attention_schema::HeadView yv = a.q;
    yv.d = VD;
    const bool parallel = a.q.b * a.q.h * S * T * (D + VD) >= kParallelWork && units > 1;
    const int threads = parallel ? static_cast<int>(std::min<int64_t>(omp_get_max_threads(), units)) : 1;
    const size_t scratchBytes = static_cast<size_t>(tile_.m * T) * sizeof(float);
    MemoryCharge charge(static_cast<int64_t>(scratchBytes) * threads);
    Status failed;
#pragma omp parallel num_threads(threads) if (parallel)
    {
      ScopedThreads one(1);
      float* scratch = static_cast<float*>(threadScratch(0, scratchBytes));
      std::vector<uint8_t> dead;
      Status mine;
      try {
        dnnl::stream& st = threadStream();
        // The thread's scratchpads, one block per primitive (they run in turn).
        auto bindTile = [&](const TilePrims& t) {
          return std::array<dnnl::memory, 8>{dnnl::memory(t.q, cpuEngine(), DNNL_MEMORY_NONE),
                                             dnnl::memory(t.kt, cpuEngine(), DNNL_MEMORY_NONE),
                                             dnnl::memory(t.s, cpuEngine(), DNNL_MEMORY_NONE),
                                             dnnl::memory(t.v, cpuEngine(), DNNL_MEMORY_NONE),
                                             dnnl::memory(t.y, cpuEngine(), DNNL_MEMORY_NONE),
                                             dnnl::memory(t.qkPad, cpuEngine()),
                                             dnnl::memory(t.softmaxPad, cpuEngine()),
                                             dnnl::memory(t.pvPad, cpuEngine())};
        };
        std::array<dnnl::memory, 8> full = bindTile(tile_), tail;
        if (tail_.m) tail = bindTile(tail_);
        if (!scratch) throw std::bad_alloc();
#pragma omp for schedule(static)
        for (int64_t u = 0; u < units; ++u) {
          const int64_t tIdx = u % tiles, h = (u / tiles) % a.q.h, b = u / (tiles * a.q.h), kh = h / group;
          const int64_t i0 = tIdx * tile_.m, m = std::min(tile_.m, S - i0);
          const TilePrims& t = m == tile_.m ? tile_ : tail_;
          std::array<dnnl::memory, 8>& mem = m == tile_.m ? full : tail;
          mem[0].set_data_handle(const_cast<float*>(pq + a.q.at(b, h, i0, 0)));
          mem[1].set_data_handle(const_cast<float*>(pk + a.k.at(b, kh, 0, 0)));
          mem[2].set_data_handle(scratch);
          mem[3].set_data_handle(const_cast<float*>(pv + a.v.at(b, kh, 0, 0)));
          mem[4].set_data_handle(y + yv.at(b, h, i0, 0));
          t.qk.execute(st, {{DNNL_ARG_SRC, mem[0]},
                            {DNNL_ARG_WEIGHTS, mem[1]},
                            {DNNL_ARG_DST, mem[2]},
                            {DNNL_ARG_SCRATCHPAD, mem[5]}});
          st.wait();
          bias(scratch, m, b, h, i0, maskF, maskB, dead);
          t.softmax.execute(st, {{DNNL_ARG_SRC, mem[2]}, {DNNL_ARG_DST, mem[2]}, {DNNL_ARG_SCRATCHPAD, mem[6]}});
          st.wait();
          for (int64_t r = 0; r < m; ++r)
            if (dead[r]) std::fill(scratch + r * T, scratch + (r + 1) * T, 0.0f);
          t.pv.execute(st, {{DNNL_ARG_SRC, mem[2]},
                            {DNNL_ARG_WEIGHTS, mem[3]},
                            {DNNL_ARG_DST, mem[4]},
                            {DNNL_ARG_SCRATCHPAD, mem[7]}});
          st.wait();
        }
      } catch (const dnnl::error& e) {
        mine = dnnlError("attention", e);
      } catch (const std::bad_alloc&) {
        mine = internalError("cannot allocate ", scratchBytes, " bytes of attention scores");
      }
      if (!mine.ok()) {
#pragma omp critical(pcc_attention_status)
        if (failed.ok()) failed = mine;
      }
    }
    return failed;
  }

  /// The small-shape path: per query row, scores, softmax and weighted sum
  /// in plain loops (a oneDNN call per head costs more than the work).
  void computeRows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, float* y) const {
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

  bool largeOnly_;  ///< decline what the per-row loops would compute
  AttrMap attrs_;
  bool causal_, plain_;
  ShapeKey key_;
  bool supported_ = false;
  AttentionShapes a_;
  float scale_ = 1;
  bool gemm_ = false;  ///< per head, enough work for the oneDNN path
  TilePrims tile_, tail_;  ///< tiles of m rows; tail_.m = 0 when m divides the sequence
  int64_t maskLen_ = 0;
  std::vector<int64_t> maskStrides_;
};

}  // namespace

std::unique_ptr<KernelOverride> makeAttentionKernel(const AttrMap& attrs, const std::vector<bool>&) {
  return std::make_unique<AttentionKernel>(attrs, false);
}

std::unique_ptr<KernelOverride> makeLargeAttentionKernel(const AttrMap& attrs) {
  return declineEmpty(std::make_unique<AttentionKernel>(attrs, true));
}

}  // namespace pcc::cpu
