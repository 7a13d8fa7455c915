// recognize: rewrites what exporters decompose back into ONNX's own ops, so
// the IR stays standard and later passes see one node per block.
//
// Algorithm (patterns of passes/rewrite/pattern.h, applied to a fixpoint;
// every constant is checked by value within a relative tolerance of 1e-5, and
// every matched intermediate value must be read only inside the block):
//  1. LayerNormalization core, rooted at the Div (or Mul by a Reciprocal):
//     d = x - ReduceMean(x), n = d / Sqrt(ReduceMean(d^2) + eps), d^2 as
//     Pow(d, 2) or Mul(d, d), both means over the same last k axes (kept
//     dims) -> LayerNormalization(x, ones, axis = rank - k, epsilon = eps).
//  2. RMSNormalization core, rooted at the Mul (or Div): x * Reciprocal(s),
//     x * (1 / s) or x / s, with s = Sqrt(ReduceMean(x^2) + eps) over the
//     last k axes -> RMSNormalization(x, ones, axis, epsilon).
//  3. Scale and bias: Mul(norm, c) with a constant c that broadcasts to the
//     normalized dims becomes the norm's scale when it is all ones (and a
//     LayerNormalization has no bias); Add(LayerNormalization, c) becomes
//     its bias when it has none. The norm must have no other reader.
//  4. Gelu, rooted at the last Mul: the product (over single-use Muls, any
//     grouping) of 0.5, x and 1 + Erf(x / sqrt 2) (or x * 1/sqrt 2) ->
//     Gelu(x); of 0.5, x and 1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))
//     -> Gelu(x, approximate = "tanh"), x^3 as Pow(x, 3) or x * x * x.
//  5. Swish: x * Sigmoid(x) -> Swish(x).
//  6. HardSwish: x * HardSigmoid(x) (alpha 1/6, beta 0.5), or the product of
//     x, Clip(x + 3, 0, 6) and 1/6 (or divided by 6) -> HardSwish(x).
//  7. Attention, rooted at the MatMul P·V with V [B, Hk, T, Dv]: P is
//     Softmax(s) on the last axis, or Where(IsNaN(Softmax(s)), 0, Softmax(s));
//     s is Add(scores, m) with a float mask m (last dim T, broadcasting to
//     [B, H, S, T]), Where(m, scores, c) with a bool mask m and c = -inf
//     (or c <= -1e4 when m is a constant keeping a key in every row),
//     Where(d, -inf, scores) with the mask Not(d) (d's own input when d is
//     a Not), or scores;
//     scores = MatMul(Q, Kᵀ) with Mul or Div by constants on the product, on
//     Q or on Kᵀ (their product is the scale); Q [B, H, S, D] and Kᵀ
//     [B, Hk, D, T], Hk = H or 1. K is Kᵀ's Transpose input when it swaps
//     the last two dims (a new Transpose composed with the swap otherwise).
//     K and V repeated per head group (Reshape(Expand(Unsqueeze(x, 2))), as
//     LLaMA's repeat_kv, or Tile in place of the Expand) are read before the
//     repeat: grouped-query heads.
//     -> Attention(Q, K, V[, m]) {scale, num_outputs = 1} (opset 23: a fully
//     masked row gives zeros, as the NaN guard made it).
//  8. 3-D layout: a 4-D Attention whose Q, K and V are Transpose(Reshape(x,
//     [B, S, H, D]), [0, 2, 1, 3]) of x [B, S, H * D] and whose Y is read
//     only by Transpose [0, 2, 1, 3] then Reshape becomes Attention(xq, xk,
//     xv[, m]) {q_num_heads, kv_num_heads}, [B, S, H * Dv] (then the
//     Reshape's shape if it differs).
// Steps 1, 2, 4, 5, 6 and 7 count in PassContext::stats under the op's name.
// The patterns: passes/rewrite/norm_patterns.cpp (steps 1-3),
// passes/rewrite/activation_patterns.cpp (steps 4-6) and
// passes/rewrite/attention_patterns.cpp (steps 7-8).

#include <memory>

#include "passes/registry.h"
#include "passes/rewrite/recognize_patterns.h"

namespace pcc {

namespace {

class RecognizePass : public Pass {
 public:
  RecognizePass() {
    addNormPatterns(patterns_);
    addActivationPatterns(patterns_);
    addAttentionPatterns(patterns_);
  }
  std::string_view name() const override { return "recognize"; }
  StatusOr<bool> run(Graph& g, PassContext& ctx) override { return applyPatterns(g, patterns_, ctx); }

 private:
  PatternList patterns_;
};

}  // namespace

std::unique_ptr<Pass> createRecognizePass() { return std::make_unique<RecognizePass>(); }

}  // namespace pcc
