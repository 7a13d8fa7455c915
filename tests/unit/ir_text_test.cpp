// Printer and parser: exact round trip of every attribute kind and annotation,
// elided constants, and errors (never a crash) on malformed text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "ir_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

/// Prints, parses and prints again. \returns the parsed graph.
std::unique_ptr<Graph> roundTrip(const Graph& g) {
  std::string text = printGraph(g);
  auto parsed = parseGraph(text, "rt.ir");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << text;
  if (!parsed.ok()) return nullptr;
  EXPECT_EQ(printGraph(**parsed), text);
  return std::move(*parsed);
}

TEST(IrText, PrintsTheDocumentedForm) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {8, 512}});
  Value* w = g.addConstant("w", Tensor::zeros(DType::kF32, {512, 1024}));
  AttrMap attrs;
  attrs.set("transB", int64_t{0});
  Node* gemm = addInferred(g, OpKind::Gemm, {x, w}, attrs, "", {"0"});
  Node* relu = addInferred(g, OpKind::Relu, {gemm->output()}, {}, "", {"1"});
  g.addOutput(relu->output());
  EXPECT_EQ(printGraph(g),
            "graph @main(%x: f32[8,512], %w: f32[512,1024] const) -> (%1: f32[8,1024]) {\n"
            "  %0 = Gemm(%x, %w) {transB = 0} : f32[8,1024]\n"
            "  %1 = Relu(%0) : f32[8,1024]\n"
            "  return %1\n"
            "}\n");
}

TEST(IrText, EveryAttributeKindRoundTripsExactly) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  AttrMap attrs;
  attrs.set("i", int64_t{-9223372036854775807LL - 1});
  attrs.set("f", 0.1f);
  attrs.set("f_int_valued", 3.0f);
  attrs.set("f_tiny", 1.17549435e-38f);
  attrs.set("f_big", -3.40282347e+38f);
  attrs.set("f_inf", std::numeric_limits<float>::infinity());
  attrs.set("s", std::string("quote\" backslash\\ newline\n tab\t bell\x07 end"));
  attrs.set("s_empty", std::string());
  attrs.set("ints", std::vector<int64_t>{0, -1, 9007199254740993LL});
  attrs.set("ints_empty", std::vector<int64_t>{});
  attrs.set("floats", std::vector<float>{1.0f, -0.333333343f, 1e-30f});
  attrs.set("floats_empty", std::vector<float>{});
  attrs.set("strings", std::vector<std::string>{"a", "", "with \"quotes\""});
  attrs.set("strings_empty", std::vector<std::string>{});
  attrs.set("t_f32", f32({2, 2}, {0.1f, -2.5f, 1e20f, 0.0f}));
  attrs.set("t_i64", i64({3}, {-5, 0, 1LL << 40}));
  attrs.set("t_scalar", Tensor::scalarF32(7.25f));
  attrs.set("t_empty", Tensor::zeros(DType::kI32, {0}));
  Tensor h = Tensor::zeros(DType::kF16, {2});
  h.mutableData<uint16_t>()[0] = floatToHalf(0.333f);
  h.mutableData<uint16_t>()[1] = floatToHalf(-65504.0f);
  attrs.set("t_f16", h);
  Tensor b = Tensor::zeros(DType::kBool, {3});
  b.mutableData<uint8_t>()[1] = 1;
  attrs.set("t_bool", b);
  attrs.set("quoted name", int64_t{1});
  Node* n = addInferred(g, OpKind::Identity, {x}, attrs);
  g.addOutput(n->output());

  std::string text = printGraph(g);
  EXPECT_EQ(text.find("\n tab"), std::string::npos) << "strings must print on one line";
  auto parsed = roundTrip(g);
  ASSERT_NE(parsed, nullptr);
  const AttrMap& back = parsed->nodes()[0]->attrs();
  for (const auto& [name, a] : attrs.all()) {
    ASSERT_TRUE(back.has(name)) << name;
    const Attribute& got = back.all().at(name);
    EXPECT_EQ(got.index(), a.index()) << name;
    EXPECT_EQ(attributeToString(got), attributeToString(a)) << name;
  }
  EXPECT_TRUE(back == attrs);
}

TEST(IrText, TensorsOfEveryDTypeRoundTrip) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  AttrMap attrs;
  for (DType t : kAllDTypes) {
    Tensor v = Tensor::zeros(t, {4});
    for (int64_t i = 0; i < 4; ++i) v.setDouble(i, static_cast<double>(i) - 1.5);
    attrs.set(std::string("t_") + std::string(dtypeName(t)), v);
  }
  Node* n = addInferred(g, OpKind::Identity, {x}, attrs);
  g.addOutput(n->output());
  auto parsed = roundTrip(g);
  ASSERT_NE(parsed, nullptr);
  const AttrMap& back = parsed->nodes()[0]->attrs();
  for (const auto& [name, a] : attrs.all()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(back.has(name));
    const Tensor& want = std::get<Tensor>(a);
    const Tensor& got = std::get<Tensor>(back.all().at(name));
    ASSERT_EQ(got.type(), want.type());
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0) << got.str() << " vs " << want.str();
  }
}

TEST(IrText, NanAttributeReadsBackAsNan) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  AttrMap attrs;
  attrs.set("f", std::numeric_limits<float>::quiet_NaN());
  attrs.set("fs", std::vector<float>{std::numeric_limits<float>::quiet_NaN(), 1.0f});
  Node* n = addInferred(g, OpKind::Identity, {x}, attrs);
  g.addOutput(n->output());
  auto parsed = roundTrip(g);
  ASSERT_NE(parsed, nullptr);
  EXPECT_TRUE(std::isnan(parsed->nodes()[0]->attrs().getFloat("f", 0)));
  EXPECT_TRUE(std::isnan(parsed->nodes()[0]->attrs().getFloats("fs")[0]));
}

TEST(IrText, AnnotationsNamesAndStagesRoundTrip) {
  Graph g;
  g.setName("blk/0");
  Value* x = g.addInput("/in x", {DType::kF32, {4, 6}});
  x->setSharding(Sharding{{MeshAxis::kDP, MeshAxis::kNone}, MeshAxis::kNone});
  Value* c = g.addConstant("c.0", f32({6}, {1, 2, 3, 4, 5, 6}));
  c->setSharding(Sharding{{MeshAxis::kTP}, MeshAxis::kNone});
  Node* add = addInferred(g, OpKind::Add, {x, c}, {}, "/blk/Add \"q\"", {"/blk/Add_output_0"});
  add->setStage(3);
  add->output()->setSharding(Sharding{{MeshAxis::kNone, MeshAxis::kNone}, MeshAxis::kTP});
  Node* relu = addInferred(g, OpKind::Relu, {add->output()}, {}, "", {"r"});
  g.addOutput(relu->output());
  g.addOutput(x);

  std::string text = printGraph(g);
  EXPECT_NE(text.find("graph @\"blk/0\"("), std::string::npos) << text;
  EXPECT_NE(text.find("%\"/in x\": f32[4,6] #shard<[dp,-]>"), std::string::npos) << text;
  EXPECT_NE(text.find("%c.0: f32[6] #shard<[tp]> const dense<f32[6]: 1, 2, 3, 4, 5, 6>"), std::string::npos) << text;
  EXPECT_NE(text.find("%\"/blk/Add_output_0\" = Add(%\"/in x\", %c.0) : f32[4,6] #shard<[-,-] partial(tp)> "
                      "loc(\"/blk/Add \\\"q\\\"\") @stage(3)\n"),
            std::string::npos)
      << text;

  auto parsed = roundTrip(g);
  ASSERT_NE(parsed, nullptr);
  EXPECT_TRUE(verifyGraph(*parsed).ok());
  EXPECT_EQ(parsed->name(), "blk/0");
  Node* padd = parsed->nodes()[0];
  EXPECT_EQ(padd->name(), "/blk/Add \"q\"");
  EXPECT_EQ(padd->stage(), 3);
  EXPECT_EQ(padd->output()->sharding(), add->output()->sharding());
  EXPECT_EQ(parsed->inputs()[0]->sharding(), x->sharding());
  EXPECT_EQ(parsed->findValue("c.0")->sharding(), c->sharding());
  EXPECT_EQ(parsed->nodes()[1]->stage(), 0);
  EXPECT_FALSE(parsed->nodes()[1]->output()->sharding().has_value());
  ASSERT_EQ(parsed->outputs().size(), 2u);
  EXPECT_EQ(parsed->outputs()[1], parsed->inputs()[0]);
}

TEST(IrText, ArgumentsKeepDeclarationOrderAndOptionalInputsPrintAsUnderscore) {
  Graph g;
  Value* scale = g.addConstant("scale", f32({3}, {1, 1, 1}));
  Value* x = g.addInput("x", {DType::kF32, {2, 3}});
  Value* y = g.addInput("y", {DType::kF32, {2, 3}});
  Node* ln = addInferred(g, OpKind::LayerNormalization, {x, scale, nullptr});
  Node* add = addInferred(g, OpKind::Add, {ln->output(), y});
  g.addOutput(add->output());
  std::string text = printGraph(g);
  EXPECT_NE(text.find("graph @main(%scale: f32[3] const dense<f32[3]: 1, 1, 1>, %x: f32[2,3], %y: f32[2,3])"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("LayerNormalization(%x, %scale, _)"), std::string::npos) << text;
  auto parsed = roundTrip(g);
  ASSERT_NE(parsed, nullptr);
  // Graph input order is the interface: x then y.
  ASSERT_EQ(parsed->inputs().size(), 2u);
  EXPECT_EQ(parsed->inputs()[0]->name(), "x");
  EXPECT_EQ(parsed->inputs()[1]->name(), "y");
  EXPECT_EQ(parsed->nodes()[0]->inputs().size(), 3u);
  EXPECT_EQ(parsed->nodes()[0]->input(2), nullptr);
}

TEST(IrText, SmallConstantsKeepDataLargeOnesAreSynthesizedDeterministically) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {17}});
  Value* small = g.addConstant("small", Tensor::fromVector<int32_t>(DType::kI32, {16}, std::vector<int32_t>(16, 7)));
  Value* big = g.addConstant("big", f32({17}, std::vector<float>(17, 5.0f)));
  Node* add = addInferred(g, OpKind::Add, {x, big});
  g.addOutput(add->output());
  g.addOutput(small);
  std::string text = printGraph(g);
  EXPECT_NE(text.find("%big: f32[17] const)"), std::string::npos) << text;
  EXPECT_NE(text.find("%small: i32[16] const dense<i32[16]: 7, 7"), std::string::npos) << text;

  auto p1 = roundTrip(g);
  auto p2 = parseGraph(text);
  ASSERT_NE(p1, nullptr);
  ASSERT_TRUE(p2.ok());
  const Tensor& b1 = p1->findValue("big")->constantData();
  const Tensor& b2 = (*p2)->findValue("big")->constantData();
  EXPECT_EQ(b1.type(), (TensorType{DType::kF32, {17}}));
  EXPECT_EQ(floatsOf(b1), floatsOf(b2));  // deterministic
  bool varied = false;
  for (int64_t i = 0; i < b1.numel(); ++i) {
    EXPECT_GE(b1.getDouble(i), -1.0);
    EXPECT_LE(b1.getDouble(i), 1.0);
    varied |= b1.getDouble(i) != b1.getDouble(0);
  }
  EXPECT_TRUE(varied);
  EXPECT_EQ(p1->findValue("small")->constantData().toInts(), std::vector<int64_t>(16, 7));

  // Everything prints with maxConstElements < 0.
  PrintOptions all;
  all.maxConstElements = -1;
  EXPECT_NE(printGraph(g, all).find("%big: f32[17] const dense<f32[17]: 5, 5"), std::string::npos);
}

TEST(IrText, PseudoRandomTensorRanges) {
  Tensor i = pseudoRandomTensor({DType::kI64, {100}}, 1);
  Tensor b = pseudoRandomTensor({DType::kBool, {100}}, 1);
  Tensor h = pseudoRandomTensor({DType::kBF16, {100}}, 1);
  std::set<int64_t> ints, bools;
  for (int64_t k = 0; k < 100; ++k) {
    ints.insert(i.getInt(k));
    bools.insert(b.getInt(k));
    EXPECT_LE(std::fabs(h.getDouble(k)), 1.0);
  }
  EXPECT_EQ(ints, (std::set<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(bools, (std::set<int64_t>{0, 1}));
  EXPECT_NE(floatsOf(pseudoRandomTensor({DType::kF32, {4}}, 1)), floatsOf(pseudoRandomTensor({DType::kF32, {4}}, 2)));
  EXPECT_NE(seedFromName("a"), seedFromName("b"));
}

TEST(IrText, CommentsAndWhitespaceAreIgnored) {
  auto g = parseOrFail(
      "// leading comment\n"
      "graph   @g ( %x :f32[ 2 , 3 ] )->( %y:f32[2,3] ){ // trailing\n"
      "%y=Relu( %x )\n"
      "   :f32[2,3]   loc( \"n\" )   @stage( 1 )\n"
      "return %y }\n"
      "// end\n");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(printGraph(*g),
            "graph @g(%x: f32[2,3]) -> (%y: f32[2,3]) {\n"
            "  %y = Relu(%x) : f32[2,3] loc(\"n\") @stage(1)\n"
            "  return %y\n"
            "}\n");
}

struct ErrorCase {
  const char* text;
  const char* message;  // expected error, after "bad.ir:"
};

TEST(IrText, ErrorsNameFileLineAndColumn) {
  const ErrorCase cases[] = {
      {"", "1:1: expected 'graph', found end of input"},
      {"graph main() -> () { return }", "1:7: expected '@' before the graph name, found 'main'"},
      {"graph @m(%x: f32[2]) -> () {\n  return %z\n}", "2:10: expected a defined value, found use of undefined value %z"},
      {"graph @m(%x: f32[2], %x: f32[2]) -> () { return }", "1:22: expected a new value name, found a redefinition of %x"},
      {"graph @m(%x: f32[2) -> () { return }", "1:19: expected ']' to close the shape, found ')'"},
      {"graph @m(%x: f32[2]) -> () {\n  %a, %b = Relu(%x) : f32[2]\n  return\n}",
       "2:12: expected 2 result types for 2 results, found 1"},
      {"graph @m(%x: f32[2]) -> () {\n  %a = Relu(%x) {k = 99999999999999999999} : f32[2]\n  return\n}",
       "2:22: expected an attribute value in the int64 range, found '99999999999999999999'"},
      {"graph @m(%x: f32[2]) -> () {\n  %a = Relu(%x) {k = \"open} : f32[2]\n  return\n}",
       "2:22: expected '\"' to end the string"},
      {"graph @m(%c: i8[1] const dense<i8[1]: 300>) -> () { return }",
       "1:39: expected an element in the range of i8, found 300"},
      {"graph @m(%c: f32[2] const dense<f32[3]: 1, 2, 3>) -> () { return }",
       "1:27: expected dense data of type f32[2] for %c, found f32[3]"},
      {"graph @m(%c: f32[-1] const) -> () { return }", "1:14: expected a static shape for constant %c, found f32[-1]"},
      {"graph @m(%x: f32[2]) -> () {\n  %a = Relu(%x) : f32[2] @stage(-1)\n  return\n}",
       "2:33: expected a non-negative stage number, found -1"},
      {"graph @m(%x: f32[2]) -> (%x: f32[2]) { return %x } extra", "1:52: expected end of input after the graph, found 'extra'"},
      {"graph @m(%x: f32[2]) -> (%x: f32[2], %x: f32[2]) { return %x }",
       "1:59: expected 2 returned values as the signature says, found 1"},
  };
  for (const ErrorCase& c : cases) {
    auto g = parseGraph(c.text, "bad.ir");
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidInput);
    EXPECT_EQ(g.status().message(), std::string("bad.ir:") + c.message) << c.text;
  }
}

TEST(IrText, FirstLineOffsetsErrorLines) {
  auto g = parseGraph("\ngraph @m() -> () {\n  return %q\n}", "f.ir", 10);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "f.ir:12:10: expected a defined value, found use of undefined value %q");
}

/// Truncations and byte mutations of a valid text: each parses or fails with
/// a one-line located error; none crashes, and whatever parses prints again.
TEST(IrText, FuzzedTextNeverCrashes) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2, 6}});
  Value* c = g.addConstant("c", f32({3}, {1, 2, 3}));
  AttrMap attrs;
  attrs.set("axis", int64_t{1});
  attrs.set("num_outputs", int64_t{2});
  attrs.set("names", std::vector<std::string>{"p", "q"});
  attrs.set("fs", std::vector<float>{0.5f});
  Node* split = addInferred(g, OpKind::Split, {x}, attrs, "split \"s\"");
  split->output(0)->setSharding(Sharding{{MeshAxis::kDP, MeshAxis::kNone}, MeshAxis::kTP});
  Node* add = addInferred(g, OpKind::Add, {split->output(1), c}, {}, "", {"/odd name"});
  add->setStage(2);
  g.setOutputs({add->output(), split->output(0)});
  const std::string text = printGraph(g);

  auto check = [](const std::string& t) {
    auto r = parseGraph(t, "fuzz.ir");
    if (r.ok()) {
      std::string printed = printGraph(**r);
      auto again = parseGraph(printed, "fuzz2.ir");
      ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << printed;
      EXPECT_EQ(printGraph(**again), printed);
      verifyGraph(**r).ignore();  // may fail; must not crash
    } else {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
      EXPECT_EQ(r.status().message().rfind("fuzz.ir:", 0), 0u) << r.status().message();
      EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
    }
  };
  for (size_t n = 0; n < text.size(); ++n) check(text.substr(0, n));
  const char replacements[] = {'%', '"', '(', ')', '[', ']', '{', '}', '<', '>', ',', ':', '=', '-', '9', 'x', ' ',
                               '\n', '#', '@', '_', '\\', '.', 'e', '/', '\0'};
  uint64_t state = 12345;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string t = text;
    int edits = 1 + iter % 3;
    for (int e = 0; e < edits; ++e) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      size_t pos = (state >> 33) % t.size();
      char r = replacements[(state >> 17) % sizeof replacements];
      switch ((state >> 9) % 3) {
        case 0: t[pos] = r; break;
        case 1: t.insert(t.begin() + static_cast<std::ptrdiff_t>(pos), r); break;
        default: t.erase(pos, 1); break;
      }
    }
    check(t);
  }
}

}  // namespace
}  // namespace pcc
