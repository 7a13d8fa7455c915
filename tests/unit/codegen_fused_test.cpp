// The plan emitter writes a Fused node as its body's ops (docs/runtime.md#fused-nodes):
// ordinary instructions over the node's buffers, temporaries freed in the
// body, and the plan runs on CPU ranks to the reference program's numbers.
#include <gtest/gtest.h>

#include <filesystem>

#include "codegen/plan_emitter.h"
#include "runtime/support/compare.h"
#include "compiler/ir/text.h"
#include "passes/partition/partitioner.h"
#include "passes/registry.h"
#include "runtime/launcher.h"
#include "runtime/plan_io.h"

namespace pcc {
namespace {

const char kGraph[] =
    "graph @g(%x: f32[4,8], %w: f32[8,8] const, %b: f32[8] const) -> (%y: f32[4,8], %t: f32[4,8]) {\n"
    "  %m = MatMul(%x, %w) : f32[4,8] loc(\"mm\")\n"
    "  %a = Add(%m, %b) : f32[4,8] loc(\"bias\")\n"
    "  %h = Relu(%a) : f32[4,8] loc(\"act\")\n"
    "  %y = Add(%h, %x) : f32[4,8] loc(\"res\")\n"
    "  %s = Softmax(%y) {axis = -1} : f32[4,8] loc(\"sm\")\n"
    "  %t = Mul(%s, %h) : f32[4,8] loc(\"mul\")\n"
    "  return %y, %t\n"
    "}\n";

TEST(CodegenFused, BodyIsEmittedAsInstructionsAndRuns) {
  auto ref = parseGraph(kGraph, "g.ir");
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  std::unique_ptr<Graph> g = (*ref)->clone();
  PartitionOptions po;
  po.gpus = 2;
  auto part = partitionGraph(*g, po);
  ASSERT_TRUE(part.ok()) << part.status().message();
  auto ranks = lowerToRanks(*g, *part);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  for (RankGraph& rg : *ranks) {
    std::vector<std::string> in, out;
    for (const IoBind& b : rg.inputs) in.push_back(b.value->name());
    for (const IoBind& b : rg.outputs) out.push_back(b.value->name());
    PassContext ctx;
    auto changed = createPass("fuse")->run(*rg.graph, ctx);
    ASSERT_TRUE(changed.ok() && *changed);
    // Both groups (the epilogue, the softmax and its product) became Fused nodes.
    EXPECT_EQ(rg.graph->numNodes(), 2u) << printGraph(*rg.graph);
    for (size_t i = 0; i < in.size(); ++i) rg.inputs[i].value = rg.graph->findValue(in[i]);
    for (size_t i = 0; i < out.size(); ++i) rg.outputs[i].value = rg.graph->findValue(out[i]);
  }
  auto emitted = emitPlan(**ref, *g, *part, *ranks, "g.onnx");
  ASSERT_TRUE(emitted.ok()) << emitted.status().message();
  const plan::RankProgram& prog = emitted->plan.ranks(0);
  std::vector<std::string> ops, nodes;
  int frees = 0;
  for (const plan::Instruction& ins : prog.instructions()) {
    if (ins.kind() == plan::Instruction::FREE) {
      ++frees;
      continue;
    }
    ops.push_back(ins.op());
    nodes.push_back(ins.node());
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"MatMul", "Add", "Relu", "Add", "Softmax", "Mul"}));
  EXPECT_EQ(nodes.front(), "mm/fused/mm");
  EXPECT_EQ(nodes.back(), "sm/fused/mul");
  EXPECT_GE(frees, 2);  // the body temporaries %m, %a and %s are released
  for (const plan::Buffer& b : prog.buffers()) EXPECT_NE(b.name(), "") << b.id();

  // Written, read back (validated) and run on two CPU ranks: the reference program's numbers.
  std::string dir = (std::filesystem::temp_directory_path() / "pcc_codegen_fused.pcc").string();
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(writeEmittedPlan(dir, *emitted).ok());
  auto loaded = loadPlanBundle(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  std::vector<Tensor> inputs = randomInputsFor(loaded->plan, 3);
  RunOptions ro;
  ro.threadsPerRank = 1;
  auto got = runPlan(*loaded, inputs, ro);
  ASSERT_TRUE(got.ok()) << got.status().message();
  auto want = runReference(*loaded, inputs);
  ASSERT_TRUE(want.ok()) << want.status().message();
  ASSERT_EQ(got->outputs.size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    Diff d = compareTensors(got->outputs[i], (*want)[i], 1e-5, 1e-6);
    EXPECT_TRUE(d.ok) << "output " << i << ": " << d.where;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pcc
