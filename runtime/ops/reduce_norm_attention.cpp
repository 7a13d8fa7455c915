// Attention and RotaryEmbedding, opset-23 semantics.
//
// Attention works on 4-D [batch, heads, seq, head_size] tensors; 3-D
// [batch, seq, heads * head_size] inputs (with q_num_heads / kv_num_heads)
// are viewed as 4-D by index arithmetic, never copied. For each query row:
//   1. scores over the key sequence, past keys first: (q . k) * scale;
//   2. bias: the float mask (or -inf where a bool mask is false; a mask shorter
//      than the key sequence is padded with -inf), -inf for the keys at and
//      after nonpad_kv_seqlen[b] (opset 24, padded batches), and the causal
//      -inf above the diagonal shifted by the past length;
//   3. softcap: cap * tanh(score / cap) when cap > 0;
//   4. softmax, then the weighted sum of the values; a row whose scores are
//      all -inf (masked everywhere) gives zeros, not NaN.
// Grouped-query attention: query head h reads key/value head h / (Hq / Hkv).
// The node's num_outputs (set by the importer, 1 to 4) selects the outputs Y,
// present_key, present_value and qk_matmul_output (scores after the step that
// qk_matmul_output_mode names: 0 step 1, 1 step 2, 2 step 3, 3 step 4).
// Their type inference is runtime/schema/reduce_norm_attention.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/ops/reduce_norm.h"
#include "runtime/schema/reduce_norm_attention.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::reduce_norm_attention_schema;

/// \returns present = concat(past, new) along the sequence: [B, Hkv, P + S, D].
template <typename T>
Tensor presentOf(const Tensor* past, const Tensor& x, const HeadView& v, int64_t pastLen) {
  int64_t total = pastLen + v.s;
  Tensor r = Tensor::zeros(x.dtype(), {v.b, v.h, total, v.d});
  T* pr = r.mutableData<T>();
  for (int64_t b = 0; b < v.b; ++b)
    for (int64_t h = 0; h < v.h; ++h)
      for (int64_t s = 0; s < total; ++s)
        for (int64_t d = 0; d < v.d; ++d)
          pr[((b * v.h + h) * total + s) * v.d + d] =
              s < pastLen ? past->data<T>()[((b * v.h + h) * pastLen + s) * v.d + d]
                          : x.data<T>()[v.at(b, h, s - pastLen, d)];
  return r;
}

Status computeAttention(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeAttention, in, attrs, out);
  InferArgs args = argsFromTensors(in, attrs);
  ASSIGN_OR_RETURN(AttentionShapes a, attentionShapes(args));
  auto opt = [&](size_t i) { return i < in.size() && in[i] && in[i]->defined() ? in[i] : nullptr; };
  const Tensor* mask = opt(3);
  const Tensor* nonpad = opt(6);
  double scale = attrs.has("scale") ? attrs.getFloat("scale", 1.0f) : 1.0 / std::sqrt(static_cast<double>(a.q.d));
  double softcap = attrs.getFloat("softcap", 0.0f);
  bool causal = attrs.getInt("is_causal", 0) != 0;
  int64_t mode = attrs.getInt("qk_matmul_output_mode", 0);
  std::vector<Tensor> results;
  RETURN_IF_ERROR(visitFloat(in[0]->dtype(), [&]<typename T>() -> Status {
    Tensor pk = presentOf<T>(opt(4), *in[1], a.k, a.past), pv = presentOf<T>(opt(5), *in[2], a.v, a.past);
    Tensor y = Tensor::zeros(a.outputs[0]), qk = Tensor::zeros(in[0]->dtype(), {a.q.b, a.q.h, a.q.s, a.total});
    const T *pq = in[0]->data<T>(), *pkd = pk.data<T>(), *pvd = pv.data<T>();
    Dims maskTarget = mask ? Dims{a.q.b, a.q.h, a.q.s, mask->shape().back()} : Dims{};
    std::vector<int64_t> ms = mask ? broadcastStrides(mask->shape(), maskTarget) : std::vector<int64_t>{};
    int64_t group = a.q.h / a.k.h, T_ = a.total;
    std::vector<double> score(T_);
    HeadView yv = a.q;
    yv.d = a.vd;
    for (int64_t b = 0; b < a.q.b; ++b)
      for (int64_t h = 0; h < a.q.h; ++h) {
        int64_t kh = h / group;
        const T* kbase = pkd + (b * a.k.h + kh) * T_ * a.k.d;
        const T* vbase = pvd + (b * a.k.h + kh) * T_ * a.vd;
        for (int64_t i = 0; i < a.q.s; ++i) {
          T* qkRow = qk.mutableData<T>() + ((b * a.q.h + h) * a.q.s + i) * T_;
          for (int64_t j = 0; j < T_; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < a.q.d; ++d)
              dot += static_cast<double>(pq[a.q.at(b, h, i, d)]) * kbase[j * a.k.d + d];
            double s = dot * scale;
            if (mode == 0) qkRow[j] = static_cast<T>(s);
            if (mask) {
              if (j >= mask->shape().back()) {
                s = -INFINITY;
              } else {
                int64_t off = b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3];
                if (mask->dtype() == DType::kBool) s += mask->data<uint8_t>()[off] ? 0.0 : -INFINITY;
                else s += mask->data<T>()[off];
              }
            }
            if (nonpad && j >= nonpad->data<int64_t>()[b]) s = -INFINITY;
            if (causal && j > i + a.past) s = -INFINITY;
            if (mode == 1) qkRow[j] = static_cast<T>(s);
            if (softcap > 0) s = softcap * std::tanh(s / softcap);
            if (mode == 2) qkRow[j] = static_cast<T>(s);
            score[j] = s;
          }
          double mx = -INFINITY, sum = 0;
          for (double s : score) mx = std::max(mx, s);
          for (double& s : score) sum += s = std::exp(s - mx);
          for (double& s : score) s /= sum;
          if (mode == 3)
            for (int64_t j = 0; j < T_; ++j) qkRow[j] = static_cast<T>(score[j]);
          // A row masked everywhere (all -inf) weighs nothing: Y is zero there
          // (ONNX's opset-23 erratum; qk_matmul_output keeps the NaN).
          if (mx == -INFINITY) std::fill(score.begin(), score.end(), 0.0);
          for (int64_t d = 0; d < a.vd; ++d) {
            double acc = 0;
            for (int64_t j = 0; j < T_; ++j) acc += score[j] * vbase[j * a.vd + d];
            y.mutableData<T>()[yv.at(b, h, i, d)] = static_cast<T>(acc);
          }
        }
      }
    results.push_back(std::move(y));
    results.push_back(std::move(pk));
    results.push_back(std::move(pv));
    results.push_back(std::move(qk));
    return Status::OK();
  }));
  results.resize(a.numOutputs);
  for (Tensor& t : results) out.push_back(std::move(t));
  return Status::OK();
}

Status computeRotary(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeRotary, in, attrs, out);
  ASSIGN_OR_RETURN(RotaryShapes r, rotaryShapes(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  const Tensor* pos = in.size() > 3 && in[3] && in[3]->defined() ? in[3] : nullptr;
  bool interleaved = attrs.getInt("interleaved", 0) != 0;
  int64_t half = r.rot / 2, maxPos = pos ? in[1]->shape()[0] : 0;
  // The planned output (possibly over x itself: each pair is read before it
  // is written); the dims past rot stay as they are.
  Tensor y = output(out, 0, x.dtype(), x.shape());
  if (y.raw() != x.raw() && x.nbytes()) std::memcpy(y.mutableData(), x.raw(), x.nbytes());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T *px = x.data<T>(), *pc = in[1]->data<T>(), *ps = in[2]->data<T>();
    T* py = y.mutableData<T>();
    const HeadView& v = r.x;
    for (int64_t b = 0; b < v.b; ++b)
      for (int64_t s = 0; s < v.s; ++s) {
        int64_t row = b * v.s + s;
        if (pos) {
          row = pos->data<int64_t>()[b * v.s + s];
          if (row < 0 || row >= maxPos)
            return invalidInput("position id ", row, " is out of range for a cache of ", maxPos, " positions");
        }
        const T *cr = pc + row * half, *sr = ps + row * half;
        // Pair k is (k, k + half), or (2k, 2k + 1) interleaved.
        const int64_t step = interleaved ? 2 : 1, other = interleaved ? 1 : half;
        for (int64_t h = 0; h < v.h; ++h) {
          const int64_t base = v.at(b, h, s, 0);
          const T* xr = px + base;
          T* yr = py + base;
          for (int64_t k = 0; k < half; ++k) {
            const int64_t i1 = k * step, i2 = i1 + other;
            const double c = cr[k], sn = sr[k];
            const double x1 = xr[i1], x2 = xr[i2];
            yr[i1] = static_cast<T>(c * x1 - sn * x2);
            yr[i2] = static_cast<T>(sn * x1 + c * x2);
          }
        }
      }
    return Status::OK();
  }));
  return Status::OK();
}

}  // namespace

void registerAttentionOps(OpRegistry& r) {
  r.add(OpKind::Attention, &computeAttention);
  r.add(OpKind::RotaryEmbedding, &computeRotary, kWritesOutputs);
}

}  // namespace pcc
