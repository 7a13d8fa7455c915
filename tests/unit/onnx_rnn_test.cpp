// Importers of the rnn family: opset variants of RNN, GRU and LSTM and how the
// node's optional outputs become the canonical node's num_outputs.
#include <cmath>

#include "onnx_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

/// A one-unit RNN model: X [2, 1, 1], W = 0.5, R = 2 as initializers.
ModelBuilder& rnnModel(ModelBuilder& b, const std::vector<std::string>& outs) {
  b.input("X", DType::kF32, {int64_t(2), int64_t(1), int64_t(1)});
  b.init("W", Tensor::fromVector<float>(DType::kF32, {1, 1, 1}, {0.5f}));
  b.init("R", Tensor::fromVector<float>(DType::kF32, {1, 1, 1}, {2.f}));
  for (const std::string& o : outs)
    if (!o.empty()) b.output(o);
  return b;
}

TEST(OnnxRnn, OptionalOutputsSetNumOutputs) {
  struct Case {
    std::vector<std::string> outs;
    int64_t numOutputs;
  } cases[] = {{{"Y"}, 1}, {{"", "Y_h"}, 2}, {{"Y", "Y_h"}, 2}, {{"Y", ""}, 1}};
  for (const Case& k : cases) {
    ModelBuilder b(22);
    rnnModel(b, k.outs);
    setInt(b.node("RNN", {"X", "W", "R"}, k.outs, "rnn"), "hidden_size", 1);
    PCC_IMPORT_OK(g, b);
    auto rnns = nodesOf(*g, OpKind::RNN);
    ASSERT_EQ(rnns.size(), 1u);
    EXPECT_EQ(rnns[0]->attrs().getInt("num_outputs", 0), k.numOutputs);
    EXPECT_EQ(static_cast<int64_t>(rnns[0]->outputs().size()), k.numOutputs);
  }
}

TEST(OnnxRnn, Opset1OutputSequenceIsDroppedAndValuesMatch) {
  for (int64_t opset : {1, 7, 14, 22}) {
    ModelBuilder b(opset);
    rnnModel(b, {"Y", "Y_h"});
    auto& n = b.node("RNN", {"X", "W", "R"}, {"Y", "Y_h"}, "rnn");
    setInt(n, "hidden_size", 1);
    if (opset == 1) setInt(n, "output_sequence", 1);
    PCC_IMPORT_OK(g, b);
    auto rnns = nodesOf(*g, OpKind::RNN);
    ASSERT_EQ(rnns.size(), 1u) << "opset " << opset;
    EXPECT_FALSE(rnns[0]->attrs().has("output_sequence"));
    auto out = evaluate(*g, {Tensor::fromVector<float>(DType::kF32, {2, 1, 1}, {1.f, -1.f})});
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ(out->size(), 2u);
    double h1 = std::tanh(0.5), h2 = std::tanh(-0.5 + 2 * h1);
    EXPECT_NEAR((*out)[0].getDouble(1), h2, 1e-6);
    EXPECT_NEAR((*out)[1].getDouble(0), h2, 1e-6);
  }
}

TEST(OnnxRnn, LstmBatchFirstLayoutWithYc) {
  ModelBuilder b(14);
  b.input("X", DType::kF32, {int64_t(3), int64_t(2), int64_t(1)}).output("Y").output("Y_h").output("Y_c");
  b.init("W", Tensor::fromVector<float>(DType::kF32, {1, 8, 1}, {1, 1, 1, 1, 1, 1, 1, 1}));
  b.init("R", Tensor::fromVector<float>(DType::kF32, {1, 8, 2}, std::vector<float>(16, 0.1f)));
  auto& n = b.node("LSTM", {"X", "W", "R"}, {"Y", "Y_h", "Y_c"}, "lstm");
  setInt(n, "hidden_size", 2);
  setInt(n, "layout", 1);
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->outputs().size(), 3u);
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[3,2,1,2]");
  EXPECT_EQ(g->outputs()[1]->type().str(), "f32[3,1,2]");
  EXPECT_EQ(g->outputs()[2]->type().str(), "f32[3,1,2]");
}

TEST(OnnxRnn, GruAttributesKeptAndBadShapesNamed) {
  ModelBuilder b(7);
  b.input("X", DType::kF32, {int64_t(1), int64_t(1), int64_t(1)}).output("Y");
  b.init("W", Tensor::fromVector<float>(DType::kF32, {1, 3, 1}, {1, 1, 1}));
  b.init("R", Tensor::fromVector<float>(DType::kF32, {1, 3, 1}, {1, 1, 1}));
  auto& n = b.node("GRU", {"X", "W", "R"}, {"Y"}, "gru");
  setInt(n, "linear_before_reset", 1);
  setFloat(n, "clip", 2.f);
  PCC_IMPORT_OK(g, b);
  auto grus = nodesOf(*g, OpKind::GRU);
  ASSERT_EQ(grus.size(), 1u);
  EXPECT_EQ(grus[0]->attrs().getInt("linear_before_reset", 0), 1);
  EXPECT_FLOAT_EQ(grus[0]->attrs().getFloat("clip", 0), 2.f);

  ModelBuilder bad(22);
  bad.input("X", DType::kF32, {int64_t(1), int64_t(1), int64_t(1)}).output("Y");
  bad.init("W", Tensor::fromVector<float>(DType::kF32, {1, 2, 1}, {1, 1}));
  bad.init("R", Tensor::fromVector<float>(DType::kF32, {1, 3, 1}, {1, 1, 1}));
  bad.node("GRU", {"X", "W", "R"}, {"Y"}, "gru");
  auto r = importModel(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'gru'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("W must be f32[1,3,1]"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace pcc
