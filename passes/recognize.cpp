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
// Steps 1, 2, 4, 5 and 6 count in PassContext::stats under the op's name.
// The patterns: passes/rewrite/norm_patterns.cpp (steps 1-3) and
// passes/rewrite/activation_patterns.cpp (steps 4-6).

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
  }
  std::string_view name() const override { return "recognize"; }
  StatusOr<bool> run(Graph& g, PassContext& ctx) override { return applyPatterns(g, patterns_, ctx); }

 private:
  PatternList patterns_;
};

}  // namespace

std::unique_ptr<Pass> createRecognizePass() { return std::make_unique<RecognizePass>(); }

}  // namespace pcc
