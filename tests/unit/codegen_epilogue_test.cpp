// Epilogues: which generated kernels the plan describes as an elementwise
// chain (codegen/epilogue.h), and that the cpu backend computing such a chain
// as oneDNN post-ops of the MatMul, Gemm or Conv before it (runtime/
// fold_epilogue.h, Backend::prepareFolded) gives the reference program's
// results, folded and unfolded.
#include <gtest/gtest.h>

#include <sstream>

#include "codegen/epilogue.h"
#include "tests/unit/codegen_kernel_test_util.h"

namespace pcc {
namespace {

/// \returns the epilogue of `text`'s first fused group, as "xI: op#operand
/// op(scalar) ..." (' marks chain_second), or "none".
std::string epilogueOf(const std::string& text) {
  auto g = fused(text);
  if (!g || !firstFused(*g)) return "no fused group";
  auto spec = describeFused(*firstFused(*g));
  if (!spec.ok()) return "not generated: " + spec.status().message();
  plan::Kernel k;
  if (!describeEpilogue(*spec, &k)) {
    EXPECT_EQ(k.epilogue_size(), 0);
    return "none";
  }
  std::ostringstream s;
  s << "x" << k.epilogue_input() << ":";
  for (const plan::EpilogueStep& st : k.epilogue()) {
    s << " " << st.op();
    if (st.operand() >= 0)
      s << "#" << st.operand();
    else if (st.op() == "leaky_relu" || st.op() == "swish" || st.op() == "add" || st.op() == "sub" ||
             st.op() == "mul" || st.op() == "div" || st.op() == "max" || st.op() == "min")
      s << "(" << st.scalar() << ")";
    if (st.chain_second()) s << "'";
  }
  return s.str();
}

std::string graph(const std::string& params, const std::string& body) {
  return "graph @g(%x: f32[4,8]" + params + ") -> (%r: f32[4,8]) {\n" + body + "  return %r\n}\n";
}

TEST(Epilogue, ChainsTheCompilerDescribes) {
  const std::string bias = ", %b: f32[8]";
  const std::string six = ", %zero: f32[] const dense<f32[]: 0>, %six: f32[] const dense<f32[]: 6>";
  struct Case {
    std::string text, want;
  };
  const Case cases[] = {
      {graph(bias, "  %a = Add(%x, %b) : f32[4,8]\n  %r = Relu(%a) : f32[4,8]\n"), "x0: add#1 relu"},
      // The chain is the second operand: the bias has another shape.
      {graph(bias, "  %a = Add(%b, %x) : f32[4,8]\n  %r = Relu(%a) : f32[4,8]\n"), "x1: add#0' relu"},
      {graph(bias, "  %a = Sub(%b, %x) : f32[4,8]\n  %r = Tanh(%a) : f32[4,8]\n"), "x1: sub#0' tanh"},
      {graph(bias + six, "  %a = Add(%x, %b) : f32[4,8]\n  %r = Clip(%a, %zero, %six) : f32[4,8]\n"),
       "x0: add#1 max#2 min#3"},  // scalar constants of the graph are the kernel's inputs
      {graph(bias, "  %a = Add(%x, %b) : f32[4,8]\n  %r = LeakyRelu(%a) {alpha = 0.25} : f32[4,8]\n"),
       "x0: add#1 leaky_relu(0.25)"},
      {graph(bias, "  %a = Mul(%x, %b) : f32[4,8]\n  %r = Swish(%a) {alpha = 1.5} : f32[4,8]\n"),
       "x0: mul#1 swish(1.5)"},
      {graph("", "  %s = Sigmoid(%x) : f32[4,8]\n  %r = Mul(%x, %s) : f32[4,8]\n"), "x0: swish(1)"},
      {graph(bias, "  %a = Add(%x, %b) : f32[4,8]\n  %r = Gelu(%a) : f32[4,8]\n"), "x0: add#1 gelu_erf"},
      {graph(", %y: f32[4,8]", "  %a = Add(%x, %y) : f32[4,8]\n  %r = Sigmoid(%a) : f32[4,8]\n"),
       "x0: add#1 sigmoid"},
      // Not chains: x read twice, a tree, a reduction, another output type.
      {graph(", %y: f32[4,8]", "  %a = Add(%x, %y) : f32[4,8]\n  %r = Mul(%a, %x) : f32[4,8]\n"), "none"},
      {graph(", %y: f32[4,8]", "  %a = Exp(%x) : f32[4,8]\n  %e = Exp(%y) : f32[4,8]\n  %r = Add(%a, %e) : f32[4,8]\n"),
       "none"},
      {graph(bias, "  %a = Add(%x, %b) : f32[4,8]\n  %r = Softmax(%a) {axis = -1} : f32[4,8]\n"), "none"},
      {"graph @g(%x: f32[4,8], %b: f32[8]) -> (%r: f32[4,8]) {\n  %a = Add(%x, %b) : f32[4,8]\n"
       "  %h = Cast(%a) {to = 10} : f16[4,8]\n  %r = Cast(%h) {to = 1} : f32[4,8]\n  return %r\n}\n",
       "none"},
  };
  for (const Case& c : cases) EXPECT_EQ(epilogueOf(c.text), c.want) << c.text;
}

/// Runs `text` with and without folding against the reference program and
/// \returns the kernel providers of rank 0's folded run, joined by '|'.
std::string foldedProviders(const std::string& text, const char* dir, double rtol = 1e-5, double atol = 1e-5) {
  GeneratedPlan g = compileGenerated(text, 1, dir);
  if (!g.loaded) return "not compiled";
  RunOptions ro;
  ro.threadsPerRank = 1;
  ro.profile = true;
  std::optional<RunResult> folded = runAndCompare(*g.loaded, ro, rtol, atol);
  ro.foldEpilogues = false;
  std::optional<RunResult> unfolded = runAndCompare(*g.loaded, ro, rtol, atol);
  std::string providers;
  if (folded && !folded->instructions.empty()) {
    for (const RunResult::InstructionTime& t : folded->instructions[0])
      if (t.provider.find("epilogue") != std::string::npos) providers += (providers.empty() ? "" : "|") + t.provider;
  }
  if (unfolded && !unfolded->instructions.empty()) {
    for (const RunResult::InstructionTime& t : unfolded->instructions[0])
      EXPECT_EQ(t.provider.find("epilogue"), std::string::npos) << "folded under --no-fold: " << t.provider;
  }
  std::filesystem::remove_all(g.dir);
  return providers;
}

TEST(Epilogue, MatMulAndGemmFoldTheirEpilogue) {
  // Bias, erf Gelu, a residual of the output's shape: one matmul.
  EXPECT_EQ(foldedProviders("graph @g(%x: f32[2,6,32], %w: f32[32,48] const, %b: f32[48] const, "
                            "%res: f32[2,6,48]) -> (%r: f32[2,6,48]) {\n"
                            "  %m = MatMul(%x, %w) : f32[2,6,48]\n"
                            "  %a = Add(%m, %b) : f32[2,6,48]\n"
                            "  %g = Gelu(%a) : f32[2,6,48]\n"
                            "  %r = Add(%res, %g) : f32[2,6,48]\n  return %r\n}\n",
                            "pcc_epilogue_matmul.pcc"),
            "onednn, epilogue add+gelu_erf+add");
  // A batched product, b - x, a per-row operand [6,1] and Swish.
  EXPECT_EQ(foldedProviders("graph @g(%x: f32[2,6,32], %y: f32[2,32,8], %c: f32[6,1], %s: f32[]) -> (%r: f32[2,6,8]) {\n"
                            "  %m = MatMul(%x, %y) : f32[2,6,8]\n"
                            "  %a = Sub(%c, %m) : f32[2,6,8]\n"
                            "  %q = Swish(%a) {alpha = 1.0} : f32[2,6,8]\n"
                            "  %r = Mul(%q, %s) : f32[2,6,8]\n  return %r\n}\n",
                            "pcc_epilogue_bmm.pcc"),
            "onednn, epilogue sub+swish+mul");
  // Gemm with C and transB, then a clip.
  EXPECT_EQ(foldedProviders("graph @g(%x: f32[5,16], %w: f32[24,16] const, %c: f32[24] const, "
                            "%lo: f32[] const dense<f32[]: -0.5>, %hi: f32[] const dense<f32[]: 0.5>) -> (%r: f32[5,24]) {\n"
                            "  %m = Gemm(%x, %w, %c) {transB = 1, alpha = 0.5, beta = 2.0} : f32[5,24]\n"
                            "  %r = Clip(%m, %lo, %hi) : f32[5,24]\n  return %r\n}\n",
                            "pcc_epilogue_gemm.pcc"),
            "onednn, epilogue max+min");
}

TEST(Epilogue, ConvFoldsItsEpilogue) {
  // A 3x3 convolution (oneDNN's blocked layout) with bias and Relu.
  EXPECT_EQ(foldedProviders("graph @g(%x: f32[2,16,10,10], %w: f32[32,16,3,3] const, %b: f32[32] const) "
                            "-> (%r: f32[2,32,10,10]) {\n"
                            "  %c = Conv(%x, %w, %b) {pads = [1, 1, 1, 1]} : f32[2,32,10,10]\n"
                            "  %r = Relu(%c) : f32[2,32,10,10]\n  return %r\n}\n",
                            "pcc_epilogue_conv.pcc"),
            "onednn, epilogue relu");
  // A pointwise convolution (a matmul) with a residual and Relu.
  EXPECT_EQ(foldedProviders("graph @g(%x: f32[2,16,6,6], %w: f32[16,16,1,1] const, %b: f32[16] const) "
                            "-> (%r: f32[2,16,6,6]) {\n"
                            "  %c = Conv(%x, %w, %b) : f32[2,16,6,6]\n"
                            "  %a = Add(%c, %x) : f32[2,16,6,6]\n"
                            "  %r = Relu(%a) : f32[2,16,6,6]\n  return %r\n}\n",
                            "pcc_epilogue_pointwise.pcc"),
            "onednn, epilogue add+relu");
  // A per-channel scale [C,1,1] after a strided convolution without bias.
  EXPECT_EQ(foldedProviders("graph @g(%x: f32[1,8,9,9], %w: f32[16,8,3,3] const, %s: f32[16,1,1]) "
                            "-> (%r: f32[1,16,4,4]) {\n"
                            "  %c = Conv(%x, %w) {strides = [2, 2]} : f32[1,16,4,4]\n"
                            "  %r = Mul(%c, %s) : f32[1,16,4,4]\n  return %r\n}\n",
                            "pcc_epilogue_scale.pcc"),
            "onednn, epilogue mul");
}

TEST(Epilogue, AnOperandNoPostOpDescribesIsNotFolded) {
  // [6,1] against a MatMul whose batch and rows oneDNN sees as one dim of
  // 2*6: broadcast along the batch, full along the rows. The chain runs as
  // planned (and still matches).
  EXPECT_EQ(foldedProviders("graph @g(%x: f32[2,6,32], %w: f32[32,8] const, %c: f32[6,1]) -> (%r: f32[2,6,8]) {\n"
                            "  %m = MatMul(%x, %w) : f32[2,6,8]\n"
                            "  %r = Add(%m, %c) : f32[2,6,8]\n  return %r\n}\n",
                            "pcc_epilogue_declined.pcc"),
            "");
  // Two eltwise post-ops of one algorithm with different parameters (x + 1,
  // then 2x: linear twice), which oneDNN 2.6 computes wrong.
  EXPECT_EQ(foldedProviders("graph @g(%x: f32[4,32], %w: f32[32,8] const, %one: f32[] const dense<f32[]: 1>, "
                            "%two: f32[] const dense<f32[]: 2>) -> (%r: f32[4,8]) {\n"
                            "  %m = MatMul(%x, %w) : f32[4,8]\n"
                            "  %a = Add(%m, %one) : f32[4,8]\n"
                            "  %r = Mul(%a, %two) : f32[4,8]\n  return %r\n}\n",
                            "pcc_epilogue_linear2.pcc"),
            "");
}

}  // namespace
}  // namespace pcc
