// Generated kernels (docs/kernels.md): the description of a fused group
// (index space, broadcast strides, expression) for the broadcasting cases,
// the groups it refuses with their reason, and the whole path (C++ emitted,
// compiled into the bundle's shared object, loaded and LAUNCHed on CPU ranks)
// against the reference program, in place and not.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "codegen/kernel_build.h"
#include "codegen/kernel_desc.h"
#include "codegen/kernel_emit.h"
#include "codegen/plan_emitter.h"
#include "compiler/ir/text.h"
#include "passes/partition/partitioner.h"
#include "passes/registry.h"
#include "runtime/launcher.h"
#include "runtime/plan_io.h"
#include "runtime/support/compare.h"
#include "tests/unit/codegen_kernel_test_util.h"

namespace pcc {
namespace {

/// \returns the strides of `spec`'s inputs, in order.
std::vector<std::vector<int64_t>> strides(const KernelSpec& spec) {
  std::vector<std::vector<int64_t>> s;
  for (const KernelInput& in : spec.inputs) s.push_back(in.strides);
  return s;
}

using V = std::vector<int64_t>;
using VV = std::vector<std::vector<int64_t>>;

TEST(KernelDesc, SameShapeIsOneFlatLoop) {
  auto g = fused("graph @g(%x: f32[4,8], %y: f32[4,8]) -> (%r: f32[4,8]) {\n"
                 "  %a = Add(%x, %y) : f32[4,8]\n"
                 "  %r = Relu(%a) : f32[4,8]\n"
                 "  return %r\n}\n");
  ASSERT_TRUE(g && firstFused(*g));
  auto spec = describeFused(*firstFused(*g));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->dims, V({32}));
  EXPECT_EQ(strides(*spec), VV({{1}, {1}}));
  ASSERT_EQ(spec->outputs.size(), 1u);
  EXPECT_EQ(spec->exprs[spec->outputs[0].expr].op, ScalarOp::kRelu);
}

TEST(KernelDesc, ScalarRowColumnAndSizeOneDims) {
  struct Case {
    std::string other;  // the second operand's type
    V dims;
    VV strides;
  };
  std::vector<Case> cases = {
      {"f32[]", {32}, {{1}, {0}}},                 // scalar
      {"f32[8]", {4, 8}, {{8, 1}, {0, 1}}},         // row (bias)
      {"f32[4,1]", {4, 8}, {{8, 1}, {1, 0}}},       // column
      {"f32[1,1,8]", {4, 8}, {{8, 1}, {0, 1}}},     // size-1 leading dims, one more rank
  };
  for (const Case& c : cases) {
    std::string shape = c.other == "f32[1,1,8]" ? "f32[1,4,8]" : "f32[4,8]";
    auto g = fused("graph @g(%x: " + shape + ", %b: " + c.other + ") -> (%r: " + shape + ") {\n" +
                   "  %a = Mul(%x, %b) : " + shape + "\n  %r = Sigmoid(%a) : " + shape + "\n  return %r\n}\n");
    ASSERT_TRUE(g && firstFused(*g)) << c.other;
    auto spec = describeFused(*firstFused(*g));
    ASSERT_TRUE(spec.ok()) << c.other << ": " << spec.status().message();
    EXPECT_EQ(spec->dims, c.dims) << c.other;
    EXPECT_EQ(strides(*spec), c.strides) << c.other;
  }
}

TEST(KernelDesc, BroadcastInsideTheGroup) {
  // %s = b * c is computed on [8] and broadcast to the group's [4,8].
  auto g = fused("graph @g(%x: f32[4,8], %b: f32[8], %c: f32[8]) -> (%r: f32[4,8]) {\n"
                 "  %s = Mul(%b, %c) : f32[8]\n"
                 "  %r = Add(%x, %s) : f32[4,8]\n"
                 "  return %r\n}\n");
  ASSERT_TRUE(g && firstFused(*g));
  auto spec = describeFused(*firstFused(*g));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->dims, V({4, 8}));
}

TEST(KernelDesc, RefusesWithAReason) {
  auto g = fused("graph @g(%x: f32[4,8]) -> (%r: f32[4,8]) {\n"
                 "  %s = Softmax(%x) {axis = 0} : f32[4,8]\n"
                 "  %r = Mul(%s, %x) : f32[4,8]\n"
                 "  return %r\n}\n");
  ASSERT_TRUE(g && firstFused(*g));
  auto spec = describeFused(*firstFused(*g));
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("Softmax ('s') over axis 0 of f32[4,8], not the last"), std::string::npos)
      << spec.status().message();

  auto h = fused("graph @g(%x: f32[4,8], %w: f32[8,8]) -> (%r: f32[4,8]) {\n"
                 "  %m = MatMul(%x, %w) : f32[4,8]\n"
                 "  %r = Relu(%m) : f32[4,8]\n"
                 "  return %r\n}\n");
  ASSERT_TRUE(h && firstFused(*h));
  spec = describeFused(*firstFused(*h));
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("MatMul"), std::string::npos) << spec.status().message();
}

TEST(KernelDesc, EqualGroupsShareOneKernel) {
  auto g = fused("graph @g(%x: f32[4,8], %y: f32[4,8]) -> (%r: f32[4,8], %q: f32[4,8]) {\n"
                 "  %a = Add(%x, %y) : f32[4,8]\n"
                 "  %r = Tanh(%a) : f32[4,8]\n"
                 "  %t = Transpose(%r) {perm = [0, 1]} : f32[4,8]\n"
                 "  %b = Add(%t, %y) : f32[4,8]\n"
                 "  %q = Tanh(%b) : f32[4,8]\n"
                 "  return %r, %q\n}\n");
  ASSERT_TRUE(g);
  KernelTable table;
  std::vector<int> ids;
  for (const Node* n : g->nodes())
    if (n->op() == OpKind::Fused) {
      auto spec = describeFused(*n);
      ASSERT_TRUE(spec.ok()) << spec.status().message();
      ids.push_back(table.add(*spec));
    }
  EXPECT_EQ(ids, std::vector<int>({0, 0}));
  EXPECT_EQ(table.specs().size(), 1u);
}

TEST(KernelGenerated, BroadcastingGroupsEqualTheReference) {
  const char kText[] =
      "graph @g(%x: f32[6,8], %b: f32[8], %c: f32[6,1], %s: f32[]) -> (%r: f32[6,8], %q: f32[6,8]) {\n"
      "  %a = Add(%x, %b) : f32[6,8]\n"
      "  %m = Mul(%a, %c) : f32[6,8]\n"
      "  %d = Sub(%m, %s) : f32[6,8]\n"
      "  %e = Erf(%d) : f32[6,8]\n"
      "  %r = Gelu(%e) : f32[6,8]\n"
      "  %t = Transpose(%r) {perm = [0, 1]} : f32[6,8]\n"
      "  %p = Less(%t, %x) : bool[6,8]\n"
      "  %w = Where(%p, %t, %b) : f32[6,8]\n"
      "  %q = Swish(%w) {alpha = 1.5} : f32[6,8]\n"
      "  return %r, %q\n}\n";
  plan::Plan p = runGenerated(kText, 1, "pcc_kernel_desc_bcast.pcc");
  EXPECT_EQ(p.kernels_size(), 2);
  ASSERT_EQ(p.ranks_size(), 1);
  EXPECT_EQ(launches(p.ranks(0)), 2);
  EXPECT_EQ(p.kernel_fallbacks_size(), 0);
  EXPECT_TRUE(p.cpu_library().nbytes() > 0);
}

TEST(KernelGenerated, InPlaceOverItsInput) {
  // The first Transpose's output dies at the fused group: the planner puts
  // the group's output over it, and the kernel must still compute right.
  const char kInner[] =
      "graph @g(%x: f32[16,32], %b: f32[32]) -> (%r: f32[32,16]) {\n"
      "  %e = Exp(%x) : f32[16,32]\n"
      "  %t = Transpose(%e) {perm = [0, 1]} : f32[16,32]\n"
      "  %a = Add(%t, %b) : f32[16,32]\n"
      "  %h = Tanh(%a) : f32[16,32]\n"
      "  %r = Transpose(%h) {perm = [1, 0]} : f32[32,16]\n"
      "  return %r\n}\n";
  plan::Plan q = runGenerated(kInner, 1, "pcc_kernel_desc_inplace2.pcc");
  ASSERT_EQ(q.ranks_size(), 1);
  const plan::RankProgram& qp = q.ranks(0);
  bool inPlace = false;
  for (const plan::Instruction& ins : qp.instructions())
    if (ins.kind() == plan::Instruction::LAUNCH)
      for (const plan::Buffer& b : qp.buffers())
        if (b.id() == ins.outputs(0) && b.in_place_of() == ins.inputs(0)) inPlace = true;
  EXPECT_TRUE(inPlace) << "no LAUNCH was planned in place";
}

TEST(KernelGenerated, TensorParallelPlanEqualsTheReference) {
  const char kText[] =
      "graph @g(%x: f32[8,16], %w: f32[16,32] const, %b: f32[32] const, %v: f32[32,16] const) -> (%y: f32[8,16]) {\n"
      "  %m = MatMul(%x, %w) : f32[8,32]\n"
      "  %t = Transpose(%m) {perm = [0, 1]} : f32[8,32]\n"
      "  %a = Add(%t, %b) : f32[8,32]\n"
      "  %h = Gelu(%a) : f32[8,32]\n"
      "  %y = MatMul(%h, %v) : f32[8,16]\n"
      "  return %y\n}\n";
  plan::Plan p = runGenerated(kText, 2, "pcc_kernel_desc_tp.pcc");
  EXPECT_EQ(p.ranks_size(), 2);
}

TEST(KernelEmit, CudaSourceHasAGridStrideLoop) {
  auto g = fused("graph @g(%x: f32[4,8], %b: f32[8]) -> (%r: f32[4,8]) {\n"
                 "  %a = Add(%x, %b) : f32[4,8]\n"
                 "  %r = Relu(%a) : f32[4,8]\n"
                 "  return %r\n}\n");
  ASSERT_TRUE(g && firstFused(*g));
  auto spec = describeFused(*firstFused(*g));
  ASSERT_TRUE(spec.ok());
  std::string src = emitCudaKernel("pcc_k_test", *spec);
  EXPECT_NE(src.find("extern \"C\" __global__ void pcc_k_test(const float* in0, const float* in1, float* out0)"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("i += (long long)gridDim.x * blockDim.x"), std::string::npos) << src;
  EXPECT_EQ(cudaGridFor(*spec), 1);
}

TEST(KernelBuild, ACompileErrorNamesTheGroupAndShowsTheLine) {
  auto g = fused("graph @g(%x: f32[4,8], %b: f32[8]) -> (%r: f32[4,8]) {\n"
                 "  %a = Add(%x, %b) : f32[4,8] loc(\"bias\")\n"
                 "  %r = Relu(%a) : f32[4,8]\n"
                 "  return %r\n}\n");
  ASSERT_TRUE(g && firstFused(*g));
  auto spec = describeFused(*firstFused(*g));
  ASSERT_TRUE(spec.ok());
  KernelTable table;
  table.add(*spec);
  // A "compiler" that rejects the last line of the source, as g++ reports errors.
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "pcc_kernel_build_error";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string script = (dir / "cxx.sh").string();
  {
    std::ofstream f(script);
    f << "#!/bin/sh\nsrc=\"\"\nfor a; do src=\"$a\"; done\n"
         "n=$(wc -l < \"$src\")\necho \"$src:$n:1: error: injected\"\nexit 1\n";
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  KernelOptions ko;
  ko.cxx = script;
  ko.cacheDir = (dir / "cache").string();
  plan::Plan p;
  std::map<std::string, std::string> files;
  Status st = buildKernels(table, ko, p, &files);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("fused group '"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("error: injected"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("\n>"), std::string::npos) << st.message();  // the offending line, marked
  EXPECT_TRUE(files.empty());
  std::filesystem::remove_all(dir);
}

TEST(KernelBuild, SourceExcerptMarksTheLine) {
  EXPECT_EQ(sourceExcerpt("a\nb\nc\nd\ne\nf\n", 3), " 1 | a\n 2 | b\n>3 | c\n 4 | d\n 5 | e\n");
  EXPECT_EQ(sourceExcerpt("a\n", 0), "");
}

}  // namespace
}  // namespace pcc
