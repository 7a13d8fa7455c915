// Type inference (the op schemas) of Attention and RotaryEmbedding. Their
// reference kernels, and what the kernels compute, are
// runtime/ops/reduce_norm_attention.cpp.
#include <cmath>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/reduce_norm_attention.h"

namespace pcc {

namespace ops::reduce_norm_attention_schema {

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

}  // namespace ops::reduce_norm_attention_schema

namespace {
using namespace ops;
using namespace ops::reduce_norm_attention_schema;

StatusOr<std::vector<TensorType>> inferAttention(const InferArgs& args) {
  ASSIGN_OR_RETURN(AttentionShapes a, attentionShapes(args));
  return a.outputs;
}

StatusOr<std::vector<TensorType>> inferRotary(const InferArgs& args) {
  RETURN_IF_ERROR(rotaryShapes(args).status());
  return std::vector<TensorType>{args.inputs[0]};
}

}  // namespace

void registerAttentionSchemas(SchemaRegistry& r) {
  r.add(OpKind::Attention, &inferAttention);
  r.add(OpKind::RotaryEmbedding, &inferRotary);
}

}  // namespace pcc
