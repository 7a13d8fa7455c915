// Importers of the signal family, with their opset variants: structure (which
// canonical ops, inputs and attributes come out) and numerics.
#include "onnx_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

std::vector<Tensor> eval(const Graph& g, const std::vector<Tensor>& inputs) {
  auto out = evaluate(g, inputs);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? std::move(out).value() : std::vector<Tensor>{};
}

Tensor realSignal() {
  return Tensor::fromVector<float>(DType::kF32, {1, 4, 1}, {1, 2, 3, 4});
}

TEST(OnnxSignal, DftAxisAttributeBecomesInput) {
  // Before opset 20 axis is an attribute (default 1); it becomes input 2.
  for (bool withAttr : {true, false}) {
    ModelBuilder b(17);
    b.input("x", DType::kF32, {int64_t(1), int64_t(4), int64_t(1)}).output("y");
    auto& n = b.node("DFT", {"x"}, {"y"}, "dft");
    if (withAttr) setInt(n, "axis", 1);
    PCC_IMPORT_OK(g, b);
    ASSERT_EQ(g->numNodes(), 1u);
    Node* d = g->nodes()[0];
    EXPECT_EQ(d->opName(), "DFT");
    ASSERT_EQ(d->inputs().size(), 3u);
    EXPECT_EQ(d->input(1), nullptr);
    ASSERT_TRUE(d->input(2)->isConstant());
    EXPECT_EQ(d->input(2)->constantData().toInts(), std::vector<int64_t>{1});
    EXPECT_FALSE(d->attrs().has("axis"));
    EXPECT_EQ(d->output()->type().str(), "f32[1,4,2]");
    auto out = eval(*g, {realSignal()});
    ASSERT_EQ(out.size(), 1u);
    expectNear(out[0], Tensor::fromVector<float>(DType::kF32, {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2}), 1e-5);
  }
}

TEST(OnnxSignal, DftOpset20TakesAxisInput) {
  ModelBuilder b(20);
  b.input("x", DType::kF32, {int64_t(1), int64_t(4), int64_t(1)}).output("y");
  b.init("axis", Tensor::scalarI64(1));
  auto& n = b.node("DFT", {"x", "", "axis"}, {"y"}, "dft");
  setInt(n, "onesided", 1);
  PCC_IMPORT_OK(g, b);
  ASSERT_EQ(g->numNodes(), 1u);
  EXPECT_EQ(g->nodes()[0]->attrs().getInt("onesided", 0), 1);
  EXPECT_EQ(g->nodes()[0]->output()->type().str(), "f32[1,3,2]");
}

TEST(OnnxSignal, DftAxisRunTimeInputNeedsFreezing) {
  ModelBuilder b(20);
  b.input("x", DType::kF32, {int64_t(1), int64_t(4), int64_t(1)}).input("axis", DType::kI64, {}).output("y");
  b.node("DFT", {"x", "", "axis"}, {"y"}, "dft");
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("must be a constant"), std::string::npos) << g.status().message();
}

TEST(OnnxSignal, SoftmaxCrossEntropyOutputCount) {
  for (int outs : {1, 2}) {
    ModelBuilder b(13);
    b.input("x", DType::kF32, {int64_t(3), int64_t(5)}).input("t", DType::kI64, {int64_t(3)}).output("loss");
    std::vector<std::string> names = {"loss"};
    if (outs == 2) {
      names.push_back("log_prob");
      b.output("log_prob");
    }
    auto& n = b.node("SoftmaxCrossEntropyLoss", {"x", "t"}, names, "sce");
    setString(n, "reduction", "sum");
    PCC_IMPORT_OK(g, b);
    ASSERT_EQ(g->numNodes(), 1u);
    Node* s = g->nodes()[0];
    EXPECT_EQ(s->attrs().getInt("num_outputs", 0), outs);
    ASSERT_EQ(s->outputs().size(), static_cast<size_t>(outs));
    EXPECT_EQ(s->output(0)->type().str(), "f32[]");
    if (outs == 2) {
      EXPECT_EQ(s->output(1)->type().str(), "f32[3,5]");
    }
    EXPECT_EQ(s->attrs().getString("reduction", ""), "sum");
  }
}

TEST(OnnxSignal, NllLossImportsAttributes) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).input("t", DType::kI64, {int64_t(2)}).output("loss");
  auto& n = b.node("NegativeLogLikelihoodLoss", {"x", "t"}, {"loss"}, "nll");
  setString(n, "reduction", "none");
  setInt(n, "ignore_index", 2);
  PCC_IMPORT_OK(g, b);
  auto out = eval(*g, {Tensor::fromVector<float>(DType::kF32, {2, 3}, {-1, -2, -3, -4, -5, -6}),
                       Tensor::fromVector<int64_t>(DType::kI64, {2}, {0, 2})});
  ASSERT_EQ(out.size(), 1u);
  expectNear(out[0], Tensor::fromVector<float>(DType::kF32, {2}, {1, 0}));
}

TEST(OnnxSignal, WindowWithConstantSizeAndStft) {
  ModelBuilder b(17);
  b.input("x", DType::kF32, {int64_t(1), int64_t(4), int64_t(1)}).output("w").output("y");
  b.init("n", Tensor::fromVector<int64_t>(DType::kI64, {}, {2}));
  b.init("step", Tensor::fromVector<int64_t>(DType::kI64, {}, {2}));
  auto& h = b.node("HannWindow", {"n"}, {"w"}, "hann");
  setInt(h, "periodic", 1);
  b.node("STFT", {"x", "step", "w"}, {"y"}, "stft");
  PCC_IMPORT_OK(g, b);
  auto out = eval(*g, {realSignal()});
  ASSERT_EQ(out.size(), 2u);
  // Periodic Hann of 2 samples is (0, 1): frames (1, 2) and (3, 4) become (0, 2) and (0, 4).
  expectNear(out[0], Tensor::fromVector<float>(DType::kF32, {2}, {0, 1}));
  expectNear(out[1], Tensor::fromVector<float>(DType::kF32, {1, 2, 2, 2}, {2, 0, -2, 0, 4, 0, -4, 0}), 1e-5);
}

}  // namespace
}  // namespace pcc
