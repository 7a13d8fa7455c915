// Folding (Backend::prepareFolded): which instruction chains the executor
// offers a backend, and that a folded kernel runs in place of the chain. A
// test backend over the cpu one folds MatMul + Add + Relu into one kernel
// that runs the three cpu kernels itself, and records every offer.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "codegen/memory_plan.h"
#include "runtime/backend.h"
#include "runtime/executor.h"
#include "runtime/launcher.h"
#include "runtime_test_util.h"

namespace pcc {
namespace {

using namespace testing_rt;

/// What the folding backend saw: per offer "OP: NEXT@CHAININPUT ...", and
/// how many times a folded kernel ran.
struct FoldLog {
  std::vector<std::string> offers;
  int foldedRuns = 0;
};
FoldLog foldLog;

/// MatMul, then Add (the chain through input `addChain`), then Relu, on the cpu kernels.
class FoldedMatMulAddRelu : public DeviceKernel {
 public:
  FoldedMatMulAddRelu(std::unique_ptr<DeviceKernel> mm, std::unique_ptr<DeviceKernel> add,
                      std::unique_ptr<DeviceKernel> relu, TensorType mmType, TensorType addType, size_t addChain)
      : mm_(std::move(mm)), add_(std::move(add)), relu_(std::move(relu)), mmType_(mmType), addType_(addType),
        addChain_(addChain) {}
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    if (inputs.size() != 3 || outputs.size() != 1) return internalError("folded kernel: takes x, w, bias -> y");
    Tensor m = Tensor::zeros(mmType_), a = Tensor::zeros(addType_);
    RETURN_IF_ERROR(mm_->run({inputs[0], inputs[1]}, {m}));
    std::vector<const Tensor*> addIn(2);
    addIn[addChain_] = &m;
    addIn[1 - addChain_] = inputs[2];
    RETURN_IF_ERROR(add_->run(addIn, {a}));
    RETURN_IF_ERROR(relu_->run({&a}, outputs));
    ++foldLog.foldedRuns;
    return Status::OK();
  }

 private:
  std::unique_ptr<DeviceKernel> mm_, add_, relu_;
  TensorType mmType_, addType_;
  size_t addChain_;
};

class FoldingCpu : public Backend {
 public:
  explicit FoldingCpu(const BackendOptions& o) {
    auto cpu = makeBackend("cpu", o);
    EXPECT_TRUE(cpu.ok());
    host_ = std::move(cpu).value();
  }
  std::string_view name() const override { return "fold-test"; }
  StatusOr<DeviceMemory> allocate(uint64_t bytes) override { return host_->allocate(bytes); }
  StatusOr<Tensor> toDevice(const Tensor& host) override { return host_->toDevice(host); }
  StatusOr<Tensor> toHost(const Tensor& t) override { return host_->toHost(t); }
  Status copy(const Tensor& src, const Tensor& dst) override { return host_->copy(src, dst); }
  StatusOr<std::unique_ptr<DeviceKernel>> prepareKernel(const KernelDesc& k) override {
    return host_->prepareKernel(k);
  }
  StatusOr<FoldedKernel> prepareFolded(const KernelDesc& k, const std::vector<FoldCandidate>& next) override {
    std::string offer = k.op + ":";
    for (const FoldCandidate& c : next) offer += strCat(" ", c.desc.op, "@", c.chainInput);
    foldLog.offers.push_back(offer);
    if (k.op != "MatMul" || next.size() < 2 || next[0].desc.op != "Add" || next[1].desc.op != "Relu")
      return FoldedKernel{};
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceKernel> mm, host_->prepareKernel(k));
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceKernel> add, host_->prepareKernel(next[0].desc));
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceKernel> relu, host_->prepareKernel(next[1].desc));
    return FoldedKernel{std::make_unique<FoldedMatMulAddRelu>(std::move(mm), std::move(add), std::move(relu),
                                                              k.outputs[0], next[0].desc.outputs[0],
                                                              next[0].chainInput),
                        2};
  }
  std::unique_ptr<CommunicatorFactory> communicators(std::shared_ptr<GlooStore> store,
                                                     const GlooOptions& options) override {
    return host_->communicators(std::move(store), options);
  }

 private:
  std::unique_ptr<Backend> host_;
};

/// y = Relu(b + x W) (the bias first), optionally with `extra` reading the
/// MatMul's result too (z = m * m, a second output) or m a model output.
struct Built {
  LoadedPlan plan;
  Tensor x;
};
enum class Extra { kNone, kSecondReader, kModelOutput };

Built build(const std::string& name, Extra extra) {
  plan::Plan p;
  setMesh(&p, 1, 1, 1);
  addIo(&p, true, "x", f32({4, 6}));
  addIo(&p, false, "y", f32({4, 5}));
  if (extra != Extra::kNone) addIo(&p, false, "z", f32({4, 5}));
  WeightFileWriter w;
  ProgBuilder b(p.add_ranks(), 0, &w);
  int x = b.buffer("x", f32({4, 6})), wb = b.weight("w", pattern(f32({6, 5}), 0.2f, -0.3f));
  int bias = b.weight("b", pattern(f32({5}), 0.5f, -1.0f));
  int m = b.buffer("m", f32({4, 5})), a = b.buffer("a", f32({4, 5})), y = b.buffer("y", f32({4, 5}));
  b.input(x, 0);
  b.kernel("MatMul", {x, wb}, {m}, "g/mm");
  if (extra == Extra::kSecondReader) {
    int z = b.buffer("z", f32({4, 5}));
    b.kernel("Mul", {m, m}, {z}, "sq");
    b.output(z, 1);
  }
  b.kernel("Add", {bias, m}, {a}, "g/add");
  if (extra != Extra::kModelOutput) b.free({m});
  b.kernel("Relu", {a}, {y}, "g/relu");
  b.output(y, 0);
  if (extra == Extra::kModelOutput) b.output(m, 1);
  auto st = planMemory(p.mutable_ranks(0), [](std::string_view op) { return op == "Relu" || op == "Add"; });
  EXPECT_TRUE(st.ok()) << st.status().message();
  return {writeAndLoad(name, p, {{"rank0.bin", &w}}), pattern(f32({4, 6}), 0.3f, -0.4f)};
}

/// Runs `p` on the cpu backend and on the folding one; \returns the latter's outputs.
std::vector<Tensor> runBoth(const Built& b, int iters) {
  registerBackend("fold-test", [](const BackendOptions& o) { return std::make_unique<FoldingCpu>(o); });
  auto want = runPlan(b.plan, {b.x}, RunOptions());
  EXPECT_TRUE(want.ok()) << want.status().message();
  foldLog = FoldLog();
  RunOptions o;
  o.backend = "fold-test";
  o.iters = iters;
  auto got = runPlan(b.plan, {b.x}, o);
  EXPECT_TRUE(got.ok()) << got.status().message();
  if (!want.ok() || !got.ok()) return {};
  EXPECT_EQ(got->outputs.size(), want->outputs.size());
  for (size_t i = 0; i < got->outputs.size() && i < want->outputs.size(); ++i)
    EXPECT_EQ(std::memcmp(got->outputs[i].raw(), want->outputs[i].raw(), want->outputs[i].nbytes()), 0) << i;
  return got->outputs;
}

TEST(RuntimeFold, AChainIsOfferedAndTheFoldedKernelRunsInItsPlace) {
  Built b = build("fold_chain", Extra::kNone);
  runBoth(b, 2);
  // The MatMul is offered Add (through its input 1, the bias first) and Relu
  // (the FREE between is skipped); the folded steps are not offered again.
  ASSERT_FALSE(foldLog.offers.empty());
  EXPECT_EQ(foldLog.offers[0], "MatMul: Add@1 Relu@0");
  EXPECT_EQ(foldLog.offers.size(), 1u) << foldLog.offers.back();
  EXPECT_EQ(foldLog.foldedRuns, 2);
}

TEST(RuntimeFold, AResultReadElsewhereEndsTheChain) {
  for (Extra e : {Extra::kSecondReader, Extra::kModelOutput}) {
    Built b = build(e == Extra::kSecondReader ? "fold_reader" : "fold_output", e);
    runBoth(b, 1);
    for (const std::string& o : foldLog.offers) EXPECT_NE(o.rfind("MatMul", 0), 0u) << o;
    EXPECT_EQ(foldLog.foldedRuns, 0);
  }
}

TEST(RuntimeFold, AResultOverAnInputOfTheChainEndsIt) {
  // x1 = Relu(x0), m = x1 W, a = m + b, r = Relu(a), y = -r, with r planned
  // over x1's bytes (x1 is dead by then): folding Relu would write r while
  // the MatMul still reads x1, so the chain stops before it.
  plan::Plan p;
  setMesh(&p, 1, 1, 1);
  addIo(&p, true, "x", f32({4, 4}));
  addIo(&p, false, "y", f32({4, 4}));
  WeightFileWriter w;
  ProgBuilder b(p.add_ranks(), 0, &w);
  int x0 = b.buffer("x0", f32({4, 4})), wb = b.weight("w", pattern(f32({4, 4}), 0.2f, -0.3f));
  int bias = b.weight("b", pattern(f32({4}), 0.5f, -1.0f));
  int x1 = b.buffer("x1", f32({4, 4})), m = b.buffer("m", f32({4, 4})), a = b.buffer("a", f32({4, 4}));
  int r = b.buffer("r", f32({4, 4})), y = b.buffer("y", f32({4, 4}));
  b.input(x0, 0);
  b.kernel("Relu", {x0}, {x1}, "pre");
  b.kernel("MatMul", {x1, wb}, {m}, "g/mm");
  b.kernel("Add", {m, bias}, {a}, "g/add");
  b.kernel("Relu", {a}, {r}, "g/relu");
  b.kernel("Neg", {r}, {y}, "post");
  b.output(y, 0);
  plan::RankProgram* prog = p.mutable_ranks(0);
  const int offsets[][2] = {{x1, 0}, {m, 64}, {a, 128}, {r, 0}};
  for (const auto& o : offsets) prog->mutable_buffers(o[0])->set_arena_offset(o[1]);
  prog->set_arena_bytes(192);
  Built built{writeAndLoad("fold_overlap", p, {{"rank0.bin", &w}}), pattern(f32({4, 4}), 0.3f, -0.4f)};
  runBoth(built, 1);
  bool offered = false;
  for (const std::string& o : foldLog.offers)
    if (o.rfind("MatMul", 0) == 0) {
      offered = true;
      EXPECT_EQ(o, "MatMul: Add@0");
    }
  EXPECT_TRUE(offered);
  EXPECT_EQ(foldLog.foldedRuns, 0);
}

/// An all-reduce whose peer adds 100 to every element, completed only when
/// waited for: a kernel that reads its result without the wait reads the
/// operand as it was before the sum.
class WaitedPeer final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  bool startsInBackground() const override { return true; }
  Status allReduceSum(Tensor& t) override {
    add100(t);
    return Status::OK();
  }
  Status allGather(const Tensor&, int, Tensor*) override { return unsupported("not simulated"); }
  Status reduceScatterSum(const Tensor&, int, Tensor*) override { return unsupported("not simulated"); }
  Status allToAll(const Tensor&, int, int, Tensor*) override { return unsupported("not simulated"); }
  Status send(const Tensor&, int) override { return unsupported("not simulated"); }
  Status recv(Tensor*, int) override { return unsupported("not simulated"); }
  StatusOr<std::unique_ptr<CommWork>> startAllReduceSum(Tensor& t) override {
    class Work final : public CommWork {
     public:
      explicit Work(Tensor t) : t_(std::move(t)) {}
      Status wait() override {
        if (!done_) add100(t_);
        done_ = true;
        at_ = Clock::now();
        return Status::OK();
      }
      Clock::time_point finishedAt() const override { return at_; }

     private:
      Tensor t_;
      bool done_ = false;
      Clock::time_point at_;
    };
    return std::unique_ptr<CommWork>(new Work(t));
  }

 private:
  static void add100(Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.mutableData<float>()[i] += 100;
  }
};

TEST(RuntimeFold, AFoldedChainWaitsForACollectiveALaterMemberReads) {
  // bs = AllReduce(c) in flight; m = x W; a = bs + m; y = Relu(a): the Add's
  // operand bs is read by the folded kernel at the MatMul's step, which must
  // wait for the all-reduce (the wait rule sees every member's operands).
  plan::Plan p;
  addIo(&p, true, "x", f32({4, 6}));
  addIo(&p, true, "w", f32({6, 5}));
  addIo(&p, true, "c", f32({5}));
  addIo(&p, false, "y", f32({4, 5}));
  addGroup(&p, "tp", {0, 1});
  for (int rank = 0; rank < 2; ++rank) {
    ProgBuilder b(p.add_ranks(), rank);
    int x = b.buffer("x", f32({4, 6})), w = b.buffer("w", f32({6, 5})), c = b.buffer("c", f32({5}));
    int bs = b.buffer("bs", f32({5})), m = b.buffer("m", f32({4, 5})), a = b.buffer("a", f32({4, 5}));
    int y = b.buffer("y", f32({4, 5}));
    b.input(x, 0), b.input(w, 1), b.input(c, 2);
    b.collective(plan::Instruction::ALL_REDUCE, c, bs, 0);
    b.kernel("MatMul", {x, w}, {m}, "g/mm");
    b.kernel("Add", {bs, m}, {a}, "g/add");
    b.free({m});
    b.kernel("Relu", {a}, {y}, "g/relu");
    b.output(y, 0);
    auto st = planMemory(p.mutable_ranks(rank), [](std::string_view op) { return op == "Relu" || op == "Add"; });
    ASSERT_TRUE(st.ok()) << st.status().message();
  }
  LoadedPlan lp = writeAndLoad("fold_waits", p);
  foldLog = FoldLog();
  auto exec = Executor::create(lp, lp.plan.ranks(0), std::make_shared<FoldingCpu>(BackendOptions()), false);
  ASSERT_TRUE(exec.ok()) << exec.status().message();
  RankComms comms;
  comms.groups.push_back(std::make_unique<WaitedPeer>());
  Tensor x = pattern(f32({4, 6}), 0.3f, -0.4f), w = pattern(f32({6, 5}), 0.2f, -0.3f);
  Tensor c = pattern(f32({5}), 0.5f, -1.0f);
  std::vector<OutputPiece> outs;
  Status st = (*exec)->run({x, w, c}, &comms, &outs);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(foldLog.foldedRuns, 1);
  ASSERT_EQ(outs.size(), 1u);
  Tensor want = Tensor::zeros(DType::kF32, {4, 5});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) {
      float v = c.data<float>()[j] + 100;
      for (int k = 0; k < 6; ++k) v += x.data<float>()[i * 6 + k] * w.data<float>()[k * 5 + j];
      want.mutableData<float>()[i * 5 + j] = v > 0 ? v : 0;
    }
  expectClose(outs[0].tensor, want);
}

}  // namespace
}  // namespace pcc
