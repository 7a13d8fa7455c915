// The float32 Attention kernel of runtime/cpu against the reference kernel
// (which accumulates in double), and the cases it must leave to the reference.
//
// Tolerance. With inputs in [-1, 1] and head size D <= 32, a score q.k*scale
// is off by at most (D+2) u D scale (u = 2^-24) in float, about 1e-5 here;
// a softmax weight p then moves by at most p times twice that plus a few u,
// and Y = sum p_j v_j (|v| <= 1, sum p = 1) by at most 2e-5 + T u. The check
// uses |fast - ref| <= 5e-5: far below the O(0.1) error of a wrong head, row,
// stride or mask index.
#include "cpu_test_util.h"

namespace pcc {
namespace {

struct AttentionCase {
  const char* what;
  Dims q, k, v;
  AttrMap attrs;
  DType maskType = DType::kUndefined;  ///< kUndefined: no mask
  Dims mask;
};

/// \returns the largest |fast - reference| of the case, or -1 when the fast
/// kernel declined, with `error` set when either failed.
double worstDifference(const AttentionCase& c, uint64_t seed, std::string& error) {
  Tensor q = randomF32(c.q, seed), k = randomF32(c.k, seed + 1), v = randomF32(c.v, seed + 2), m;
  std::vector<const Tensor*> in = {&q, &k, &v};
  if (c.maskType == DType::kF32) {
    m = randomF32(c.mask, seed + 3);
    in.push_back(&m);
  } else if (c.maskType == DType::kBool) {
    m = Tensor::zeros(DType::kBool, c.mask);
    // Every third element true; a row of a [.., S, T] mask with T <= 2 may be all false.
    for (int64_t i = 0; i < m.numel(); ++i) m.mutableData<uint8_t>()[i] = i % 3 == 0;
    in.push_back(&m);
  }
  auto ref = runOp("Attention", in, c.attrs);
  if (!ref.ok()) {
    error = "reference: " + ref.status().message();
    return 0;
  }
  std::unique_ptr<KernelOverride> fast = cpu::makeFastKernel(OpKind::Attention, c.attrs, {});
  if (!fast) {
    error = "no fast Attention kernel";
    return 0;
  }
  std::vector<Tensor> out;
  auto ran = fast->run(in, out);
  if (!ran.ok()) {
    error = "fast: " + ran.status().message();
    return 0;
  }
  if (!*ran) return -1;
  if (out.size() != 1 || out[0].type() != (*ref)[0].type()) {
    error = "fast output " + (out.empty() ? std::string("missing") : out[0].type().str()) + ", reference " +
            (*ref)[0].type().str();
    return 0;
  }
  double worst = 0;
  for (int64_t i = 0; i < out[0].numel(); ++i) {
    double f = out[0].data<float>()[i], r = (*ref)[0].data<float>()[i];
    worst = std::max(worst, std::isfinite(f) ? std::fabs(f - r) : INFINITY);
  }
  return worst;
}

AttrMap attrs(std::initializer_list<std::pair<const char*, int64_t>> ints, float scale = 0) {
  AttrMap a;
  for (const auto& kv : ints) a.set(kv.first, Attribute(kv.second));
  if (scale != 0) a.set("scale", Attribute(scale));
  return a;
}

TEST(CpuAttention, MatchesReference) {
  const std::vector<AttentionCase> cases = {
      {"4-D", {2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 8}, {}},
      {"4-D, value size != key size", {2, 2, 4, 8}, {2, 2, 6, 8}, {2, 2, 6, 5}, {}},
      {"3-D packed", {2, 5, 4 * 8}, {2, 7, 4 * 8}, {2, 7, 4 * 8}, attrs({{"q_num_heads", 4}, {"kv_num_heads", 4}})},
      {"grouped query", {1, 4, 6, 16}, {1, 2, 6, 16}, {1, 2, 6, 16}, {}},
      {"3-D grouped", {2, 6, 4 * 8}, {2, 6, 2 * 8}, {2, 6, 2 * 8}, attrs({{"q_num_heads", 4}, {"kv_num_heads", 2}})},
      {"causal", {2, 2, 9, 8}, {2, 2, 9, 8}, {2, 2, 9, 8}, attrs({{"is_causal", 1}})},
      {"scale", {1, 2, 4, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}, attrs({}, 0.7f)},
      {"float mask [S, T]", {2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 8}, {}, DType::kF32, {5, 7}},
      {"float mask [B, H, S, T]", {2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 8}, {}, DType::kF32, {2, 3, 5, 7}},
      {"short float mask", {2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 8}, {}, DType::kF32, {1, 1, 5, 4}},
      {"bool mask [B, 1, 1, T]", {3, 2, 4, 8}, {3, 2, 6, 8}, {3, 2, 6, 8}, {}, DType::kBool, {3, 1, 1, 6}},
      {"bool mask, rows masked everywhere", {1, 2, 6, 8}, {1, 2, 2, 8}, {1, 2, 2, 8}, {}, DType::kBool, {6, 2}},
      {"large (threads)", {4, 8, 64, 32}, {4, 8, 64, 32}, {4, 8, 64, 32}, attrs({{"is_causal", 1}})},
      // From 2^18 multiply-adds per head the oneDNN path runs: its layouts, masks and tiles.
      {"oneDNN path, 3-D grouped, float mask", {2, 64, 4 * 64}, {2, 64, 2 * 64}, {2, 64, 2 * 64},
       attrs({{"q_num_heads", 4}, {"kv_num_heads", 2}}), DType::kF32, {64, 64}},
      {"oneDNN path, bool mask [B, 1, 1, T]", {2, 2, 64, 64}, {2, 2, 70, 64}, {2, 2, 70, 48}, {}, DType::kBool,
       {2, 1, 1, 70}},
      {"oneDNN path, tail tile, causal", {1, 1, 301, 16}, {1, 1, 301, 16}, {1, 1, 301, 16}, attrs({{"is_causal", 1}})},
      // A prefill's: causal and a bool mask shorter than the keys (keys past it and after each query are -inf).
      {"oneDNN path, causal, short bool mask", {1, 2, 64, 64}, {1, 2, 80, 64}, {1, 2, 80, 64},
       attrs({{"is_causal", 1}}), DType::kBool, {1, 1, 64, 50}},
  };
  uint64_t seed = 100;
  for (const AttentionCase& c : cases) {
    std::string error;
    double worst = worstDifference(c, seed, error);
    seed += 10;
    EXPECT_EQ(error, "") << c.what;
    EXPECT_GE(worst, 0) << c.what << ": the fast kernel declined";
    EXPECT_LE(worst, 5e-5) << c.what;
  }
}

TEST(CpuAttention, LeavesOtherCasesToTheReference) {
  // Softcap, more than one output, a past key/value: declined.
  const std::vector<AttentionCase> cases = {
      {"softcap", {1, 2, 4, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}, [] {
         AttrMap a;
         a.set("softcap", Attribute(2.0f));
         return a;
       }()},
      {"two outputs", {1, 2, 4, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}, attrs({{"num_outputs", 2}})},
  };
  for (const AttentionCase& c : cases) {
    std::string error;
    EXPECT_EQ(worstDifference(c, 7, error), -1) << c.what;
    EXPECT_EQ(error, "") << c.what;
  }
  Tensor q = randomF32({1, 2, 4, 8}, 1), k = randomF32({1, 2, 4, 8}, 2), v = randomF32({1, 2, 4, 8}, 3);
  Tensor pk = randomF32({1, 2, 3, 8}, 4), pv = randomF32({1, 2, 3, 8}, 5);
  std::unique_ptr<KernelOverride> fast = cpu::makeFastKernel(OpKind::Attention, {}, {});
  ASSERT_TRUE(fast);
  std::vector<Tensor> out;
  auto ran = fast->run({&q, &k, &v, nullptr, &pk, &pv}, out);
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  EXPECT_FALSE(*ran) << "a past key/value is the reference's";
}

}  // namespace

// The large-heads kernel (the CPU backend runs it ahead of a generated
// Attention kernel) declines small heads, and computes large ones with Y
// planned over Q (the memory plan may put it there).
TEST(CpuAttention, LargeHeadsOnlyAndInPlaceOverQ) {
  const AttrMap a = attrs({{"q_num_heads", 4}, {"kv_num_heads", 4}});
  std::unique_ptr<KernelOverride> large = cpu::makeLargeAttentionKernel(a);
  Tensor qs = randomF32({2, 5, 4 * 8}, 1), ks = randomF32({2, 7, 4 * 8}, 2), vs = randomF32({2, 7, 4 * 8}, 3);
  std::vector<Tensor> out;
  auto ran = large->run({&qs, &ks, &vs}, out);
  ASSERT_TRUE(ran.ok());
  EXPECT_FALSE(*ran) << "a small head must be left to the generated kernel";

  Tensor q = randomF32({2, 64, 4 * 64}, 4), k = randomF32({2, 64, 4 * 64}, 5), v = randomF32({2, 64, 4 * 64}, 6);
  auto ref = runOp("Attention", {&q, &k, &v}, a);
  ASSERT_TRUE(ref.ok());
  Tensor y = q.clone();  // Q's buffer, overwritten by Y
  std::vector<Tensor> outs = {y};
  ran = large->run({&y, &k, &v}, outs);
  ASSERT_TRUE(ran.ok() && *ran);
  double worst = 0;
  for (int64_t i = 0; i < y.numel(); ++i)
    worst = std::max(worst, std::fabs(double(y.data<float>()[i]) - (*ref)[0].data<float>()[i]));
  EXPECT_LE(worst, 5e-5);
}

}  // namespace pcc
