// NVRTC driver: PTX and cubin for several arches, errors, and PTX checked by
// ptxas (the assembler the driver's JIT uses) where the toolkit has it.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/cuda/nvrtc_compiler.h"
#include "cuda_test_kernels.h"
#include "tests/unit/prerequisite.h"

namespace pcc::cuda {
namespace {


using namespace pcc::cuda::testing;

#ifndef PCC_CUDA_BIN_DIR
#define PCC_CUDA_BIN_DIR "/usr/local/cuda/bin"
#endif

bool hasElfMagic(const std::vector<char>& b) {
  return b.size() > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

std::string ptxasPath() {
  for (const std::string& p : {std::string(PCC_CUDA_BIN_DIR) + "/ptxas", std::string("/usr/local/cuda/bin/ptxas")})
    if (std::filesystem::exists(p)) return p;
  return "";
}

struct PtxasResult {
  int exitCode = -1;
  std::string output;
};

/// Assembles `ptx` with ptxas for `arch` in `dir`. \returns its exit code and
/// its output (stdout and stderr).
PtxasResult runPtxas(const std::string& ptxas, const std::string& ptx, const std::string& arch,
                     const std::string& dir) {
  std::string in = dir + "/kernel_" + arch + ".ptx", out = dir + "/kernel_" + arch + ".cubin",
              log = dir + "/ptxas_" + arch + ".log";
  std::ofstream(in) << ptx;
  std::string cmd = "'" + ptxas + "' -arch=" + arch + " '" + in + "' -o '" + out + "' > '" + log + "' 2>&1";
  int rc = std::system(cmd.c_str());
  PtxasResult r;
  r.exitCode = (rc != -1 && WIFEXITED(rc)) ? WEXITSTATUS(rc) : -1;
  std::ifstream l(log);
  std::stringstream ss;
  ss << l.rdbuf();
  r.output = ss.str();
  if (r.exitCode == 0 && std::filesystem::file_size(out) == 0) r.exitCode = -2;
  return r;
}

TEST(NvrtcTest, GeluErfForSm80AndSm90) {
  auto r = compileCuda(kGeluErfSource, "fused_gelu_affine", CudaCompileOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  const char* arches[] = {"sm_80", "sm_90"};
  for (size_t i = 0; i < 2; ++i) {
    const CompiledKernel& k = (*r)[i];
    SCOPED_TRACE(arches[i]);
    EXPECT_EQ(k.name, "fused_gelu_affine");
    EXPECT_EQ(k.arch, arches[i]);
    EXPECT_NE(k.ptx.find(".visible .entry fused_gelu_affine("), std::string::npos) << k.ptx;
    EXPECT_NE(k.ptx.find(std::string(".target ") + arches[i]), std::string::npos);
    EXPECT_EQ(k.ptx.find('\0'), std::string::npos) << "PTX text must not carry NVRTC's NUL";
    EXPECT_TRUE(hasElfMagic(k.cubin)) << "cubin of " << k.cubin.size() << " bytes";
  }
  EXPECT_EQ((*r)[0].ptx.find(".target sm_90"), std::string::npos);
  EXPECT_NE((*r)[0].cubin, (*r)[1].cubin) << "cubins for different arches must differ";
}

TEST(NvrtcTest, GeluTanhAndFastMath) {
  CudaCompileOptions precise;
  precise.arches = {"sm_80"};
  auto p = compileCuda(kGeluTanhSource, "fused_gelu_tanh", precise);
  ASSERT_TRUE(p.ok()) << p.status().message();
  CudaCompileOptions fast = precise;
  fast.fastMath = true;
  auto f = compileCuda(kGeluTanhSource, "fused_gelu_tanh", fast);
  ASSERT_TRUE(f.ok()) << f.status().message();
  const std::string& pp = (*p)[0].ptx;
  const std::string& fp = (*f)[0].ptx;
  EXPECT_NE(pp.find(".visible .entry fused_gelu_tanh("), std::string::npos);
  // IEEE division unless fast math, which uses the approximate one.
  EXPECT_NE(pp.find("div.rn.f32"), std::string::npos);
  EXPECT_EQ(fp.find("div.rn.f32"), std::string::npos);
  EXPECT_NE(pp, fp);
}

TEST(NvrtcTest, HalfKernelWithCudaFp16) {
  auto r = compileCuda(kHalfSource, "add_relu_half", CudaCompileOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  for (const CompiledKernel& k : *r) {
    SCOPED_TRACE(k.arch);
    EXPECT_NE(k.ptx.find(".visible .entry add_relu_half("), std::string::npos);
    EXPECT_NE(k.ptx.find(".target " + k.arch), std::string::npos);
    EXPECT_NE(k.ptx.find(".f16"), std::string::npos) << "expected half arithmetic in the PTX";
    EXPECT_TRUE(hasElfMagic(k.cubin));
  }
}

TEST(NvrtcTest, ManyArchesInParallelKeepOrderAndAreDeterministic) {
  CudaCompileOptions opts;
  opts.arches = {"sm_90", "sm_80", "sm_86", "sm_89"};
  auto a = compileCuda(kGeluErfSource, "fused_gelu_affine", opts);
  auto b = compileCuda(kGeluErfSource, "fused_gelu_affine", opts);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(a->size(), 4u);
  for (size_t i = 0; i < opts.arches.size(); ++i) {
    EXPECT_EQ((*a)[i].arch, opts.arches[i]);
    EXPECT_NE((*a)[i].ptx.find(".target " + opts.arches[i] + "\n"), std::string::npos);
    // The kernel cache relies on a compile being a pure function.
    EXPECT_EQ((*a)[i].ptx, (*b)[i].ptx);
    EXPECT_EQ((*a)[i].cubin, (*b)[i].cubin);
  }
}

TEST(NvrtcTest, SyntaxErrorIsInternalErrorWithKernelNameAndLog) {
  auto r = compileCuda(kSyntaxErrorSource, "broken_kernel", CudaCompileOptions{});
  ASSERT_FALSE(r.ok());
  const Status s = r.status();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("broken_kernel"), std::string::npos) << s.message();
  // NVRTC's own diagnostic, with the file and line it points at.
  EXPECT_NE(s.message().find("broken_kernel.cu(4): error: expected a \";\""), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one-line message: " << s.message();
}

TEST(NvrtcTest, MangledEntryIsRejected) {
  const char* src = "__global__ void not_extern_c(float* y) { y[0] = 1.0f; }\n";
  auto r = compileCuda(src, "not_extern_c", CudaCompileOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("extern \"C\""), std::string::npos) << r.status().message();
}

TEST(NvrtcTest, BadArchIsInvalidInput) {
  for (const char* bad : {"compute_80", "sm80", "sm_8", "sm_80x", ""}) {
    CudaCompileOptions opts;
    opts.arches = {"sm_80", bad};
    auto r = compileCuda(kGeluErfSource, "fused_gelu_affine", opts);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput) << bad;
    EXPECT_NE(r.status().message().find("'" + std::string(bad) + "'"), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(isValidArch("sm_90a"));
  EXPECT_TRUE(isValidArch("sm_100"));
  CudaCompileOptions none;
  none.arches.clear();
  EXPECT_EQ(compileCuda(kGeluErfSource, "fused_gelu_affine", none).status().code(), StatusCode::kInvalidInput);
}

TEST(NvrtcTest, UnknownOptionIsInternalErrorNamingKernel) {
  CudaCompileOptions opts;
  opts.arches = {"sm_80"};
  opts.extraFlags = {"--no-such-nvrtc-flag"};
  auto r = compileCuda(kGeluErfSource, "fused_gelu_affine", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("fused_gelu_affine"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("sm_80"), std::string::npos) << r.status().message();
}

TEST(NvrtcTest, ExtraFlagsReachTheCompiler) {
  const char* src = R"(
extern "C" __global__ void scaled(float* y) { y[threadIdx.x] *= SCALE; }
)";
  CudaCompileOptions opts;
  opts.arches = {"sm_80"};
  EXPECT_FALSE(compileCuda(src, "scaled", opts).ok()) << "SCALE is undefined without the flag";
  opts.extraFlags = {"-DSCALE=3.0f"};
  auto r = compileCuda(src, "scaled", opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<std::string> o = nvrtcOptions("sm_80", opts);
  EXPECT_EQ(o.front(), "--gpu-architecture=sm_80");
  EXPECT_EQ(o.back(), "-DSCALE=3.0f");
}

TEST(NvrtcTest, PtxasAcceptsThePtx) {
  std::string ptxas = ptxasPath();
  if (ptxas.empty()) PCC_SKIP_UNLESS_REQUIRED("ptxas not found in " PCC_CUDA_BIN_DIR " or /usr/local/cuda/bin");
  TempDir dir;
  for (auto [src, name] : {std::pair{kGeluErfSource, "fused_gelu_affine"}, std::pair{kGeluTanhSource, "fused_gelu_tanh"},
                           std::pair{kHalfSource, "add_relu_half"}}) {
    auto r = compileCuda(src, name, CudaCompileOptions{});
    ASSERT_TRUE(r.ok()) << r.status().message();
    for (const CompiledKernel& k : *r) {
      PtxasResult p = runPtxas(ptxas, k.ptx, k.arch, dir.path());
      EXPECT_EQ(p.exitCode, 0) << name << " for " << k.arch << ": " << p.output;
    }
  }
}

TEST(NvrtcTest, PtxasRejectsDamagedPtx) {
  // Shows that the check above can fail: an undeclared register.
  std::string ptxas = ptxasPath();
  if (ptxas.empty()) PCC_SKIP_UNLESS_REQUIRED("ptxas not found in " PCC_CUDA_BIN_DIR " or /usr/local/cuda/bin");
  CudaCompileOptions opts;
  opts.arches = {"sm_80"};
  auto r = compileCuda(kGeluErfSource, "fused_gelu_affine", opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::string ptx = (*r)[0].ptx;
  size_t ret = ptx.rfind("ret;");
  ASSERT_NE(ret, std::string::npos);
  ptx.insert(ret, "mov.u32 %undeclared_reg, 1;\n\t");
  TempDir dir;
  PtxasResult p = runPtxas(ptxas, ptx, "sm_80", dir.path());
  EXPECT_NE(p.exitCode, 0) << p.output;
}

TEST(NvrtcTest, VersionIsKnown) {
  auto v = nvrtcVersionString();
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_NE(v->find('.'), std::string::npos);
}

}  // namespace
}  // namespace pcc::cuda
