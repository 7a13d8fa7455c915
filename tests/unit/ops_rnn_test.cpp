// RNN, GRU and LSTM on cases small enough to check by hand: hidden and input
// size 1, so that every gate is a scalar formula written out in the test.
#include <cmath>

#include "ops_test_util.h"
#include "runtime/ops/op_util.h"

namespace pcc::testing {
namespace {

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

Attribute Ss(std::vector<std::string> v) { return v; }
Attribute Fs(std::vector<float> v) { return v; }

// A one-unit RNN: h' = f(0.5 x + 2 h + 0.3) (W bias 0.1, R bias 0.2).
struct TinyRnn {
  Tensor w = f32({1, 1, 1}, {0.5f}), r = f32({1, 1, 1}, {2.f}), b = f32({1, 2}, {0.1f, 0.2f});
  static double cell(double x, double h) { return std::tanh(0.5 * x + 2 * h + 0.3); }
};

TEST(OpsRnn, ForwardComputesEveryStep) {
  TinyRnn m;
  Tensor x = f32({2, 1, 1}, {1, -1});
  auto out = run("RNN", {&x, &m.w, &m.r, &m.b});
  ASSERT_EQ(out.size(), 2u);
  double h1 = TinyRnn::cell(1, 0), h2 = TinyRnn::cell(-1, h1);
  expectTensor(out[0], DType::kF32, {2, 1, 1, 1}, {h1, h2});
  expectTensor(out[1], DType::kF32, {1, 1, 1}, {h2});
}

TEST(OpsRnn, ReverseAndBidirectional) {
  TinyRnn m;
  Tensor x = f32({2, 1, 1}, {1, -1});
  double r1 = TinyRnn::cell(-1, 0), r2 = TinyRnn::cell(1, r1);  // time 1 first
  auto rev = run("RNN", {&x, &m.w, &m.r, &m.b}, attrs({{"direction", S("reverse")}}));
  ASSERT_EQ(rev.size(), 2u);
  expectTensor(rev[0], DType::kF32, {2, 1, 1, 1}, {r2, r1});
  expectTensor(rev[1], DType::kF32, {1, 1, 1}, {r2});

  // Direction 1 has the weights of the reverse direction above, direction 0 W = 1, R = 0, no bias.
  Tensor w = f32({2, 1, 1}, {1.f, 0.5f}), r = f32({2, 1, 1}, {0.f, 2.f}), b = f32({2, 2}, {0, 0, 0.1f, 0.2f});
  auto bi = run("RNN", {&x, &w, &r, &b}, attrs({{"direction", S("bidirectional")}}));
  ASSERT_EQ(bi.size(), 2u);
  double f1 = std::tanh(1.0), f2 = std::tanh(-1.0);
  // Y is [seq, dir, batch, hidden].
  expectTensor(bi[0], DType::kF32, {2, 2, 1, 1}, {f1, r2, f2, r1});
  expectTensor(bi[1], DType::kF32, {2, 1, 1}, {f2, r2});
}

TEST(OpsRnn, SequenceLensStopRowsEarlyAndZeroTheirTail) {
  TinyRnn m;
  Tensor x = f32({2, 2, 1}, {1, 3, -1, 7});  // [seq, batch, input]; row 1 ends after step 0
  Tensor lens = i32({2}, {2, 1});
  auto out = run("RNN", {&x, &m.w, &m.r, &m.b, &lens});
  ASSERT_EQ(out.size(), 2u);
  double a1 = TinyRnn::cell(1, 0), a2 = TinyRnn::cell(-1, a1), b1 = TinyRnn::cell(3, 0);
  expectTensor(out[0], DType::kF32, {2, 1, 2, 1}, {a1, b1, a2, 0});
  expectTensor(out[1], DType::kF32, {1, 2, 1}, {a2, b1});
  // Reversed, row 1 still reads only its own single step.
  auto rev = run("RNN", {&x, &m.w, &m.r, &m.b, &lens}, attrs({{"direction", S("reverse")}}));
  ASSERT_EQ(rev.size(), 2u);
  double c1 = TinyRnn::cell(-1, 0), c2 = TinyRnn::cell(1, c1);
  expectTensor(rev[0], DType::kF32, {2, 1, 2, 1}, {c2, b1, c1, 0});
  Tensor tooLong = i32({2}, {3, 1});
  EXPECT_NE(runError("RNN", {&x, &m.w, &m.r, &m.b, &tooLong}).find("sequence_lens[0] = 3"), std::string::npos);
}

TEST(OpsRnn, InitialStateAndBatchFirstLayout) {
  TinyRnn m;
  Tensor x = f32({2, 2, 1}, {1, -1, 2, 0});  // layout 1: [batch, seq, input]
  Tensor h0 = f32({2, 1, 1}, {0.5f, -0.5f});  // [batch, dir, hidden]
  auto out = run("RNN", {&x, &m.w, &m.r, &m.b, nullptr, &h0}, attrs({{"layout", I(1)}}));
  ASSERT_EQ(out.size(), 2u);
  double a1 = TinyRnn::cell(1, 0.5), a2 = TinyRnn::cell(-1, a1);
  double b1 = TinyRnn::cell(2, -0.5), b2 = TinyRnn::cell(0, b1);
  expectTensor(out[0], DType::kF32, {2, 2, 1, 1}, {a1, a2, b1, b2});
  expectTensor(out[1], DType::kF32, {2, 1, 1}, {a2, b2});
}

TEST(OpsRnn, ActivationsTheirParametersAndClip) {
  TinyRnn m;
  Tensor x = f32({1, 1, 1}, {1});  // pre-activation 0.8
  auto one = [&](const AttrMap& a) {
    auto out = run("RNN", {&x, &m.w, &m.r, &m.b}, a);
    return out.size() == 2 ? out[1].getDouble(0) : std::nan("");
  };
  EXPECT_NEAR(one(attrs({{"activations", Ss({"Relu"})}})), 0.8, 1e-6);
  EXPECT_NEAR(one(attrs({{"activations", Ss({"Affine"})}, {"activation_alpha", Fs({2})},
                         {"activation_beta", Fs({1})}})), 2.6, 1e-6);
  EXPECT_NEAR(one(attrs({{"activations", Ss({"ScaledTanh"})}, {"activation_alpha", Fs({3})},
                         {"activation_beta", Fs({0.5f})}})), 3 * std::tanh(0.4), 1e-6);
  EXPECT_NEAR(one(attrs({{"activations", Ss({"HardSigmoid"})}})), 0.2 * 0.8 + 0.5, 1e-6);  // defaults
  EXPECT_NEAR(one(attrs({{"activations", Ss({"sigmoid"})}})), sigmoid(0.8), 1e-6);        // any case
  EXPECT_NEAR(one(attrs({{"clip", F(0.5f)}})), std::tanh(0.5), 1e-6);
  EXPECT_NE(runError("RNN", {&x, &m.w, &m.r, &m.b}, attrs({{"activations", Ss({"Gelu"})}})).find("Gelu"),
            std::string::npos);
  EXPECT_NE(runError("RNN", {&x, &m.w, &m.r, &m.b}, attrs({{"activations", Ss({"Tanh", "Tanh"})}}))
                .find("activations must list 1"),
            std::string::npos);
}

TEST(OpsGru, GatesWithAndWithoutLinearBeforeReset) {
  // z = s(0.2 x + 0.1 h), r = s(-0.3 x + 0.4 h), candidate from W_h = 0.6, R_h = -0.7, Rb_h = 0.25.
  Tensor x = f32({1, 1, 1}, {1.5f}), h0 = f32({1, 1, 1}, {0.8f});
  Tensor w = f32({1, 3, 1}, {0.2f, -0.3f, 0.6f}), r = f32({1, 3, 1}, {0.1f, 0.4f, -0.7f});
  Tensor b = f32({1, 6}, {0, 0, 0, 0, 0, 0.25f});
  double z = sigmoid(0.2 * 1.5 + 0.1 * 0.8), rg = sigmoid(-0.3 * 1.5 + 0.4 * 0.8);
  double candBefore = std::tanh(0.6 * 1.5 + (-0.7) * (rg * 0.8) + 0.25);
  double candLinear = std::tanh(0.6 * 1.5 + rg * ((-0.7) * 0.8 + 0.25));
  auto out = run("GRU", {&x, &w, &r, &b, nullptr, &h0});
  ASSERT_EQ(out.size(), 2u);
  double hBefore = (1 - z) * candBefore + z * 0.8;
  expectTensor(out[0], DType::kF32, {1, 1, 1, 1}, {hBefore});
  expectTensor(out[1], DType::kF32, {1, 1, 1}, {hBefore});
  auto lin = run("GRU", {&x, &w, &r, &b, nullptr, &h0}, attrs({{"linear_before_reset", I(1)}}));
  ASSERT_EQ(lin.size(), 2u);
  expectTensor(lin[1], DType::kF32, {1, 1, 1}, {(1 - z) * candLinear + z * 0.8});
}

TEST(OpsLstm, GatesPeepholesAndCellState) {
  // Gate order i, o, f, c; peepholes i, o, f.
  Tensor x = f32({1, 1, 1}, {1.f}), h0 = f32({1, 1, 1}, {0.5f}), c0 = f32({1, 1, 1}, {-0.4f});
  Tensor w = f32({1, 4, 1}, {0.3f, -0.2f, 0.7f, 0.9f}), r = f32({1, 4, 1}, {0.1f, 0.6f, -0.5f, 0.2f});
  Tensor p = f32({1, 3}, {0.5f, -1.f, 2.f});
  double i = sigmoid(0.3 + 0.05 + 0.5 * -0.4), f = sigmoid(0.7 - 0.25 + 2 * -0.4);
  double cand = std::tanh(0.9 + 0.1), c = f * -0.4 + i * cand;
  double o = sigmoid(-0.2 + 0.3 - 1 * c), h = o * std::tanh(c);
  auto out = run("LSTM", {&x, &w, &r, nullptr, nullptr, &h0, &c0, &p});
  ASSERT_EQ(out.size(), 3u);
  expectTensor(out[0], DType::kF32, {1, 1, 1, 1}, {h});
  expectTensor(out[1], DType::kF32, {1, 1, 1}, {h});
  expectTensor(out[2], DType::kF32, {1, 1, 1}, {c});

  // input_forget couples the gates: f = 1 - i.
  auto coupled = run("LSTM", {&x, &w, &r, nullptr, nullptr, &h0, &c0, &p}, attrs({{"input_forget", I(1)}}));
  ASSERT_EQ(coupled.size(), 3u);
  double c2 = (1 - i) * -0.4 + i * cand;
  expectTensor(coupled[2], DType::kF32, {1, 1, 1}, {c2});
  expectTensor(coupled[1], DType::kF32, {1, 1, 1}, {sigmoid(-0.2 + 0.3 - c2) * std::tanh(c2)});
}

TEST(OpsLstm, NumOutputsSelectsOutputs) {
  Tensor x = f32({1, 1, 1}, {1.f}), w = f32({1, 4, 1}, {1, 1, 1, 1}), r = f32({1, 4, 1}, {0, 0, 0, 0});
  EXPECT_EQ(run("LSTM", {&x, &w, &r}, attrs({{"num_outputs", I(1)}})).size(), 1u);
  EXPECT_EQ(run("LSTM", {&x, &w, &r}, attrs({{"num_outputs", I(2)}})).size(), 2u);
  EXPECT_NE(runError("LSTM", {&x, &w, &r}, attrs({{"num_outputs", I(4)}})).find("num_outputs"), std::string::npos);
  Tensor w3 = f32({1, 3, 1}, {1, 1, 1}), r3 = f32({1, 3, 1}, {0, 0, 0});
  EXPECT_NE(runError("GRU", {&x, &w3, &r3}, attrs({{"num_outputs", I(3)}})).find("num_outputs"), std::string::npos);
}

TEST(OpsRnn, DoubleAndHalfTypes) {
  TinyRnn m;
  double h1 = TinyRnn::cell(1, 0);
  Tensor x = f64({1, 1, 1}, {1}), w = f64({1, 1, 1}, {0.5}), r = f64({1, 1, 1}, {2}), b = f64({1, 2}, {0.1, 0.2});
  auto out = run("RNN", {&x, &w, &r, &b});
  ASSERT_EQ(out.size(), 2u);
  expectTensor(out[1], DType::kF64, {1, 1, 1}, {h1}, 1e-12);
  Tensor xh = ops::f32ToHalf(f32({1, 1, 1}, {1}), DType::kF16), wh = ops::f32ToHalf(m.w, DType::kF16);
  Tensor rh = ops::f32ToHalf(m.r, DType::kF16), bh = ops::f32ToHalf(m.b, DType::kF16);
  auto half = run("RNN", {&xh, &wh, &rh, &bh});
  ASSERT_EQ(half.size(), 2u);
  expectTensor(half[1], DType::kF16, {1, 1, 1}, {h1}, 2e-3);
}

TEST(OpsRnn, InferChecksShapesTypesAndAttributes) {
  TensorType x{DType::kF32, {5, 2, 3}}, w{DType::kF32, {1, 16, 3}}, r{DType::kF32, {1, 16, 4}};
  auto ok = infer("LSTM", {x, w, r}, {}, attrs({{"hidden_size", I(4)}, {"num_outputs", I(3)}}));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[0].str(), "f32[5,1,2,4]");
  EXPECT_EQ((*ok)[2].str(), "f32[1,2,4]");
  auto batchFirst = infer("GRU", {{DType::kF32, {2, 5, 3}}, {DType::kF32, {2, 9, 3}}, {DType::kF32, {2, 9, 3}}},
                          {}, attrs({{"direction", S("bidirectional")}, {"layout", I(1)}}));
  ASSERT_TRUE(batchFirst.ok()) << batchFirst.status().message();
  ASSERT_EQ(batchFirst->size(), 2u);
  EXPECT_EQ((*batchFirst)[0].str(), "f32[2,5,2,3]");
  EXPECT_EQ((*batchFirst)[1].str(), "f32[2,2,3]");

  auto msg = [](const StatusOr<std::vector<TensorType>>& s) { return s.ok() ? std::string() : s.status().message(); };
  EXPECT_NE(msg(infer("LSTM", {x, {DType::kF32, {1, 12, 2}}, r})).find("W must be f32[1,16,3]"), std::string::npos);
  EXPECT_NE(msg(infer("LSTM", {x, w, r}, {}, attrs({{"direction", S("sideways")}}))).find("direction"),
            std::string::npos);
  EXPECT_NE(msg(infer("RNN", {{DType::kI32, {1, 1, 1}}, {DType::kI32, {1, 1, 1}}, {DType::kI32, {1, 1, 1}}}))
                .find("X"),
            std::string::npos);
  TensorType lens{DType::kF32, {2}};
  EXPECT_NE(msg(infer("RNN", {x, {DType::kF32, {1, 4, 3}}, {DType::kF32, {1, 4, 4}}, {}, lens}))
                .find("sequence_lens"),
            std::string::npos);
  EXPECT_NE(msg(infer("RNN", {x, {DType::kF32, {1, 4, 3}}, {DType::kF32, {1, 4, 4}}}, {},
                      attrs({{"clip", F(-1)}})))
                .find("clip"),
            std::string::npos);
}

}  // namespace
}  // namespace pcc::testing
