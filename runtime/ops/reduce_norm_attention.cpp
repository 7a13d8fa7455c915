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
//   4. softmax, then the weighted sum of the values.
// Grouped-query attention: query head h reads key/value head h / (Hq / Hkv).
// The node's num_outputs (set by the importer, 1 to 4) selects the outputs Y,
// present_key, present_value and qk_matmul_output (scores after the step that
// qk_matmul_output_mode names: 0 step 1, 1 step 2, 2 step 3, 3 step 4).
#include <cmath>

#include "runtime/ops/reduce_norm.h"

namespace pcc {
namespace {
using namespace ops;

/// A 3-D or 4-D tensor seen as [B, H, S, D].
struct HeadView {
  int64_t b = 0, h = 0, s = 0, d = 0;
  bool packed = false;  // 3-D [B, S, H * D]
  /// \returns the element offset of (bi, hi, si, di).
  int64_t at(int64_t bi, int64_t hi, int64_t si, int64_t di) const {
    return packed ? ((bi * s + si) * h + hi) * d + di : ((bi * h + hi) * s + si) * d + di;
  }
};

/// \returns the [B, H, S, D] view of `t`; `heads` is the head count of a 3-D input.
StatusOr<HeadView> headView(const TensorType& t, int64_t heads, const char* what) {
  HeadView v;
  if (t.rank() == 4) {
    v = {t.shape[0], t.shape[1], t.shape[2], t.shape[3], false};
    if (heads > 0 && heads != v.h) return invalidInput(what, " ", t.str(), " does not have ", heads, " heads");
    return v;
  }
  if (t.rank() != 3) return invalidInput(what, " must be 3-D or 4-D, got ", t.str());
  if (heads <= 0 || t.shape[2] % heads != 0)
    return invalidInput(what, " ", t.str(), " is 3-D: the head count attribute (", heads,
                        ") must be positive and divide its last dim");
  return HeadView{t.shape[0], heads, t.shape[1], t.shape[2] / heads, true};
}

struct AttentionShapes {
  HeadView q, k, v;
  int64_t past = 0, total = 0;  // past and total key sequence lengths
  int64_t vd = 0;
  int64_t numOutputs = 1;
  std::vector<TensorType> outputs;
};

StatusOr<AttentionShapes> attentionShapes(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 7));
  const AttrMap& attrs = attrsOf(args);
  const TensorType &q = args.inputs[0], &k = args.inputs[1], &v = args.inputs[2];
  RETURN_IF_ERROR(checkDType(q, kFloatTypes, "Q"));
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    return invalidInput("Q, K and V must have one type, got ", typesToString(args.inputs));
  if (k.rank() != q.rank() || v.rank() != q.rank())
    return invalidInput("Q, K and V must have one rank, got ", typesToString(args.inputs));
  AttentionShapes a;
  ASSIGN_OR_RETURN(a.q, headView(q, attrs.getInt("q_num_heads", 0), "Q"));
  ASSIGN_OR_RETURN(a.k, headView(k, attrs.getInt("kv_num_heads", 0), "K"));
  ASSIGN_OR_RETURN(a.v, headView(v, attrs.getInt("kv_num_heads", 0), "V"));
  if (a.k.b != a.q.b || a.v.b != a.q.b || a.k.d != a.q.d || a.v.h != a.k.h || a.v.s != a.k.s)
    return invalidInput("Q, K and V shapes do not agree: ", typesToString(args.inputs));
  if (a.k.h <= 0 || a.q.h % a.k.h != 0)
    return invalidInput("query heads ", a.q.h, " must be a multiple of key/value heads ", a.k.h);
  a.vd = a.v.d;
  bool hasPastK = args.has(4), hasPastV = args.has(5);
  if (hasPastK != hasPastV) return invalidInput("past_key and past_value must be given together");
  if (hasPastK) {
    const TensorType &pk = args.inputs[4], &pv = args.inputs[5];
    if (pk.rank() != 4 || pv.rank() != 4 || pk.dtype != q.dtype || pv.dtype != q.dtype ||
        pk.shape != Dims{a.q.b, a.k.h, pk.shape[2], a.k.d} || pv.shape != Dims{a.q.b, a.k.h, pk.shape[2], a.vd})
      return invalidInput("past_key ", pk.str(), " and past_value ", pv.str(), " must be [B, kv_heads, P, D]");
    a.past = pk.shape[2];
  }
  a.total = a.past + a.k.s;
  if (args.has(3)) {
    const TensorType& m = args.inputs[3];
    if (m.dtype != DType::kBool && m.dtype != q.dtype)
      return invalidInput("attn_mask ", m.str(), " must be bool or of Q's type ", dtypeName(q.dtype));
    if (m.rank() < 1 || m.rank() > 4 || m.shape.back() > a.total)
      return invalidInput("attn_mask ", m.str(), " must be of rank 1 to 4 with a last dim <= ", a.total);
    Dims target = {a.q.b, a.q.h, a.q.s, m.shape.back()};
    auto bc = broadcastShapes(m.shape, target);
    if (!bc.ok() || *bc != target)
      return invalidInput("attn_mask ", m.str(), " does not broadcast to ", dimsToString(target));
  }
  if (args.has(6)) {
    const TensorType& n = args.inputs[6];
    if (n.dtype != DType::kI64 || n.shape != Dims{a.q.b})
      return invalidInput("nonpad_kv_seqlen ", n.str(), " must be i64[", a.q.b, "]");
  }
  int64_t mode = attrs.getInt("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) return invalidInput("qk_matmul_output_mode must be 0 to 3, got ", mode);
  a.numOutputs = attrs.getInt("num_outputs", 1);
  if (a.numOutputs < 1 || a.numOutputs > 4) return invalidInput("num_outputs must be 1 to 4, got ", a.numOutputs);
  Dims y = q.rank() == 4 ? Dims{a.q.b, a.q.h, a.q.s, a.vd} : Dims{a.q.b, a.q.s, a.q.h * a.vd};
  a.outputs = {{q.dtype, y},
               {q.dtype, {a.q.b, a.k.h, a.total, a.k.d}},
               {q.dtype, {a.q.b, a.k.h, a.total, a.vd}},
               {q.dtype, {a.q.b, a.q.h, a.q.s, a.total}}};
  a.outputs.resize(a.numOutputs);
  return a;
}

StatusOr<std::vector<TensorType>> inferAttention(const InferArgs& args) {
  ASSIGN_OR_RETURN(AttentionShapes a, attentionShapes(args));
  return a.outputs;
}

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

// ---- RotaryEmbedding ----------------------------------------------------------

struct RotaryShapes {
  HeadView x;
  int64_t rot = 0;  // rotated dims of each head
};

StatusOr<RotaryShapes> rotaryShapes(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 4));
  const AttrMap& attrs = attrsOf(args);
  const TensorType &x = args.inputs[0], &cs = args.inputs[1], &sn = args.inputs[2];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  if (cs.dtype != x.dtype || sn.dtype != x.dtype || cs.shape != sn.shape)
    return invalidInput("cos_cache ", cs.str(), " and sin_cache ", sn.str(), " must agree with each other and X ",
                        x.str());
  RotaryShapes r;
  // A 4-D input is [B, H, S, D]; a 3-D one [B, S, H * D].
  ASSIGN_OR_RETURN(r.x, headView(x, attrs.getInt("num_heads", 0), "input X"));
  r.rot = attrs.getInt("rotary_embedding_dim", 0);
  if (r.rot == 0) r.rot = r.x.d;
  if (r.rot < 0 || r.rot > r.x.d || r.rot % 2 != 0)
    return invalidInput("rotary_embedding_dim ", r.rot, " must be even and at most the head size ", r.x.d);
  if (args.has(3)) {
    const TensorType& p = args.inputs[3];
    if (p.dtype != DType::kI64 || p.shape != Dims{r.x.b, r.x.s})
      return invalidInput("position_ids ", p.str(), " must be i64[", r.x.b, ",", r.x.s, "]");
    if (cs.rank() != 2 || cs.shape[1] != r.rot / 2)
      return invalidInput("cos_cache ", cs.str(), " must be [max_position, ", r.rot / 2, "] with position_ids");
  } else if (cs.shape != Dims{r.x.b, r.x.s, r.rot / 2}) {
    return invalidInput("cos_cache ", cs.str(), " must be [", r.x.b, ",", r.x.s, ",", r.rot / 2,
                        "] without position_ids");
  }
  return r;
}

StatusOr<std::vector<TensorType>> inferRotary(const InferArgs& args) {
  RETURN_IF_ERROR(rotaryShapes(args).status());
  return std::vector<TensorType>{args.inputs[0]};
}

Status computeRotary(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeRotary, in, attrs, out);
  ASSIGN_OR_RETURN(RotaryShapes r, rotaryShapes(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  const Tensor* pos = in.size() > 3 && in[3] && in[3]->defined() ? in[3] : nullptr;
  bool interleaved = attrs.getInt("interleaved", 0) != 0;
  int64_t half = r.rot / 2, maxPos = pos ? in[1]->shape()[0] : 0;
  Tensor y = x.clone();  // dims past rot stay as they are
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
        for (int64_t h = 0; h < v.h; ++h)
          for (int64_t k = 0; k < half; ++k) {
            int64_t i1 = interleaved ? 2 * k : k, i2 = interleaved ? 2 * k + 1 : k + half;
            double c = pc[row * half + k], sn = ps[row * half + k];
            double x1 = px[v.at(b, h, s, i1)], x2 = px[v.at(b, h, s, i2)];
            py[v.at(b, h, s, i1)] = static_cast<T>(c * x1 - sn * x2);
            py[v.at(b, h, s, i2)] = static_cast<T>(sn * x1 + c * x2);
          }
      }
    return Status::OK();
  }));
  out.push_back(std::move(y));
  return Status::OK();
}

}  // namespace

void registerAttentionOps(OpRegistry& r) {
  r.add({"Attention", &inferAttention, &computeAttention});
  r.add({"RotaryEmbedding", &inferRotary, &computeRotary});
}

}  // namespace pcc
