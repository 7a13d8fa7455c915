// Constant folding at import, symbolic-dim binding and external data.
#include <sys/mman.h>

#include <fstream>
#include <sstream>

#include "onnx_test_util.h"
#include "runtime/support/mapped_file.h"

namespace pcc {
namespace {
using namespace pcc::testing;

/// The PyTorch-export pattern: x.reshape(x.shape[0], -1) spelled as
/// Shape -> Gather -> Unsqueeze -> Concat -> Reshape, with a symbolic batch.
ModelBuilder flattenByShapeModel(int64_t opset) {
  ModelBuilder b(opset);
  b.input("x", DType::kF32, {std::string("batch"), int64_t(3), int64_t(4)}).output("y", DType::kF32);
  b.init("zero", Tensor::scalarI64(0)).initI64("minus_one", {-1});
  if (opset >= 13) b.initI64("axes0", {0});
  b.node("Shape", {"x"}, {"/Shape_output_0"}, "/Shape");
  setInt(b.node("Gather", {"/Shape_output_0", "zero"}, {"/Gather_output_0"}, "/Gather"), "axis", 0);
  if (opset >= 13) {
    b.node("Unsqueeze", {"/Gather_output_0", "axes0"}, {"/Unsqueeze_output_0"}, "/Unsqueeze");
  } else {
    setInts(b.node("Unsqueeze", {"/Gather_output_0"}, {"/Unsqueeze_output_0"}, "/Unsqueeze"), "axes", {0});
  }
  setInt(b.node("Concat", {"/Unsqueeze_output_0", "minus_one"}, {"/Concat_output_0"}, "/Concat"), "axis", 0);
  b.node("Reshape", {"x", "/Concat_output_0"}, {"y"}, "/Reshape");
  return b;
}

TEST(OnnxFold, ShapeChainFoldsWithBoundBatch) {
  for (int64_t opset : {11, 13, 17}) {
    SCOPED_TRACE(opset);
    ModelBuilder b = flattenByShapeModel(opset);
    ImportOptions opts;
    opts.batch = 5;
    PCC_IMPORT_OK(g, b, opts);
    EXPECT_EQ(g->inputs()[0]->type().str(), "f32[5,3,4]");
    ASSERT_EQ(g->numNodes(), 1u) << "only the Reshape should be left";
    Node* r = g->nodes()[0];
    EXPECT_EQ(r->op(), OpKind::Reshape);
    ASSERT_TRUE(r->input(1)->isConstant());
    EXPECT_EQ(r->input(1)->constantData().toInts(), (std::vector<int64_t>{5, -1}));
    EXPECT_EQ(g->outputs()[0]->type().str(), "f32[5,12]");
    EXPECT_TRUE(nodesOf(*g, OpKind::Shape).empty());
    // The intermediate shape constants are dropped once nothing reads them.
    EXPECT_EQ(g->findValue("/Gather_output_0"), nullptr);
    auto out = evaluate(*g, {iota({5, 3, 4})});
    ASSERT_TRUE(out.ok()) << out.status().message();
    expectNear((*out)[0], iota({5, 12}));
  }
}

TEST(OnnxFold, LargeConstantComputationsStayNodes) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2), int64_t(300)}).output("y");
  b.init("w", iota({300, 300}, 0.f, 1e-4f));
  b.init("small", iota({4, 4}));
  setInts(b.node("Transpose", {"w"}, {"wt"}, "transpose_w"), "perm", {1, 0});  // 90000 elements: kept
  b.node("MatMul", {"x", "wt"}, {"y"}, "mm");
  setInts(b.node("Transpose", {"small"}, {"st"}, "transpose_small"), "perm", {1, 0});  // folded, unused
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->numNodes(), 2u);
  EXPECT_EQ(g->nodes()[0]->name(), "transpose_w");
  EXPECT_EQ(g->findValue("st"), nullptr);
}

TEST(OnnxFold, SmallInputsMayFoldToLargeOutput) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(300), int64_t(300)}).output("y");
  b.initI64("shape", {300, 300});
  b.node("ConstantOfShape", {"shape"}, {"ones"}, "cos");
  b.node("Add", {"x", "ones"}, {"y"}, "add");
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(g->numNodes(), 1u);
  EXPECT_TRUE(g->findValue("ones")->isConstant());
}

TEST(OnnxFold, HugeOutputsOfSmallInputsStayNodes) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(5000), int64_t(4000)}).output("y");
  b.initI64("shape", {5000, 4000});  // 20M elements: over FoldLimits::maxExpandElements
  b.node("ConstantOfShape", {"shape"}, {"ones"}, "cos");
  b.node("Add", {"x", "ones"}, {"y"}, "add");
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->numNodes(), 2u);
  EXPECT_EQ(g->nodes()[0]->op(), OpKind::ConstantOfShape);
  EXPECT_FALSE(g->findValue("ones")->isConstant());
}

TEST(OnnxFold, NodesFeedingGraphOutputsAreNotFolded) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2)}).output("y").output("k");
  b.init("a", iota({2})).init("c", iota({2}, 1.f));
  b.node("Add", {"a", "c"}, {"k"}, "const_add");
  b.node("Add", {"x", "k"}, {"y"}, "add");
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->numNodes(), 2u);
  EXPECT_EQ(g->outputs()[1]->producer()->name(), "const_add");
}

TEST(OnnxBind, ShapesAndSymbolsByName) {
  ModelBuilder b(13);
  b.input("ids", DType::kI64, {std::string("batch"), std::string("seq")})
      .input("mask", DType::kI64, {std::string("batch"), std::string("seq")})
      .output("y");
  b.node("Add", {"ids", "mask"}, {"y"}, "add");
  ImportOptions o;
  o.shapes["ids"] = {2, 7};
  PCC_IMPORT_OK(g, b, o);
  EXPECT_EQ(g->inputs()[1]->type().str(), "i64[2,7]");  // symbols bound through --shape ids

  ImportOptions conflict;
  conflict.shapes["ids"] = {2, 7};
  conflict.shapes["mask"] = {2, 8};
  auto bad = importModel(b, conflict);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'seq'"), std::string::npos) << bad.status().message();

  ImportOptions batchOnly;
  batchOnly.batch = 3;
  bad = importModel(b, batchOnly);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(bad.status().message().find("model.onnx: 2 symbolic dims have no size (from --batch, --shape or the model): input 'ids' dim 1 "
                                            "('seq'), input 'mask' dim 1 ('seq')"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("--shape"), std::string::npos);
}

TEST(OnnxBind, UnboundSymbolicDim) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {std::string("N"), int64_t(4)}).output("y");
  b.node("Relu", {"x"}, {"y"}, "relu");
  auto r = importModel(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  const std::string m = r.status().message();
  EXPECT_NE(m.find("input 'x' dim 0 ('N', the batch)"), std::string::npos) << m;
  EXPECT_NE(m.find("--batch"), std::string::npos) << m;

  // An unnamed symbolic dim (no dim_param, no dim_value) is reported as such.
  ModelBuilder u(13);
  u.input("x", DType::kF32, {int64_t(4), std::string()}).output("y");
  u.node("Relu", {"x"}, {"y"}, "relu");
  r = importModel(u);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 'x' dim 1 (unnamed)"), std::string::npos) << r.status().message();

  ModelBuilder n(13);
  n.inputNoShape("x", DType::kF32).output("y");
  n.node("Relu", {"x"}, {"y"}, "relu");
  r = importModel(n);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no declared shape"), std::string::npos);
  ImportOptions o;
  o.shapes["x"] = {2, 2};
  EXPECT_TRUE(importModel(n, o).ok());
}

TEST(OnnxBind, BadShapeOption) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {std::string("N"), int64_t(4)}).output("y");
  b.node("Relu", {"x"}, {"y"}, "relu");
  struct Case { std::map<std::string, Dims> shapes; const char* expect; };
  const Case cases[] = {
      {{{"nope", {1, 4}}}, "--shape names 'nope', which is not an input of the model (inputs: x)"},
      {{{"x", {2, 4, 1}}}, "--shape x has rank 3 but the input has rank 2"},
      {{{"x", {2, 5}}}, "--shape x sets dim 1 to 5 but the model fixes it to 4"},
      {{{"x", {-2, 4}}}, "negative"},
  };
  for (const Case& c : cases) {
    ImportOptions o;
    o.shapes = c.shapes;
    auto r = importModel(b, o);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
  ImportOptions ok;
  ok.shapes["x"] = {6, 4};
  PCC_IMPORT_OK(g, b, ok);
  EXPECT_EQ(g->inputs()[0]->type().str(), "f32[6,4]");
  ImportOptions zero;
  zero.batch = 0;
  EXPECT_FALSE(importModel(b, zero).ok());
}

/// \returns the [start, end) address ranges of the mappings of `path` in this process.
std::vector<std::pair<uintptr_t, uintptr_t>> mappingsOf(const std::string& path) {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::string canonical = std::filesystem::canonical(path).string();
  while (std::getline(maps, line)) {
    if (line.size() < canonical.size() || line.compare(line.size() - canonical.size(), canonical.size(), canonical))
      continue;
    std::istringstream is(line);
    std::string range;
    is >> range;
    auto dash = range.find('-');
    out.emplace_back(std::stoull(range.substr(0, dash), nullptr, 16), std::stoull(range.substr(dash + 1), nullptr, 16));
  }
  return out;
}

TEST(OnnxExternalData, WeightsAreMappedNotCopied) {
  std::string dir = tempDir("external");
  // weights.bin: 64 bytes of padding, then w (f32[4,4]), then b (f32[4]).
  std::string bin(64, '\0');
  Tensor w = iota({4, 4}, 0.f, 0.5f), bias = iota({4}, 10.f);
  bin.append(static_cast<const char*>(w.raw()), w.nbytes());
  bin.append(static_cast<const char*>(bias.raw()), bias.nbytes());
  writeFile(dir + "/weights.bin", bin);

  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(1), int64_t(4)}).output("y");
  auto external = [&](const std::string& name, Dims dims, size_t offset, size_t length) {
    auto* t = b.model().mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair<std::string, std::string>{"location", "weights.bin"},
                        {"offset", std::to_string(offset)}, {"length", std::to_string(length)}}) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
  };
  external("w", {4, 4}, 64, 64);
  external("b", {4}, 128, 16);
  b.node("MatMul", {"x", "w"}, {"mm"}, "mm");
  b.node("Add", {"mm", "b"}, {"y"}, "add");
  writeFile(dir + "/model.onnx", b.bytes());

  auto g = importOnnxModel(dir + "/model.onnx", {});
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto ranges = mappingsOf(dir + "/weights.bin");
  ASSERT_FALSE(ranges.empty()) << "weights.bin is not mapped";
  for (const char* name : {"w", "b"}) {
    Value* v = (*g)->findValue(name);
    ASSERT_NE(v, nullptr);
    auto p = reinterpret_cast<uintptr_t>(v->constantData().raw());
    bool inside = false;
    for (auto [lo, hi] : ranges) inside |= p >= lo && p + v->constantData().nbytes() <= hi;
    EXPECT_TRUE(inside) << name << " was copied out of the mapping";
  }
  auto out = evaluate(**g, {iota({1, 4}, 1.f)});
  ASSERT_TRUE(out.ok());
  // y[0] = sum_k (k+1) * w[k][0] + 10 = 1*0 + 2*2 + 3*4 + 4*6 + 10
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], 50.f);

  // A length that disagrees with the dims names the initializer.
  b.model().mutable_graph()->mutable_initializer(1)->mutable_external_data(2)->set_value("12");
  writeFile(dir + "/bad.onnx", b.bytes());
  auto bad = importOnnxModel(dir + "/bad.onnx", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(bad.status().message().find("tensor 'b'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("bad.onnx"), std::string::npos) << bad.status().message();

  // A missing data file.
  std::filesystem::remove(dir + "/weights.bin");
  bad = importOnnxModel(dir + "/model.onnx", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("weights.bin"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace pcc

namespace pcc {
namespace {
using namespace pcc::testing;

TEST(OnnxBind, InputValuesBecomeConstants) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).input("shape", DType::kI64, {int64_t(2)}).output("y");
  b.node("Reshape", {"x", "shape"}, {"y"}, "rs");
  ImportOptions o;
  o.inputValues["shape"] = Tensor::fromVector<int64_t>(DType::kI64, {2}, {3, 2});
  PCC_IMPORT_OK(g, b, o);
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[3,2]");
  EXPECT_TRUE(g->nodes()[0]->input(1)->isConstant());

  ImportOptions wrongType;
  wrongType.inputValues["shape"] = Tensor::fromVector<int32_t>(DType::kI32, {2}, {3, 2});
  auto bad = importModel(b, wrongType);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not fit its declaration"), std::string::npos);

  ImportOptions unknown;
  unknown.inputValues["nope"] = Tensor::scalarI64(1);
  bad = importModel(b, unknown);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'nope', which is not an input"), std::string::npos);
}

}  // namespace
}  // namespace pcc
