// Attention and RotaryEmbedding on cases small enough to check by hand.
// With scores [1, 0] the softmax is [e/(e+1), 1/(e+1)] = [0.7310586, 0.2689414].
#include <cmath>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

constexpr double kP = 0.7310585786300049;  // e / (e + 1)

TEST(OpsAttention, SoftmaxWeightsTheValues) {
  Tensor q = f32({1, 1, 1, 2}, {1, 0}), k = f32({1, 1, 2, 2}, {1, 0, 0, 0}), v = f32({1, 1, 2, 1}, {10, 20});
  AttrMap unit = attrs({{"scale", F(1)}});
  expectTensor(run1("Attention", {&q, &k, &v}, unit), DType::kF32, {1, 1, 1, 1}, {10 * kP + 20 * (1 - kP)});
  // Default scale 1/sqrt(2): scores [0.7071, 0].
  double p = 1 / (1 + std::exp(-M_SQRT1_2));
  expectTensor(run1("Attention", {&q, &k, &v}), DType::kF32, {1, 1, 1, 1}, {10 * p + 20 * (1 - p)});
  // softcap 0.5: scores [0.5 tanh 2, 0].
  double c = 1 / (1 + std::exp(-0.5 * std::tanh(2.0)));
  expectTensor(run1("Attention", {&q, &k, &v}, attrs({{"scale", F(1)}, {"softcap", F(0.5f)}})), DType::kF32,
               {1, 1, 1, 1}, {10 * c + 20 * (1 - c)});
}

TEST(OpsAttention, MasksCausalAndPadding) {
  Tensor q = f32({1, 1, 2, 2}, {1, 0, 1, 0}), k = f32({1, 1, 2, 2}, {1, 0, 0, 0}), v = f32({1, 1, 2, 1}, {10, 20});
  AttrMap unit = attrs({{"scale", F(1)}});
  double mixed = 10 * kP + 20 * (1 - kP);
  Tensor boolMask = boolean({2, 2}, {1, 0, 1, 1});
  expectTensor(run1("Attention", {&q, &k, &v, &boolMask}, unit), DType::kF32, {1, 1, 2, 1}, {10, mixed});
  Tensor floatMask = f32({1, 2}, {0, -1});  // scores [1, -1] on both rows
  double p2 = 1 / (1 + std::exp(-2.0));
  expectTensor(run1("Attention", {&q, &k, &v, &floatMask}, unit), DType::kF32, {1, 1, 2, 1},
               {10 * p2 + 20 * (1 - p2), 10 * p2 + 20 * (1 - p2)});
  // A mask shorter than the keys masks out the rest.
  Tensor shortMask = f32({1}, {0});
  expectTensor(run1("Attention", {&q, &k, &v, &shortMask}, unit), DType::kF32, {1, 1, 2, 1}, {10, 10});
  expectTensor(run1("Attention", {&q, &k, &v}, attrs({{"scale", F(1)}, {"is_causal", I(1)}})), DType::kF32,
               {1, 1, 2, 1}, {10, mixed});
  // nonpad_kv_seqlen: batch 0 keeps 1 key, batch 1 both.
  Tensor q2 = f32({2, 1, 1, 2}, {1, 0, 1, 0}), k2 = f32({2, 1, 2, 2}, {1, 0, 0, 0, 1, 0, 0, 0});
  Tensor v2 = f32({2, 1, 2, 1}, {10, 20, 10, 20}), lens = ints({1, 2});
  expectTensor(run1("Attention", {&q2, &k2, &v2, nullptr, nullptr, nullptr, &lens}, unit), DType::kF32,
               {2, 1, 1, 1}, {10, mixed});
  Tensor badLens = ints({1});
  EXPECT_NE(runError("Attention", {&q2, &k2, &v2, nullptr, nullptr, nullptr, &badLens}, unit), "");
}

TEST(OpsAttention, PastKeysPresentOutputsAndScores) {
  Tensor q = f32({1, 1, 1, 2}, {1, 0}), k = f32({1, 1, 1, 2}, {1, 0}), v = f32({1, 1, 1, 1}, {10});
  Tensor pk = f32({1, 1, 1, 2}, {0, 0}), pv = f32({1, 1, 1, 1}, {20});
  auto r = run("Attention", {&q, &k, &v, nullptr, &pk, &pv},
               attrs({{"scale", F(1)}, {"num_outputs", I(4)}, {"qk_matmul_output_mode", I(3)}}));
  ASSERT_EQ(r.size(), 4u);
  expectTensor(r[0], DType::kF32, {1, 1, 1, 1}, {20 * (1 - kP) + 10 * kP});
  expectTensor(r[1], DType::kF32, {1, 1, 2, 2}, {0, 0, 1, 0});
  expectTensor(r[2], DType::kF32, {1, 1, 2, 1}, {20, 10});
  expectTensor(r[3], DType::kF32, {1, 1, 1, 2}, {1 - kP, kP});
  r = run("Attention", {&q, &k, &v, nullptr, &pk, &pv}, attrs({{"scale", F(2)}, {"num_outputs", I(4)}}));
  ASSERT_EQ(r.size(), 4u);
  expectTensor(r[3], DType::kF32, {1, 1, 1, 2}, {0, 2});  // mode 0: the scaled q.k
  EXPECT_FALSE(runError("Attention", {&q, &k, &v, nullptr, &pk}).empty()) << "past_value missing";
}

TEST(OpsAttention, GroupedQueryAnd3DInputs) {
  // Two query heads share one key/value head.
  Tensor q = f32({1, 2, 1, 2}, {1, 0, 0, 1}), k = f32({1, 1, 2, 2}, {1, 0, 0, 0}), v = f32({1, 1, 2, 1}, {10, 20});
  expectTensor(run1("Attention", {&q, &k, &v}, attrs({{"scale", F(1)}})), DType::kF32, {1, 2, 1, 1},
               {10 * kP + 20 * (1 - kP), 15});
  // The same as 3-D [B, S, H * D] inputs.
  Tensor q3 = f32({1, 1, 4}, {1, 0, 0, 1}), k3 = f32({1, 2, 2}, {1, 0, 0, 0}), v3 = f32({1, 2, 1}, {10, 20});
  AttrMap heads = attrs({{"scale", F(1)}, {"q_num_heads", I(2)}, {"kv_num_heads", I(1)}});
  expectTensor(run1("Attention", {&q3, &k3, &v3}, heads), DType::kF32, {1, 1, 2}, {10 * kP + 20 * (1 - kP), 15});
  EXPECT_FALSE(runError("Attention", {&q3, &k3, &v3}).empty()) << "3-D inputs need head counts";
  Tensor q3h = f32({1, 3, 1, 2}, {1, 0, 0, 1, 1, 1});
  Tensor k2h = f32({1, 2, 3, 2}, std::vector<float>(12, 0)), v2h = f32({1, 2, 3, 1}, std::vector<float>(6, 0));
  EXPECT_FALSE(runError("Attention", {&q3h, &k2h, &v2h}).empty()) << "3 query heads over 2 kv heads";
}

TEST(OpsRotaryEmbedding, HalvesInterleavedPartialAndPositions) {
  // cos/sin [0, 1] / [1, 0]: the first pair rotates by 90 degrees, the second stays.
  Tensor x = f32({1, 1, 1, 4}, {1, 2, 3, 4}), cs = f32({1, 1, 2}, {0, 1}), sn = f32({1, 1, 2}, {1, 0});
  expectTensor(run1("RotaryEmbedding", {&x, &cs, &sn}), DType::kF32, {1, 1, 1, 4}, {-3, 2, 1, 4});
  expectTensor(run1("RotaryEmbedding", {&x, &cs, &sn}, attrs({{"interleaved", I(1)}})), DType::kF32, {1, 1, 1, 4},
               {-2, 1, 3, 4});
  Tensor cs1 = f32({1, 1, 1}, {0}), sn1 = f32({1, 1, 1}, {1});
  expectTensor(run1("RotaryEmbedding", {&x, &cs1, &sn1}, attrs({{"rotary_embedding_dim", I(2)}})), DType::kF32,
               {1, 1, 1, 4}, {-2, 1, 3, 4});
  // position_ids pick cache rows: row 1 holds the rotation, row 0 the identity.
  Tensor cache = f32({2, 2}, {1, 1, 0, 1}), sinCache = f32({2, 2}, {0, 0, 1, 0}), pos = i64({1, 1}, {1});
  expectTensor(run1("RotaryEmbedding", {&x, &cache, &sinCache, &pos}), DType::kF32, {1, 1, 1, 4}, {-3, 2, 1, 4});
  Tensor x3 = f32({1, 1, 4}, {1, 2, 3, 4});
  expectTensor(run1("RotaryEmbedding", {&x3, &cs, &sn}, attrs({{"num_heads", I(1)}})), DType::kF32, {1, 1, 4},
               {-3, 2, 1, 4});
  EXPECT_FALSE(runError("RotaryEmbedding", {&x3, &cs, &sn}).empty()) << "3-D input needs num_heads";
  Tensor badPos = i64({1, 1}, {2});
  EXPECT_FALSE(runError("RotaryEmbedding", {&x, &cache, &sinCache, &badPos}).empty());
}

}  // namespace
}  // namespace pcc::testing
