// Planning reads no weight bytes, and the plan writer streams each rank's
// pieces of the weights from the mapped model: the same bytes and checksums as
// copying every piece first (the path before streaming), and plans that run.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "compiler/driver.h"
#include "report/plan_report.h"
#include "runtime/launcher.h"
#include "tests/unit/onnx_test_util.h"

namespace pcc {
namespace {

namespace fs = std::filesystem;
using testing::ModelBuilder;

constexpr int64_t kIn = 512, kHidden = 1024;

/// Writes DIR/model.onnx, y = (relu(x @ w1) @ w2) + b2, with w1 [512, 1024]
/// and w2 [1024, 512] (2 MiB each, pseudo-random) in DIR/weights.bin at page
/// offsets 0 and 2 MiB, and b2 [512] after them. \returns the model's path.
std::string writeMlp(const std::string& dir) {
  Tensor w1 = Tensor::zeros(DType::kF32, {kIn, kHidden}), w2 = Tensor::zeros(DType::kF32, {kHidden, kIn});
  Tensor b2 = Tensor::zeros(DType::kF32, {kIn});
  for (Tensor* t : {&w1, &w2, &b2})
    for (int64_t i = 0; i < t->numel(); ++i)
      t->mutableData<float>()[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + t->rank())) * 0.05f;
  const size_t mib2 = size_t{2} << 20;
  std::string bytes(2 * mib2 + b2.nbytes(), '\0');
  std::memcpy(bytes.data(), w1.raw(), w1.nbytes());
  std::memcpy(bytes.data() + mib2, w2.raw(), w2.nbytes());
  std::memcpy(bytes.data() + 2 * mib2, b2.raw(), b2.nbytes());
  testing::writeFile(dir + "/weights.bin", bytes);

  ModelBuilder b;
  b.input("x", DType::kF32, {8, kIn}).output("y", DType::kF32);
  auto external = [&](const std::string& name, Dims dims, size_t offset, size_t length) {
    auto* t = b.model().mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& kv : {std::pair<std::string, std::string>{"location", "weights.bin"},
                           {"offset", std::to_string(offset)},
                           {"length", std::to_string(length)}}) {
      auto* e = t->add_external_data();
      e->set_key(kv.first);
      e->set_value(kv.second);
    }
  };
  external("w1", {kIn, kHidden}, 0, w1.nbytes());
  external("w2", {kHidden, kIn}, mib2, w2.nbytes());
  external("b2", {kIn}, 2 * mib2, b2.nbytes());
  b.node("MatMul", {"x", "w1"}, {"h"}, "fc1");
  b.node("Relu", {"h"}, {"r"}, "relu");
  b.node("MatMul", {"r", "w2"}, {"m"}, "fc2");
  b.node("Add", {"m", "b2"}, {"y"}, "bias");
  testing::writeFile(dir + "/model.onnx", b.bytes());
  return dir + "/model.onnx";
}

/// Makes every whole page of each constant of `g` of at least 1 MiB
/// unreadable: a read of it kills the process with SIGSEGV.
/// \returns the number of bytes protected.
size_t protectLargeWeights(const Graph& g) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  size_t protectedBytes = 0;
  for (const Value* c : g.constants()) {
    const Tensor& t = c->constantData();  // the mapped view: nothing is read
    if (t.nbytes() < (size_t{1} << 20) || !t.isMapped()) continue;
    uintptr_t lo = (reinterpret_cast<uintptr_t>(t.raw()) + page - 1) / page * page;
    uintptr_t hi = (reinterpret_cast<uintptr_t>(t.raw()) + t.nbytes()) / page * page;
    if (hi > lo && ::mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_NONE) == 0) protectedBytes += hi - lo;
  }
  return protectedBytes;
}

CompileOptions optionsFor(const std::string& model, int gpus, int tp) {
  CompileOptions o;
  o.modelPath = model;
  o.gpus = gpus;
  o.tp = tp;
  o.quiet = true;
  o.gpu = "cpu";
  return o;
}

// Plans `model` with its large weights unreadable (the search over every
// dp x tp, lowering, the plan in memory, the JSON and text reports and the
// IR), then exits 0; a read of a protected weight kills the process instead.
void planWithLargeWeightsUnreadable(const std::string& model) {
  const std::pair<int, int> meshes[] = {{4, 0}, {2, 2}, {4, 4}};  // (gpus, tp); tp 0: the search chooses
  bool ok = true;
  for (const auto& mesh : meshes) {
    auto g = importOnnxModel(model, {});
    if (!g.ok() || protectLargeWeights(**g) != 2 * (size_t{2} << 20)) std::exit(3);
    auto c = compileImported(std::move(g).value(), optionsFor(model, mesh.first, mesh.second), nullptr);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().message().c_str());
      std::exit(4);
    }
    std::string json = planReportJson(c->plan.plan), text = planReportText(c->plan.plan), ir = emitIr(*c);
    ok = ok && !json.empty() && !text.empty() && !ir.empty();
    // The pieces of w1 and w2 the ranks hold are blocks, not copies.
    int blocks = 0;
    for (const RankGraph& rg : c->ranks)
      for (const Value* v : rg.graph->constants()) blocks += v->constantBlock() != nullptr;
    if (c->partition.mesh.tp > 1) ok = ok && blocks >= 2 * c->partition.mesh.tp;
  }
  std::exit(ok ? 0 : 5);
}

// Planning must not touch the weights: it runs in a child process (a death
// test), which a read of a protected page would kill.
TEST(DriverStreaming, PlanningReadsNoWeightBytes) {
  std::string dir = testing::tempDir("noread");
  std::string model = writeMlp(dir);
  EXPECT_EXIT(planWithLargeWeightsUnreadable(model), ::testing::ExitedWithCode(0), "");
  fs::remove_all(dir);
}

// The weights of every rank of a tp=2 plan, streamed from the model, equal the
// pieces copied out of the global weights (sliceBlock, the path before
// streaming), with the same checksums; the plan loads with its checksums
// verified and runs, matching its reference program.
TEST(DriverStreaming, StreamedPiecesMatchCopiedPiecesAndRun) {
  std::string dir = testing::tempDir("stream");
  std::string model = writeMlp(dir);
  auto c = compileModel(optionsFor(model, 2, 2), nullptr);
  ASSERT_TRUE(c.ok()) << c.status().message();
  int blocks = 0, large = 0;
  for (const RankGraph& rg : c->ranks)
    for (const Value* v : rg.graph->constants()) {
      if (!v->constantBlock()) continue;
      ++blocks;
      large += v->type().numel() > 65536;
    }
  EXPECT_EQ(large, 4);  // w1's column halves and w2's row halves
  EXPECT_GE(blocks, 4);  // and the pieces of any other weight read from the file
  ASSERT_TRUE(writeEmittedPlan(dir + "/plan.pcc", c->plan).ok());
  auto lp = loadPlanBundle(dir + "/plan.pcc");
  ASSERT_TRUE(lp.ok()) << lp.status().message();
  int compared = 0;
  for (const plan::RankProgram& prog : lp->plan.ranks()) {
    const Graph& rg = *c->ranks.at(prog.rank()).graph;
    for (int i = 0; i < prog.weights_size(); ++i) {
      auto w = loadWeight(*lp, prog, i, /*verifyChecksum=*/true);
      ASSERT_TRUE(w.ok()) << w.status().message();
      const Value* v = rg.findValue(prog.weights(i).name());
      ASSERT_NE(v, nullptr) << prog.weights(i).name();
      const Tensor& copied = v->constantData();  // a block is copied out here: the old path
      ASSERT_EQ(copied.nbytes(), w->nbytes());
      EXPECT_EQ(std::memcmp(copied.raw(), w->raw(), w->nbytes()), 0) << prog.weights(i).name();
      EXPECT_EQ(prog.weights(i).crc32(), crc32Of(copied.raw(), copied.nbytes())) << prog.weights(i).name();
      ++compared;
    }
  }
  EXPECT_GE(compared, 6);
  std::vector<Tensor> inputs = randomInputsFor(lp->plan, 7);
  RunOptions ro;
  auto run = runPlan(*lp, inputs, ro);
  ASSERT_TRUE(run.ok()) << run.status().message();
  auto ref = runReference(*lp, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  ASSERT_EQ(run->outputs.size(), 1u);
  testing::expectNear(run->outputs[0], (*ref)[0], 1e-4);
  fs::remove_all(dir);
}

// On the committed models, at tp=2 and at dp=2 x tp=2, every piece streamed
// (eagerSliceElements 0) gives rank files and checksums byte-identical to
// every piece copied while lowering (the path before streaming), and the
// streamed plan runs and matches its reference program.
TEST(DriverStreaming, CommittedModelsStreamAsCopied) {
  for (const char* name : {"mlp", "gpt2_tiny", "cnn_small"}) {
    for (auto [gpus, tp] : {std::pair<int, int>{2, 2}, {4, 2}}) {
      SCOPED_TRACE(std::string(name) + " gpus " + std::to_string(gpus));
      std::string dir = testing::tempDir(std::string("committed_") + name);
      std::string plans[2] = {dir + "/streamed.pcc", dir + "/copied.pcc"};
      for (int k = 0; k < 2; ++k) {
        CompileOptions o = optionsFor(std::string(PCC_SOURCE_DIR) + "/models/" + name + ".onnx", gpus, tp);
        o.batch = 8;
        o.eagerSliceElements = k == 0 ? 0 : std::numeric_limits<int64_t>::max();
        auto c = compileModel(o, nullptr);
        ASSERT_TRUE(c.ok()) << c.status().message();
        ASSERT_TRUE(writeEmittedPlan(plans[k], c->plan).ok());
      }
      auto a = loadPlanBundle(plans[0]), b = loadPlanBundle(plans[1]);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_EQ(a->plan.ranks_size(), b->plan.ranks_size());
      for (int r = 0; r < a->plan.ranks_size(); ++r) {
        const auto &pa = a->plan.ranks(r), &pb = b->plan.ranks(r);
        ASSERT_EQ(pa.weights_size(), pb.weights_size());
        for (int i = 0; i < pa.weights_size(); ++i) {
          EXPECT_EQ(pa.weights(i).crc32(), pb.weights(i).crc32()) << pa.weights(i).name();
          EXPECT_EQ(pa.weights(i).offset(), pb.weights(i).offset());
        }
        ASSERT_EQ(a->files.count(pa.weight_file()), b->files.count(pb.weight_file()));
        if (!a->files.count(pa.weight_file())) continue;
        const MappedFile& fa = *a->files.at(pa.weight_file());
        const MappedFile& fb = *b->files.at(pb.weight_file());
        ASSERT_EQ(fa.size(), fb.size());
        EXPECT_TRUE(fa.size() == 0 || std::memcmp(fa.data(), fb.data(), fa.size()) == 0) << pa.weight_file();
      }
      std::vector<Tensor> inputs = randomInputsFor(a->plan, 3);
      auto run = runPlan(*a, inputs, RunOptions{});
      ASSERT_TRUE(run.ok()) << run.status().message();
      auto ref = runReference(*a, inputs);
      ASSERT_TRUE(ref.ok()) << ref.status().message();
      ASSERT_EQ(run->outputs.size(), ref->size());
      for (size_t k = 0; k < ref->size(); ++k) testing::expectNear(run->outputs[k], (*ref)[k], 1e-3);
      fs::remove_all(dir);
    }
  }
}

}  // namespace
}  // namespace pcc
