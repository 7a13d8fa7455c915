// describeAttention: an Attention node -> the KernelSpec of a tiled kernel
// with online softmax (docs/kernels.md#attention).
//
// Algorithm:
//  1. Refuse what the kernel does not compute: more than one output, past
//     key/value, nonpad_kv_seqlen, softcap, a dtype other than float32 (a
//     mask: float32 or bool), an empty size, a head size above
//     kAttentionMaxHeadSize. Those stay on the runtime's Attention kernels.
//  2. Work out the heads, sequences and layouts with the op's own shape
//     function (runtime/schema), so the kernel sees the sizes the reference
//     does; each of Q, K, V and Y gets its strides along (batch, head,
//     sequence): [B, H, S, D] is (H*S*D, S*D, D), the packed 3-D
//     [B, S, H*D] is (S*H*D, D, H*D).
//  3. The mask broadcasts (numpy rules) to [B, Hq, S, maskLen]: its strides
//     there, 0 along broadcast dims.
//  4. The tiles: keys go in tiles of keyTile = the largest power of two in
//     [8, 64] whose K and V rows fit 32 KiB of shared memory; the CUDA form
//     takes queryTile = a power of two in [4, 32] rows per block, with Q's
//     rows in at most 8 KiB and at most 32 accumulators per thread.
#include "codegen/attention_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/schema/reduce_norm_attention.h"

namespace pcc {

namespace {

using ops::reduce_norm_attention_schema::HeadView;

/// \returns the strides of `v` along (batch, head, sequence).
std::array<int64_t, 3> headStrides(const HeadView& v) {
  if (v.packed) return {v.s * v.h * v.d, v.d, v.h * v.d};
  return {v.h * v.s * v.d, v.s * v.d, v.d};
}

/// \returns the largest power of two <= n (1 for n < 1).
int64_t pow2Floor(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

StatusOr<KernelSpec> describeAttentionTypes(const std::vector<TensorType>& inputs, const AttrMap& attrs,
                                            size_t numOutputs, const std::string& group, int keyTile) {
  // Step 1.
  auto has = [&](size_t i) { return i < inputs.size() && inputs[i].dtype != DType::kUndefined; };
  if (numOutputs != 1 || attrs.getInt("num_outputs", 1) != 1)
    return unsupported("Attention ('", group, "') with ", std::max<int64_t>(numOutputs, attrs.getInt("num_outputs", 1)),
                       " outputs (present key/value, qk_matmul_output)");
  if (has(4) || has(5)) return unsupported("Attention ('", group, "') with past key/value");
  if (has(6)) return unsupported("Attention ('", group, "') with nonpad_kv_seqlen");
  if (attrs.getFloat("softcap", 0.0f) != 0.0f) return unsupported("Attention ('", group, "') with softcap");
  for (size_t i = 0; i < 3 && i < inputs.size(); ++i)
    if (inputs[i].dtype != DType::kF32)
      return unsupported("Attention ('", group, "') input ", i, " is ", inputs[i].str(), ", not f32");
  if (has(3) && inputs[3].dtype != DType::kF32 && inputs[3].dtype != DType::kBool)
    return unsupported("Attention ('", group, "') mask ", inputs[3].str(), " is neither f32 nor bool");
  // Step 2.
  InferArgs args;
  args.inputs = inputs;
  args.constInputs.assign(inputs.size(), nullptr);
  args.attrs = &attrs;
  auto shapes = ops::reduce_norm_attention_schema::attentionShapes(args);
  if (!shapes.ok()) return unsupported("Attention ('", group, "'): ", shapes.status().message());
  const auto& a = *shapes;
  auto d = std::make_shared<AttentionDesc>();
  d->batch = a.q.b;
  d->qHeads = a.q.h;
  d->kvHeads = a.k.h;
  d->qLen = a.q.s;
  d->kvLen = a.total;
  d->headSize = a.q.d;
  d->valueSize = a.vd;
  if (d->batch == 0 || d->qHeads == 0 || d->qLen == 0 || d->kvLen == 0 || d->headSize == 0 || d->valueSize == 0)
    return unsupported("Attention ('", group, "') with an empty size: ", a.outputs[0].str());
  if (d->headSize > kAttentionMaxHeadSize || d->valueSize > kAttentionMaxHeadSize)
    return unsupported("Attention ('", group, "') head sizes ", d->headSize, " and ", d->valueSize, " exceed ",
                       kAttentionMaxHeadSize, ", the largest the CUDA tiles hold");
  d->q = headStrides(a.q);
  d->k = headStrides(a.k);
  d->v = headStrides(a.v);
  HeadView yv = a.q;
  yv.d = a.vd;
  d->y = headStrides(yv);
  // Step 3.
  if (has(3)) {
    const Dims& m = inputs[3].shape;
    d->mask = inputs[3].dtype == DType::kBool ? AttentionMask::kBool : AttentionMask::kFloat;
    d->maskLen = m.back();
    const Dims target = {d->batch, d->qHeads, d->qLen, d->maskLen};
    int64_t stride = 1;
    for (size_t j = m.size(); j-- > 0;) {
      const size_t t = 4 - (m.size() - j);
      d->maskStrides[t] = m[j] == 1 && target[t] != 1 ? 0 : stride;
      stride *= m[j];
    }
  }
  d->causal = attrs.getInt("is_causal", 0) != 0;
  d->scale = attrs.has("scale") ? attrs.getFloat("scale", 1.0f)
                                : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d->headSize)));
  if (!std::isfinite(d->scale)) return unsupported("Attention ('", group, "') with scale ", d->scale);
  // Step 4.
  const int64_t accumulators = (d->valueSize + 31) / 32;
  d->keyTile = keyTile > 0 ? keyTile
                           : static_cast<int>(std::clamp<int64_t>(
                                 pow2Floor(8192 / (d->headSize + 1 + d->valueSize)), 8, 64));
  int64_t qt = std::clamp<int64_t>(pow2Floor(2048 / d->headSize), 4, 32);
  while (qt > 4 && qt / 4 * accumulators > 32) qt /= 2;
  d->queryTile = static_cast<int>(qt);

  KernelSpec spec;
  spec.group = group;
  for (size_t i = 0; i < 3; ++i) spec.inputs.push_back(KernelInput{inputs[i], {}});
  if (has(3)) spec.inputs.push_back(KernelInput{inputs[3], {}});
  KernelOutput y;
  y.type = a.outputs[0];
  spec.outputs.push_back(y);
  spec.attention = std::move(d);
  return spec;
}

StatusOr<KernelSpec> describeAttention(const Node& n) {
  const std::string name = n.name().empty() && n.output(0) ? n.output(0)->name() : n.name();
  if (n.op() != OpKind::Attention) return unsupported(n.opName(), " ('", name, "') is not Attention");
  std::vector<TensorType> types;
  for (const Value* v : n.inputs()) types.push_back(v ? v->type() : TensorType{});
  size_t outputs = 0;
  for (const Value* v : n.outputs()) outputs += v != nullptr;
  return describeAttentionTypes(types, n.attrs(), outputs, name);
}

std::string attentionKey(const AttentionDesc& d) {
  char scale[32];
  std::snprintf(scale, sizeof scale, "%a", static_cast<double>(d.scale));
  std::string s = strCat("attention ", d.batch, " ", d.qHeads, " ", d.kvHeads, " ", d.qLen, " ", d.kvLen, " ",
                         d.headSize, " ", d.valueSize);
  for (const auto* st : {&d.q, &d.k, &d.v, &d.y}) s += strCat(" | ", (*st)[0], " ", (*st)[1], " ", (*st)[2]);
  s += strCat(" | mask ", static_cast<int>(d.mask), " ", d.maskLen);
  for (int64_t m : d.maskStrides) s += strCat(" ", m);
  s += strCat(" | causal ", d.causal ? 1 : 0, " scale ", scale, " tiles ", d.keyTile, " ", d.queryTile);
  return s;
}

std::string attentionFloatLiteral(float f) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", static_cast<double>(f));
  std::string s = b;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

int64_t attentionTiles(const AttentionDesc& d) {
  return d.batch * d.qHeads * ((d.qLen + d.queryTile - 1) / d.queryTile);
}

}  // namespace pcc
