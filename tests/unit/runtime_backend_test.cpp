// The Backend seam: a test-only "device" whose memory the executor cannot
// read (its addresses are not host addresses) runs whole plans, collectives
// included, through the unchanged executor and launcher.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "codegen/memory_plan.h"
#include "runtime/backend.h"
#include "runtime/comm_gloo.h"
#include "runtime/launcher.h"
#include "runtime_test_util.h"

namespace pcc {
namespace {

using namespace testing_rt;
using K = plan::Instruction;

/// Calls into the fake device, summed over every rank's instance.
struct Counts {
  std::atomic<int> allocations{0}, uploads{0}, downloads{0}, copies{0}, kernels{0}, collectives{0};
};
Counts counts;

/// Device memory: blocks of host memory handed out under fake addresses
/// (above 2^60, never mapped), so that any dereference outside this backend
/// would crash the test. Shared by the ranks of a run (each rank's blocks are
/// its own).
class FakeMemory {
 public:
  DeviceMemory allocate(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto block = std::shared_ptr<std::vector<unsigned char>>(new std::vector<unsigned char>(bytes + 64));
    uintptr_t addr = next_;
    next_ += (bytes + 127) / 64 * 64;
    blocks_[addr] = block;
    ++counts.allocations;
    DeviceMemory m;
    m.base = addr;
    m.bytes = bytes;
    // The owner keeps the block alive and forgets it when the last view goes.
    m.owner = std::shared_ptr<const void>(block.get(), [this, addr, block](const void*) {
      std::lock_guard<std::mutex> l(mu_);
      blocks_.erase(addr);
    });
    return m;
  }
  /// \returns the host bytes behind device tensor `t`, or nullptr if `t` is not device memory.
  unsigned char* host(const Tensor& t) {
    std::lock_guard<std::mutex> lock(mu_);
    uintptr_t a = reinterpret_cast<uintptr_t>(t.raw());
    auto it = blocks_.upper_bound(a);
    if (it == blocks_.begin()) return nullptr;
    --it;
    if (a + t.nbytes() > it->first + it->second->size()) return nullptr;
    return it->second->data() + (a - it->first);
  }

 private:
  std::mutex mu_;
  uintptr_t next_ = uintptr_t{1} << 60;
  std::map<uintptr_t, std::shared_ptr<std::vector<unsigned char>>> blocks_;
};
FakeMemory memory;

StatusOr<Tensor> download(const Tensor& t) {
  unsigned char* p = memory.host(t);
  if (!p) return internalError("a tensor that is not in device memory reached the device");
  Tensor h = Tensor::zeros(t.type());
  std::memcpy(h.mutableData(), p, t.nbytes());
  return h;
}
Status upload(const Tensor& h, const Tensor& t) {
  unsigned char* p = memory.host(t);
  if (!p) return internalError("upload into memory that is not the device's");
  if (h.type() != t.type()) return internalError("upload of ", h.type().str(), " into ", t.type().str());
  std::memcpy(p, h.raw(), h.nbytes());
  return Status::OK();
}
StatusOr<Tensor> newDeviceTensor(const Tensor& host) {
  Tensor t = memory.allocate(host.nbytes()).view(0, host.type());
  RETURN_IF_ERROR(upload(host, t));
  return t;
}

/// A kernel of the device: stages its inputs to the host, runs the cpu
/// backend's kernel there, and stages the outputs back.
class FakeKernel : public DeviceKernel {
 public:
  explicit FakeKernel(std::unique_ptr<DeviceKernel> host) : host_(std::move(host)) {}
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& outputs) override {
    ++counts.kernels;
    std::vector<Tensor> in;
    for (const Tensor* t : inputs) {
      if (!t) {
        in.emplace_back();
        continue;
      }
      ASSIGN_OR_RETURN(Tensor h, download(*t));
      in.push_back(std::move(h));
    }
    std::vector<const Tensor*> args;
    for (size_t k = 0; k < in.size(); ++k) args.push_back(inputs[k] ? &in[k] : nullptr);
    std::vector<Tensor> out;
    for (const Tensor& t : outputs) out.push_back(Tensor::zeros(t.type()));
    RETURN_IF_ERROR(host_->run(args, out));
    for (size_t k = 0; k < out.size(); ++k) RETURN_IF_ERROR(upload(out[k], outputs[k]));
    return Status::OK();
  }

 private:
  std::unique_ptr<DeviceKernel> host_;
};

/// A communicator of the device: stages through the host around gloo.
class FakeComm : public Communicator {
 public:
  explicit FakeComm(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status allReduceSum(Tensor& t) override {
    ++counts.collectives;
    ASSIGN_OR_RETURN(Tensor h, download(t));
    RETURN_IF_ERROR(inner_->allReduceSum(h));
    return upload(h, t);
  }
  Status allGather(const Tensor& in, int dim, Tensor* out) override {
    ++counts.collectives;
    ASSIGN_OR_RETURN(Tensor h, download(in));
    Tensor g;
    RETURN_IF_ERROR(inner_->allGather(h, dim, &g));
    ASSIGN_OR_RETURN(*out, newDeviceTensor(g));
    return Status::OK();
  }
  Status reduceScatterSum(const Tensor& in, int dim, Tensor* out) override {
    ++counts.collectives;
    ASSIGN_OR_RETURN(Tensor h, download(in));
    Tensor r = out->defined() ? Tensor::zeros(out->type()) : Tensor();
    RETURN_IF_ERROR(inner_->reduceScatterSum(h, dim, &r));
    ASSIGN_OR_RETURN(*out, newDeviceTensor(r));
    return Status::OK();
  }
  Status allToAll(const Tensor& in, int splitDim, int concatDim, Tensor* out) override {
    ++counts.collectives;
    ASSIGN_OR_RETURN(Tensor h, download(in));
    Tensor r = out->defined() ? Tensor::zeros(out->type()) : Tensor();
    RETURN_IF_ERROR(inner_->allToAll(h, splitDim, concatDim, &r));
    ASSIGN_OR_RETURN(*out, newDeviceTensor(r));
    return Status::OK();
  }
  Status send(const Tensor& t, int peer) override {
    ASSIGN_OR_RETURN(Tensor h, download(t));
    return inner_->send(h, peer);
  }
  Status recv(Tensor* t, int peer) override {
    Tensor h = Tensor::zeros(t->type());
    RETURN_IF_ERROR(inner_->recv(&h, peer));
    return upload(h, *t);
  }
  void abort() override { inner_->abort(); }

 private:
  std::unique_ptr<Communicator> inner_;
};

class FakeCommFactory : public CommunicatorFactory {
 public:
  explicit FakeCommFactory(std::unique_ptr<CommunicatorFactory> inner) : inner_(std::move(inner)) {}
  StatusOr<RankComms> connect(int rank, int worldSize, const std::vector<CommGroup>& groups,
                              bool withWorld) override {
    ASSIGN_OR_RETURN(RankComms host, inner_->connect(rank, worldSize, groups, withWorld));
    RankComms dev;
    if (host.world) dev.world = std::make_unique<FakeComm>(std::move(host.world));
    for (auto& g : host.groups) dev.groups.push_back(g ? std::make_unique<FakeComm>(std::move(g)) : nullptr);
    return dev;
  }

 private:
  std::unique_ptr<CommunicatorFactory> inner_;
};

class FakeDevice : public Backend {
 public:
  explicit FakeDevice(const BackendOptions& o) {
    auto cpu = makeBackend("cpu", o);
    EXPECT_TRUE(cpu.ok());
    host_ = std::move(cpu).value();
  }
  std::string_view name() const override { return "fake-device"; }
  StatusOr<DeviceMemory> allocate(uint64_t bytes) override { return memory.allocate(bytes); }
  StatusOr<Tensor> toDevice(const Tensor& host) override {
    ++counts.uploads;
    return newDeviceTensor(host);
  }
  StatusOr<Tensor> toHost(const Tensor& t) override {
    ++counts.downloads;
    return download(t);
  }
  Status copy(const Tensor& src, const Tensor& dst) override {
    ++counts.copies;
    ASSIGN_OR_RETURN(Tensor h, download(src));
    return upload(h, dst);
  }
  StatusOr<std::unique_ptr<DeviceKernel>> prepareKernel(const KernelDesc& k) override {
    // Weights arrive as host values (KernelDesc.constInputs); the kernel runs
    // on staged copies, so the host kernel never sees the device's memory.
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceKernel> host, host_->prepareKernel(k));
    return std::unique_ptr<DeviceKernel>(new FakeKernel(std::move(host)));
  }
  std::unique_ptr<CommunicatorFactory> communicators(std::shared_ptr<GlooStore> store,
                                                     const GlooOptions& options) override {
    return std::make_unique<FakeCommFactory>(host_->communicators(std::move(store), options));
  }

 private:
  std::unique_ptr<Backend> host_;
};

/// y = Relu(X W) with X split by column and W by row over two ranks: each rank
/// multiplies its blocks, the partial products are all-reduced, then Relu and
/// Add; memory planned, so buffers live in each rank's arena.
plan::Plan tpPlan(WeightFileWriter* w, WeightFileWriter& wr, const Tensor& wt) {
  plan::Plan p;
  addIo(&p, true, "x", f32({4, 6}));
  addIo(&p, false, "y", f32({4, 5}));
  addGroup(&p, "tp", {0, 1});
  for (int r = 0; r < 2; ++r) {
    ProgBuilder b(p.add_ranks(), r, &w[r]);
    int x = b.buffer("x", f32({4, 3}));
    auto ws = [&] {
      Tensor s = Tensor::zeros(f32({3, 5}));
      std::memcpy(s.mutableData(), wt.data<float>() + r * 15, 15 * sizeof(float));
      return s;
    }();
    int wb = b.weight("w", ws);
    int part = b.buffer("part", f32({4, 5})), sum = b.buffer("sum", f32({4, 5}));
    int relu = b.buffer("relu", f32({4, 5})), y = b.buffer("y", f32({4, 5}));
    b.input(x, 0, 1, 3 * r, 3);
    b.kernel("MatMul", {x, wb}, {part}, "fc");
    b.collective(K::ALL_REDUCE, part, sum, 0);
    b.kernel("Relu", {sum}, {relu}, "relu");
    b.kernel("Add", {relu, relu}, {y}, "double");
    if (r == 0) b.output(y, 0);  // rank 0 alone delivers y
  }
  ProgBuilder ref(p.mutable_reference(), 0, &wr);
  p.mutable_reference()->set_weight_file("reference.bin");
  int x = ref.buffer("x", f32({4, 6})), wb = ref.weight("w", wt);
  int mm = ref.buffer("mm", f32({4, 5})), relu = ref.buffer("relu", f32({4, 5})), y = ref.buffer("y", f32({4, 5}));
  ref.input(x, 0);
  ref.kernel("MatMul", {x, wb}, {mm});
  ref.kernel("Relu", {mm}, {relu});
  ref.kernel("Add", {relu, relu}, {y});
  ref.output(y, 0);
  for (int r = 0; r < 2; ++r) {
    auto st = planMemory(p.mutable_ranks(r), [](std::string_view op) { return op == "Relu" || op == "Add"; });
    EXPECT_TRUE(st.ok()) << st.status().message();
  }
  return p;
}

TEST(RuntimeBackend, AFakeDeviceRunsATensorParallelPlanThroughTheUnchangedExecutor) {
  registerBackend("fake-device", [](const BackendOptions& o) { return std::make_unique<FakeDevice>(o); });
  Tensor wt = pattern(f32({6, 5}), 0.2f), x = pattern(f32({4, 6}), 0.3f, 0.2f);
  WeightFileWriter w[2], wr;
  plan::Plan p = tpPlan(w, wr, wt);
  ASSERT_GT(p.ranks(0).arena_bytes(), 0u);
  LoadedPlan lp = writeAndLoad("fakedev", p, {{"rank0.bin", &w[0]}, {"rank1.bin", &w[1]}, {"reference.bin", &wr}});

  RunOptions cpu;
  auto want = runPlan(lp, {x}, cpu);
  ASSERT_TRUE(want.ok()) << want.status().message();
  auto ref = runReference(lp, {x});
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  expectClose(want->outputs[0], (*ref)[0]);

  RunOptions dev;
  dev.backend = "fake-device";
  dev.iters = 2;
  counts.kernels = counts.collectives = counts.uploads = counts.downloads = counts.copies = 0;
  auto got = runPlan(lp, {x}, dev);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->outputs[0].type(), want->outputs[0].type());
  EXPECT_EQ(std::memcmp(got->outputs[0].raw(), want->outputs[0].raw(), want->outputs[0].nbytes()), 0)
      << got->outputs[0].str() << " vs " << want->outputs[0].str();
  // 3 kernels and 1 all-reduce per rank and run; 1 weight per rank uploaded
  // once, the input slice each run; rank 0's output downloaded each run; the
  // all-reduce's input copied into its output each run.
  EXPECT_EQ(counts.kernels.load(), 3 * 2 * 2);
  EXPECT_EQ(counts.collectives.load(), 2 * 2);
  EXPECT_EQ(counts.uploads.load(), 2 + 2 * 2);
  EXPECT_EQ(counts.downloads.load(), 2);
  EXPECT_EQ(counts.copies.load(), 2 * 2);
}

TEST(RuntimeBackend, GatherScatterSendAndRecvCrossTheSeam) {
  // Rank r: a = Relu(rows [2r, 2r+2) of x); g = all-gather(a) along rows;
  // s = reduce-scatter(g) = 2 a; rank 0 sends s to rank 1, which adds it to
  // its own. Output rows 0-1: 2 relu(x0); rows 2-3: 2 relu(x1) + 2 relu(x0).
  registerBackend("fake-device", [](const BackendOptions& o) { return std::make_unique<FakeDevice>(o); });
  plan::Plan p;
  addIo(&p, true, "x", f32({4, 3}));
  addIo(&p, false, "y", f32({4, 3}));
  addGroup(&p, "dp", {0, 1});
  setMesh(&p, 1, 2, 1);
  for (int r = 0; r < 2; ++r) {
    ProgBuilder b(p.add_ranks(), r);
    int x = b.buffer("x", f32({2, 3})), a = b.buffer("a", f32({2, 3})), g = b.buffer("g", f32({4, 3}));
    int s = b.buffer("s", f32({2, 3}));
    b.input(x, 0, 0, 2 * r, 2);
    b.kernel("Relu", {x}, {a}, "relu");
    b.collective(K::ALL_GATHER, a, g, 0, 0);
    b.collective(K::REDUCE_SCATTER, g, s, 0, 0);
    if (r == 0) {
      b.send(s, 1);
      b.output(s, 0, 0, 0, 2);
    } else {
      int t = b.buffer("t", f32({2, 3})), y = b.buffer("y", f32({2, 3}));
      b.recv(t, 0);
      b.kernel("Add", {s, t}, {y}, "add");
      b.output(y, 0, 0, 2, 2);
    }
    ASSERT_TRUE(planMemory(p.mutable_ranks(r), nullptr).ok());
  }
  LoadedPlan lp = writeAndLoad("fakedev_comm", p);
  Tensor x = pattern(f32({4, 3}), 0.25f);
  auto want = runPlan(lp, {x}, RunOptions());
  ASSERT_TRUE(want.ok()) << want.status().message();
  const float* px = x.data<float>();
  const float* pw = want->outputs[0].data<float>();
  auto relu2 = [&](int i) { return 2.0f * std::max(px[i], 0.0f); };
  for (int i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(pw[i], relu2(i));
    EXPECT_FLOAT_EQ(pw[6 + i], relu2(6 + i) + relu2(i));
  }
  RunOptions dev;
  dev.backend = "fake-device";
  counts.collectives = 0;
  auto got = runPlan(lp, {x}, dev);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(std::memcmp(got->outputs[0].raw(), want->outputs[0].raw(), want->outputs[0].nbytes()), 0)
      << got->outputs[0].str() << " vs " << want->outputs[0].str();
  EXPECT_EQ(counts.collectives.load(), 2 * 2);  // a gather and a scatter per rank
}

TEST(RuntimeBackend, AHostTensorNeverReachesTheDevice) {
  // The fake device refuses memory that is not its own: a host tensor handed
  // to its kernel is an error, so the run above proves that the executor
  // passed device memory only.
  Tensor h = Tensor::zeros(f32({2}));
  auto r = download(h);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not in device memory"), std::string::npos);
}

/// Prepares and runs one MatMul of dtype `dt` on the cpu backend made with
/// `o`. \returns the provider that ran it ("" on error, with a failure).
std::string matMulProvider(const BackendOptions& o, DType dt) {
  auto cpu = makeBackend("cpu", o);
  EXPECT_TRUE(cpu.ok());
  if (!cpu.ok()) return "";
  Tensor a = Tensor::zeros(TensorType{dt, {4, 8}}), b = Tensor::zeros(TensorType{dt, {8, 3}});
  for (int64_t i = 0; i < a.numel(); ++i) a.setDouble(i, (i % 5) - 2);
  for (int64_t i = 0; i < b.numel(); ++i) b.setDouble(i, (i % 3) - 1);
  AttrMap attrs;
  KernelDesc k;
  k.op = "MatMul";
  k.attrs = &attrs;
  k.inputs = {a.type(), b.type()};
  k.outputs = {TensorType{dt, {4, 3}}};
  k.outputNames = {"buffer 0 'y'"};
  k.where = "rank 0: node 'mm' (MatMul)";
  auto kernel = (*cpu)->prepareKernel(k);
  EXPECT_TRUE(kernel.ok()) << kernel.status().message();
  if (!kernel.ok()) return "";
  Tensor y = Tensor::zeros(k.outputs[0]);
  Status st = (*kernel)->run({&a, &b}, {y});
  EXPECT_TRUE(st.ok()) << st.message();
  auto want = runOp("MatMul", {&a, &b}, {});
  EXPECT_TRUE(want.ok());
  for (int64_t i = 0; want.ok() && i < y.numel(); ++i) EXPECT_EQ(y.getDouble(i), (*want)[0].getDouble(i)) << i;
  return std::string((*kernel)->provider());
}

TEST(RuntimeBackend, CpuPicksTheFirstPreferredProviderThatTakesTheCall) {
  BackendOptions fast;  // the default order: oneDNN, then the reference kernels
  EXPECT_EQ(matMulProvider(fast, DType::kF32), "onednn");
  // oneDNN declines an i64 MatMul: the reference kernel takes it.
  EXPECT_EQ(matMulProvider(fast, DType::kI64), "reference");
  BackendOptions reference;  // pcc-run --reference-kernels
  reference.kernelProviders = {Provider::kReference};
  EXPECT_EQ(matMulProvider(reference, DType::kF32), "reference");
  // kGenerated has no kernels yet: preferring it changes nothing.
  BackendOptions generated;
  generated.kernelProviders = {Provider::kGenerated, Provider::kOneDnn, Provider::kReference};
  EXPECT_EQ(matMulProvider(generated, DType::kF32), "onednn");
}

TEST(RuntimeBackend, UnknownBackendNamesTheKnownOnes) {
  auto b = makeBackend("tpu", BackendOptions());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(b.status().message().find("unknown backend 'tpu' (known: cpu"), std::string::npos)
      << b.status().message();
  auto cpu = makeBackend("cpu", BackendOptions());
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->name(), "cpu");
}

}  // namespace
}  // namespace pcc
