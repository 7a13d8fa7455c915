// Bad models: every one is an invalid-input or unsupported Status with a
// one-line message naming the file (and the node, op, opset, shapes) — never a crash.
#include <functional>

#include "onnx_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

ModelBuilder smallModel() {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).output("y", DType::kF32);
  b.init("w", iota({3, 2}));
  b.node("MatMul", {"x", "w"}, {"mm"}, "mm");
  b.node("Relu", {"mm"}, {"y"}, "relu");
  return b;
}

void expectOneLine(const Status& s) {
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
}

TEST(OnnxErrors, NotOnnxBytes) {
  std::string dir = tempDir("errors");
  for (const std::string& bytes : {std::string("hello, this is not a model\n"), std::string("\xff\xff\xff\xff\x0f", 5),
                                   std::string()}) {
    writeFile(dir + "/junk.onnx", bytes);
    auto g = importOnnxModel(dir + "/junk.onnx", {});
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidInput);
    EXPECT_EQ(g.status().exitCode(), 2);
    EXPECT_NE(g.status().message().find("junk.onnx: not a valid ONNX model ("), std::string::npos)
        << g.status().message();
    expectOneLine(g.status());
  }
  auto missing = importOnnxModel(dir + "/missing.onnx", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing.onnx"), std::string::npos);
}

TEST(OnnxErrors, TruncatedFileAtEveryPoint) {
  std::string dir = tempDir("truncated");
  std::string bytes = smallModel().bytes();
  ASSERT_TRUE(importOnnxModel(smallModel().model(), "", "full", {}).ok());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    writeFile(dir + "/cut.onnx", bytes.substr(0, cut));
    auto g = importOnnxModel(dir + "/cut.onnx", {});
    ASSERT_FALSE(g.ok()) << "cut at " << cut << " of " << bytes.size();
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidInput) << g.status().message();
    EXPECT_NE(g.status().message().find("cut.onnx: not a valid ONNX model"), std::string::npos)
        << g.status().message();
  }
}

TEST(OnnxErrors, StructuralProblems) {
  struct Case { std::function<void(onnx::ModelProto&)> breakIt; const char* expect; };
  const Case cases[] = {
      {[](onnx::ModelProto& m) { m.clear_graph(); }, "(no graph)"},
      {[](onnx::ModelProto& m) { m.clear_ir_version(); }, "(no ir_version)"},
      {[](onnx::ModelProto& m) { m.mutable_opset_import(0)->set_domain("com.example"); },
       "no opset_import for the default domain"},
      {[](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(1)->set_input(0, "ghost"); },
       "node 'relu' (Relu) reads 'ghost'"},
      {[](onnx::ModelProto& m) { m.mutable_graph()->mutable_node()->SwapElements(0, 1); }, "reads 'mm'"},
      {[](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(1)->set_output(0, "mm"); },
       "value 'mm' is defined twice"},
      {[](onnx::ModelProto& m) { m.mutable_graph()->mutable_output(0)->set_name("nowhere"); },
       "graph output 'nowhere' is never defined"},
      {[](onnx::ModelProto& m) { m.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(8); },
       "tensor 'w': raw_data holds 8 bytes, f32[3,2] needs 24"},
  };
  for (const Case& c : cases) {
    ModelBuilder b = smallModel();
    c.breakIt(b.model());
    auto g = importModel(b);
    ASSERT_FALSE(g.ok()) << c.expect;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(g.status().message().find(c.expect), std::string::npos) << g.status().message();
    EXPECT_EQ(g.status().message().rfind("model.onnx: ", 0), 0u) << g.status().message();
    expectOneLine(g.status());
  }
}

TEST(OnnxErrors, OpsetOutOfRange) {
  for (int64_t opset : {0, 25}) {
    ModelBuilder b = smallModel();
    b.model().mutable_opset_import(0)->set_version(opset);
    auto g = importModel(b);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(g.status().message().find(strCat("opset ", opset, " of the default domain is not supported")),
              std::string::npos);
  }
}

TEST(OnnxErrors, UnsupportedOpsListedTogether) {
  ModelBuilder b(15);
  b.input("x", DType::kF32, {int64_t(4)}).output("y");
  b.node("Relu", {"x"}, {"a"}, "ok_node");
  b.node("Foo", {"a"}, {"b"}, "n1");
  b.node("Bar", {"b"}, {"c"}, "n2");
  b.node("Bar", {"c"}, {"d"});  // unnamed: Bar_3
  auto& ms = b.node("FusedMatMul", {"d", "d"}, {"e"}, "n4");
  ms.set_domain("com.microsoft");
  b.node("Relu", {"e"}, {"y"}, "tail");
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(g.status().message(),
            "model.onnx: unsupported operators (opset 15): Foo (node 'n1'), Bar (nodes 'n2', 'Bar_3'), "
            "com.microsoft.FusedMatMul (node 'n4')");

  // Many nodes of one op: the list is cut short.
  ModelBuilder many(15);
  many.input("x", DType::kF32, {int64_t(4)}).output("x5");
  for (int i = 0; i < 5; ++i) many.node("Baz", {strCat("x", i ? std::to_string(i) : "")}, {strCat("x", i + 1)});
  g = importModel(many);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("Baz (nodes 'Baz_0', 'Baz_1', 'Baz_2' and 2 more)"), std::string::npos)
      << g.status().message();
}

TEST(OnnxErrors, NodeErrorNamesNodeOpOpsetAndShapes) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).output("y");
  b.init("w", iota({4, 5}));
  b.node("MatMul", {"x", "w"}, {"y"}, "proj");
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  const std::string m = g.status().message();
  EXPECT_EQ(m.rfind("model.onnx: node 'proj' (MatMul, opset 13): ", 0), 0u) << m;
  EXPECT_NE(m.find("[input shapes f32[2,3], f32[4,5]]"), std::string::npos) << m;
  expectOneLine(g.status());

  // A Reshape whose shape is computed at run time cannot have a static shape.
  ModelBuilder r(13);
  r.input("x", DType::kF32, {int64_t(2), int64_t(3)}).input("s", DType::kI64, {int64_t(2)}).output("y");
  r.node("Reshape", {"x", "s"}, {"y"}, "dyn");
  g = importModel(r);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("node 'dyn' (Reshape, opset 13)"), std::string::npos);
  EXPECT_NE(g.status().message().find("[input shapes f32[2,3], i64[2]]"), std::string::npos)
      << g.status().message();
}

TEST(OnnxErrors, OutputDtypeMismatchAndBadInputs) {
  ModelBuilder b = smallModel();
  b.model().mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::INT64);
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("graph output 'y'"), std::string::npos);

  ModelBuilder s(13);
  s.input("x", DType::kUndefined, {int64_t(2)}).output("y");
  s.model().mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::STRING);
  s.node("Identity", {"x"}, {"y"}, "id");
  g = importModel(s);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("input 'x' has unsupported element type 8"), std::string::npos);
}

TEST(OnnxErrors, NewestOpsetAndIrVersionAccepted) {
  for (int64_t opset : {22, 23, 24}) {
    ModelBuilder b = smallModel();
    b.model().mutable_opset_import(0)->set_version(opset);
    b.model().set_ir_version(12);
    auto g = importModel(b);
    EXPECT_TRUE(g.ok()) << "opset " << opset << ": " << g.status().message();
  }
  ModelBuilder b = smallModel();
  b.model().set_ir_version(13);
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(g.status().message().find("IR version 13 is not supported"), std::string::npos) << g.status().message();
}

TEST(OnnxErrors, ModelOfAnotherDomainOnlyIsUnsupportedNotInvalid) {
  ModelBuilder b(13);
  b.model().mutable_opset_import(0)->set_domain("ai.onnx.ml");
  b.model().mutable_opset_import(0)->set_version(3);
  b.input("x", DType::kF32, {int64_t(4)}).output("y");
  b.node("Binarizer", {"x"}, {"y"}, "bin").set_domain("ai.onnx.ml");
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(g.status().message(),
            "model.onnx: unsupported operators (no default-domain opset): ai.onnx.ml.Binarizer (node 'bin')");
}

TEST(OnnxErrors, RunTimeIfWithTooFewBranchOutputsIsInvalid) {
  ModelBuilder b(16);
  b.input("c", DType::kBool, {}).input("x", DType::kF32, {int64_t(2)}).output("y");
  auto& n = b.node("If", {"c"}, {"y"}, "branch");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = newAttr(n, name, onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name(name);
  }
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidInput);
  const std::string m = g.status().message();
  EXPECT_NE(m.find("model.onnx: node 'branch' (If, opset 16): has 1 outputs but its branches give 0"), std::string::npos)
      << m;
  expectOneLine(g.status());

  // A graph attribute on any other op is an unsupported op.
  ModelBuilder other(16);
  other.input("x", DType::kF32, {int64_t(2)}).output("y");
  newAttr(other.node("Relu", {"x"}, {"y"}, "r"), "body", onnx::AttributeProto::GRAPH)->mutable_g()->set_name("b");
  g = importModel(other);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "model.onnx: unsupported operators (opset 16): Relu (node 'r')");
}

TEST(OnnxErrors, NodeLevelRefusalsSayUnsupported) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2)}).output("y");
  b.init("train", Tensor::fromVector<uint8_t>(DType::kBool, {}, {1}));
  b.node("Dropout", {"x", "", "train"}, {"y"}, "drop");
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(g.status().message().find("node 'drop' (Dropout, opset 13): unsupported: training_mode"),
            std::string::npos)
      << g.status().message();
}

}  // namespace
}  // namespace pcc
