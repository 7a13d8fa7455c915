// Importers of the com.microsoft ops onnxruntime-genai's model builder writes
// (what most published ONNX LLMs hold), each lowered at import into ONNX ops
// pcc has kernels and dimension maps for (docs/generation.md#builder-models):
//
//   SimplifiedLayerNormalization(X, scale)      -> RMSNormalization (also in the
//                                                  default domain, where ORT
//                                                  registers it)
//   SkipSimplifiedLayerNormalization(x, skip, gamma[, bias])
//                                               -> s = x + skip (+ bias);
//                                                  RMSNormalization(s, gamma);
//                                                  output 3 is s
//   SkipLayerNormalization(x, skip, gamma[, beta[, bias]])
//                                               -> s as above;
//                                                  LayerNormalization(s, gamma, beta)
//   RotaryEmbedding(x, position_ids, cos, sin)  -> RotaryEmbedding (ONNX 23 order:
//                                                  x, cos, sin, position_ids; a
//                                                  one-element position_ids is an
//                                                  offset to the positions 0..S-1)
//   GroupQueryAttention(query[, key, value], past_key, past_value, seqlens_k,
//                       total_sequence_length[, cos_cache, sin_cache])
//       q, k, v: the packed query split in three (or the three inputs),
//       each [B, S, heads * d] -> [B, heads, S, d];
//       start_b = seqlens_k[b] + 1 - S (0 when the past is empty): where the
//       sequence's new positions begin; positions start_b + i feed the
//       rotary embedding (do_rotary);
//       present = TensorScatter(Concat(past, zeros[B, kv, S, d]), new, start)
//       along the positions: the past's valid prefix, the new keys at the
//       sequence's own position (what the ORT kernel writes when past and
//       present are separate buffers);
//       Y = Attention(q, present_key, present_value, key j <= start_b + i),
//       scale (0: 1/sqrt(d)), the kv heads shared by num_heads / kv_num_heads
//       query heads; -> [B, S, num_heads * d].
// Unsupported attributes or inputs (softcap, smooth_softmax, a local window,
// attention_bias, head_sink, position_ids, the qk output, packed batching, a
// rotary scale other than 1) are refused naming the node.
#include "compiler/onnx/import_util.h"
#include "runtime/schema/linalg.h"

#include <cmath>
#include <numeric>

namespace pcc {
namespace {

/// \returns an attribute map of one entry.
AttrMap attr(const std::string& name, Attribute value) {
  AttrMap a;
  a.set(name, std::move(value));
  return a;
}

/// \returns a + b.
StatusOr<Value*> add(C& c, Value* a, Value* b, std::string_view tag) {
  ASSIGN_OR_RETURN(std::vector<Value*> r, c.emit(OpKind::Add, {a, b}, {}, {}, tag));
  return r[0];
}

StatusOr<Value*> one(C& c, OpKind op, std::vector<Value*> ins, AttrMap a, std::string_view tag) {
  ASSIGN_OR_RETURN(std::vector<Value*> r, c.emit(op, std::move(ins), std::move(a), {}, tag));
  return r[0];
}

/// x + skip (+ bias): the residual stream the Skip*Normalization ops carry.
StatusOr<Value*> skipSum(C& c, size_t biasInput) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  ASSIGN_OR_RETURN(Value* skip, c.requiredInput(1));
  ASSIGN_OR_RETURN(Value* s, add(c, x, skip, "skip"));
  if (Value* bias = c.input(biasInput)) {
    ASSIGN_OR_RETURN(s, add(c, s, bias, "bias"));
  }
  return s;
}

Status refuseUsedOutputs(C& c, std::initializer_list<size_t> outputs, std::string_view what) {
  for (size_t k : outputs)
    if (c.outputUsed(k)) return c.unsupportedHere("output ", k, " (", what, ") is read; pcc computes only the others");
  return Status::OK();
}

AttrMap normAttrs(C& c) {
  AttrMap a;
  a.set("axis", c.attrs().getInt("axis", -1));
  a.set("epsilon", c.attrs().getFloat("epsilon", 1e-5f));
  return a;
}

Status importSimplifiedLayerNorm(C& c) {
  RETURN_IF_ERROR(refuseUsedOutputs(c, {1}, "inv_std_var"));
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  ASSIGN_OR_RETURN(Value* scale, c.requiredInput(1));
  return c.emitNode(OpKind::RMSNormalization, {x, scale}, normAttrs(c));
}

/// Skip(Simplified)LayerNormalization: `op` over x + skip (+ bias, input
/// `biasInput`) with gamma (and beta, input 3, when `withBeta`); output 3 is
/// the sum.
Status importSkipNorm(C& c, OpKind op, size_t biasInput, bool withBeta) {
  RETURN_IF_ERROR(refuseUsedOutputs(c, {1, 2}, "mean, inv_std_var"));
  ASSIGN_OR_RETURN(Value* s, skipSum(c, biasInput));
  ASSIGN_OR_RETURN(Value* gamma, c.requiredInput(2));
  AttrMap a = normAttrs(c);
  a.set("axis", int64_t{-1});
  std::vector<Value*> ins = {s, gamma};
  if (Value* beta = withBeta ? c.input(3) : nullptr) ins.push_back(beta);
  ASSIGN_OR_RETURN(std::vector<Value*> y, c.emit(op, std::move(ins), std::move(a), {c.node().output(0)}, "norm"));
  c.setOutput(0, y[0]);
  c.setOutput(3, s);
  return Status::OK();
}

Status importSkipSimplifiedLayerNorm(C& c) { return importSkipNorm(c, OpKind::RMSNormalization, 3, false); }

Status importSkipLayerNorm(C& c) { return importSkipNorm(c, OpKind::LayerNormalization, 4, true); }

/// positions [B, S] i64 = start [B] + 0..S-1.
StatusOr<Value*> positionsFrom(C& c, Value* start, int64_t seq) {
  std::vector<int64_t> steps(static_cast<size_t>(seq));
  std::iota(steps.begin(), steps.end(), 0);
  ASSIGN_OR_RETURN(Value* col, one(c, OpKind::Unsqueeze, {start, c.constI64({1}, "axes")}, {}, "start"));
  Value* range = c.constant(Tensor::fromVector<int64_t>(DType::kI64, {1, seq}, steps), "steps");
  return add(c, col, range, "positions");
}

Status importRotaryEmbedding(C& c) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  ASSIGN_OR_RETURN(Value* pos, c.requiredInput(1));
  ASSIGN_OR_RETURN(Value* cos, c.requiredInput(2));
  ASSIGN_OR_RETURN(Value* sin, c.requiredInput(3));
  if (c.attrs().getInt("is_packed_batching", 0) != 0) return c.unsupportedHere("is_packed_batching = 1");
  if (c.attrs().getFloat("scale", 1.0f) != 1.0f)
    return c.unsupportedHere("scale ", c.attrs().getFloat("scale", 1.0f), " (only 1)");
  const Dims& xs = x->type().shape;
  if (xs.size() != 3 && xs.size() != 4) return c.invalid("input must be 3-D or 4-D, got ", x->type().str());
  if (pos->type().numel() == 1 && pos->type().rank() <= 1) {
    // An offset: the positions are offset + 0..S-1 for every sequence.
    const int64_t batch = xs[0], seq = xs.size() == 4 ? xs[2] : xs[1];
    ASSIGN_OR_RETURN(Value* flat, one(c, OpKind::Reshape, {pos, c.constI64({1}, "shape")}, {}, "offset"));
    ASSIGN_OR_RETURN(Value* offset, one(c, OpKind::Cast, {flat}, attr("to", int64_t{7}), "offset"));
    ASSIGN_OR_RETURN(Value* p1, positionsFrom(c, offset, seq));
    ASSIGN_OR_RETURN(pos, one(c, OpKind::Expand, {p1, c.constI64({batch, seq}, "shape")}, {}, "positions"));
  }
  AttrMap a;
  a.set("interleaved", c.attrs().getInt("interleaved", 0));
  if (c.attrs().has("num_heads")) a.set("num_heads", c.attrs().getInt("num_heads", 0));
  if (c.attrs().has("rotary_embedding_dim")) a.set("rotary_embedding_dim", c.attrs().getInt("rotary_embedding_dim", 0));
  return c.emitNode(OpKind::RotaryEmbedding, {x, cos, sin, pos}, a);
}

/// [B, S, heads * d] -> [B, heads, S, d].
StatusOr<Value*> toHeads(C& c, Value* x, int64_t heads, int64_t d, std::string_view tag) {
  const Dims& s = x->type().shape;
  ASSIGN_OR_RETURN(Value* r, one(c, OpKind::Reshape, {x, c.constI64({s[0], s[1], heads, d}, "shape")}, {}, tag));
  return one(c, OpKind::Transpose, {r}, attr("perm", std::vector<int64_t>{0, 2, 1, 3}), tag);
}

Status importGroupQueryAttention(C& c) {
  const AttrMap& at = c.attrs();
  const int64_t heads = at.getInt("num_heads", 0), kvHeads = at.getInt("kv_num_heads", 0);
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    return c.invalid("num_heads ", heads, " must be a positive multiple of kv_num_heads ", kvHeads);
  if (at.getFloat("softcap", 0.0f) != 0.0f) return c.unsupportedHere("softcap ", at.getFloat("softcap", 0.0f));
  if (at.getInt("smooth_softmax", 0) != 0) return c.unsupportedHere("smooth_softmax = 1");
  if (at.getInt("local_window_size", -1) != -1)
    return c.unsupportedHere("local_window_size ", at.getInt("local_window_size", -1), " (sliding-window attention)");
  for (size_t i : {9, 10, 11})
    if (c.input(i))
      return c.unsupportedHere("input ", i, i == 9 ? " (position_ids)" : i == 10 ? " (attention_bias)" : " (head_sink)");
  RETURN_IF_ERROR(refuseUsedOutputs(c, {3}, "output_qk"));
  ASSIGN_OR_RETURN(Value* query, c.requiredInput(0));
  ASSIGN_OR_RETURN(Value* seqlens, c.requiredInput(5));
  const Dims& qs = query->type().shape;
  if (qs.size() != 3) return c.invalid("query must be [batch, sequence, hidden], got ", query->type().str());
  const int64_t batch = qs[0], seq = qs[1];
  Value *q3 = query, *k3 = c.input(1), *v3 = c.input(2);
  int64_t d = 0;
  if (!k3 && !v3) {  // packed: [B, S, (heads + 2 kv heads) * d]
    if (qs[2] % (heads + 2 * kvHeads) != 0)
      return c.invalid("packed query width ", qs[2], " is not (num_heads + 2 kv_num_heads) * head size");
    d = qs[2] / (heads + 2 * kvHeads);
    ASSIGN_OR_RETURN(std::vector<Value*> parts,
                     c.emit(OpKind::Split, {query, c.constI64({heads * d, kvHeads * d, kvHeads * d}, "split")},
                            attr("axis", int64_t{2}), {}, "qkv"));
    q3 = parts[0], k3 = parts[1], v3 = parts[2];
  } else if (k3 && v3) {
    if (qs[2] % heads != 0) return c.invalid("query width ", qs[2], " is not a multiple of num_heads ", heads);
    d = qs[2] / heads;
  } else {
    return c.invalid("key and value must be both given or both absent (packed query)");
  }
  ASSIGN_OR_RETURN(Value* q, toHeads(c, q3, heads, d, "q"));
  ASSIGN_OR_RETURN(Value* k, toHeads(c, k3, kvHeads, d, "k"));
  ASSIGN_OR_RETURN(Value* v, toHeads(c, v3, kvHeads, d, "v"));
  Value* pastK = c.input(3);
  Value* pastV = c.input(4);
  if (!pastK != !pastV) return c.invalid("past_key and past_value must be both given or both absent");
  const int64_t past = pastK ? pastK->type().shape.size() == 4 ? pastK->type().shape[2] : -1 : 0;
  if (pastK && (pastK->type().shape != Dims{batch, kvHeads, past, d} || pastV->type() != pastK->type()))
    return c.invalid("past_key and past_value must be [batch, kv_num_heads, positions, head size] = [", batch, ", ",
                     kvHeads, ", P, ", d, "], got ", pastK->type().str(), " and ", pastV->type().str());
  // Where each sequence's new positions start.
  Value* start = nullptr;
  if (past == 0) {
    start = c.constant(Tensor::zeros(DType::kI64, {batch}), "start");
  } else {
    ASSIGN_OR_RETURN(Value* s64, one(c, OpKind::Cast, {seqlens}, attr("to", int64_t{7}), "seqlens"));
    ASSIGN_OR_RETURN(start, add(c, s64, c.constant(Tensor::scalarI64(1 - seq), "one_minus_s"), "start"));
  }
  ASSIGN_OR_RETURN(Value* positions, positionsFrom(c, start, seq));
  if (at.getInt("do_rotary", 0) != 0) {
    Value* cos = c.input(7);
    Value* sin = c.input(8);
    if (!cos || !sin) return c.invalid("do_rotary = 1 needs cos_cache and sin_cache (inputs 7 and 8)");
    if (cos->type().rank() != 2 || cos->type() != sin->type() || 2 * cos->type().shape[1] > d)
      return c.invalid("cos_cache and sin_cache must be [max positions, rotary dim / 2] with rotary dim <= ", d,
                       ", got ", cos->type().str(), " and ", sin->type().str());
    AttrMap r;
    r.set("interleaved", at.getInt("rotary_interleaved", 0));
    if (2 * cos->type().shape[1] < d) r.set("rotary_embedding_dim", 2 * cos->type().shape[1]);
    ASSIGN_OR_RETURN(q, one(c, OpKind::RotaryEmbedding, {q, cos, sin, positions}, r, "q_rotary"));
    ASSIGN_OR_RETURN(k, one(c, OpKind::RotaryEmbedding, {k, cos, sin, positions}, r, "k_rotary"));
  }
  // The presents: the past with the new positions written at `start`.
  Value* presentK = k;
  Value* presentV = v;
  std::vector<std::string> names = {c.node().output_size() > 1 ? c.node().output(1) : std::string(),
                                    c.node().output_size() > 2 ? c.node().output(2) : std::string()};
  if (pastK) {
    Value* zeros = c.constant(Tensor::zeros(pastK->type().dtype, {batch, kvHeads, seq, d}), "new_slots");
    AttrMap ts;
    ts.set("axis", int64_t{2});
    ts.set("mode", std::string("linear"));
    for (int kv = 0; kv < 2; ++kv) {
      Value* p = kv ? pastV : pastK;
      ASSIGN_OR_RETURN(Value* grown, one(c, OpKind::Concat, {p, zeros}, attr("axis", int64_t{2}),
                                         kv ? "value_slots" : "key_slots"));
      std::vector<std::string> n;
      if (!names[kv].empty()) n.push_back(names[kv]);
      ASSIGN_OR_RETURN(std::vector<Value*> w, c.emit(OpKind::TensorScatter, {grown, kv ? v : k, start}, ts, n,
                                                     kv ? "present_value" : "present_key"));
      (kv ? presentV : presentK) = w[0];
    }
  }
  // Key j is seen by query i of sequence b when j <= start_b + i.
  const int64_t total = presentK->type().shape[2];
  std::vector<int64_t> cols(static_cast<size_t>(total));
  std::iota(cols.begin(), cols.end(), 0);
  Value* keys = c.constant(Tensor::fromVector<int64_t>(DType::kI64, {1, 1, 1, total}, cols), "key_positions");
  ASSIGN_OR_RETURN(Value* rows, one(c, OpKind::Unsqueeze, {positions, c.constI64({1, 3}, "axes")}, {}, "query_positions"));
  ASSIGN_OR_RETURN(Value* mask, one(c, OpKind::LessOrEqual, {keys, rows}, {}, "mask"));
  AttrMap a;
  const float scale = at.getFloat("scale", 0.0f);
  a.set("scale", scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(d)));
  a.set("num_outputs", int64_t{1});
  ASSIGN_OR_RETURN(Value* y, one(c, OpKind::Attention, {q, presentK, presentV, mask}, a, "attention"));
  ASSIGN_OR_RETURN(Value* yt, one(c, OpKind::Transpose, {y}, attr("perm", std::vector<int64_t>{0, 2, 1, 3}),
                                  "attention"));
  ASSIGN_OR_RETURN(std::vector<Value*> out,
                   c.emit(OpKind::Reshape, {yt, c.constI64({batch, seq, heads * d}, "shape")}, {},
                          {c.node().output(0)}, "output"));
  c.setOutput(0, out[0]);
  c.setOutput(1, presentK);
  c.setOutput(2, presentV);
  return Status::OK();
}

/// MatMulNBits(A, B, scales[, zero_points[, g_idx[, bias]]]) with attributes
/// K, N, bits, block_size (accuracy_level is a kernel choice: ignored): B
/// kept as it is (u8 [N, blocks, blob]); scales [N * blocks] (or [N, blocks])
/// reshaped to [N, blocks]; u8 zero points [N * bytes] reshaped to [N, bytes]
/// (runtime/ops/nbits.h). Float zero points and g_idx (an act-order
/// permutation) are refused.
Status importMatMulNBits(C& c) {
  ASSIGN_OR_RETURN(Value* a, c.requiredInput(0));
  ASSIGN_OR_RETURN(Value* b, c.requiredInput(1));
  ASSIGN_OR_RETURN(Value* scales, c.requiredInput(2));
  const AttrMap& at = c.attrs();
  const int64_t k = at.getInt("K", -1), n = at.getInt("N", -1);
  const int bits = static_cast<int>(at.getInt("bits", 4));
  const int64_t block = at.getInt("block_size", -1);
  if (!at.has("K") || !at.has("N") || !at.has("block_size"))
    return c.invalid("MatMulNBits needs the attributes K, N and block_size");
  StatusOr<ops::linalg_schema::NBitsShape> shape = ops::linalg_schema::nbitsShape(k, n, bits, block);
  if (!shape.ok()) return c.invalid(shape.status().message());
  const ops::linalg_schema::NBitsShape s = *shape;
  if (a->type().rank() < 1 || a->type().shape.back() != k)
    return c.invalid("input A is ", a->type().str(), ", attribute K is ", k);
  if (b->type().dtype != DType::kU8)
    return c.unsupportedHere("input B of type ", dtypeName(b->type().dtype), " (only uint8 is supported)");
  if (b->type().shape != Dims{n, s.blocks, s.blobBytes})
    return c.invalid("input B is ", b->type().str(), ", expected u8[", n, ",", s.blocks, ",", s.blobBytes,
                     "] for K ", k, ", N ", n, ", ", bits, " bits, blocks of ", block);
  if (scales->type().numel() != n * s.blocks)
    return c.invalid("scales are ", scales->type().str(), ", expected ", n * s.blocks, " elements");
  if (c.input(4)) return c.unsupportedHere("input g_idx (an act-order permutation of K)");
  ASSIGN_OR_RETURN(Value* sc, one(c, OpKind::Reshape, {scales, c.constI64({n, s.blocks}, "scales_shape")}, {},
                                  "scales"));
  std::vector<Value*> ins = {a, b, sc};
  Value* zeros = c.input(3);
  if (zeros) {
    if (zeros->type().dtype != DType::kU8)
      return c.unsupportedHere("zero points of type ", dtypeName(zeros->type().dtype), " (only packed uint8)");
    if (zeros->type().numel() != n * s.zeroBytes)
      return c.invalid("zero points are ", zeros->type().str(), ", expected ", n * s.zeroBytes, " elements");
    ASSIGN_OR_RETURN(zeros, one(c, OpKind::Reshape, {zeros, c.constI64({n, s.zeroBytes}, "zeros_shape")}, {},
                                "zeros"));
  }
  ins.push_back(zeros);
  ins.push_back(c.input(5));
  while (!ins.back()) ins.pop_back();
  AttrMap keep;
  keep.set("bits", static_cast<int64_t>(bits));
  keep.set("block_size", block);
  return c.emitNode(OpKind::MatMulNBits, std::move(ins), std::move(keep));
}

struct ContribRow {
  const char* domain;
  const char* opType;
  ImportFn fn;
};

constexpr ContribRow kContrib[] = {
    {"", "SimplifiedLayerNormalization", importSimplifiedLayerNorm},
    {"com.microsoft", "SimplifiedLayerNormalization", importSimplifiedLayerNorm},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", importSkipSimplifiedLayerNorm},
    {"com.microsoft", "SkipLayerNormalization", importSkipLayerNorm},
    {"com.microsoft", "RotaryEmbedding", importRotaryEmbedding},
    {"com.microsoft", "GroupQueryAttention", importGroupQueryAttention},
    {"com.microsoft", "MatMulNBits", importMatMulNBits},
};

}  // namespace

ImportFn findContribImporter(std::string_view domain, std::string_view opType) {
  if (domain == "ai.onnx") domain = "";
  for (const ContribRow& r : kContrib)
    if (domain == r.domain && opType == r.opType) return r.fn;
  return nullptr;
}

}  // namespace pcc
