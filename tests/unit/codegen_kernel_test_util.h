// Helpers of the generated-kernel tests (codegen_kernel_desc_test.cpp,
// codegen_kernel_reduce_test.cpp): fuse a graph in text form, and compile a
// graph with generated kernels, run it on CPU ranks and compare it with the
// reference program.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "codegen/kernel_build.h"
#include "codegen/kernel_desc.h"
#include "codegen/plan_emitter.h"
#include "compiler/ir/text.h"
#include "passes/partition/partitioner.h"
#include "passes/registry.h"
#include "runtime/launcher.h"
#include "runtime/plan_io.h"
#include "runtime/support/compare.h"

namespace pcc {

/// Parses `text`, fuses it. \returns the graph (its Fused nodes in order).
inline std::unique_ptr<Graph> fused(const std::string& text) {
  auto g = parseGraph(text, "k.ir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return nullptr;
  PassContext ctx;
  auto changed = createPass("fuse")->run(**g, ctx);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  return std::move(g).value();
}

inline const Node* firstFused(const Graph& g) {
  for (const Node* n : g.nodes())
    if (n->op() == OpKind::Fused) return n;
  return nullptr;
}

/// Compiles `text` on `gpus` CPU ranks with generated kernels into bundle
/// `dirName` (under the temporary directory, replaced). \returns the emitted
/// plan and the loaded bundle (nullopt when something failed, which the
/// expectations report).
struct GeneratedPlan {
  plan::Plan plan;
  std::string dir;
  std::optional<LoadedPlan> loaded;
};
inline GeneratedPlan compileGenerated(const std::string& text, int gpus, const char* dirName) {
  GeneratedPlan out;
  auto ref = parseGraph(text, "k.ir");
  EXPECT_TRUE(ref.ok()) << ref.status().message();
  if (!ref.ok()) return out;
  std::unique_ptr<Graph> g = (*ref)->clone();
  PartitionOptions po;
  po.gpus = gpus;
  auto part = partitionGraph(*g, po);
  EXPECT_TRUE(part.ok()) << part.status().message();
  auto ranks = lowerToRanks(*g, *part);
  EXPECT_TRUE(ranks.ok()) << ranks.status().message();
  for (RankGraph& rg : *ranks) {
    std::vector<std::string> in, out;
    for (const IoBind& b : rg.inputs) in.push_back(b.value->name());
    for (const IoBind& b : rg.outputs) out.push_back(b.value->name());
    PassContext ctx;
    EXPECT_TRUE(createPass("fuse")->run(*rg.graph, ctx).ok());
    for (size_t i = 0; i < in.size(); ++i) rg.inputs[i].value = rg.graph->findValue(in[i]);
    for (size_t i = 0; i < out.size(); ++i) rg.outputs[i].value = rg.graph->findValue(out[i]);
  }
  KernelTable table;
  auto emitted = emitPlan(**ref, *g, *part, *ranks, "k.onnx", &table);
  EXPECT_TRUE(emitted.ok()) << emitted.status().message();
  KernelOptions ko;
  ko.cacheDir = (std::filesystem::temp_directory_path() / "pcc_kernel_desc_cache").string();
  Status built = buildKernels(table, ko, emitted->plan, &emitted->files);
  EXPECT_TRUE(built.ok()) << built.message();
  out.plan = emitted->plan;
  out.dir = (std::filesystem::temp_directory_path() / dirName).string();
  std::filesystem::remove_all(out.dir);
  Status written = writeEmittedPlan(out.dir, *emitted);
  EXPECT_TRUE(written.ok()) << written.message();
  auto loaded = loadPlanBundle(out.dir);
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  if (loaded.ok()) out.loaded = std::move(loaded).value();
  return out;
}

/// Runs `p` with `ro` on seeded random inputs and compares with the reference
/// program at `rtol` and `atol`. \returns the run (nullopt when it failed).
inline std::optional<RunResult> runAndCompare(const LoadedPlan& p, const RunOptions& ro, double rtol, double atol) {
  std::vector<Tensor> inputs = randomInputsFor(p.plan, 5);
  auto got = runPlan(p, inputs, ro);
  EXPECT_TRUE(got.ok()) << got.status().message();
  auto want = runReference(p, inputs);
  EXPECT_TRUE(want.ok()) << want.status().message();
  if (!got.ok() || !want.ok()) return std::nullopt;
  EXPECT_EQ(got->outputs.size(), want->size());
  for (size_t i = 0; i < want->size() && i < got->outputs.size(); ++i) {
    Diff d = compareTensors(got->outputs[i], (*want)[i], rtol, atol);
    EXPECT_TRUE(d.ok) << "output " << i << ": " << d.where;
  }
  return std::move(got).value();
}

/// Compiles `text` on `gpus` CPU ranks with generated kernels, runs it, and
/// compares with the reference program at `rtol` and `atol` (float32's by
/// default). \returns the emitted plan.
inline plan::Plan runGenerated(const std::string& text, int gpus, const char* dirName, double rtol = 1e-5,
                               double atol = 1e-6) {
  GeneratedPlan g = compileGenerated(text, gpus, dirName);
  if (g.loaded) {
    RunOptions ro;
    ro.threadsPerRank = 1;
    runAndCompare(*g.loaded, ro, rtol, atol);
  }
  std::filesystem::remove_all(g.dir);
  return g.plan;
}

inline int launches(const plan::RankProgram& prog) {
  int n = 0;
  for (const plan::Instruction& ins : prog.instructions()) n += ins.kind() == plan::Instruction::LAUNCH;
  return n;
}

}  // namespace pcc
