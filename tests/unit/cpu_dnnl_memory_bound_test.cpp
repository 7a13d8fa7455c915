// The memory-bound oneDNN kernels of runtime/cpu (Add, Sub, Mul, Div, Relu,
// Tanh, Pow, MaxPool, AveragePool) against the reference kernels. Arithmetic
// and MaxPool round once per element (or not at all), so they must agree to
// one ulp. Tanh and Pow are approximations in oneDNN and correctly rounded (or
// nearly) in the reference, computed in double: each is within about one ulp
// of the exact value, so they are held to two. AveragePool sums a window, and
// is held to the summation-order bound of cpu_test_util.h with K the window size.
#include "cpu_test_util.h"

namespace pcc {
namespace {

struct BinaryCase {
  Dims a, b;
  bool swapped;     ///< only a commuting op can take it (the first operand is the broadcast one)
  bool twoSided;    ///< both operands broadcast: always declined
};

TEST(CpuDnnlBinary, MatchesReferenceOverBroadcasts) {
  const std::vector<BinaryCase> cases = {
      {{3, 4, 5}, {3, 4, 5}, false, false}, {{4, 128, 768}, {768}, false, false},
      {{768}, {4, 128, 768}, true, false},  {{2, 3, 4}, {2, 1, 4}, false, false},
      {{2, 1, 4}, {2, 3, 4}, true, false},  {{3, 4}, {}, false, false},
      {{}, {3, 4}, true, false},            {{}, {}, false, false},
      {{5}, {1}, false, false},             {{2, 3, 1}, {1, 3, 4}, false, true},
      {{4, 12, 128, 128}, {4, 1, 1, 128}, false, false}, {{1}, {7, 1, 5}, true, false},
  };
  uint64_t seed = 5000;
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    bool commutes = std::string(op) == "Add" || std::string(op) == "Mul";
    for (const BinaryCase& c : cases) {
      Tensor a = randomF32(c.a, seed++), b = randomF32(c.b, seed++);
      Outcome o = compareExact(op, {&a, &b}, {});
      std::string what = std::string(op) + " " + dimsToString(c.a) + " " + dimsToString(c.b);
      EXPECT_EQ(o.error, "") << what;
      bool expectRan = !c.twoSided && (commutes || !c.swapped);
      EXPECT_EQ(o.ran, expectRan) << what;
      EXPECT_LE(o.worst, 1.0) << what;
    }
  }
}

TEST(CpuDnnlBinary, SpecialValues) {
  Tensor a = Tensor::fromVector<float>(DType::kF32, {6}, {1.0f, -1.0f, 0.0f, INFINITY, NAN, 3.0f});
  Tensor b = Tensor::fromVector<float>(DType::kF32, {6}, {0.0f, 0.0f, 0.0f, 2.0f, 1.0f, -INFINITY});
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    Outcome o = compareExact(op, {&a, &b}, {});
    EXPECT_EQ(o.error, "") << op;
    EXPECT_TRUE(o.ran) << op;
    EXPECT_LE(o.worst, 1.0) << op;
  }
}

TEST(CpuDnnlBinary, OtherTypesAreDeclined) {
  Tensor a = Tensor::fromVector<int64_t>(DType::kI64, {2}, {1, 2});
  Outcome o = compareExact("Add", {&a, &a}, {});
  EXPECT_EQ(o.error, "");
  EXPECT_FALSE(o.ran);
}

TEST(CpuDnnlEltwise, ReluMatchesReference) {
  Tensor x = randomF32({4, 8, 9, 9}, 77), s = randomF32({}, 78);
  for (const Tensor* t : {&x, &s}) {
    Outcome o = compareExact("Relu", {t}, {});
    EXPECT_EQ(o.error, "");
    EXPECT_TRUE(o.ran);
    EXPECT_EQ(o.worst, 0.0);
  }
  Tensor special = Tensor::fromVector<float>(DType::kF32, {7}, {-INFINITY, INFINITY, -0.0f, 0.0f, -1e-38f, NAN, -NAN});
  Outcome o = compareExact("Relu", {&special}, {});
  EXPECT_TRUE(o.ran);
  EXPECT_EQ(o.worst, 0.0);
  // Clip has no fast kernel: oneDNN's clip would turn NaN into a bound.
  EXPECT_EQ(cpu::makeFastKernel(OpKind::Clip, {}, {}), nullptr);
}

/// \returns n values spread over [-r, r], with a few special ones.
Tensor spread(int64_t n, float r) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(-r + 2 * r * static_cast<float>(i) / static_cast<float>(n - 1));
  v.insert(v.end(), {0.0f, -0.0f, 1e-30f, -1e-30f, 1.0f, -1.0f});
  return Tensor::fromVector<float>(DType::kF32, {static_cast<int64_t>(v.size())}, v);
}

TEST(CpuDnnlEltwise, TanhWithinFewUlps) {
  for (float r : {0.01f, 1.0f, 10.0f, 100.0f}) {
    Tensor x = spread(20001, r);
    Outcome o = compareExact("Tanh", {&x}, {}, 1);
    EXPECT_EQ(o.error, "");
    EXPECT_TRUE(o.ran);
    EXPECT_LE(o.worst, 2.0) << r;  // measured: at most 1.0
  }
}

/// Gelu and Swish go to 0 in their negative tail, where oneDNN computes
/// x * (1 + erf(x / sqrt 2)) / 2 (or its tanh and sigmoid analogues) in float,
/// as the float32 decomposition the exporters write does: 1 + erf(...)
/// cancels there, leaving an absolute error of about one ulp of |x|, while
/// the reference computes in double. So each element must be within 8 ulps
/// of |ref| plus one ulp of |x|.
TEST(CpuDnnlEltwise, GeluAndSwishWithinFewUlps) {
  struct Case {
    std::string what;
    const char* op;
    AttrMap attrs;
  };
  AttrMap tanh, alpha;
  tanh.set("approximate", std::string("tanh"));
  alpha.set("alpha", 0.5f);
  const std::vector<Case> cases = {
      {"Gelu", "Gelu", {}}, {"Gelu tanh", "Gelu", tanh}, {"Swish", "Swish", {}}, {"Swish alpha 0.5", "Swish", alpha}};
  for (const Case& c : cases)
    for (float r : {0.01f, 1.0f, 10.0f, 100.0f}) {
      Tensor x = spread(20001, r);
      auto ref = runOp(c.op, {&x}, c.attrs);
      ASSERT_TRUE(ref.ok()) << ref.status().message();
      Outcome o;
      std::vector<Tensor> out;
      ASSERT_TRUE(runFast(c.op, {&x}, c.attrs, {}, 1, (*ref)[0], o, out)) << c.what << ": " << o.error;
      const float* f = out[0].data<float>();
      const float* want = (*ref)[0].data<float>();
      double worst = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        double bound = std::ldexp(1.0, -23) * (8 * std::fabs(want[i]) + std::fabs(x.data<float>()[i])) + 1e-38;
        worst = std::max(worst, std::fabs(static_cast<double>(f[i]) - want[i]) / bound);
        ASSERT_TRUE(std::isfinite(f[i])) << c.what << " at " << x.data<float>()[i];
      }
      EXPECT_LE(worst, 1.0) << c.what << ", r " << r;
    }
}

TEST(CpuDnnlEltwise, PowWithScalarExponentWithinFewUlps) {
  for (float e : {2.0f, 3.0f, 0.5f, -1.0f, 1.5f}) {
    Tensor x = spread(20001, 8.0f);
    Tensor ex = Tensor::scalarF32(e);
    Outcome o = compareExact("Pow", {&x, &ex}, {}, 1);
    EXPECT_EQ(o.error, "");
    EXPECT_TRUE(o.ran);
    EXPECT_LE(o.worst, 2.0) << e;  // measured: at most 0.97
  }
  // A tensor exponent, or one that changes the shape, stays on the reference.
  Tensor x = randomF32({3, 4}, 1), ex = randomF32({4}, 2);
  EXPECT_FALSE(compareExact("Pow", {&x, &ex}, {}).ran);
}

TEST(CpuDnnlPool, MaxPoolNaNAsTheReference) {
  Tensor p = Tensor::fromVector<float>(DType::kF32, {1, 1, 4}, {NAN, 1.0f, 2.0f, NAN});
  AttrMap a;
  a.set("kernel_shape", Dims{2});
  Outcome o = compareExact("MaxPool", {&p}, a);
  EXPECT_TRUE(o.ran);
  EXPECT_EQ(o.worst, 0.0);
}

struct PoolCase {
  std::string name;
  Dims x;
  Dims kernel, strides, dilations, pads;
  int64_t ceil = 0, includePad = 0;
  bool expectRan = true;
};

AttrMap poolAttrs(const PoolCase& c) {
  AttrMap a;
  a.set("kernel_shape", c.kernel);
  if (!c.strides.empty()) a.set("strides", c.strides);
  if (!c.dilations.empty()) a.set("dilations", c.dilations);
  if (!c.pads.empty()) a.set("pads", c.pads);
  if (c.ceil) a.set("ceil_mode", c.ceil);
  if (c.includePad) a.set("count_include_pad", c.includePad);
  return a;
}

TEST(CpuDnnlPool, MatchesReference) {
  const std::vector<PoolCase> cases = {
      {"3x3 s2 p1 (ResNet)", {2, 8, 16, 16}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}},
      {"3x3 s2 no pads (Inception)", {1, 4, 17, 17}, {3, 3}, {2, 2}, {}, {}},
      {"3x3 s1 p1 (Inception average)", {1, 4, 9, 9}, {3, 3}, {1, 1}, {}, {1, 1, 1, 1}},
      {"3x3 s1 p1 include pads", {1, 4, 9, 9}, {3, 3}, {1, 1}, {}, {1, 1, 1, 1}, 0, 1},
      {"asymmetric pads", {1, 3, 10, 11}, {2, 3}, {2, 2}, {}, {0, 1, 1, 0}},
      {"asymmetric pads include pads", {1, 3, 10, 11}, {2, 3}, {2, 2}, {}, {0, 1, 1, 0}, 0, 1},
      {"ceil mode", {1, 3, 10, 10}, {3, 3}, {2, 2}, {}, {}, 1},
      {"ceil mode include pads (overhang)", {1, 3, 10, 10}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}, 1, 1, false},
      {"dilated", {1, 2, 12, 12}, {3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}},
      {"1-D", {2, 3, 20}, {4}, {3}, {}, {1, 2}},
      {"3-D", {1, 2, 6, 7, 8}, {2, 3, 2}, {2, 1, 2}, {}, {0, 1, 1, 1, 0, 0}},
      {"2x2 s2 (VGG)", {2, 16, 8, 8}, {2, 2}, {2, 2}, {}, {}},
  };
  uint64_t seed = 9000;
  for (const PoolCase& c : cases) {
    Tensor x = randomF32(c.x, seed++);
    AttrMap a = poolAttrs(c);
    Outcome mx = compareExact("MaxPool", {&x}, a);
    EXPECT_EQ(mx.error, "") << "MaxPool " << c.name;
    EXPECT_TRUE(mx.ran) << "MaxPool " << c.name;  // max has no count to get wrong
    EXPECT_EQ(mx.worst, 0.0) << "MaxPool " << c.name;
    int64_t k = 1;
    for (int64_t d : c.kernel) k *= d;
    Outcome av = compareWithReference("AveragePool", {&x}, a, k);
    EXPECT_EQ(av.error, "") << "AveragePool " << c.name;
    EXPECT_EQ(av.ran, c.expectRan) << "AveragePool " << c.name;
    EXPECT_LE(av.worst, 1.0) << "AveragePool " << c.name;
  }
}

}  // namespace
}  // namespace pcc
