// emitAttentionCpp: an AttentionDesc -> the C++ form of the attention kernel,
// the same algorithm as the CUDA form (emit_attention_cuda.cpp), so that its
// semantics are tested on CPU ranks.
//
// Algorithm, per query row (b, h, i), rows shared among OpenMP threads when
// the work pays for them:
//  1. A running max m = -inf, a running sum l = 0 and an accumulator
//     acc[Dv] = 0, in float32.
//  2. For each key tile [j0, j0 + keyTile), in increasing order (causal: up
//     to key i only): the scores s_j = (q_i . k_j) * scale, the float mask
//     added or the bool mask's false keys and keys past the mask's length
//     set to -inf, and the tile's max mt. A tile with mt = -inf adds nothing.
//     A key the bool mask drops (or past its length) gets -inf without its
//     dot product: a decode step's keys past its position cost nothing but
//     the mask read.
//  3. Online softmax: m' = max(m, mt), alpha = exp(m - m') (0 while m is
//     -inf); p_j = exp(s_j - m'); l = l * alpha + sum p_j;
//     acc = acc * alpha + sum p_j v_j; m = m'.
//  4. Y = acc / l, or zeros when l = 0 (a row masked everywhere, as the
//     reference gives).
#include "codegen/attention_kernel.h"
#include "codegen/kernel_emit.h"

namespace pcc {

namespace {

/// Rows * keys * (D + Dv) below which one thread does every row.
constexpr int64_t kParallelWork = 1 << 20;

}  // namespace

std::string emitAttentionCpp(const std::string& name, const AttentionDesc& d) {
  const int64_t rows = d.batch * d.qHeads * d.qLen;
  std::string s = strCat("extern \"C\" void ", name, "(const void* const* pk_in, void* const* pk_out) {\n");
  s += "  const float* q = (const float*)pk_in[0];\n  const float* k = (const float*)pk_in[1];\n";
  s += "  const float* v = (const float*)pk_in[2];\n";
  if (d.mask == AttentionMask::kFloat) s += "  const float* mask = (const float*)pk_in[3];\n";
  if (d.mask == AttentionMask::kBool) s += "  const bool* mask = (const bool*)pk_in[3];\n";
  s += "  float* y = (float*)pk_out[0];\n";
  s += strCat("  const long long S = ", d.qLen, "LL, T = ", d.kvLen, "LL, HQ = ", d.qHeads, "LL, G = ",
              d.qHeads / d.kvHeads, "LL;\n");
  s += strCat("  const float scale = ", attentionFloatLiteral(d.scale), ", NEG = -1.0f / 0.0f;\n");
  // Only where the work pays for the threads: a region with a false `if`
  // still calls into the OpenMP runtime on every run.
  if (rows * d.kvLen * (d.headSize + d.valueSize) >= kParallelWork) s += "#pragma omp parallel for schedule(static)\n";
  s += strCat("  for (long long r = 0; r < ", rows, "LL; ++r) {\n");
  s += "    const long long i = r % S, h = (r / S) % HQ, b = r / (S * HQ), kh = h / G;\n";
  s += strCat("    const float* qi = q + b * ", d.q[0], "LL + h * ", d.q[1], "LL + i * ", d.q[2], "LL;\n");
  s += strCat("    const float* kb = k + b * ", d.k[0], "LL + kh * ", d.k[1], "LL;\n");
  s += strCat("    const float* vb = v + b * ", d.v[0], "LL + kh * ", d.v[1], "LL;\n");
  // Step 1.
  s += strCat("    float acc[", d.valueSize, "], sc[", d.keyTile, "], m = NEG, l = 0.0f;\n");
  s += strCat("    for (int c = 0; c < ", d.valueSize, "; ++c) acc[c] = 0.0f;\n");
  // Step 2.
  s += d.causal ? "    const long long jEnd = i + 1 < T ? i + 1 : T;\n" : "    const long long jEnd = T;\n";
  s += strCat("    for (long long j0 = 0; j0 < jEnd; j0 += ", d.keyTile, ") {\n");
  s += strCat("      const int n = (int)(jEnd - j0 < ", d.keyTile, " ? jEnd - j0 : ", d.keyTile, ");\n");
  s += "      float mt = NEG;\n";
  s += "      for (int jj = 0; jj < n; ++jj) {\n        const long long j = j0 + jj;\n";
  if (d.mask == AttentionMask::kBool) {
    // A dropped key is -inf whatever its score: its dot product is skipped.
    s += strCat("        if (j >= ", d.maskLen, "LL || !mask[b * ", d.maskStrides[0], "LL + h * ", d.maskStrides[1],
                "LL + i * ", d.maskStrides[2], "LL + j * ", d.maskStrides[3], "LL]) {\n");
    s += "          sc[jj] = NEG;\n          continue;\n        }\n";
  }
  s += strCat("        const float* kj = kb + j * ", d.k[2], "LL;\n");
  s += "        float dot = 0.0f;\n#pragma omp simd reduction(+:dot)\n";
  s += strCat("        for (int c = 0; c < ", d.headSize, "; ++c) dot += qi[c] * kj[c];\n");
  s += "        float x = dot * scale;\n";
  if (d.mask == AttentionMask::kFloat) {
    s += strCat("        if (j >= ", d.maskLen, "LL) {\n          x = NEG;\n        } else {\n");
    s += strCat("          x += mask[b * ", d.maskStrides[0], "LL + h * ", d.maskStrides[1], "LL + i * ",
                d.maskStrides[2], "LL + j * ", d.maskStrides[3], "LL];\n");
    s += "        }\n";
  }
  s += "        sc[jj] = x;\n        mt = x > mt ? x : mt;\n      }\n";
  s += "      if (mt == NEG) continue;\n";
  // Step 3.
  s += "      const float mn = m > mt ? m : mt, alpha = m == NEG ? 0.0f : expf(m - mn);\n";
  s += "      float ps = 0.0f;\n";
  s += "      for (int jj = 0; jj < n; ++jj) {\n        const float p = sc[jj] == NEG ? 0.0f : expf(sc[jj] - mn);\n";
  s += "        sc[jj] = p;\n        ps += p;\n      }\n";
  s += "      l = l * alpha + ps;\n      m = mn;\n";
  s += strCat("#pragma omp simd\n      for (int c = 0; c < ", d.valueSize, "; ++c) acc[c] *= alpha;\n");
  s += "      for (int jj = 0; jj < n; ++jj) {\n        const float p = sc[jj];\n";
  s += strCat("        const float* vj = vb + (j0 + jj) * ", d.v[2], "LL;\n");
  s += strCat("#pragma omp simd\n        for (int c = 0; c < ", d.valueSize, "; ++c) acc[c] += p * vj[c];\n");
  s += "      }\n    }\n";
  // Step 4.
  s += strCat("    float* yi = y + b * ", d.y[0], "LL + h * ", d.y[1], "LL + i * ", d.y[2], "LL;\n");
  s += strCat("    for (int c = 0; c < ", d.valueSize, "; ++c) yi[c] = l > 0.0f ? acc[c] / l : 0.0f;\n");
  s += "  }\n}\n";
  return s;
}

}  // namespace pcc
