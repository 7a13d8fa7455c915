// Generated reduction kernels (docs/kernels.md#reductions): the description
// of each reduction kind (Softmax, LogSoftmax, LayerNormalization,
// RMSNormalization, ReduceSum/Mean/Max with and without keepdims) alone and
// mixed with elementwise ops, the refusals with their reasons, the CUDA
// source's warp and block forms (and NVRTC for sm_80 and sm_90 where the
// toolkit is), and the generated C++ against the reference program on one
// and two ranks, in place and not.
#include <gtest/gtest.h>

#include "codegen/kernel_build.h"
#include "codegen/kernel_desc.h"
#include "codegen/kernel_emit.h"
#include "tests/unit/codegen_kernel_test_util.h"

namespace pcc {
namespace {

using V = std::vector<int64_t>;
using VV = std::vector<std::vector<int64_t>>;

StatusOr<KernelSpec> describeFirst(const std::string& text) {
  auto g = fused(text);
  if (!g || !firstFused(*g)) return unsupported("no fused group");
  return describeFused(*firstFused(*g));
}

/// \returns how many Exprs of `spec` are `op`.
int count(const KernelSpec& spec, ScalarOp op) {
  int n = 0;
  for (const Expr& e : spec.exprs) n += e.op == op;
  return n;
}

/// \returns the instructions of `prog` other than FREE, one line each, for failure messages.
std::string listing(const plan::RankProgram& prog) {
  std::string s;
  for (const plan::Instruction& ins : prog.instructions())
    if (ins.kind() != plan::Instruction::FREE)
      s += strCat("  ", plan::Instruction::Kind_Name(ins.kind()), " ", ins.op(), " ", ins.node(), " in ",
                  ins.inputs_size() ? ins.inputs(0) : -1, " out ", ins.outputs_size() ? ins.outputs(0) : -1, "\n");
  return s;
}

/// \returns the strides of the input of type `type` (the group's parameters come in the fuse pass's order).
std::vector<int64_t> stridesOf(const KernelSpec& spec, const std::string& type) {
  for (const KernelInput& in : spec.inputs)
    if (in.type.str() == type) return in.strides;
  ADD_FAILURE() << "no input of type " << type;
  return {};
}

TEST(KernelReduce, SoftmaxAfterAScaleAndAMask) {
  // Div, a Where mask [2,1,1,8] broadcast over heads and queries, Softmax on the last axis.
  auto spec = describeFirst(
      "graph @g(%x: f32[2,3,4,8], %m: bool[2,1,1,8], %k: f32[]) -> (%r: f32[2,3,4,8]) {\n"
      "  %d = Div(%x, %k) : f32[2,3,4,8]\n"
      "  %w = Where(%m, %d, %k) : f32[2,3,4,8]\n"
      "  %r = Softmax(%w) {axis = -1} : f32[2,3,4,8]\n"
      "  return %r\n}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->reduces);
  EXPECT_EQ(spec->dims, V({2, 12, 8}));
  EXPECT_EQ(stridesOf(*spec, "f32[2,3,4,8]"), V({96, 8, 1}));
  EXPECT_EQ(stridesOf(*spec, "bool[2,1,1,8]"), V({8, 0, 1}));
  EXPECT_EQ(stridesOf(*spec, "f32[]"), V({0, 0, 0}));
  EXPECT_EQ(count(*spec, ScalarOp::kReduceMax), 1);
  EXPECT_EQ(count(*spec, ScalarOp::kReduceSum), 1);
  EXPECT_EQ(spec->rows(), 24);
  EXPECT_EQ(spec->rowLength(), 8);
  EXPECT_FALSE(spec->outputs[0].perRow);
}

TEST(KernelReduce, LayerNormAfterAResidualAdd) {
  // Both the sum (read later as the next residual) and the norm leave the group.
  auto spec = describeFirst(
      "graph @g(%x: f32[4,6,16], %y: f32[4,6,16], %s: f32[16], %b: f32[16]) -> (%a: f32[4,6,16], %r: f32[4,6,16]) {\n"
      "  %a = Add(%x, %y) : f32[4,6,16]\n"
      "  %r = LayerNormalization(%a, %s, %b) {axis = -1, epsilon = 0.001} : f32[4,6,16]\n"
      "  return %a, %r\n}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->reduces);
  EXPECT_EQ(spec->dims, V({24, 16}));
  EXPECT_EQ(stridesOf(*spec, "f32[4,6,16]"), V({16, 1}));
  EXPECT_EQ(stridesOf(*spec, "f32[16]"), V({0, 1}));
  EXPECT_EQ(count(*spec, ScalarOp::kReduceSum), 2);  // two passes: mean, then variance
  ASSERT_EQ(spec->outputs.size(), 2u);
  EXPECT_EQ(spec->exprs[spec->outputs[0].expr].op, ScalarOp::kAdd);
}

TEST(KernelReduce, NormsOverSeveralTrailingAxes) {
  auto spec = describeFirst(
      "graph @g(%x: f32[3,4,5], %s: f32[4,5]) -> (%r: f32[3,4,5]) {\n"
      "  %e = Exp(%x) : f32[3,4,5]\n"
      "  %r = RMSNormalization(%e, %s) {axis = 1, epsilon = 0.00001} : f32[3,4,5]\n"
      "  return %r\n}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->dims, V({3, 20}));
  EXPECT_EQ(stridesOf(*spec, "f32[3,4,5]"), V({20, 1}));
  EXPECT_EQ(stridesOf(*spec, "f32[4,5]"), V({0, 1}));
  EXPECT_EQ(count(*spec, ScalarOp::kReduceSum), 1);  // no mean
}

TEST(KernelReduce, ReducesWithAndWithoutKeepdims) {
  for (int keep : {1, 0}) {
    std::string out = keep ? "f32[2,1,1]" : "f32[2]";
    auto spec = describeFirst(
        "graph @g(%x: f32[2,3,4]) -> (%r: " + out + ") {\n"
        "  %e = Mul(%x, %x) : f32[2,3,4]\n"
        "  %r = ReduceMean(%e) {axes = [-2, -1], keepdims = " + std::to_string(keep) + "} : " + out + "\n"
        "  return %r\n}\n");
    ASSERT_TRUE(spec.ok()) << keep << ": " << spec.status().message();
    EXPECT_EQ(spec->dims, V({2, 12})) << keep;
    ASSERT_EQ(spec->outputs.size(), 1u);
    EXPECT_TRUE(spec->outputs[0].perRow) << keep;
  }
  // ReduceMax over everything: one row.
  auto spec = describeFirst(
      "graph @g(%x: f32[2,3]) -> (%r: f32[]) {\n"
      "  %a = Abs(%x) : f32[2,3]\n"
      "  %r = ReduceMax(%a) {keepdims = 0} : f32[]\n"
      "  return %r\n}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->dims, V({6}));
  EXPECT_EQ(spec->rows(), 1);
  EXPECT_EQ(count(*spec, ScalarOp::kReduceMax), 1);
}

TEST(KernelReduce, RefusesWithAReason) {
  struct Case {
    std::string text, reason;
  };
  std::vector<Case> cases = {
      {"graph @g(%x: f32[4,8]) -> (%r: f32[1,8]) {\n"
       "  %e = Exp(%x) : f32[4,8]\n"
       "  %r = ReduceSum(%e) {axes = [0], keepdims = 1} : f32[1,8]\n  return %r\n}\n",
       "ReduceSum ('r') reduces axes [0] of f32[4,8], not trailing ones"},
      {"graph @g(%x: f32[4,8]) -> (%r: f32[4,8]) {\n"
       "  %e = Exp(%x) : f32[4,8]\n"
       "  %r = LogSoftmax(%e) {axis = 0} : f32[4,8]\n  return %r\n}\n",
       "LogSoftmax ('r') over axis 0 of f32[4,8], not the last"},
      {"graph @g(%x: f32[4,8], %b: f32[4]) -> (%r: f32[4]) {\n"
       "  %s = ReduceSum(%x) {axes = [1], keepdims = 0} : f32[4]\n"
       "  %r = Add(%s, %b) : f32[4]\n  return %r\n}\n",
       "the reduced value 's' (keepdims = 0) is read inside the group"},
      {"graph @g(%x: f32[2,3,4], %s: f32[3,1]) -> (%r: f32[2,3,4]) {\n"
       "  %e = Exp(%x) : f32[2,3,4]\n"
       "  %r = LayerNormalization(%e, %s) {axis = 1} : f32[2,3,4]\n  return %r\n}\n",
       "input 's' f32[3,1] is not contiguous along the reduced axes of [2,3,4]"},
      {"graph @g(%x: i64[4,8]) -> (%r: i64[4,1]) {\n"
       "  %e = Neg(%x) : i64[4,8]\n"
       "  %r = ReduceMax(%e) {axes = [1]} : i64[4,1]\n  return %r\n}\n",
       "ReduceMax ('r') on i64: reductions are generated on float32, float16 and bfloat16 only"},
      {"graph @g(%x: f32[4,8]) -> (%r: f32[4,8]) {\n"
       "  %e = Exp(%x) : f32[4,8]\n"
       "  %r = Hardmax(%e) {axis = -1} : f32[4,8]\n  return %r\n}\n",
       "it holds Hardmax ('r'), which is not elementwise nor a generated reduction"},
  };
  for (const Case& c : cases) {
    auto spec = describeFirst(c.text);
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_NE(spec.status().message().find(c.reason), std::string::npos)
        << "want: " << c.reason << "\ngot: " << spec.status().message();
  }
}

TEST(KernelReduce, CudaWarpAndBlockForms) {
  for (int64_t len : {int64_t{768}, int64_t{4096}}) {
    std::string t = "f32[6," + std::to_string(len) + "]";
    auto spec = describeFirst("graph @g(%x: " + t + ", %k: f32[]) -> (%r: " + t + ") {\n  %d = Mul(%x, %k) : " + t +
                              "\n  %r = Softmax(%d) {axis = -1} : " + t + "\n  return %r\n}\n");
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    std::string src = emitCudaKernel("pcc_k_test", *spec);
    EXPECT_NE(src.find("__shfl_xor_sync"), std::string::npos) << src;
    bool block = len > kCudaWarpRowMax;
    EXPECT_EQ(src.find("__shared__") != std::string::npos, block) << src;
    EXPECT_EQ(cudaGridFor(*spec), block ? 6 : 1);  // a block per row, or 8 rows per block
    if (!haveCudaCodegen()) continue;
    KernelTable table;
    table.add(*spec);
    KernelOptions ko;
    ko.target = "cuda";
    auto images = compileCudaKernels(table, ko);
    ASSERT_TRUE(images.ok()) << images.status().message();
    EXPECT_EQ(images->size(), 2u);  // sm_80 and sm_90
    for (const CudaImageBytes& im : *images) EXPECT_FALSE(im.cubin.empty()) << im.arch;
  }
}

TEST(KernelReduceGenerated, EveryKindEqualsTheReference) {
  // Each group one kernel: Div + mask + Softmax, Softmax + Mul, Add +
  // LayerNorm (two results), RMSNorm, LogSoftmax, ReduceSum/Mean/Max with
  // and without keepdims; a lone LayerNorm after a MatMul (no group) too.
  const char kText[] =
      "graph @g(%x: f32[2,3,40], %y: f32[2,3,40], %m: bool[2,1,40], %s: f32[40], %b: f32[40],"
      " %w: f32[40,40] const, %half: f32[] const dense<f32[]: 0.5>, %big: f32[] const dense<f32[]: -10000>)"
      " -> (%o1: f32[2,3,40], %o2: f32[2,3,40], %a: f32[2,3,40], %o3: f32[2,3,40],"
      " %o4: f32[2,3,40], %o5: f32[2,3,40], %o6: f32[2,3,1], %o7: f32[2], %o8: f32[2,3], %o9: f32[2,3,40]) {\n"
      "  %d = Div(%x, %half) : f32[2,3,40]\n"
      "  %mk = Where(%m, %d, %big) : f32[2,3,40]\n"
      "  %o1 = Softmax(%mk) {axis = -1} : f32[2,3,40]\n"
      "  %t = Transpose(%o1) {perm = [0, 1, 2]} : f32[2,3,40]\n"
      "  %sm = Softmax(%t) {axis = 2} : f32[2,3,40]\n"
      "  %o2 = Mul(%sm, %y) : f32[2,3,40]\n"
      "  %a = Add(%x, %y) : f32[2,3,40]\n"
      "  %o3 = LayerNormalization(%a, %s, %b) {axis = -1, epsilon = 0.00001} : f32[2,3,40]\n"
      "  %e = Exp(%y) : f32[2,3,40]\n"
      "  %o4 = RMSNormalization(%e, %s) {axis = -1, epsilon = 0.00001} : f32[2,3,40]\n"
      "  %n = Neg(%x) : f32[2,3,40]\n"
      "  %o5 = LogSoftmax(%n) {axis = -1} : f32[2,3,40]\n"
      "  %q = Mul(%y, %y) : f32[2,3,40]\n"
      "  %o6 = ReduceSum(%q) {axes = [-1], keepdims = 1} : f32[2,3,1]\n"
      "  %h = Sigmoid(%x) : f32[2,3,40]\n"
      "  %o7 = ReduceMean(%h) {axes = [1, 2], keepdims = 0} : f32[2]\n"
      "  %k = Tanh(%y) : f32[2,3,40]\n"
      "  %o8 = ReduceMax(%k) {axes = [2], keepdims = 0} : f32[2,3]\n"
      "  %mm = MatMul(%x, %w) : f32[2,3,40]\n"
      "  %o9 = LayerNormalization(%mm, %s) {axis = -1} : f32[2,3,40]\n"
      "  return %o1, %o2, %a, %o3, %o4, %o5, %o6, %o7, %o8, %o9\n}\n";
  plan::Plan p = runGenerated(kText, 1, "pcc_kernel_reduce_kinds.pcc");
  ASSERT_EQ(p.ranks_size(), 1);
  EXPECT_EQ(p.kernel_fallbacks_size(), 0);
  for (const plan::KernelFallback& f : p.kernel_fallbacks()) ADD_FAILURE() << f.node() << ": " << f.reason();
  // Eight groups and the lone LayerNorm.
  EXPECT_EQ(launches(p.ranks(0)), 9) << listing(p.ranks(0));
  for (const plan::Instruction& ins : p.ranks(0).instructions())
    EXPECT_TRUE(ins.op() != "LayerNormalization" && ins.op() != "Softmax") << ins.op() << " " << ins.node();
}

TEST(KernelReduceGenerated, DecomposedLayerNormEqualsTheReference) {
  // As exporters write it; the fuse pass cuts it into groups of one reduction each.
  const char kText[] =
      "graph @g(%x: f32[4,5,24], %s: f32[24], %b: f32[24], %two: f32[] const dense<f32[]: 2>,"
      " %eps: f32[] const dense<f32[]: 0.00001>) -> (%r: f32[4,5,24]) {\n"
      "  %mu = ReduceMean(%x) {axes = [-1], keepdims = 1} : f32[4,5,1]\n"
      "  %d = Sub(%x, %mu) : f32[4,5,24]\n"
      "  %p = Pow(%d, %two) : f32[4,5,24]\n"
      "  %v = ReduceMean(%p) {axes = [-1], keepdims = 1} : f32[4,5,1]\n"
      "  %ve = Add(%v, %eps) : f32[4,5,1]\n"
      "  %sd = Sqrt(%ve) : f32[4,5,1]\n"
      "  %n = Div(%d, %sd) : f32[4,5,24]\n"
      "  %sc = Mul(%n, %s) : f32[4,5,24]\n"
      "  %r = Add(%sc, %b) : f32[4,5,24]\n"
      "  return %r\n}\n";
  plan::Plan p = runGenerated(kText, 1, "pcc_kernel_reduce_decomposed.pcc");
  ASSERT_EQ(p.ranks_size(), 1);
  EXPECT_EQ(p.kernel_fallbacks_size(), 0);
  for (const plan::KernelFallback& f : p.kernel_fallbacks()) ADD_FAILURE() << f.node() << ": " << f.reason();
  for (const plan::Instruction& ins : p.ranks(0).instructions())
    EXPECT_TRUE(ins.kind() != plan::Instruction::KERNEL) << ins.op() << " " << ins.node();
}

TEST(KernelReduceGenerated, InPlaceOverItsInput) {
  // The first Transpose's output dies at the group: Softmax + Mul may run
  // over it (the group's result is not the program's, which the planner
  // keeps out of its arena).
  const char kText[] =
      "graph @g(%x: f32[16,32], %three: f32[] const dense<f32[]: 3>) -> (%o: f32[32,16]) {\n"
      "  %e = Exp(%x) : f32[16,32]\n"
      "  %t = Transpose(%e) {perm = [0, 1]} : f32[16,32]\n"
      "  %s = Softmax(%t) {axis = -1} : f32[16,32]\n"
      "  %r = Mul(%s, %three) : f32[16,32]\n"
      "  %o = Transpose(%r) {perm = [1, 0]} : f32[32,16]\n"
      "  return %o\n}\n";
  plan::Plan p = runGenerated(kText, 1, "pcc_kernel_reduce_inplace.pcc");
  ASSERT_EQ(p.ranks_size(), 1);
  const plan::RankProgram& prog = p.ranks(0);
  bool inPlace = false;
  for (const plan::Instruction& ins : prog.instructions())
    if (ins.kind() == plan::Instruction::LAUNCH)
      for (const plan::Buffer& b : prog.buffers())
        if (b.id() == ins.outputs(0) && b.in_place_of() == ins.inputs(0)) inPlace = true;
  EXPECT_TRUE(inPlace) << "no reduction LAUNCH was planned in place\n" << listing(prog);
}

TEST(KernelReduceGenerated, TensorParallelPlanEqualsTheReference) {
  const char kText[] =
      "graph @g(%x: f32[8,16], %w: f32[16,32] const, %s: f32[16] const, %v: f32[32,16] const) -> (%y: f32[8,16]) {\n"
      "  %n = LayerNormalization(%x, %s) {axis = -1} : f32[8,16]\n"
      "  %m = MatMul(%n, %w) : f32[8,32]\n"
      "  %h = Softmax(%m) {axis = -1} : f32[8,32]\n"
      "  %y = MatMul(%h, %v) : f32[8,16]\n"
      "  return %y\n}\n";
  plan::Plan p = runGenerated(kText, 2, "pcc_kernel_reduce_tp.pcc");
  EXPECT_EQ(p.ranks_size(), 2);
  int total = 0;
  for (const plan::RankProgram& r : p.ranks()) total += launches(r);
  EXPECT_GT(total, 0);
}

}  // namespace
}  // namespace pcc
