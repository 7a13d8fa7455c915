// The pattern-rewrite passes (canonicalize, unit-transposes, fold-batchnorm, recognize) and
// their driver: numbers before and after on every lit case, statistics,
// convergence, and the committed models.
#include <fstream>
#include <sstream>

#include "compiler/onnx/importer.h"
#include "passes/rewrite/pattern.h"
#include "passes_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

/// The cases of tests/lit/passes/NAME.ir, split at '// -----' lines.
std::vector<std::string> litCases(const std::string& name) {
  std::ifstream f(std::string(PCC_SOURCE_DIR) + "/tests/lit/passes/" + name + ".ir");
  EXPECT_TRUE(f.good()) << name;
  std::vector<std::string> cases{""};
  std::string line;
  while (std::getline(f, line)) {
    if (line == "// -----") {
      cases.emplace_back();
      continue;
    }
    cases.back() += line + "\n";
  }
  return cases;
}

/// Every lit case of pass `name`: the pass changes the graph unless the case
/// says it must leave it alone, and the outputs agree within rtol 1e-5
/// (float32) on random inputs of the one seeded generator.
void checkLitCasesNumerically(const std::string& name) {
  std::vector<std::string> cases = litCases(name);
  EXPECT_GE(cases.size(), 3u);
  for (const std::string& text : cases) {
    auto g = parseOrFail(text);
    ASSERT_NE(g, nullptr) << text;
    SCOPED_TRACE(name + " @" + g->name());
    auto before = g->clone();
    bool changed = runPass(*g, name);
    EXPECT_EQ(changed, text.find("Must leave alone") == std::string::npos);
    expectNumericallyEquivalent(*before, *g, 1e-5, 1e-5);
    EXPECT_FALSE(runPass(*g, name)) << "a second run still rewrote:\n" << printGraph(*g);
  }
}

TEST(PassesRewrite, CanonicalizeKeepsNumbers) { checkLitCasesNumerically("canonicalize"); }
TEST(PassesRewrite, FoldBatchNormKeepsNumbers) { checkLitCasesNumerically("fold-batchnorm"); }
TEST(PassesRewrite, RecognizeKeepsNumbers) { checkLitCasesNumerically("recognize"); }
TEST(PassesRewrite, UnitTransposesKeepNumbers) { checkLitCasesNumerically("unit-transposes"); }

/// Runs `name` on the lit case of `pass` whose graph is `graphName`. \returns the statistics.
std::map<std::string, int64_t> statsOf(const std::string& pass, const std::string& graphName) {
  for (const std::string& text : litCases(pass)) {
    if (text.find("graph @" + graphName + "(") == std::string::npos) continue;
    auto g = parseOrFail(text);
    if (!g) return {};
    PassManager pm;
    pm.add(createPass(pass));
    PassContext ctx;
    auto r = pm.run(*g, ctx);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return ctx.stats;
  }
  ADD_FAILURE() << "no case @" << graphName;
  return {};
}

TEST(PassesRewrite, CountsPatternsInStats) {
  using Stats = std::map<std::string, int64_t>;
  EXPECT_EQ(statsOf("recognize", "gelu_erf"), (Stats{{"Gelu", 2}}));
  EXPECT_EQ(statsOf("recognize", "gelu_tanh"), (Stats{{"Gelu", 2}}));
  EXPECT_EQ(statsOf("recognize", "layernorm"), (Stats{{"LayerNormalization", 1}}));
  EXPECT_EQ(statsOf("recognize", "rmsnorm"), (Stats{{"RMSNormalization", 2}}));
  EXPECT_EQ(statsOf("recognize", "swish"), (Stats{{"Swish", 2}}));
  EXPECT_EQ(statsOf("recognize", "hardswish"), (Stats{{"HardSwish", 3}}));
  EXPECT_EQ(statsOf("recognize", "hardswish_alone"), Stats{});
  EXPECT_EQ(statsOf("recognize", "attention_4d"), (Stats{{"Attention", 1}}));
  EXPECT_EQ(statsOf("recognize", "attention_3d"), (Stats{{"Attention", 1}}));
  EXPECT_EQ(statsOf("recognize", "attention_bool_mask_gqa"), (Stats{{"Attention", 1}}));
  EXPECT_EQ(statsOf("recognize", "attention_causal_constant"), (Stats{{"Attention", 1}}));
  EXPECT_EQ(statsOf("recognize", "attention_alone"), Stats{});
  EXPECT_EQ(statsOf("recognize", "in_bodies"), (Stats{{"Gelu", 1}, {"Swish", 1}}));
  EXPECT_EQ(statsOf("fold-batchnorm", "conv_bn"), (Stats{{"batchnorm_folded", 1}}));
  EXPECT_EQ(statsOf("fold-batchnorm", "bn_alone"), Stats{});
  // canonicalize's patterns are clean-ups, not counted.
  EXPECT_EQ(statsOf("canonicalize", "neutral"), Stats{});
}

/// A query row masked everywhere: the NaN guard turns the decomposed form's
/// NaN row into zeros, and the recognized Attention gives the same zeros
/// (random inputs rarely mask a whole row, so this one is written out).
TEST(PassesRewrite, AttentionFullyMaskedRowMatchesTheNaNGuard) {
  auto g = parseOrFail(R"(
graph @masked(%q: f32[1,1,2,2], %k: f32[1,1,2,2], %v: f32[1,1,2,2], %keep: bool[2,2],
              %ninf: f32[] const dense<f32[]: -inf>, %zero: f32[] const dense<f32[]: 0>) -> (%y: f32[1,1,2,2]) {
  %kt = Transpose(%k) {perm = [0, 1, 3, 2]} : f32[1,1,2,2]
  %s = MatMul(%q, %kt) : f32[1,1,2,2]
  %w = Where(%keep, %s, %ninf) : f32[1,1,2,2]
  %p = Softmax(%w) {axis = -1} : f32[1,1,2,2]
  %nan = IsNaN(%p) : bool[1,1,2,2]
  %g = Where(%nan, %zero, %p) : f32[1,1,2,2]
  %y = MatMul(%g, %v) : f32[1,1,2,2]
  return %y
})");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  ASSERT_TRUE(runPass(*g, "recognize"));
  ASSERT_EQ(opNames(*g), std::vector<std::string>{"Attention"});
  Tensor x = Tensor::fromVector<float>(DType::kF32, {1, 1, 2, 2}, {0.5f, -1.0f, 2.0f, 0.25f});
  Tensor keep = Tensor::fromVector<uint8_t>(DType::kBool, {2, 2}, {1, 0, 0, 0});  // row 1 masked everywhere
  std::vector<Tensor> inputs = {x, x, x, keep};
  auto want = evaluateGraph(*before, inputs);
  auto got = evaluateGraph(*g, inputs);
  ASSERT_TRUE(want.ok() && got.ok());
  const float* w = (*want)[0].data<float>();
  const float* r = (*got)[0].data<float>();
  EXPECT_EQ(std::vector<float>(w, w + 4), (std::vector<float>{0.5f, -1.0f, 0.0f, 0.0f}));
  EXPECT_EQ(std::vector<float>(r, r + 4), std::vector<float>(w, w + 4));
}

/// Rewrites `from` into `to` unconditionally: two of these undo each other.
class Flip : public RewritePattern {
 public:
  Flip(OpKind from, OpKind to) : from_(from), to_(to) {}
  OpKind rootOp() const override { return from_; }
  std::string_view name() const override { return "flip"; }
  StatusOr<bool> matchAndRewrite(Node& n, PatternRewriter& rw) const override {
    ASSIGN_OR_RETURN(Node * m, rw.create(to_, {n.input(0)}));
    rw.replace(n.output(), m->output());
    return true;
  }

 private:
  OpKind from_, to_;
};

TEST(PassesRewrite, PatternsThatUndoEachOtherAreAnErrorNotAHang) {
  auto g = parseOrFail("graph @g(%x: f32[2]) -> (%y: f32[2]) {\n  %a = Relu(%x) : f32[2]\n  %y = Neg(%a) : f32[2]\n  return %y\n}\n");
  ASSERT_NE(g, nullptr);
  PatternList patterns;
  patterns.push_back(std::make_unique<Flip>(OpKind::Relu, OpKind::Tanh));
  patterns.push_back(std::make_unique<Flip>(OpKind::Tanh, OpKind::Relu));
  PassContext ctx;
  auto r = applyPatterns(*g, patterns, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("did not converge"), std::string::npos) << r.status().message();
}

TEST(PassesRewrite, ErasesTheReplacedChainAndKeepsSharedProducers) {
  // %s feeds the Swish and a graph output: the Swish goes, %s stays.
  auto g = parseOrFail(
      "graph @g(%x: f32[4]) -> (%y: f32[4], %t: f32[4]) {\n"
      "  %s = Sigmoid(%x) : f32[4]\n"
      "  %y = Mul(%x, %s) : f32[4]\n"
      "  %u = Sigmoid(%y) : f32[4]\n"
      "  %t = Mul(%u, %y) : f32[4]\n"
      "  return %y, %t\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  EXPECT_TRUE(runPass(*g, "recognize"));
  EXPECT_EQ(opNames(*g), (std::vector<std::string>{"Swish", "Swish"}));
  EXPECT_EQ(g->outputs()[0]->name(), "y");  // the outputs keep their names
  EXPECT_EQ(g->outputs()[1]->name(), "t");
  expectNumericallyEquivalent(*before, *g, 1e-5, 1e-5);
}

/// Imports `model` (batch 2), runs the optimization pipeline's rewrite passes,
/// checks numbers against the imported graph. \returns the op names after.
std::vector<std::string> optimizeAndCheck(const std::string& model, std::map<std::string, int64_t>* stats = nullptr) {
  ImportOptions io;
  io.batch = 2;
  auto g = importOnnxModel(std::string(PCC_SOURCE_DIR) + "/" + model, io);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return {};
  auto before = (*g)->clone();
  PassManager pm;
  for (const char* p : {"fold-constants", "canonicalize", "fold-batchnorm", "recognize", "cse", "dce"}) pm.add(createPass(p));
  PassContext ctx;
  auto r = pm.run(**g, ctx);
  EXPECT_TRUE(r.ok()) << r.status().message();
  expectNumericallyEquivalent(*before, **g, 1e-5, 1e-5);
  if (stats) *stats = ctx.stats;
  return opNames(**g);
}

TEST(PassesRewrite, FoldsTheBatchNormOfCnnSmall) {
  std::map<std::string, int64_t> stats;
  std::vector<std::string> ops = optimizeAndCheck("models/cnn_small.onnx", &stats);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "BatchNormalization"), 0);
  EXPECT_EQ(stats["batchnorm_folded"], 1);  // one Conv + BatchNormalization in the model (models/README.md)
}

// A torchvision MobileNetV2 exported with its BatchNormalization nodes kept
// (models/make_bn_export.py): every one follows a Conv read by nothing else,
// so every one is folded, and the numbers hold.
TEST(PassesRewrite, FoldsEveryBatchNormOfATorchvisionExport) {
  const std::string model = "models/mobilenet_v2_bn.onnx";
  ImportOptions io;
  io.batch = 2;
  auto g = importOnnxModel(std::string(PCC_SOURCE_DIR) + "/" + model, io);
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::vector<std::string> imported = opNames(**g);
  int64_t bn = std::count(imported.begin(), imported.end(), "BatchNormalization");
  EXPECT_GT(bn, 0);
  std::map<std::string, int64_t> stats;
  std::vector<std::string> ops = optimizeAndCheck(model, &stats);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "BatchNormalization"), 0);
  EXPECT_EQ(stats["batchnorm_folded"], bn);
}

TEST(PassesRewrite, ExportsKeepTheirNumbers) {
  for (const char* m : {"bert", "gpt2", "vit", "llama", "t5_encoder", "mobilenet_v2", "resnet"})
    for (const char* e : {"dynamo", "ts"}) {
      SCOPED_TRACE(std::string(m) + "." + e);
      optimizeAndCheck(std::string("models/exported/") + m + "." + e + ".onnx");
    }
}

}  // namespace
}  // namespace pcc
