// Each import function, with its opset variants, checked for structure (which
// canonical ops and attributes come out) and numerics (reference kernels).
#include <cmath>

#include "onnx_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

TEST(OnnxImport, MlpStructureAndNames) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2), int64_t(4)}).output("y", DType::kF32);
  b.init("w", iota({4, 3}, -1.f, 0.25f)).init("bias", iota({3}));
  b.node("MatMul", {"x", "w"}, {"mm"}, "matmul");
  b.node("Add", {"mm", "bias"}, {"a"});  // unnamed: Add_1
  b.node("Relu", {"a"}, {"y"}, "relu");
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->numNodes(), 3u);
  auto nodes = g->nodes();
  EXPECT_EQ(nodes[0]->op(), OpKind::MatMul);
  EXPECT_EQ(nodes[0]->name(), "matmul");
  EXPECT_EQ(nodes[1]->name(), "Add_1");
  EXPECT_EQ(nodes[1]->output()->name(), "a");
  EXPECT_EQ(nodes[2]->output()->type().str(), "f32[2,3]");
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->inputs()[0]->name(), "x");
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  EXPECT_EQ(g->constants().size(), 2u);

  auto out = evaluate(*g, {iota({2, 4})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  // y[0][0] = relu(sum_k x[0][k] * w[k][0] + 0), w[k][0] = -1 + 0.75k
  float expect = 0 * -1.f + 1 * -0.25f + 2 * 0.5f + 3 * 1.25f;
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], expect);
}

/// Softmax over `n` contiguous elements of every one of `outer` groups.
std::vector<float> softmaxRows(const std::vector<float>& x, int64_t outer, int64_t n) {
  std::vector<float> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    double mx = -1e30, sum = 0;
    for (int64_t i = 0; i < n; ++i) mx = std::max<double>(mx, x[o * n + i]);
    for (int64_t i = 0; i < n; ++i) sum += std::exp(x[o * n + i] - mx);
    for (int64_t i = 0; i < n; ++i) y[o * n + i] = static_cast<float>(std::exp(x[o * n + i] - mx) / sum);
  }
  return y;
}

std::unique_ptr<Graph> softmaxModel(int64_t opset, std::optional<int64_t> axis) {
  ModelBuilder b(opset);
  b.input("x", DType::kF32, {int64_t(2), int64_t(3), int64_t(4)}).output("y");
  auto& n = b.node("Softmax", {"x"}, {"y"}, "sm");
  if (axis) setInt(n, "axis", *axis);
  auto g = importModel(b);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(g).value() : nullptr;
}

TEST(OnnxImport, SoftmaxOpset11CoercesTo2D) {
  Tensor x = iota({2, 3, 4}, -2.f, 0.3f);
  std::vector<float> xs(x.data<float>(), x.data<float>() + 24);
  // axis = 1 at opset 11: each batch row's 12 elements form one distribution.
  auto g = softmaxModel(11, 1);
  ASSERT_TRUE(g);
  EXPECT_EQ(nodesOf(*g, OpKind::Flatten).size(), 1u);
  EXPECT_EQ(nodesOf(*g, OpKind::Reshape).size(), 1u);
  auto out = evaluate(*g, {x});
  ASSERT_TRUE(out.ok()) << out.status().message();
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {2, 3, 4}, softmaxRows(xs, 2, 12)));
  EXPECT_EQ(g->outputs()[0]->name(), "y");

  // Default axis at opset 11 is 1 as well.
  auto gd = softmaxModel(11, std::nullopt);
  ASSERT_TRUE(gd);
  out = evaluate(*gd, {x});
  ASSERT_TRUE(out.ok());
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {2, 3, 4}, softmaxRows(xs, 2, 12)));

  // The last axis needs no coercion: one Softmax node.
  auto gl = softmaxModel(11, -1);
  ASSERT_TRUE(gl);
  EXPECT_EQ(gl->numNodes(), 1u);
  out = evaluate(*gl, {x});
  ASSERT_TRUE(out.ok());
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {2, 3, 4}, softmaxRows(xs, 6, 4)));
}

TEST(OnnxImport, SoftmaxOpset13IsPerAxis) {
  Tensor x = iota({2, 3, 4}, -2.f, 0.3f);
  auto g = softmaxModel(13, 1);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->numNodes(), 1u);
  EXPECT_EQ(g->nodes()[0]->attrs().getInt("axis", 99), 1);
  auto out = evaluate(*g, {x});
  ASSERT_TRUE(out.ok());
  // Hand-made: normalize over dim 1 (3 elements, stride 4).
  std::vector<float> expect(24);
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < 4; ++k) {
      double sum = 0;
      for (int j = 0; j < 3; ++j) sum += std::exp(x.data<float>()[b * 12 + j * 4 + k]);
      for (int j = 0; j < 3; ++j)
        expect[b * 12 + j * 4 + k] = static_cast<float>(std::exp(x.data<float>()[b * 12 + j * 4 + k]) / sum);
    }
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {2, 3, 4}, expect));

  auto gd = softmaxModel(13, std::nullopt);  // default axis -1
  ASSERT_TRUE(gd);
  EXPECT_EQ(gd->nodes()[0]->attrs().getInt("axis", 99), -1);
}

TEST(OnnxImport, SqueezeUnsqueezeAxesAttributeBecomesInput) {
  for (int64_t opset : {11, 13}) {
    SCOPED_TRACE(opset);
    ModelBuilder b(opset);
    b.input("x", DType::kF32, {int64_t(3), int64_t(1), int64_t(4)}).output("y").output("z");
    auto& sq = b.node("Squeeze", opset >= 13 ? std::vector<std::string>{"x", "ax1"} : std::vector<std::string>{"x"},
                      {"s"}, "sq");
    auto& un = b.node("Unsqueeze", opset >= 13 ? std::vector<std::string>{"s", "ax0"} : std::vector<std::string>{"s"},
                      {"y"}, "un");
    b.node("Squeeze", {"x"}, {"z"}, "sq_all");  // no axes: every 1-dim
    if (opset >= 13) {
      b.initI64("ax1", {1}).initI64("ax0", {0, -1});
    } else {
      setInts(sq, "axes", {1});
      setInts(un, "axes", {0, -1});
    }
    PCC_IMPORT_OK(g, b);
    auto nodes = g->nodes();
    ASSERT_EQ(nodes.size(), 3u);
    ASSERT_EQ(nodes[0]->inputs().size(), 2u);
    ASSERT_TRUE(nodes[0]->input(1)->isConstant());
    EXPECT_EQ(nodes[0]->input(1)->constantData().toInts(), std::vector<int64_t>{1});
    EXPECT_FALSE(nodes[0]->attrs().has("axes"));
    EXPECT_EQ(nodes[1]->input(1)->constantData().toInts(), (std::vector<int64_t>{0, -1}));
    EXPECT_EQ(g->outputs()[0]->type().str(), "f32[1,3,4,1]");
    EXPECT_EQ(nodes[2]->inputs().size(), 1u);
    EXPECT_EQ(g->outputs()[1]->type().str(), "f32[3,4]");
  }
}

TEST(OnnxImport, SplitVariants) {
  struct Case { int64_t opset; bool splitSizes; };
  for (Case c : {Case{11, true}, Case{11, false}, Case{13, true}, Case{13, false}, Case{18, true}, Case{18, false}}) {
    SCOPED_TRACE(strCat("opset ", c.opset, c.splitSizes ? " sizes" : " equal"));
    ModelBuilder b(c.opset);
    b.input("x", DType::kF32, {int64_t(2), int64_t(6)}).output("a").output("b").output("c");
    std::vector<std::string> ins = {"x"};
    if (c.splitSizes && c.opset >= 13) {
      ins.push_back("sizes");
      b.initI64("sizes", {1, 2, 3});
    }
    auto& n = b.node("Split", ins, {"a", "b", "c"}, "split");
    setInt(n, "axis", 1);
    if (c.splitSizes && c.opset < 13) setInts(n, "split", {1, 2, 3});
    if (!c.splitSizes && c.opset >= 18) setInt(n, "num_outputs", 3);
    PCC_IMPORT_OK(g, b);
    ASSERT_EQ(g->numNodes(), 1u);
    Node* s = g->nodes()[0];
    ASSERT_EQ(s->outputs().size(), 3u);
    if (c.splitSizes) {
      ASSERT_NE(s->input(1), nullptr);
      EXPECT_EQ(s->input(1)->constantData().toInts(), (std::vector<int64_t>{1, 2, 3}));
      EXPECT_EQ(g->outputs()[2]->type().str(), "f32[2,3]");
    } else {
      EXPECT_EQ(s->attrs().getInt("num_outputs", 0), 3);
      EXPECT_EQ(g->outputs()[2]->type().str(), "f32[2,2]");
    }
    auto out = evaluate(*g, {iota({2, 6})});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ((*out)[1].getDouble(0), c.splitSizes ? 1.0 : 2.0);  // first column of b
  }
  // num_outputs that contradicts the node is rejected.
  ModelBuilder b(18);
  b.input("x", DType::kF32, {int64_t(6)}).output("a");
  setInt(b.node("Split", {"x"}, {"a", "b"}, "split"), "num_outputs", 3);
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("num_outputs = 3"), std::string::npos) << g.status().message();
}

TEST(OnnxImport, ReduceMeanAxesAttributeVsInput) {
  for (int64_t opset : {13, 18}) {
    SCOPED_TRACE(opset);
    ModelBuilder b(opset);
    b.input("x", DType::kF32, {int64_t(2), int64_t(3), int64_t(4)}).output("y");
    std::vector<std::string> ins = {"x"};
    if (opset >= 18) {
      ins.push_back("axes");
      b.initI64("axes", {-1});
    }
    auto& n = b.node("ReduceMean", ins, {"y"}, "rm");
    if (opset < 18) setInts(n, "axes", {-1});
    setInt(n, "keepdims", 1);
    PCC_IMPORT_OK(g, b);
    Node* r = g->nodes().at(0);
    ASSERT_EQ(r->inputs().size(), 2u);
    EXPECT_EQ(r->input(1)->constantData().toInts(), std::vector<int64_t>{-1});
    EXPECT_EQ(r->attrs().getInt("keepdims", 0), 1);
    EXPECT_FALSE(r->attrs().has("axes"));
    EXPECT_EQ(g->outputs()[0]->type().str(), "f32[2,3,1]");
    auto out = evaluate(*g, {iota({2, 3, 4})});
    ASSERT_TRUE(out.ok());
    EXPECT_FLOAT_EQ((*out)[0].data<float>()[1], 5.5f);  // mean of 4..7
  }
}

TEST(OnnxImport, SliceAttributesBecomeInputs) {
  for (int64_t opset : {9, 13}) {
    SCOPED_TRACE(opset);
    ModelBuilder b(opset);
    b.input("x", DType::kF32, {int64_t(4), int64_t(5)}).output("y");
    if (opset >= 10) {
      b.initI64("starts", {1}).initI64("ends", {3}).initI64("axes", {1});
      b.node("Slice", {"x", "starts", "ends", "axes"}, {"y"}, "sl");
    } else {
      auto& n = b.node("Slice", {"x"}, {"y"}, "sl");
      setInts(n, "starts", {1});
      setInts(n, "ends", {3});
      setInts(n, "axes", {1});
    }
    PCC_IMPORT_OK(g, b);
    Node* s = g->nodes().at(0);
    EXPECT_EQ(s->inputs().size(), 4u);
    EXPECT_TRUE(s->attrs().empty());
    EXPECT_EQ(g->outputs()[0]->type().str(), "f32[4,2]");
    auto out = evaluate(*g, {iota({4, 5})});
    ASSERT_TRUE(out.ok());
    EXPECT_EQ((*out)[0].getDouble(2), 6.0);  // row 1, column 1
  }
}

TEST(OnnxImport, GemmDropsBroadcastAttribute) {
  ModelBuilder b(7);
  b.input("a", DType::kF32, {int64_t(2), int64_t(3)}).output("y");
  b.init("w", iota({4, 3})).init("c", iota({4}));
  auto& n = b.node("Gemm", {"a", "w", "c"}, {"y"}, "gemm");
  setInt(n, "transB", 1);
  setInt(n, "broadcast", 1);
  setFloat(n, "alpha", 2.f);
  PCC_IMPORT_OK(g, b);
  Node* gemm = g->nodes().at(0);
  EXPECT_FALSE(gemm->attrs().has("broadcast"));
  EXPECT_EQ(gemm->attrs().getInt("transB", 0), 1);
  EXPECT_EQ(gemm->attrs().getFloat("alpha", 0), 2.f);
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[2,4]");
}

TEST(OnnxImport, BatchNormalizationOldAttributesDropped) {
  ModelBuilder b(7);
  b.input("x", DType::kF32, {int64_t(1), int64_t(2), int64_t(2), int64_t(2)}).output("y");
  for (const char* p : {"scale", "bias", "mean", "var"}) b.init(p, iota({2}, 1.f));
  auto& n = b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}, "bn");
  setInt(n, "spatial", 1);
  setInt(n, "is_test", 1);
  setInts(n, "consumed_inputs", {0, 0, 0, 1, 1});
  setFloat(n, "epsilon", 1e-3f);
  setFloat(n, "momentum", 0.9f);
  PCC_IMPORT_OK(g, b);
  const AttrMap& a = g->nodes().at(0)->attrs();
  EXPECT_EQ(a.all().size(), 1u);
  EXPECT_FLOAT_EQ(a.getFloat("epsilon", 0), 1e-3f);

  // A training output that something reads is rejected; unused ones are fine.
  ModelBuilder t(9);
  t.input("x", DType::kF32, {int64_t(1), int64_t(2), int64_t(2), int64_t(2)}).output("y").output("rm");
  for (const char* p : {"scale", "bias", "mean", "var"}) t.init(p, iota({2}, 1.f));
  t.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "rm", "rv"}, "bn");
  auto bad = importModel(t);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("node 'bn' (BatchNormalization, opset 9): unsupported: output 1 ('rm') is used"),
            std::string::npos)
      << bad.status().message();
  t.model().mutable_graph()->mutable_output()->RemoveLast();
  EXPECT_TRUE(importModel(t).ok());
}

TEST(OnnxImport, BatchNormalizationTrainingMode) {
  // N = 2, C = 2, 1 element each: channel 0 holds {1, 3} (mean 2, variance 1),
  // channel 1 holds {4, 4} (mean 4, variance 0).
  ModelBuilder b(15);
  b.input("x", DType::kF32, {int64_t(2), int64_t(2), int64_t(1)}).output("y").output("rm").output("rv");
  b.init("scale", Tensor::fromVector<float>(DType::kF32, {2}, {2.f, 1.f}));
  b.init("bias", Tensor::fromVector<float>(DType::kF32, {2}, {0.5f, 0.f}));
  b.init("mean", Tensor::fromVector<float>(DType::kF32, {2}, {0.f, 10.f}));
  b.init("var", Tensor::fromVector<float>(DType::kF32, {2}, {1.f, 3.f}));
  auto& n = b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "rm", "rv"}, "bn");
  setInt(n, "training_mode", 1);
  setFloat(n, "momentum", 0.75f);
  setFloat(n, "epsilon", 0.f);
  PCC_IMPORT_OK(g, b);
  auto out = evaluate(*g, {Tensor::fromVector<float>(DType::kF32, {2, 2, 1}, {1.f, 4.f, 3.f, 4.f})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  // y = (x - mean) / sqrt(var) * scale + bias; channel 1 divides 0 by 0 -> NaN.
  EXPECT_EQ((*out)[0].getDouble(0), -1.5);
  EXPECT_EQ((*out)[0].getDouble(2), 2.5);
  EXPECT_TRUE(std::isnan((*out)[0].getDouble(1)));
  // running = given * 0.75 + batch * 0.25.
  EXPECT_EQ((*out)[1].toInts().size(), 2u);
  EXPECT_DOUBLE_EQ((*out)[1].getDouble(0), 0.5);
  EXPECT_DOUBLE_EQ((*out)[1].getDouble(1), 8.5);
  EXPECT_DOUBLE_EQ((*out)[2].getDouble(0), 1.0);
  EXPECT_DOUBLE_EQ((*out)[2].getDouble(1), 2.25);
}

TEST(OnnxImport, LayerNormalizationMeanAndInvStdDev) {
  ModelBuilder b(17);
  b.input("x", DType::kF32, {int64_t(2), int64_t(4)}).output("y");
  b.init("g", iota({4}, 1.f, 0.f)).init("bt", iota({4}, 0.f, 0.f));
  auto& n = b.node("LayerNormalization", {"x", "g", "bt"}, {"y", "mean"}, "ln");
  setFloat(n, "epsilon", 1e-5f);
  setInt(n, "stash_type", 1);
  PCC_IMPORT_OK(g, b);
  Node* ln = g->nodes().at(0);
  EXPECT_EQ(ln->op(), OpKind::LayerNormalization);
  EXPECT_FALSE(ln->attrs().has("stash_type"));
  auto out = evaluate(*g, {iota({2, 4})});
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[0].getDouble(0), -1.3416, 1e-3);

  // Mean and InvStdDev, when read, are computed (reduced dims kept as 1).
  b.output("mean");
  b.model().mutable_graph()->mutable_node(0)->add_output("inv");
  b.output("inv");
  PCC_IMPORT_OK(g2, b);
  auto all = evaluate(*g2, {iota({2, 4})});
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 3u);
  expectNear((*all)[1], Tensor::fromVector<float>(DType::kF32, {2, 1}, {1.5f, 5.5f}));
  float inv = 1.0f / std::sqrt(1.25f + 1e-5f);
  expectNear((*all)[2], Tensor::fromVector<float>(DType::kF32, {2, 1}, {inv, inv}));
  EXPECT_EQ(g2->outputs()[1]->name(), "mean");
  EXPECT_EQ(g2->outputs()[2]->name(), "inv");
}

TEST(OnnxImport, GeluNeedsOpset20) {
  ModelBuilder b(20);
  b.input("x", DType::kF32, {int64_t(3)}).output("y");
  setString(b.node("Gelu", {"x"}, {"y"}, "gelu"), "approximate", "tanh");
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(g->nodes().at(0)->attrs().getString("approximate", ""), "tanh");

  ModelBuilder old(17);
  old.input("x", DType::kF32, {int64_t(3)}).output("y");
  old.node("Gelu", {"x"}, {"y"}, "gelu");
  auto bad = importModel(old);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unsupported operators (opset 17): Gelu (node 'gelu')"), std::string::npos)
      << bad.status().message();
}

TEST(OnnxImport, CastPowWhereEqual) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(4)}).output("y", DType::kF32).output("c", DType::kI64);
  b.init("two", Tensor::scalarF32(2.f)).init("thr", Tensor::scalarF32(4.f));
  setInt(b.node("Cast", {"x"}, {"c"}, "cast"), "to", onnx::TensorProto::INT64);
  b.node("Pow", {"x", "two"}, {"sq"}, "pow");
  b.node("Equal", {"sq", "thr"}, {"eq"}, "eq");
  b.node("Where", {"eq", "x", "sq"}, {"y"}, "where");
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(g->outputs()[1]->type().str(), "i64[4]");
  auto out = evaluate(*g, {iota({4})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {4}, {0, 1, 2, 9}));

  ModelBuilder s(13);
  s.input("x", DType::kF32, {int64_t(4)}).output("y");
  setInt(s.node("Cast", {"x"}, {"y"}, "to_string"), "to", onnx::TensorProto::STRING);
  auto bad = importModel(s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("node 'to_string' (Cast, opset 13)"), std::string::npos);
}

TEST(OnnxImport, ReshapeAllowzeroShapeStartEnd) {
  ModelBuilder b(15);
  b.input("x", DType::kF32, {int64_t(2), int64_t(3), int64_t(4)}).output("y").output("s");
  b.initI64("shape", {0, -1});
  setInt(b.node("Reshape", {"x", "shape"}, {"y"}, "rs"), "allowzero", 0);
  auto& sh = b.node("Shape", {"x"}, {"s"}, "shape_of");
  setInt(sh, "start", 1);
  setInt(sh, "end", -1);
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[2,12]");
  EXPECT_TRUE(g->nodes().at(0)->attrs().has("allowzero"));
  // Shape is a constant; as a graph output it is produced by an Identity node.
  EXPECT_TRUE(nodesOf(*g, OpKind::Shape).empty());
  Value* s = g->outputs()[1];
  ASSERT_NE(s->producer(), nullptr);
  EXPECT_EQ(s->producer()->op(), OpKind::Identity);
  EXPECT_EQ(s->name(), "s");
  EXPECT_EQ(s->producer()->input(0)->constantData().toInts(), std::vector<int64_t>{3});
}

TEST(OnnxImport, ConstantBecomesGraphConstant) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(3)}).output("y");
  setTensor(b.node("Constant", {}, {"k_t"}), "value", iota({3}, 1.f));
  setFloat(b.node("Constant", {}, {"k_f"}), "value_float", 2.f);
  setFloats(b.node("Constant", {}, {"k_fs"}), "value_floats", {1.f, 1.f, 1.f});
  setInt(b.node("Constant", {}, {"k_i"}), "value_int", 3);
  setInts(b.node("Constant", {}, {"k_is"}), "value_ints", {3});
  b.node("Add", {"x", "k_t"}, {"a"});
  b.node("Mul", {"a", "k_f"}, {"m"});
  b.node("Sub", {"m", "k_fs"}, {"y0"});
  b.node("Reshape", {"y0", "k_is"}, {"y"});
  setInt(b.node("Cast", {"k_i"}, {"unused"}), "to", onnx::TensorProto::FLOAT);
  PCC_IMPORT_OK(g, b);
  for (Node* n : g->nodes()) EXPECT_NE(n->opName(), "Constant");
  EXPECT_EQ(g->numNodes(), 4u);  // Add, Mul, Sub, Reshape; the Cast of a constant folds away
  Value* kt = g->findValue("k_t");
  ASSERT_NE(kt, nullptr);
  EXPECT_TRUE(kt->isConstant());
  auto out = evaluate(*g, {iota({3})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {3}, {1, 5, 9}));

  ModelBuilder s(13);
  s.output("y");
  setString(s.node("Constant", {}, {"y"}, "str"), "value_string", "hi");
  auto bad = importModel(s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("value_string"), std::string::npos) << bad.status().message();
}

TEST(OnnxImport, IdentityAndDropout) {
  for (int64_t opset : {10, 13}) {
    SCOPED_TRACE(opset);
    ModelBuilder b(opset);
    b.input("x", DType::kF32, {int64_t(2), int64_t(2)}).output("y");
    b.init("w", iota({2, 2}));
    b.node("Identity", {"w"}, {"w2"}, "id_w");  // alias of a constant: no node
    auto& d = b.node("Dropout", {"x"}, {"d"}, "drop");
    if (opset < 12) setFloat(d, "ratio", 0.5f);
    b.node("Add", {"d", "w2"}, {"a"}, "add");
    b.node("Identity", {"a"}, {"y"}, "id_out");
    PCC_IMPORT_OK(g, b);
    auto nodes = g->nodes();
    ASSERT_EQ(nodes.size(), 3u);
    EXPECT_EQ(nodes[0]->op(), OpKind::Identity);  // dropout
    EXPECT_EQ(nodes[1]->input(1)->name(), "w");
    EXPECT_EQ(nodes[2]->op(), OpKind::Identity);
    auto out = evaluate(*g, {iota({2, 2}, 1.f)});
    ASSERT_TRUE(out.ok());
    expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {2, 2}, {1, 3, 5, 7}));
  }
  // At inference the mask is all true.
  ModelBuilder m(13);
  m.input("x", DType::kF32, {int64_t(2)}).output("y").output("mask");
  m.node("Dropout", {"x"}, {"y", "mask"}, "drop");
  PCC_IMPORT_OK(gm, m);
  auto masked = evaluate(*gm, {iota({2}, 3.f)});
  ASSERT_TRUE(masked.ok()) << masked.status().message();
  expectNear((*masked)[0], Tensor::fromVector<float>(DType::kF32, {2}, {3, 4}));
  EXPECT_EQ((*masked)[1].type().str(), "bool[2]");
  EXPECT_EQ((*masked)[1].getInt(0), 1);
  EXPECT_EQ((*masked)[1].getInt(1), 1);

  // Training with ratio 0 keeps every element.
  ModelBuilder z(13);
  z.input("x", DType::kF32, {int64_t(2)}).output("y");
  z.init("ratio", Tensor::scalarF32(0.f));
  z.init("train", Tensor::fromVector<uint8_t>(DType::kBool, {}, {1}));
  z.node("Dropout", {"x", "ratio", "train"}, {"y"}, "drop");
  PCC_IMPORT_OK(gz, z);
  EXPECT_EQ(gz->numNodes(), 1u);

  ModelBuilder t(13);
  t.input("x", DType::kF32, {int64_t(2)}).output("y");
  t.init("ratio", Tensor::scalarF32(0.1f));
  t.init("train", Tensor::fromVector<uint8_t>(DType::kBool, {}, {1}));
  t.node("Dropout", {"x", "ratio", "train"}, {"y"}, "drop");
  auto bad = importModel(t);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("training_mode"), std::string::npos);

  // A training_mode known only at run time cannot be compiled as inference.
  ModelBuilder r(13);
  r.input("x", DType::kF32, {int64_t(2)}).input("train", DType::kBool, {}).output("y");
  r.node("Dropout", {"x", "", "train"}, {"y"}, "drop");
  bad = importModel(r);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("run time"), std::string::npos) << bad.status().message();
}

TEST(OnnxImport, ConvPoolAndFriends) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(1), int64_t(2), int64_t(6), int64_t(6)}).output("y").output("g");
  b.init("w", iota({4, 2, 3, 3}, 0.f, 0.01f));
  auto& conv = b.node("Conv", {"x", "w"}, {"c"}, "conv");
  setInts(conv, "pads", {1, 1, 1, 1});
  setInts(conv, "kernel_shape", {3, 3});
  auto& mp = b.node("MaxPool", {"c"}, {"p"}, "pool");
  setInts(mp, "kernel_shape", {2, 2});
  setInts(mp, "strides", {2, 2});
  setInt(mp, "storage_order", 0);
  auto& ap = b.node("AveragePool", {"p"}, {"ap"}, "avg");
  setInts(ap, "kernel_shape", {3, 3});
  b.node("Flatten", {"ap"}, {"y"}, "flat");
  b.node("GlobalAveragePool", {"c"}, {"g"}, "gap");
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[1,4]");
  EXPECT_EQ(g->outputs()[1]->type().str(), "f32[1,4,1,1]");
  EXPECT_FALSE(nodesOf(*g, OpKind::MaxPool)[0]->attrs().has("storage_order"));
  EXPECT_TRUE(evaluate(*g, {iota({1, 2, 6, 6})}).ok());
}

TEST(OnnxImport, TransposeConcatGatherExpandConstantOfShape) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).output("y").output("e").output("z");
  b.initI64("idx", {2, 0}).initI64("eshape", {2, 2, 3}).initI64("zshape", {2, 2});
  setInts(b.node("Transpose", {"x"}, {"t"}, "tr"), "perm", {1, 0});
  setInt(b.node("Concat", {"t", "t"}, {"cc"}, "cat"), "axis", 0);
  setInt(b.node("Gather", {"cc", "idx"}, {"y"}, "gather"), "axis", 0);
  b.node("Expand", {"x", "eshape"}, {"e"}, "expand");
  setTensor(b.node("ConstantOfShape", {"zshape"}, {"z0"}, "cos"), "value",
            Tensor::fromVector<float>(DType::kF32, {1}, {7.f}));
  b.node("Identity", {"z0"}, {"z"}, "zid");
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[2,2]");
  EXPECT_EQ(g->outputs()[1]->type().str(), "f32[2,2,3]");
  EXPECT_TRUE(nodesOf(*g, OpKind::ConstantOfShape).empty());  // folded
  auto out = evaluate(*g, {iota({2, 3})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  // t = [[0,3],[1,4],[2,5]], cc rows 2 and 0 -> [[2,5],[0,3]]
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {2, 2}, {2, 5, 0, 3}));
  expectNear((*out)[2], Tensor::fromVector<float>(DType::kF32, {2, 2}, {7, 7, 7, 7}));
}

TEST(OnnxImport, OutputsThatAreInputsOrInitializers) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2)}).output("x").output("w").output("y").output("y");
  b.init("w", iota({2}));
  b.node("Relu", {"x"}, {"y"}, "relu");
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->outputs().size(), 4u);
  for (Value* o : g->outputs()) ASSERT_NE(o->producer(), nullptr) << o->name();
  EXPECT_EQ(g->outputs()[0]->producer()->op(), OpKind::Identity);
  EXPECT_EQ(g->outputs()[0]->producer()->input(0), g->inputs()[0]);
  EXPECT_EQ(g->outputs()[1]->producer()->op(), OpKind::Identity);
  EXPECT_EQ(g->outputs()[2], g->outputs()[3]);
  EXPECT_EQ(g->outputs()[2]->name(), "y");
  auto out = evaluate(*g, {iota({2}, -1.f, 2.f)});
  ASSERT_TRUE(out.ok());
  expectNear((*out)[1], iota({2}));
  expectNear((*out)[2], Tensor::fromVector<float>(DType::kF32, {2}, {0, 1}));
}

TEST(OnnxImport, InitializersListedAsInputsAreConstants) {
  ModelBuilder b(8, 3);  // IR 3: initializers are graph inputs too
  b.input("x", DType::kF32, {int64_t(2)}).input("w", DType::kF32, {int64_t(2)}).output("y");
  b.init("w", iota({2}));
  b.node("Add", {"x", "w"}, {"y"}, "add");
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_TRUE(g->findValue("w")->isConstant());
  ImportOptions o;
  o.shapes["w"] = {2};
  auto bad = importModel(b, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'w', which is not an input"), std::string::npos);
}

TEST(OnnxImport, DomainAiOnnxAndTypeless) {
  // "ai.onnx" is the default domain too; attributes without a type still work
  // in a model of IR version 1 (later ones must type them: onnx_hostile_test).
  ModelBuilder b(13, 1);
  b.model().mutable_opset_import(0)->set_domain("ai.onnx");
  b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).output("y");
  auto& n = b.node("Transpose", {"x"}, {"y"}, "tr");
  n.set_domain("ai.onnx");
  auto* a = n.add_attribute();
  a->set_name("perm");
  a->add_ints(1);
  a->add_ints(0);
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[3,2]");
}

TEST(OnnxImport, LegacyBroadcastBeforeOpset7) {
  // Opset 6: B = [3] matched with A's dim 1 (axis = 1) becomes B = [3,1].
  ModelBuilder b(6);
  b.input("a", DType::kF32, {int64_t(2), int64_t(3), int64_t(2)}).output("y");
  b.init("b", iota({3}, 10.f, 10.f));
  auto& n = b.node("Add", {"a", "b"}, {"y"}, "add");
  setInt(n, "broadcast", 1);
  setInt(n, "axis", 1);
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->numNodes(), 1u);
  EXPECT_EQ(g->nodes()[0]->input(1)->type().str(), "f32[3,1]");
  EXPECT_FALSE(g->nodes()[0]->attrs().has("broadcast"));
  auto out = evaluate(*g, {iota({2, 3, 2}, 0.f, 0.f)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {2, 3, 2},
                                                  {10, 10, 20, 20, 30, 30, 10, 10, 20, 20, 30, 30}));

  // Without axis B aligns with A's trailing dims, as numpy does; opset 1
  // models import too.
  ModelBuilder t(1);
  t.input("a", DType::kF32, {int64_t(2), int64_t(3)}).output("y");
  t.init("b", iota({3}));
  setInt(t.node("Mul", {"a", "b"}, {"y"}, "mul"), "broadcast", 1);
  PCC_IMPORT_OK(g2, t);
  EXPECT_EQ(g2->nodes()[0]->input(1)->type().str(), "f32[3]");

  // An axis that does not fit is an error naming the shapes.
  ModelBuilder bad(6);
  bad.input("a", DType::kF32, {int64_t(2), int64_t(3)}).output("y");
  bad.init("b", iota({3}));
  auto& nb = bad.node("Sub", {"a", "b"}, {"y"}, "sub");
  setInt(nb, "broadcast", 1);
  setInt(nb, "axis", 0);
  auto r = importModel(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("broadcast axis 0"), std::string::npos) << r.status().message();
}

TEST(OnnxImport, PReluSlopePerChannelBeforeOpset7) {
  ModelBuilder b(6);
  b.input("x", DType::kF32, {int64_t(1), int64_t(2), int64_t(2)}).output("y");
  b.init("slope", Tensor::fromVector<float>(DType::kF32, {2}, {0.5f, 2.f}));
  b.node("PRelu", {"x", "slope"}, {"y"}, "prelu");
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(g->nodes()[0]->input(1)->type().str(), "f32[2,1]");
  auto out = evaluate(*g, {Tensor::fromVector<float>(DType::kF32, {1, 2, 2}, {-2, 4, -2, 4})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  expectNear((*out)[0], Tensor::fromVector<float>(DType::kF32, {1, 2, 2}, {-1, 4, -4, 4}));
}

TEST(OnnxImport, ReshapeAndConcatBeforeOpset5) {
  ModelBuilder b(4);
  b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).output("y");
  setInts(b.node("Reshape", {"x"}, {"r"}, "reshape"), "shape", {3, 2});
  b.node("Concat", {"r", "r"}, {"y"}, "concat");  // axis defaults to 1 before opset 4
  b.model().mutable_opset_import(0)->set_version(3);
  PCC_IMPORT_OK(g, b);
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[3,4]");
}

}  // namespace
}  // namespace pcc
