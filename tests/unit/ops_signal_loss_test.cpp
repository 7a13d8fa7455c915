// Kernels of the losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss,
// with every reduction, class weights, ignore_index, N-d inputs and dtypes.
#include <cmath>

#include "ops_test_util.h"
#include "runtime/ops/op_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

// Log-probabilities of 2 samples over 3 classes; targets pick -1 and -6.
Tensor nllX() { return f32({2, 3}, {-1, -2, -3, -4, -5, -6}); }
Tensor nllT() { return i64({2}, {0, 2}); }

TEST(OpsSignalLoss, NllReductions) {
  Tensor x = nllX(), t = nllT();
  expectTensor(run1("NegativeLogLikelihoodLoss", {&x, &t}, attrs({{"reduction", S("none")}})), DType::kF32, {2},
               {1, 6});
  expectTensor(run1("NegativeLogLikelihoodLoss", {&x, &t}, attrs({{"reduction", S("sum")}})), DType::kF32, {}, {7});
  // "mean" is the default.
  expectTensor(run1("NegativeLogLikelihoodLoss", {&x, &t}), DType::kF32, {}, {3.5});
}

TEST(OpsSignalLoss, NllWeightsDivideMeanBySumOfWeights) {
  Tensor x = nllX(), t = nllT(), w = f32({3}, {1, 2, 3});
  expectTensor(run1("NegativeLogLikelihoodLoss", {&x, &t, &w}, attrs({{"reduction", S("none")}})), DType::kF32, {2},
               {1, 18});
  expectTensor(run1("NegativeLogLikelihoodLoss", {&x, &t, &w}), DType::kF32, {}, {19.0 / 4.0});
}

TEST(OpsSignalLoss, NllIgnoreIndexDropsElementsFromSumAndCount) {
  Tensor x = nllX(), t = nllT(), w = f32({3}, {1, 2, 3});
  AttrMap ignore2 = attrs({{"ignore_index", I(2)}});
  expectTensor(run1("NegativeLogLikelihoodLoss", {&x, &t}, ignore2), DType::kF32, {}, {1});
  expectTensor(run1("NegativeLogLikelihoodLoss", {&x, &t, &w}, ignore2), DType::kF32, {}, {1});
  // An ignored target may lie outside [0, C) (here -1), as ONNX's tests use.
  Tensor tNeg = i64({2}, {-1, 2});
  expectTensor(run1("NegativeLogLikelihoodLoss", {&x, &tNeg},
                    attrs({{"ignore_index", I(-1)}, {"reduction", S("none")}})),
               DType::kF32, {2}, {0, 6});
}

TEST(OpsSignalLoss, NllSpatialDims) {
  // x [N=1, C=2, d=2]: x[0,:,0] = {-1, -2}, x[0,:,1] = {-3, -4}.
  Tensor x = f32({1, 2, 2}, {-1, -3, -2, -4}), t = i32({1, 2}, {1, 0});
  expectTensor(run1("NegativeLogLikelihoodLoss", {&x, &t}, attrs({{"reduction", S("none")}})), DType::kF32, {1, 2},
               {2, 3});
}

TEST(OpsSignalLoss, NllDoubleAndHalf) {
  Tensor x = f64({2, 3}, {-1, -2, -3, -4, -5, -6}), t = nllT();
  expectTensor(run1("NegativeLogLikelihoodLoss", {&x, &t}), DType::kF64, {}, {3.5});
  Tensor h = ops::f32ToHalf(nllX(), DType::kF16);
  expectTensor(run1("NegativeLogLikelihoodLoss", {&h, &t}), DType::kF16, {}, {3.5}, 1e-3);
}

TEST(OpsSignalLoss, NllErrors) {
  Tensor x = nllX(), bad = i64({2}, {0, 3});
  EXPECT_NE(runError("NegativeLogLikelihoodLoss", {&x, &bad}).find("out of range"), std::string::npos);
  Tensor t = nllT();
  EXPECT_NE(runError("NegativeLogLikelihoodLoss", {&x, &t}, attrs({{"reduction", S("avg")}})).find("reduction"),
            std::string::npos);
  Tensor t3 = i64({3}, {0, 0, 0});
  EXPECT_NE(runError("NegativeLogLikelihoodLoss", {&x, &t3}).find("target must have"), std::string::npos);
  Tensor w = f32({2}, {1, 1});
  EXPECT_NE(runError("NegativeLogLikelihoodLoss", {&x, &t, &w}).find("weights"), std::string::npos);
  auto r = infer("NegativeLogLikelihoodLoss", {{DType::kI32, {2, 3}}, {DType::kI64, {2}}});
  EXPECT_FALSE(r.ok());
}

TEST(OpsSignalLoss, SceLossAndLogProb) {
  // Row 0: softmax(0, ln 3) = (1/4, 3/4); row 1: softmax(0, 0) = (1/2, 1/2).
  Tensor x = f32({2, 2}, {0, std::log(3.f), 0, 0}), t = i64({2}, {1, 0});
  double l0 = -std::log(0.75), l1 = std::log(2.0);
  expectTensor(run1("SoftmaxCrossEntropyLoss", {&x, &t}), DType::kF32, {}, {(l0 + l1) / 2});
  std::vector<Tensor> both =
      run("SoftmaxCrossEntropyLoss", {&x, &t}, attrs({{"num_outputs", I(2)}, {"reduction", S("none")}}));
  ASSERT_EQ(both.size(), 2u);
  expectTensor(both[0], DType::kF32, {2}, {l0, l1});
  expectTensor(both[1], DType::kF32, {2, 2}, {std::log(0.25), std::log(0.75), -l1, -l1});
}

TEST(OpsSignalLoss, SceWeightsIgnoreIndexAndSpatialDims) {
  // x [1, 2, 2]: both positions have logits (0, ln 3) over the classes.
  Tensor x = f32({1, 2, 2}, {0, 0, std::log(3.f), std::log(3.f)}), t = i64({1, 2}, {0, 1});
  Tensor w = f32({2}, {2, 1});
  double l0 = -std::log(0.25), l1 = -std::log(0.75);
  expectTensor(run1("SoftmaxCrossEntropyLoss", {&x, &t, &w}, attrs({{"reduction", S("sum")}})), DType::kF32, {},
               {2 * l0 + l1});
  expectTensor(run1("SoftmaxCrossEntropyLoss", {&x, &t, &w}), DType::kF32, {}, {(2 * l0 + l1) / 3});
  expectTensor(run1("SoftmaxCrossEntropyLoss", {&x, &t, &w}, attrs({{"ignore_index", I(0)}})), DType::kF32, {}, {l1});
}

TEST(OpsSignalLoss, SceInferOutputCount) {
  std::vector<TensorType> in = {{DType::kF32, {3, 5, 2}}, {DType::kI64, {3, 2}}};
  auto one = infer("SoftmaxCrossEntropyLoss", in);
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].str(), "f32[]");
  AttrMap two = attrs({{"num_outputs", I(2)}, {"reduction", S("none")}});
  auto r = infer("SoftmaxCrossEntropyLoss", in, {}, two);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].str(), "f32[3,2]");
  EXPECT_EQ((*r)[1].str(), "f32[3,5,2]");
  EXPECT_FALSE(infer("SoftmaxCrossEntropyLoss", in, {}, attrs({{"num_outputs", I(3)}})).ok());
}

}  // namespace
}  // namespace pcc
