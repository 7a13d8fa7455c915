// convert-precision (passes/precision.h) and its error measurement
// (compiler/precision_error.h): which nodes convert, the casts at the edges,
// the rules, the ranges, the retyped states, and the figures it reports.
#include "compiler/precision_error.h"
#include "passes/precision.h"
#include "passes_test_util.h"
#include "runtime/support/tensor_block.h"

#include <cmath>

namespace pcc {
namespace {
using namespace pcc::testing;

// x -> MatMul(w) -> Add(b) -> Softmax -> MatMul(w2) -> y
const char* kSmall =
    "graph @p(%x: f32[2,4], %w: f32[4,8] const, %b: f32[8] const, %w2: f32[8,3] const) -> (%y: f32[2,3]) {\n"
    "  %h = MatMul(%x, %w) : f32[2,8]\n"
    "  %a = Add(%h, %b) : f32[2,8]\n"
    "  %s = Softmax(%a) {axis = -1} : f32[2,8]\n"
    "  %r = Relu(%s) : f32[2,8]\n"
    "  %y = MatMul(%r, %w2) : f32[2,3]\n"
    "  return %y\n"
    "}\n";

PrecisionOptions to(DType t) {
  PrecisionOptions o;
  o.target = t;
  return o;
}

/// \returns the reason the node of op `op` is kept for (the parsed graphs' nodes have no names).
std::string reasonOf(const PrecisionSummary& s, const std::string& op) {
  for (const KeptNode& k : s.kept)
    if (k.op == op) return k.reason;
  return "";
}

const Node* producerOf(const Graph& g, const std::string& value) {
  const Value* v = g.findValue(value);
  return v ? v->producer() : nullptr;
}

TEST(PassesPrecision, ConvertsComputeKeepsTheRulesOpsAndTheOutputsType) {
  auto g = parseOrFail(kSmall);
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  auto s = convertPrecision(*g, to(DType::kBF16));
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(verifyGraph(*g).ok());
  // The first MatMul and the Add compute in bf16, with their weights stored so.
  EXPECT_EQ(g->findValue("h")->type().dtype, DType::kBF16);
  EXPECT_EQ(g->findValue("a")->type().dtype, DType::kBF16);
  EXPECT_EQ(g->findValue("w")->type().dtype, DType::kBF16);
  EXPECT_EQ(g->findValue("b")->type().dtype, DType::kBF16);
  // Softmax by rule; the last MatMul computes the output: float32, weight too.
  EXPECT_EQ(g->findValue("s")->type().dtype, DType::kF32);
  EXPECT_EQ(reasonOf(*s, "Softmax"), "rule: Softmax in float32");
  EXPECT_EQ(g->outputs()[0]->type().dtype, DType::kF32);
  EXPECT_EQ(g->findValue("w2")->type().dtype, DType::kF32);
  // The input keeps its type; a Cast feeds the MatMul.
  EXPECT_EQ(g->inputs()[0]->type().dtype, DType::kF32);
  EXPECT_EQ(producerOf(*g, "h")->input(0)->producer()->op(), OpKind::Cast);
  EXPECT_EQ(s->nodesConverted, 3);  // MatMul, Add, Relu (after a Cast of Softmax's result)
  EXPECT_LT(s->weightBytesAfter, s->weightBytesBefore);
  expectNumericallyEquivalent(*before, *g, 0x1p-5, 0x1p-5);
}

TEST(PassesPrecision, KeepFlagsAndNoRules) {
  auto g = parseOrFail(kSmall);
  ASSERT_NE(g, nullptr);
  PrecisionOptions o = to(DType::kF16);
  o.keepOps = {"Add"};
  auto s = convertPrecision(*g, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(g->findValue("a")->type().dtype, DType::kF32);
  EXPECT_EQ(reasonOf(*s, "Add"), "--keep-fp32 Add");

  auto h = parseOrFail(kSmall);
  PrecisionOptions none = to(DType::kF16);
  none.rules = false;
  auto t = convertPrecision(*h, none);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->kept.empty());
  EXPECT_EQ(h->findValue("s")->type().dtype, DType::kF16);
  EXPECT_EQ(h->outputs()[0]->type().dtype, DType::kF32);  // cast back at the edge
  EXPECT_EQ(h->outputs()[0]->name(), "y");
  EXPECT_EQ(h->outputs()[0]->producer()->op(), OpKind::Cast);

  auto k = parseOrFail(kSmall);
  PrecisionOptions bad = to(DType::kF16);
  bad.keepOps = {"NoSuchOp"};
  EXPECT_FALSE(convertPrecision(*k, bad).ok());
}

TEST(PassesPrecision, RangesKeepOverflowingAndUnderflowingValuesInFloat32) {
  auto g = parseOrFail(kSmall);
  ASSERT_NE(g, nullptr);
  std::map<std::string, double> ranges = {{"h", 1e5}, {"a", 1e5}, {"w", 1.0}, {"r", 1e-6}};
  PrecisionOptions o = to(DType::kF16);
  o.ranges = &ranges;
  auto s = convertPrecision(*g, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(g->findValue("h")->type().dtype, DType::kF32);  // writes 1e5 > 65504 / 4
  EXPECT_NE(reasonOf(*s, "MatMul").find("range: |h| reaches"), std::string::npos);
  EXPECT_EQ(g->findValue("r")->type().dtype, DType::kF32);  // all below 2^-14
  EXPECT_NE(reasonOf(*s, "Relu").find("stays below"), std::string::npos);
  EXPECT_TRUE(s->overflowingConstants.empty());
  // For bf16 (float32's exponent range) the same ranges change nothing.
  auto h = parseOrFail(kSmall);
  PrecisionOptions b = to(DType::kBF16);
  b.ranges = &ranges;
  ASSERT_TRUE(convertPrecision(*h, b).ok());
  EXPECT_EQ(h->findValue("h")->type().dtype, DType::kBF16);
}

TEST(PassesPrecision, AConstantBeyondTheTypeIsReportedAndKept) {
  auto g = parseOrFail(
      "graph @c(%x: f32[4], %big: f32[4] const dense<f32[4]: 1, 2, 3, 100000>) -> (%y: f32[4]) {\n"
      "  %m = Mul(%x, %big) : f32[4]\n"
      "  %y = Relu(%m) : f32[4]\n"
      "  return %y\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  std::map<std::string, double> ranges = {{"big", 1e5}, {"m", 10}};
  PrecisionOptions o = to(DType::kF16);
  o.ranges = &ranges;
  auto s = convertPrecision(*g, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->overflowingConstants, std::vector<std::string>{"big"});
  EXPECT_EQ(g->findValue("big")->type().dtype, DType::kF32);
  EXPECT_EQ(g->findValue("big")->constantData().getDouble(3), 100000.0);  // not clipped
}

TEST(PassesPrecision, RetypedStatesAreNotCastAtTheEdges) {
  Graph g;
  Value* cache = g.addInput("cache", {DType::kF32, {4, 2}});
  Value* fresh = g.addInput("new", {DType::kF32, {1, 2}});
  Value* w = g.addConstant("w", Tensor::fromVector<float>(DType::kF32, {2, 2}, {1, 2, 3, 4}));
  Node* p = addInferred(g, OpKind::MatMul, {fresh, w});
  AttrMap axis;
  axis.set("axis", int64_t{0});
  Node* out = addInferred(g, OpKind::Concat, {cache, p->output()}, axis);
  Node* y = addInferred(g, OpKind::Relu, {p->output()});
  ASSERT_TRUE(g.renameValue(out->output(), "present"));
  g.addOutput(out->output());
  g.addOutput(y->output());
  PrecisionOptions o = to(DType::kBF16);
  o.ioTypes = {{"cache", DType::kBF16}, {"present", DType::kBF16}};
  ASSERT_TRUE(convertPrecision(g, o).ok());
  ASSERT_TRUE(verifyGraph(g).ok());
  EXPECT_EQ(g.inputs()[0]->type().dtype, DType::kBF16);  // the state, retyped in place
  EXPECT_EQ(g.inputs()[1]->type().dtype, DType::kF32);   // a model input keeps its type
  EXPECT_EQ(g.outputs()[0]->type().dtype, DType::kBF16);
  EXPECT_EQ(g.outputs()[0]->producer()->op(), OpKind::Concat);  // no cast after it
  EXPECT_EQ(g.outputs()[1]->type().dtype, DType::kF32);
}

TEST(PassesPrecision, WeightsAreConvertedWhenReadNotWhenPlanned) {
  Graph g;
  Tensor big = Tensor::zeros(DType::kF32, {512, 1024});  // 2 MiB: past the eager limit
  for (int64_t i = 0; i < big.numel(); ++i) big.mutableData<float>()[i] = static_cast<float>(i % 97) / 7.0f;
  Value* x = g.addInput("x", {DType::kF32, {1, 512}});
  Value* w = g.addConstant("w", big);
  Node* m = addInferred(g, OpKind::MatMul, {x, w});
  Node* r = addInferred(g, OpKind::Relu, {m->output()});
  g.addOutput(r->output());
  auto s = convertPrecision(g, to(DType::kF16));
  ASSERT_TRUE(s.ok());
  const Value* cw = g.findValue("w");
  ASSERT_NE(cw, nullptr);
  ASSERT_NE(cw->constantBlock(), nullptr) << "a large weight is converted lazily";
  EXPECT_EQ(cw->constantBlock()->as, DType::kF16);
  EXPECT_EQ(cw->type().dtype, DType::kF16);
  EXPECT_EQ(cw->constantBlock()->nbytes(), big.nbytes() / 2);
  const Tensor& data = cw->constantData();
  ASSERT_EQ(data.dtype(), DType::kF16);
  for (int64_t i : {0, 1, 96, 97, 524287})
    EXPECT_EQ(data.getDouble(i), static_cast<double>(halfToFloat(floatToHalf(big.data<float>()[i])))) << i;
}

TEST(SupportFloatConvert, BulkConversionsMatchTheScalarOnes) {
  // Every float16 bit pattern both ways, NaNs aside (their payloads may differ).
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  std::vector<float> f(65536);
  convertFloats(h.data(), DType::kF16, f.data(), DType::kF32, h.size());
  std::vector<uint16_t> back(65536);
  convertFloats(f.data(), DType::kF32, back.data(), DType::kF16, f.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    const float want = halfToFloat(h[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f[i])) << i;
      continue;
    }
    EXPECT_EQ(f[i], want) << i;
    EXPECT_EQ(back[i], h[i]) << i;
  }
  // Floats between float16 values, halfway ties, overflow and subnormals.
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65520.0f, 1e9f,
                           -1e9f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 3e-6f, -5.96e-8f, 0.1f, 3.14159f};
  std::vector<uint16_t> hs(xs.size()), bs(xs.size());
  convertFloats(xs.data(), DType::kF32, hs.data(), DType::kF16, xs.size());
  convertFloats(xs.data(), DType::kF32, bs.data(), DType::kBF16, xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(hs[i], floatToHalf(xs[i])) << xs[i];
    EXPECT_EQ(bs[i], floatToBf16(xs[i])) << xs[i];
  }
}

TEST(PrecisionError, FiguresAsDefined) {
  // original: y = x; converted: y = x * 1.01 (a known error).
  auto a = parseOrFail(
      "graph @a(%x: f32[4,3]) -> (%logits: f32[4,3]) {\n"
      "  %logits = Identity(%x) : f32[4,3]\n"
      "  return %logits\n"
      "}\n");
  auto b = parseOrFail(
      "graph @b(%x: f32[4,3], %k: f32[] const dense<f32[]: 1.01>) -> (%logits: f32[4,3]) {\n"
      "  %logits = Mul(%x, %k) : f32[4,3]\n"
      "  return %logits\n"
      "}\n");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::vector<std::vector<Tensor>> sets = {randomInputs(*a, 5)};
  auto e = measureError(*a, *b, sets);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->size(), 1u);
  const Tensor& x = sets[0][0];
  double maxX = 0;
  for (int64_t i = 0; i < x.numel(); ++i) maxX = std::max(maxX, std::fabs(x.getDouble(i)));
  EXPECT_NEAR((*e)[0].maxAbs, 0.01 * maxX, 1e-6);
  EXPECT_NEAR((*e)[0].maxRel, 0.01, 1e-5);
  EXPECT_NEAR((*e)[0].cosine, 1.0, 1e-9);  // a scaled copy points the same way
  EXPECT_EQ((*e)[0].top1, 1.0);            // named logits: scored; scaling keeps every argmax
  EXPECT_TRUE((*e)[0].finite);
  EXPECT_EQ(upstreamOps(*b, "logits", DType::kF32), "Mul x1");
}

}  // namespace
}  // namespace pcc
