// Whole plans, built by hand, run by the launcher on rank threads.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "runtime/launcher.h"
#include "runtime/ops/registry.h"
#include "runtime/tensor_slice.h"
#include "runtime_test_util.h"

namespace pcc {
namespace {

using namespace testing_rt;
using K = plan::Instruction;

Tensor matmul(const Tensor& a, const Tensor& b) {
  auto r = runOp("MatMul", {&a, &b}, AttrMap());
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? (*r)[0] : Tensor();
}

Tensor slice(const Tensor& t, int dim, int64_t off, int64_t len) {
  auto r = sliceAlong(t, dim, off, len);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Tensor();
}

/// Y = X[4,6] x W[6,5], tensor-parallel over the ranks of `group`: each rank
/// multiplies its column block of X by its row block of W and the partial
/// products are all-reduced; `outputs` makes this rank produce Y.
void addTpMatMul(ProgBuilder& b, const Tensor& w, int tpIndex, int tpSize, int group, bool outputs) {
  int64_t k = 6 / tpSize;
  int x = b.buffer("x", f32({4, k}));
  int ws = b.weight("w", slice(w, 0, tpIndex * k, k));
  int part = b.buffer("part", f32({4, 5}));
  int y = b.buffer("y", f32({4, 5}));
  b.input(x, 0, 1, tpIndex * k, k);
  b.kernel("MatMul", {x, ws}, {part}, "fc");
  b.collective(K::ALL_REDUCE, part, y, group);
  b.free({part});
  if (outputs) b.output(y, 0);
}

/// The reference: the unsplit MatMul.
void addReference(plan::Plan& p, WeightFileWriter& ww, const Tensor& w) {
  ProgBuilder r(p.mutable_reference(), 0, &ww);
  p.mutable_reference()->set_weight_file("reference.bin");
  int x = r.buffer("x", f32({4, 6}));
  int wb = r.weight("w", w);
  int y = r.buffer("y", f32({4, 5}));
  r.input(x, 0);
  r.kernel("MatMul", {x, wb}, {y}, "fc");
  r.output(y, 0);
}

TEST(RuntimeLauncher, RanksUseTheOneDnnKernelsAndTheReferenceProgramDoesNot) {
  // A long reduction (K = 2000) on random data: oneDNN's blocked summation
  // order rounds differently from the reference loop somewhere, so bitwise
  // differences show which kernel ran; the values agree to float accuracy.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random = [&](Dims shape) {
    Tensor t = Tensor::zeros(DType::kF32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.mutableData<float>()[i] = u(rng);
    return t;
  };
  Tensor w = random({2000, 16}), x = random({8, 2000});
  plan::Plan p;
  addIo(&p, true, "x", f32({8, 2000}));
  addIo(&p, false, "y", f32({8, 16}));
  WeightFileWriter w0, wr;
  for (ProgBuilder b : {ProgBuilder(p.add_ranks(), 0, &w0), ProgBuilder(p.mutable_reference(), 0, &wr)}) {
    int xb = b.buffer("x", f32({8, 2000}));
    int wb = b.weight("w", w);
    int y = b.buffer("y", f32({8, 16}));
    b.input(xb, 0);
    b.kernel("MatMul", {xb, wb}, {y}, "fc");
    b.output(y, 0);
  }
  p.mutable_reference()->set_weight_file("reference.bin");
  LoadedPlan lp = writeAndLoad("fastref", p, {{"rank0.bin", &w0}, {"reference.bin", &wr}});
  auto fast = runPlan(lp, {x}, RunOptions());
  RunOptions refOpts;
  refOpts.referenceKernels = true;
  auto refKernels = runPlan(lp, {x}, refOpts);
  auto reference = runReference(lp, {x});
  ASSERT_TRUE(fast.ok() && refKernels.ok() && reference.ok());
  const Tensor &f = fast->outputs[0], &rk = refKernels->outputs[0], &r = (*reference)[0];
  ASSERT_EQ(std::memcmp(rk.raw(), r.raw(), r.nbytes()), 0) << "the reference program must use the reference kernels";
  EXPECT_NE(std::memcmp(f.raw(), r.raw(), r.nbytes()), 0) << "the rank did not run the oneDNN kernel";
  Diff d = compareTensors(f, r, 1e-4, 1e-4);
  EXPECT_TRUE(d.ok) << d.where;
}

TEST(RuntimeLauncher, TwoRankAllReduceEqualsFullMatMul) {
  Tensor w = pattern(f32({6, 5}), 0.2f);
  plan::Plan p;
  addIo(&p, true, "x", f32({4, 6}));
  addIo(&p, false, "y", f32({4, 5}));
  addGroup(&p, "tp", {0, 1});
  WeightFileWriter w0, w1, wr;
  ProgBuilder b0(p.add_ranks(), 0, &w0), b1(p.add_ranks(), 1, &w1);
  addTpMatMul(b0, w, 0, 2, 0, true);
  addTpMatMul(b1, w, 1, 2, 0, false);
  addReference(p, wr, w);
  LoadedPlan lp = writeAndLoad("tp2", p, {{"rank0.bin", &w0}, {"rank1.bin", &w1}, {"reference.bin", &wr}});

  Tensor x = pattern(f32({4, 6}), 0.3f);
  RunOptions o;
  o.iters = 2;
  o.warmup = 1;
  auto res = runPlan(lp, {x}, o);
  ASSERT_TRUE(res.ok()) << res.status().message();
  ASSERT_EQ(res->outputs.size(), 1u);
  expectClose(res->outputs[0], matmul(x, w));
  ASSERT_EQ(res->rankSeconds.size(), 2u);
  EXPECT_GT(res->rankSeconds[0], 0.0);

  auto ref = runReference(lp, {x});
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  expectClose((*ref)[0], matmul(x, w));
}

TEST(RuntimeLauncher, FourRanksInTwoTensorParallelGroups) {
  // dp = 2 (rows 0-1 on ranks 0,1; rows 2-3 on ranks 2,3), tp = 2 inside each.
  Tensor w = pattern(f32({6, 5}), 0.2f);
  plan::Plan p;
  addIo(&p, true, "x", f32({4, 6}));
  addIo(&p, false, "y", f32({4, 5}));
  addGroup(&p, "tp", {0, 1});
  addGroup(&p, "tp", {2, 3});
  setMesh(&p, 1, 2, 2);
  WeightFileWriter ws[4];
  std::map<std::string, WeightFileWriter*> files;
  for (int r = 0; r < 4; ++r) {
    ProgBuilder b(p.add_ranks(), r, &ws[r]);
    files["rank" + std::to_string(r) + ".bin"] = &ws[r];
    int dp = r / 2, tp = r % 2;
    int x = b.buffer("x", f32({4, 3}));
    int xs = b.buffer("x_rows", f32({2, 3}));
    // Column block of X from the binding, row block by a Split kernel.
    b.input(x, 0, 1, tp * 3, 3);
    int other = b.buffer("x_other", f32({2, 3}));
    plan::Instruction* split = b.kernel("Split", {x}, dp == 0 ? std::vector<int>{xs, other}
                                                              : std::vector<int>{other, xs}, "split");
    toAttrProto("axis", int64_t{0}, split->add_attrs());
    toAttrProto("num_outputs", int64_t{2}, split->add_attrs());
    int wsb = b.weight("w", slice(w, 0, tp * 3, 3));
    int part = b.buffer("part", f32({2, 5}));
    int y = b.buffer("y", f32({2, 5}));
    b.kernel("MatMul", {xs, wsb}, {part}, "fc");
    b.collective(K::ALL_REDUCE, part, y, dp);
    if (tp == 0) b.output(y, 0, 0, dp * 2, 2);
  }
  LoadedPlan lp = writeAndLoad("dp2tp2", p, files);
  Tensor x = pattern(f32({4, 6}), 0.3f);
  auto res = runPlan(lp, {x}, RunOptions());
  ASSERT_TRUE(res.ok()) << res.status().message();
  expectClose(res->outputs[0], matmul(x, w));
  EXPECT_EQ(res->rankSeconds.size(), 4u);
}

/// Each rank applies Relu to its row slice of X; the slices are all-gathered
/// along dim 0 and rank 0 outputs the whole.
void checkAllGather(const std::string& name, std::vector<int64_t> rows) {
  int n = static_cast<int>(rows.size());
  plan::Plan p;
  addIo(&p, true, "x", f32({5, 3}));
  addIo(&p, false, "y", f32({5, 3}));
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  addGroup(&p, "dp", all);
  setMesh(&p, 1, static_cast<int>(all.size()), 1);
  int64_t off = 0;
  for (int r = 0; r < n; ++r) {
    ProgBuilder b(p.add_ranks(), r);
    int x = b.buffer("x", f32({rows[r], 3}));
    int h = b.buffer("h", f32({rows[r], 3}));
    int y = b.buffer("y", f32({5, 3}));
    b.input(x, 0, 0, off, rows[r]);
    b.kernel("Relu", {x}, {h});
    b.collective(K::ALL_GATHER, h, y, 0, 0);
    if (r == 0) b.output(y, 0);
    off += rows[r];
  }
  LoadedPlan lp = writeAndLoad(name, p);
  Tensor x = pattern(f32({5, 3}));
  auto res = runPlan(lp, {x}, RunOptions());
  ASSERT_TRUE(res.ok()) << res.status().message();
  auto relu = runOp("Relu", {&x}, AttrMap());
  ASSERT_TRUE(relu.ok());
  expectClose(res->outputs[0], (*relu)[0]);
}

TEST(RuntimeLauncher, AllGatherEven) {
  // 5 rows do not split evenly over 2; over 5 ranks they do.
  checkAllGather("ag_even", {1, 1, 1, 1, 1});
}

TEST(RuntimeLauncher, AllGatherUneven) { checkAllGather("ag_uneven", {3, 2}); }

TEST(RuntimeLauncher, ReduceScatterPiecesAssembleTheOutput) {
  // Rank r computes X * c_r on the whole X; the sum X * (c_0 + c_1) is
  // reduce-scattered along dim 0 (3 + 2 rows) and each rank outputs its rows.
  plan::Plan p;
  addIo(&p, true, "x", f32({5, 4}));
  addIo(&p, false, "y", f32({5, 4}));
  addGroup(&p, "tp", {0, 1});
  WeightFileWriter ws[2];
  const float c[2] = {2.0f, -0.5f};
  const int64_t rows[2] = {3, 2};
  for (int r = 0; r < 2; ++r) {
    ProgBuilder b(p.add_ranks(), r, &ws[r]);
    int x = b.buffer("x", f32({5, 4}));
    int cw = b.weight("c", Tensor::scalarF32(c[r]));
    int prod = b.buffer("prod", f32({5, 4}));
    int y = b.buffer("y", f32({rows[r], 4}));
    b.input(x, 0);
    b.kernel("Mul", {x, cw}, {prod});
    b.collective(K::REDUCE_SCATTER, prod, y, 0, 0);
    b.output(y, 0, 0, r == 0 ? 0 : 3, rows[r]);
  }
  LoadedPlan lp = writeAndLoad("rs", p, {{"rank0.bin", &ws[0]}, {"rank1.bin", &ws[1]}});
  Tensor x = pattern(f32({5, 4}));
  auto res = runPlan(lp, {x}, RunOptions());
  ASSERT_TRUE(res.ok()) << res.status().message();
  Tensor want = x.clone();
  for (int64_t i = 0; i < want.numel(); ++i) want.mutableData<float>()[i] *= 1.5f;
  expectClose(res->outputs[0], want);
}

/// Rank 0: Relu(X) -> send to rank 1; rank 1: receive, Add it to itself.
plan::Plan sendRecvPlan() {
  plan::Plan p;
  addIo(&p, true, "x", f32({2, 3}));
  addIo(&p, false, "y", f32({2, 3}));
  ProgBuilder b0(p.add_ranks(), 0), b1(p.add_ranks(), 1);
  int x = b0.buffer("x", f32({2, 3}));
  int h = b0.buffer("h", f32({2, 3}));
  b0.input(x, 0);
  b0.kernel("Relu", {x}, {h});
  b0.send(h, 1);
  int in = b1.buffer("h", f32({2, 3}));
  int y = b1.buffer("y", f32({2, 3}));
  b1.recv(in, 0);
  b1.kernel("Add", {in, in}, {y});
  b1.output(y, 0);
  return p;
}

TEST(RuntimeLauncher, SendRecvPipeline) {
  LoadedPlan lp = writeAndLoad("p2p", sendRecvPlan());
  Tensor x = pattern(f32({2, 3}));
  auto res = runPlan(lp, {x}, RunOptions());
  ASSERT_TRUE(res.ok()) << res.status().message();
  Tensor want = Tensor::zeros(f32({2, 3}));
  for (int64_t i = 0; i < 6; ++i) want.mutableData<float>()[i] = 2 * std::max(0.f, x.data<float>()[i]);
  expectClose(res->outputs[0], want);
}

TEST(RuntimeLauncher, InputsAreValidated) {
  LoadedPlan lp = writeAndLoad("validate", sendRecvPlan());
  auto missing = runPlan(lp, {}, RunOptions());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(missing.status().message(), "input 0 'x' (f32[2,3]) is missing");

  auto shape = runPlan(lp, {Tensor::zeros(f32({3, 2}))}, RunOptions());
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(shape.status().message(), "input 0 'x': the plan expects f32[2,3], got f32[3,2]");

  auto dtype = runReference(lp, {Tensor::zeros(DType::kF64, {2, 3})});
  ASSERT_FALSE(dtype.ok());
  EXPECT_EQ(dtype.status().message(), "input 0 'x': the plan expects f32[2,3], got f64[2,3]");
}

TEST(RuntimeLauncher, KernelOutputTypeMismatchNamesTheNode) {
  plan::Plan p;
  addIo(&p, true, "x", f32({2, 3}));
  addIo(&p, false, "y", f32({2, 3}));
  ProgBuilder b(p.add_ranks(), 0);
  int x = b.buffer("x", f32({2, 3}));
  int y = b.buffer("y", f32({3, 2}));  // wrong: Relu keeps the shape
  b.input(x, 0);
  b.kernel("Relu", {x}, {y}, "act1");
  // Refused when the plan is read, before any rank is prepared.
  auto lp = loadPlanBundle(writeBundle("badtype", p));
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(lp.status().message().find("rank 0: instruction #0 (node 'act1'): Relu with inputs (f32[2,3]) makes "
                                       "output 0 f32[2,3] but buffer 1 'y' is f32[3,2]"),
            std::string::npos)
      << lp.status().message();
}

TEST(RuntimeLauncher, OutputsCoveredTwiceAreRejected) {
  plan::Plan p;
  addIo(&p, true, "x", f32({2}));
  addIo(&p, false, "y", f32({2}));
  for (int r = 0; r < 2; ++r) {
    ProgBuilder b(p.add_ranks(), r);
    int x = b.buffer("x", f32({2}));
    b.input(x, 0);
    b.output(x, 0);
  }
  LoadedPlan lp = writeAndLoad("twice", p);
  auto res = runPlan(lp, {Tensor::zeros(f32({2}))}, RunOptions());
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.status().message().find("2 ranks produce it"), std::string::npos) << res.status().message();
}

TEST(RuntimeLauncher, CollectiveThatOneRankSkipsTimesOut) {
  plan::Plan p;
  addIo(&p, true, "x", f32({4}));
  addIo(&p, false, "y", f32({4}));
  addGroup(&p, "tp", {0, 1});
  ProgBuilder b0(p.add_ranks(), 0), b1(p.add_ranks(), 1);
  int x = b0.buffer("x", f32({4}));
  int y = b0.buffer("y", f32({4}));
  b0.input(x, 0);
  b0.collective(K::ALL_REDUCE, x, y, 0)->set_node("sum_block1");
  b0.output(y, 0);
  b1.buffer("unused", f32({4}));  // rank 1 never calls the all-reduce
  // The plan reader refuses such a plan (collectives must match across a
  // group); the run-time timeout is what catches a peer that stalls anyway,
  // so the plan is handed to the launcher as if it had been read.
  std::string dir = writeBundle("timeout", p);
  auto refused = loadPlanBundle(dir);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("group 0 (tp): rank 1 runs 0 collective(s) on it, rank 0 runs 1"),
            std::string::npos)
      << refused.status().message();
  LoadedPlan lp;
  lp.plan = withMesh(p);
  lp.dir = dir;
  RunOptions o;
  o.timeoutSeconds = 2;
  auto start = std::chrono::steady_clock::now();
  auto res = runPlan(lp, {pattern(f32({4}))}, o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 15.0);
  ASSERT_FALSE(res.ok());
  std::string m = res.status().message();
  EXPECT_NE(m.find("rank 0: node 'sum_block1' (ALL_REDUCE)"), std::string::npos) << m;
  EXPECT_NE(m.find("all-reduce"), std::string::npos) << m;
}

TEST(RuntimeLauncher, FailingRankStopsItsPeersAtOnce) {
  // Rank 0 fails before the all-reduce that rank 1 waits in; with the default
  // 300 s timeout, only rank 0 closing its connections ends rank 1 quickly.
  plan::Plan p;
  addIo(&p, true, "x", f32({4}));
  addIo(&p, false, "y", f32({4}));
  addGroup(&p, "tp", {0, 1});
  for (int r = 0; r < 2; ++r) {
    ProgBuilder b(p.add_ranks(), r);
    int x = b.buffer("x", f32({4}));
    int h = b.buffer("h", f32({4}));
    int y = b.buffer("y", f32({4}));
    b.input(x, 0);
    if (r == 0) b.free({x});  // then reads the freed buffer
    b.kernel("Relu", {x}, {h}, "act");
    b.collective(K::ALL_REDUCE, h, y, 0);
    if (r == 0) b.output(y, 0);
  }
  LoadedPlan lp = writeAndLoad("abort", p);
  auto start = std::chrono::steady_clock::now();
  auto res = runPlan(lp, {pattern(f32({4}))}, RunOptions());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 30.0);
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.status().message().find("rank 0: node 'act' (Relu): input 0 (buffer 0 'x') is read before it is written"),
            std::string::npos)
      << res.status().message();
}

TEST(RuntimeLauncher, RandomInputsAreSeededAndInRange) {
  plan::Plan p;
  addIo(&p, true, "f", f32({64}));
  addIo(&p, true, "i", {DType::kI64, {64}});
  addIo(&p, true, "b", {DType::kBool, {64}});
  auto a = randomInputsFor(p, 7), b = randomInputsFor(p, 7), c = randomInputsFor(p, 8);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_TRUE(compareTensors(a[0], b[0], 0, 0).ok);
  EXPECT_FALSE(compareTensors(a[0], c[0], 0, 0).ok);
  bool sawNegative = false;
  for (int64_t k = 0; k < 64; ++k) {
    double f = a[0].getDouble(k);
    EXPECT_TRUE(f >= -1 && f <= 1);
    sawNegative |= f < 0;
    EXPECT_TRUE(a[1].getInt(k) >= 0 && a[1].getInt(k) < 4);
    EXPECT_TRUE(a[2].getInt(k) == 0 || a[2].getInt(k) == 1);
  }
  EXPECT_TRUE(sawNegative);
}

TEST(RuntimeLauncher, CompareTensors) {
  Tensor w = Tensor::fromVector<float>(DType::kF32, {2, 2}, {1.f, 100.f, NAN, 0.f});
  Tensor g = Tensor::fromVector<float>(DType::kF32, {2, 2}, {1.f, 100.01f, NAN, 0.f});
  Diff d = compareTensors(g, w, 1e-3, 0);
  EXPECT_TRUE(d.ok) << d.where;  // NaN matches NaN
  EXPECT_NEAR(d.maxAbs, 0.01, 1e-4);
  EXPECT_NEAR(d.maxRel, 1e-4, 1e-6);
  d = compareTensors(g, w, 1e-5, 1e-5);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.where.find("[0,1]: got 100.01"), std::string::npos) << d.where;
  Tensor nanVsNumber = Tensor::fromVector<float>(DType::kF32, {2, 2}, {1.f, 100.f, 3.f, 0.f});
  EXPECT_FALSE(compareTensors(nanVsNumber, w, 1, 1).ok);
  Diff shape = compareTensors(Tensor::zeros(f32({4})), Tensor::zeros(f32({2, 2})), 1, 1);
  EXPECT_FALSE(shape.ok);
  EXPECT_NE(shape.where.find("type mismatch"), std::string::npos);
  EXPECT_FALSE(compareTensors(Tensor::zeros(DType::kF64, {4}), Tensor::zeros(f32({4})), 1, 1).ok);
}

}  // namespace
}  // namespace pcc
