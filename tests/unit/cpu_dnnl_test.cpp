// The oneDNN kernels of runtime/cpu against the reference kernels of
// runtime/ops, on seeded random inputs over many shapes and attributes.
//
// Tolerance. Both kernels compute each output as a sum of K products (plus a
// bias or C term) in float32, in different orders (oneDNN blocks and
// vectorizes the reduction). The classic bound for a sum of K terms in any
// order is |error| <= (K-1) u sum|terms| to first order, u = 2^-24, so the two
// results differ by at most 2 (K+1) u (|A||B|) element by element, where
// |A||B| is the same op run by the reference kernel on the absolute values of
// the inputs. The checks use 4 (K+2) u (|A||B|) + 1e-30: a factor 2 of slack
// for the scaling by alpha and beta, and far below the O(|A||B|) error of a
// wrong index, stride or pad, which the Broken* tests show is caught.
#include "cpu_test_util.h"

namespace pcc {
namespace {

// ---- MatMul -------------------------------------------------------------------

struct MatMulCase {
  Dims a, b;
};

TEST(CpuDnnlMatMul, MatchesReference) {
  const std::vector<MatMulCase> cases = {
      {{2, 3}, {3, 4}},           {{1, 1}, {1, 1}},
      {{7, 13}, {13, 5}},         {{64, 128}, {128, 96}},
      {{8, 1000}, {1000, 8}},     {{3}, {3, 4}},
      {{4, 3}, {3}},              {{5}, {5}},
      {{2, 3, 4}, {4, 5}},        {{2, 3, 4}, {2, 4, 5}},
      {{2, 1, 3, 4}, {1, 5, 4, 6}}, {{1, 4, 3}, {3, 3, 2}},
      {{3}, {2, 3, 4}},           {{2, 2, 3, 4}, {4}},
      {{4, 8, 16, 32}, {4, 8, 32, 16}}, {{1, 2, 1, 3, 4}, {2, 1, 2, 4, 3}},
      {{3, 4}, {2, 2, 4, 5}},     {{2, 5, 1, 6}, {6, 1}},
  };
  uint64_t seed = 1;
  for (const MatMulCase& c : cases) {
    Tensor a = randomF32(c.a, seed++), b = randomF32(c.b, seed++);
    int64_t k = c.a.back();
    Outcome o = compareWithReference("MatMul", {&a, &b}, {}, k);
    std::string what = dimsToString(c.a) + " x " + dimsToString(c.b);
    EXPECT_EQ(o.error, "") << what;
    EXPECT_TRUE(o.ran) << what << ": the fast kernel declined";
    EXPECT_LE(o.worst, 1.0) << what;
  }
}

/// \returns the largest |fast - reference| of `op` on `in` through `fast`.
double worstAgainstReference(KernelOverride& fast, const std::string& op, const std::vector<const Tensor*>& in,
                             const AttrMap& attrs) {
  auto ref = runOp(op, in, attrs);
  std::vector<Tensor> out;
  auto ran = fast.run(in, out);
  if (!ref.ok() || !ran.ok() || !*ran) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < out[0].numel(); ++i)
    worst = std::max(worst, std::fabs(double(out[0].data<float>()[i]) - (*ref)[0].data<float>()[i]));
  return worst;
}

// A constant B is packed once into oneDNN's layout and the copy serves every
// call; another buffer (another weight) is packed afresh, not mistaken for it.
TEST(CpuDnnlMatMul, ConstantWeightIsPackedOnceAndReused) {
  Tensor w = randomF32({96, 300}, 3), w2 = randomF32({96, 300}, 4);
  for (OpKind op : {OpKind::MatMul, OpKind::Gemm}) {
    const std::string name = op == OpKind::MatMul ? "MatMul" : "Gemm";
    std::unique_ptr<KernelOverride> fast = cpu::makeFastKernel(op, AttrMap(), {false, true});
    for (uint64_t s = 0; s < 3; ++s) {
      Tensor x = randomF32({64, 96}, 10 + s);
      EXPECT_LT(worstAgainstReference(*fast, name, {&x, &w}, AttrMap()), 1e-4) << name << " call " << s;
    }
    Tensor x = randomF32({64, 96}, 20);
    EXPECT_LT(worstAgainstReference(*fast, name, {&x, &w2}, AttrMap()), 1e-4) << name << " other weight";
    // Folded batch: [2, 32, 96] x [96, 300] is one [64, 96] product on the packed weight.
    if (op == OpKind::MatMul) {
      Tensor x3 = randomF32({2, 32, 96}, 21);
      EXPECT_LT(worstAgainstReference(*fast, name, {&x3, &w2}, AttrMap()), 1e-4) << "batched A";
    }
  }
}

TEST(CpuDnnlMatMul, DeclinesOtherTypesAndEmptyShapes) {
  std::unique_ptr<KernelOverride> fast = cpu::makeFastKernel(OpKind::MatMul, {}, {});
  ASSERT_TRUE(fast);
  Tensor a = Tensor::zeros(DType::kF64, {2, 3}), b = Tensor::zeros(DType::kF64, {3, 2});
  std::vector<Tensor> out;
  auto r = fast->run({&a, &b}, out);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_TRUE(out.empty());
  Tensor e = Tensor::zeros(DType::kF32, {0, 3}), f = Tensor::zeros(DType::kF32, {3, 2});
  r = fast->run({&e, &f}, out);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  // Through runOp the reference kernel then does it.
  auto viaRunOp = runOp("MatMul", {&e, &f}, {}, fast.get());
  ASSERT_TRUE(viaRunOp.ok()) << viaRunOp.status().message();
  EXPECT_EQ((*viaRunOp)[0].shape(), (Dims{0, 2}));
}

TEST(CpuDnnlMatMul, BadShapesAreErrorsNotCrashes) {
  std::unique_ptr<KernelOverride> fast = cpu::makeFastKernel(OpKind::MatMul, {}, {});
  Tensor a = randomF32({2, 3}, 1), b = randomF32({4, 2}, 2);
  auto r = runOp("MatMul", {&a, &b}, {}, fast.get());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
}

// ---- Gemm ---------------------------------------------------------------------

TEST(CpuDnnlGemm, MatchesReferenceOverTransposesScalesAndBiasShapes) {
  struct Size {
    int64_t m, n, k;
  };
  const std::vector<Size> sizes = {{5, 7, 3}, {1, 9, 17}, {33, 20, 64}};
  uint64_t seed = 100;
  int cases = 0;
  for (const Size& z : sizes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float alpha : {1.0f, 0.5f, -2.0f})
          for (float beta : {1.0f, 0.25f})
            for (const Dims& cs : std::vector<Dims>{{-1}, {z.n}, {1, z.n}, {z.m, 1}, {z.m, z.n}, {}, {1}}) {
              bool withC = cs != Dims{-1};
              Tensor a = randomF32(ta ? Dims{z.k, z.m} : Dims{z.m, z.k}, seed++);
              Tensor b = randomF32(tb ? Dims{z.n, z.k} : Dims{z.k, z.n}, seed++);
              Tensor c = withC ? randomF32(cs, seed++) : Tensor();
              AttrMap attrs, mag;
              attrs.set("transA", int64_t{ta});
              attrs.set("transB", int64_t{tb});
              attrs.set("alpha", alpha);
              attrs.set("beta", beta);
              mag = attrs;
              mag.set("alpha", std::fabs(alpha));
              mag.set("beta", std::fabs(beta));
              std::vector<const Tensor*> in = {&a, &b};
              if (withC) in.push_back(&c);
              Outcome o = compareWithReference("Gemm", in, attrs, z.k, {}, &mag);
              std::string what = "m,n,k " + std::to_string(z.m) + "," + std::to_string(z.n) + "," +
                                 std::to_string(z.k) + " transA " + std::to_string(ta) + " transB " +
                                 std::to_string(tb) + " alpha " + std::to_string(alpha) + " beta " +
                                 std::to_string(beta) + " C " + (withC ? dimsToString(cs) : "none");
              EXPECT_EQ(o.error, "") << what;
              EXPECT_TRUE(o.ran) << what << ": the fast kernel declined";
              EXPECT_LE(o.worst, 1.0) << what;
              ++cases;
            }
  EXPECT_EQ(cases, 3 * 4 * 3 * 2 * 7);
}

// ---- Conv ---------------------------------------------------------------------

struct ConvCase {
  std::string name;
  Dims x, w;
  int64_t group = 1;
  Dims strides, dilations, pads;
  std::string autoPad;
};

AttrMap convAttrs(const ConvCase& c) {
  AttrMap a;
  if (c.group != 1) a.set("group", c.group);
  if (!c.strides.empty()) a.set("strides", c.strides);
  if (!c.dilations.empty()) a.set("dilations", c.dilations);
  if (!c.pads.empty()) a.set("pads", c.pads);
  if (!c.autoPad.empty()) a.set("auto_pad", c.autoPad);
  return a;
}

const std::vector<ConvCase>& convCases() {
  static const std::vector<ConvCase> cases = {
      {"basic 3x3 pad 1", {1, 3, 8, 8}, {4, 3, 3, 3}, 1, {}, {}, {1, 1, 1, 1}, ""},
      {"stride 2x3, asymmetric pads, unused tail", {2, 4, 9, 10}, {6, 4, 3, 3}, 1, {2, 3}, {}, {0, 1, 2, 0}, ""},
      {"dilation 2x1", {1, 4, 9, 8}, {5, 4, 3, 2}, 1, {}, {2, 1}, {}, ""},
      {"dilation and stride and pads", {2, 3, 12, 11}, {4, 3, 3, 3}, 1, {2, 2}, {2, 3}, {2, 0, 1, 3}, ""},
      {"groups 2", {1, 4, 7, 7}, {6, 2, 3, 3}, 2, {}, {}, {1, 1, 1, 1}, ""},
      {"groups 3 stride 2", {2, 6, 9, 9}, {9, 2, 3, 3}, 3, {2, 2}, {}, {1, 0, 0, 1}, ""},
      {"depthwise stride 2", {2, 8, 10, 10}, {8, 1, 3, 3}, 8, {2, 2}, {}, {1, 1, 1, 1}, ""},
      {"depthwise multiplier 2", {1, 8, 6, 6}, {16, 1, 3, 3}, 8, {}, {}, {1, 1, 1, 1}, ""},
      {"depthwise 5x5 dilated", {1, 16, 11, 11}, {16, 1, 5, 5}, 16, {}, {2, 2}, {4, 4, 4, 4}, ""},
      {"1x1", {2, 16, 7, 7}, {32, 16, 1, 1}, 1, {}, {}, {}, ""},
      {"1x1 stride 2", {2, 16, 8, 8}, {24, 16, 1, 1}, 1, {2, 2}, {}, {}, ""},
      {"1x1 padded", {1, 8, 5, 5}, {4, 8, 1, 1}, 1, {}, {}, {1, 0, 0, 1}, ""},
      {"1x1 grouped", {1, 8, 5, 5}, {6, 4, 1, 1}, 2, {}, {}, {}, ""},
      {"1x1 1-D", {2, 8, 9}, {5, 8, 1}, 1, {}, {}, {}, ""},
      {"1x1x1 3-D", {1, 4, 3, 4, 5}, {6, 4, 1, 1, 1}, 1, {}, {}, {}, ""},
      {"7x7 stride 2 pad 3 (ResNet stem)", {1, 3, 32, 32}, {8, 3, 7, 7}, 1, {2, 2}, {}, {3, 3, 3, 3}, ""},
      {"kernel larger than input", {1, 1, 2, 2}, {1, 1, 3, 3}, 1, {}, {}, {1, 1, 1, 1}, ""},
      {"SAME_UPPER stride 2", {1, 3, 9, 9}, {2, 3, 4, 4}, 1, {2, 2}, {}, {}, "SAME_UPPER"},
      {"SAME_LOWER", {1, 3, 8, 7}, {2, 3, 4, 3}, 1, {}, {}, {}, "SAME_LOWER"},
      {"VALID", {1, 3, 8, 7}, {2, 3, 4, 3}, 1, {}, {}, {}, "VALID"},
      {"1-D", {2, 3, 20}, {4, 3, 5}, 1, {2}, {2}, {1, 3}, ""},
      {"1-D depthwise", {1, 6, 16}, {6, 1, 3}, 6, {}, {}, {1, 1}, ""},
      {"3-D", {1, 2, 5, 6, 7}, {3, 2, 3, 2, 3}, 1, {1, 2, 1}, {}, {1, 0, 1, 0, 1, 1}, ""},
      {"3-D groups 2", {1, 4, 4, 4, 4}, {4, 2, 3, 3, 3}, 2, {}, {}, {1, 1, 1, 1, 1, 1}, ""},
      {"3-D dilated", {1, 2, 7, 7, 7}, {2, 2, 2, 2, 2}, 1, {2, 1, 1}, {2, 2, 3}, {}, ""},
      {"wide channels", {1, 64, 14, 14}, {64, 64, 3, 3}, 1, {}, {}, {1, 1, 1, 1}, ""},
  };
  return cases;
}

TEST(CpuDnnlConv, MatchesReferenceWithAndWithoutBias) {
  uint64_t seed = 1000;
  for (const ConvCase& c : convCases())
    for (bool withBias : {false, true}) {
      Tensor x = randomF32(c.x, seed++), w = randomF32(c.w, seed++), b = randomF32({c.w[0]}, seed++);
      std::vector<const Tensor*> in = {&x, &w};
      if (withBias) in.push_back(&b);
      int64_t k = 1;
      for (size_t i = 1; i < c.w.size(); ++i) k *= c.w[i];
      Outcome o = compareWithReference("Conv", in, convAttrs(c), k);
      std::string what = c.name + (withBias ? " with bias" : "");
      EXPECT_EQ(o.error, "") << what;
      EXPECT_TRUE(o.ran) << what << ": the fast kernel declined";
      EXPECT_LE(o.worst, 1.0) << what;
    }
}

TEST(CpuDnnlConv, ConstantWeightIsReorderedOnceAndReused) {
  const ConvCase& c = convCases()[3];
  Tensor w = randomF32(c.w, 7), b = randomF32({c.w[0]}, 8);
  std::unique_ptr<KernelOverride> fast = cpu::makeFastKernel(OpKind::Conv, convAttrs(c), {false, true, true});
  // Several inputs through one kernel: the kept weight must serve all of them.
  for (uint64_t s = 0; s < 3; ++s) {
    Tensor x = randomF32(c.x, 20 + s);
    auto ref = runOp("Conv", {&x, &w, &b}, convAttrs(c));
    ASSERT_TRUE(ref.ok());
    std::vector<Tensor> out;
    auto ran = fast->run({&x, &w, &b}, out);
    ASSERT_TRUE(ran.ok() && *ran);
    double worst = 0;
    for (int64_t i = 0; i < out[0].numel(); ++i)
      worst = std::max(worst, std::fabs(double(out[0].data<float>()[i]) - (*ref)[0].data<float>()[i]));
    EXPECT_LT(worst, 1e-4) << "call " << s;
  }
  // Another weight buffer (another plan, another instruction) is not mistaken for the kept one.
  Tensor w2 = randomF32(c.w, 9), x = randomF32(c.x, 30);
  auto ref = runOp("Conv", {&x, &w2, &b}, convAttrs(c));
  std::vector<Tensor> out;
  auto ran = fast->run({&x, &w2, &b}, out);
  ASSERT_TRUE(ref.ok() && ran.ok() && *ran);
  double worst = 0;
  for (int64_t i = 0; i < out[0].numel(); ++i)
    worst = std::max(worst, std::fabs(double(out[0].data<float>()[i]) - (*ref)[0].data<float>()[i]));
  EXPECT_LT(worst, 1e-4);
}

TEST(CpuDnnlConv, ShapeChangeBetweenCallsMakesANewPrimitive) {
  AttrMap attrs;
  attrs.set("pads", Dims{1, 1, 1, 1});
  std::unique_ptr<KernelOverride> fast = cpu::makeFastKernel(OpKind::Conv, attrs, {});
  Tensor w = randomF32({4, 3, 3, 3}, 1);
  for (int64_t side : {5, 9, 5}) {
    Tensor x = randomF32({1, 3, side, side}, side);
    auto r = runOp("Conv", {&x, &w}, attrs, fast.get());
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)[0].shape(), (Dims{1, 4, side, side}));
  }
}

// ---- threads ------------------------------------------------------------------

TEST(CpuThreads, PerRankCountDividesTheCores) {
  int cores = cpu::availableCores();
  EXPECT_GE(cores, 1);
  EXPECT_EQ(cpu::threadsPerRank(1), cores);
  EXPECT_EQ(cpu::threadsPerRank(cores * 4), 1);
  EXPECT_EQ(cpu::threadsPerRank(0), cores);
  cpu::setKernelThreads(1);
  EXPECT_EQ(cpu::kernelThreads(), 1);
  cpu::setKernelThreads(0);
  EXPECT_EQ(cpu::kernelThreads(), 1);
  cpu::setKernelThreads(cores);
  EXPECT_EQ(cpu::kernelThreads(), cores);
}

// ---- Empty tensors and long epilogues ------------------------------------------

// No tensor of zero elements reaches oneDNN (a batched matmul with an empty
// batch traps with SIGFPE while oneDNN makes its primitive): every oneDNN
// kernel declines such a call, and the reference kernel computes it.
TEST(CpuDnnlEmpty, EmptyTensorsAreDeclined) {
  struct Case {
    std::string op;
    std::vector<Dims> in;
    AttrMap attrs;
  };
  AttrMap pool;
  pool.set("kernel_shape", std::vector<int64_t>{2, 2});
  const std::vector<Case> cases = {
      {"MatMul", {{0, 3, 4}, {4, 5}}, {}},       {"MatMul", {{2, 0, 4}, {4, 5}}, {}},
      {"MatMul", {{0, 1, 3, 4}, {1, 2, 4, 5}}, {}}, {"MatMul", {{1, 3, 4}, {0, 4, 5}}, {}},
      {"MatMul", {{3, 0}, {0, 5}}, {}},          {"Gemm", {{0, 4}, {4, 5}}, {}},
      {"Conv", {{0, 3, 8, 8}, {4, 3, 3, 3}}, {}}, {"MaxPool", {{0, 3, 8, 8}}, pool},
      {"AveragePool", {{2, 0, 8, 8}}, pool},     {"Add", {{0, 4}, {4}}, {}},
      {"Relu", {{0}}, {}},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    std::vector<Tensor> in;
    for (const Dims& d : c.in) in.push_back(randomF32(d, seed++));
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : in) ptrs.push_back(&t);
    std::string what = c.op + " of " + dimsToString(c.in[0]);
    for (bool constant : {false, true}) {
      std::unique_ptr<KernelOverride> fast = cpu::makeFastKernel(*opFromName(c.op), c.attrs, {false, constant});
      ASSERT_TRUE(fast) << what;
      std::vector<Tensor> out;
      auto ran = fast->run(ptrs, out);
      ASSERT_TRUE(ran.ok()) << what << ": " << ran.status().message();
      EXPECT_FALSE(*ran) << what << ": the oneDNN kernel ran on an empty tensor";
    }
    auto ref = runOp(c.op, ptrs, c.attrs);
    EXPECT_TRUE(ref.ok()) << what << ": " << ref.status().message();
  }
  // Folded with an epilogue: not made for an empty operand.
  Epilogue relu;
  relu.steps.push_back({EpilogueOp::kRelu, -1, 0, false});
  for (const std::vector<TensorType>& types : {std::vector<TensorType>{{DType::kF32, {0, 3, 4}}, {DType::kF32, {4, 5}}},
                                               std::vector<TensorType>{{DType::kF32, {2, 0, 4}}, {DType::kF32, {4, 5}}}})
    EXPECT_EQ(cpu::makeEpilogueKernel("MatMul", AttrMap(), {false, true}, types, 2, relu), nullptr)
        << types[0].str();
}

// A chain longer than oneDNN takes post-ops (an edited plan's kernel table)
// is not folded: no kernel, and no exception out of oneDNN.
TEST(CpuDnnlEpilogue, ChainBeyondThePostOpLimitIsNotFolded) {
  Epilogue e;
  for (int i = 0; i < 5000; ++i) e.steps.push_back({EpilogueOp::kRelu, -1, 0, false});
  const std::vector<TensorType> mm = {{DType::kF32, {4, 16}}, {DType::kF32, {16, 8}}};
  EXPECT_EQ(cpu::makeEpilogueKernel("MatMul", AttrMap(), {false, true}, mm, 2, e), nullptr);
  EXPECT_EQ(cpu::makeEpilogueKernel("Gemm", AttrMap(), {false, true}, mm, 2, e), nullptr);
  const std::vector<TensorType> conv = {{DType::kF32, {1, 3, 8, 8}}, {DType::kF32, {4, 3, 3, 3}}};
  EXPECT_EQ(cpu::makeEpilogueKernel("Conv", AttrMap(), {false, true}, conv, 2, e), nullptr);
}

}  // namespace
}  // namespace pcc
