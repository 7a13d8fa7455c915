// The vectorizable exp, tanh, sigmoid, erf and both GELUs of the generated C++
// kernels (codegen/emit_common.cpp, vectorMathPrelude): compiled, LAUNCHed on
// CPU ranks and compared with the reference program (double) at rtol 1e-5,
// over values from 1e-4 to beyond exp's overflow (1/x of x uniform in
// [-1, 1]) and around the polynomials' switches at |x| = 0.625 and 1; a softmax
// (pk_exp inside a reduction) the same way; and the source uses none of the
// C library's expf, tanhf and erff for them, which would not vectorize.
#include <gtest/gtest.h>

#include "codegen/kernel_emit.h"
#include "tests/unit/codegen_kernel_test_util.h"

namespace pcc {
namespace {

TEST(KernelVectorMath, ExpTanhSigmoidGeluEqualTheReference) {
  const char kText[] =
      "graph @g(%x: f32[64,64]) -> (%e: f32[64,64], %t: f32[64,64], %s: f32[64,64], %g: f32[64,64],"
      " %e1: f32[64,64], %t1: f32[64,64], %g1: f32[64,64], %f: f32[64,64], %f1: f32[64,64], %h: f32[64,64],"
      " %h1: f32[64,64]) {\n"
      "  %i = Reciprocal(%x) : f32[64,64]\n"
      "  %e = Exp(%i) : f32[64,64]\n"
      "  %t = Tanh(%i) : f32[64,64]\n"
      "  %s = Sigmoid(%i) : f32[64,64]\n"
      "  %g = Gelu(%i) {approximate = \"tanh\"} : f32[64,64]\n"
      "  %e1 = Exp(%x) : f32[64,64]\n"
      "  %t1 = Tanh(%x) : f32[64,64]\n"
      "  %g1 = Gelu(%x) {approximate = \"tanh\"} : f32[64,64]\n"
      "  %f = Erf(%i) : f32[64,64]\n"
      "  %f1 = Erf(%x) : f32[64,64]\n"
      "  %h = Gelu(%i) : f32[64,64]\n"
      "  %h1 = Gelu(%x) : f32[64,64]\n"
      "  return %e, %t, %s, %g, %e1, %t1, %g1, %f, %f1, %h, %h1\n}\n";
  plan::Plan p = runGenerated(kText, 1, "pcc_kernel_vector_math.pcc");
  ASSERT_EQ(p.ranks_size(), 1);
  EXPECT_GE(launches(p.ranks(0)), 1);
  EXPECT_EQ(p.kernel_fallbacks_size(), 0);
}

TEST(KernelVectorMath, SoftmaxEqualsTheReference) {
  const char kText[] =
      "graph @g(%x: f32[32,40]) -> (%y: f32[32,40]) {\n"
      "  %i = Reciprocal(%x) : f32[32,40]\n"
      "  %y = Softmax(%i) {axis = -1} : f32[32,40]\n"
      "  return %y\n}\n";
  plan::Plan p = runGenerated(kText, 1, "pcc_kernel_vector_softmax.pcc");
  ASSERT_EQ(p.ranks_size(), 1);
  EXPECT_GE(launches(p.ranks(0)), 1);
}

TEST(KernelVectorMath, TheCppPreludeCallsNoLibmExpOrTanh) {
  std::string cpp = scalarPrelude("static inline", true);
  EXPECT_EQ(cpp.find("return expf(x)"), std::string::npos) << cpp;  // pk_exp
  EXPECT_EQ(cpp.find("1.0f + expf(-x)"), std::string::npos) << cpp;  // pk_sigmoid
  EXPECT_EQ(cpp.find("tanhf("), std::string::npos) << cpp;           // pk_tanh, pk_gelu_tanh
  EXPECT_EQ(cpp.find("erff("), std::string::npos) << cpp;            // pk_erf, pk_gelu_erf
  EXPECT_NE(cpp.find("pk_exp("), std::string::npos);
  // CUDA keeps its own expf and tanhf.
  std::string cuda = scalarPrelude("__device__ __forceinline__");
  EXPECT_NE(cuda.find("expf("), std::string::npos);
  EXPECT_NE(cuda.find("tanhf("), std::string::npos);
}

}  // namespace
}  // namespace pcc
