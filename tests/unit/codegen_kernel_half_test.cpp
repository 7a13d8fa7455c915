// float16 and bfloat16 in generated kernels (docs/kernels.md#float16-and-bfloat16):
// descriptions of groups on them, the emitted C++ conversions bit for bit
// against runtime/support's, single ops exact against the reference program,
// elementwise groups, casts and reductions (Softmax, LayerNorm, RMSNorm,
// ReduceMean) at the storage types' tolerances, and the CUDA forms with
// their 16-byte vector path (NVRTC for sm_80 and sm_90 where the toolkit is,
// the vector loads and stores checked in the PTX).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "codegen/kernel_build.h"
#include "codegen/kernel_desc.h"
#include "codegen/kernel_emit.h"
#include "runtime/support/random.h"
#include "runtime/support/tensor.h"
#include "tests/unit/codegen_kernel_test_util.h"
#include "tests/unit/prerequisite.h"

namespace pcc {
namespace {


// Tolerances. A value rounded to float16 (11 significant bits) is off by at
// most u = 2^-11 of its magnitude, to bfloat16 (8 bits) by u = 2^-8. The
// reference rounds after every op of a group, the generated kernel once, at
// the store: a group of k ops differs by about (k + 1) u relative to the
// magnitude of the values it went through (the inputs lie in [-1, 1), the
// norms' results within a few units). Eight units, as rtol and as atol:
constexpr double kF16Tol = 8 * 0x1p-11;   // 3.9e-3
constexpr double kBf16Tol = 8 * 0x1p-8;   // 3.1e-2

StatusOr<KernelSpec> describeFirst(const std::string& text) {
  auto g = fused(text);
  if (!g || !firstFused(*g)) return unsupported("no fused group");
  return describeFused(*firstFused(*g));
}

/// \returns how many Exprs of `spec` are `op` of dtype `t`.
int count(const KernelSpec& spec, ScalarOp op, DType t) {
  int n = 0;
  for (const Expr& e : spec.exprs) n += e.op == op && e.dtype == t;
  return n;
}

TEST(KernelHalf, DescribesFloat16AndBfloat16Groups) {
  auto spec = describeFirst(
      "graph @g(%x: f16[4,8], %y: f16[4,8], %z: bf16[4,8]) -> (%r: bf16[4,8], %f: f32[4,8]) {\n"
      "  %a = Add(%x, %y) : f16[4,8]\n"
      "  %t = Tanh(%a) : f16[4,8]\n"
      "  %c = Cast(%t) {to = 16} : bf16[4,8]\n"
      "  %r = Mul(%c, %z) : bf16[4,8]\n"
      "  %f = Cast(%r) {to = 1} : f32[4,8]\n"
      "  return %r, %f\n}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->dims, std::vector<int64_t>({32}));
  EXPECT_EQ(spec->inputs[0].type.dtype, DType::kF16);
  EXPECT_EQ(spec->inputs[2].type.dtype, DType::kBF16);
  EXPECT_EQ(count(*spec, ScalarOp::kTanh, DType::kF16), 1);
  EXPECT_EQ(count(*spec, ScalarOp::kCast, DType::kBF16), 1);
  EXPECT_EQ(count(*spec, ScalarOp::kMul, DType::kBF16), 1);
  EXPECT_EQ(count(*spec, ScalarOp::kCast, DType::kF32), 1);

  std::string cpp = emitCppLibrary({{"pcc_k_test", &*spec}});
  EXPECT_NE(cpp.find("const unsigned short* in0 = (const unsigned short*)pk_in[0];"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find("pk_from_f16(in0["), std::string::npos) << cpp;
  EXPECT_NE(cpp.find("pk_from_bf16(in2["), std::string::npos) << cpp;
  EXPECT_NE(cpp.find("pk_round_bf16("), std::string::npos) << cpp;  // the Cast rounds
  EXPECT_NE(cpp.find("out0[r * C + c] = pk_to_bf16("), std::string::npos) << cpp;
  std::string cuda = emitCudaKernel("pcc_k_test", *spec);
  EXPECT_NE(cuda.find("#include <cuda_fp16.h>"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("(const __half* in0, const __half* in1, const __nv_bfloat16* in2, __nv_bfloat16* out0, float* out1)"),
            std::string::npos)
      << cuda;
  EXPECT_EQ(cudaVectorWidth(*spec), 8);  // 16 bytes of the 2-byte types; the float32 output takes two words
}

/// Loads the CPU library `buildKernels` made for `table`. \returns the
/// dlopen handle (null on failure, with a test failure).
void* loadLibrary(const KernelTable& table, const char* fileName) {
  plan::Plan p;
  std::map<std::string, std::string> files;
  KernelOptions ko;
  ko.cacheDir = (std::filesystem::temp_directory_path() / "pcc_kernel_desc_cache").string();
  Status built = buildKernels(table, ko, p, &files);
  EXPECT_TRUE(built.ok()) << built.message();
  if (!built.ok() || !files.count("kernels/cpu.so")) return nullptr;
  std::string path = (std::filesystem::temp_directory_path() / fileName).string();
  std::ofstream(path, std::ios::binary) << files["kernels/cpu.so"];
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_TRUE(h != nullptr) << dlerror();
  std::filesystem::remove(path);
  return h;
}

using KernelFn = void (*)(const void* const*, void* const*);

TEST(KernelHalf, CppConversionsAreBitExact) {
  // Float inputs: every float16 value, its neighbours, the exact midpoints
  // between float16 values (ties) and their neighbours, bfloat16 ties and
  // their neighbours, specials, and random bit patterns to fill.
  std::vector<uint32_t> bits;
  auto add = [&](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    bits.push_back(b);
  };
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    float f = halfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    add(f);
    add(std::nextafter(f, INFINITY));
    add(std::nextafter(f, -INFINITY));
    if ((h & 0x7fffu) < 0x7c00u) {  // the midpoint to the next value away from zero
      float mid = static_cast<float>((static_cast<double>(f) + halfToFloat(static_cast<uint16_t>(h + 1))) / 2);
      add(mid);
      add(std::nextafter(mid, INFINITY));
      add(std::nextafter(mid, -INFINITY));
    }
  }
  for (uint32_t hi = 0; hi < 0x10000u; hi += 7)
    for (uint32_t lo : {0x7fffu, 0x8000u, 0x8001u}) bits.push_back(hi << 16 | lo);
  for (uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu, 0xff812345u, 0x7f800000u, 0xff800000u,
                     0x7f7fffffu, 0x00000001u, 0x80000001u, 0x33000000u, 0x33000001u, 0x477ff000u, 0x477fefffu})
    bits.push_back(b);
  uint64_t state = 12345;
  const int64_t n = int64_t{1} << 19;
  ASSERT_LT(static_cast<int64_t>(bits.size()), n);
  while (static_cast<int64_t>(bits.size()) < n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    bits.push_back(static_cast<uint32_t>(state >> 32));
  }

  // Kernel 0: f32 -> f16 and bf16 (Casts, then the stores). Kernel 1: every
  // f16 and bf16 bit pattern -> f32.
  KernelSpec narrow;
  narrow.group = "narrow";
  narrow.dims = {n};
  narrow.inputs = {KernelInput{TensorType{DType::kF32, {n}}, {1}}};
  narrow.exprs = {Expr{ScalarOp::kInput, DType::kF32, {}, 0, 0}, Expr{ScalarOp::kCast, DType::kF16, {0}, -1, 0},
                  Expr{ScalarOp::kCast, DType::kBF16, {0}, -1, 0}};
  narrow.outputs = {KernelOutput{TensorType{DType::kF16, {n}}, 1, false},
                    KernelOutput{TensorType{DType::kBF16, {n}}, 2, false}};
  const int64_t m = 0x10000;
  KernelSpec widen;
  widen.group = "widen";
  widen.dims = {m};
  widen.inputs = {KernelInput{TensorType{DType::kF16, {m}}, {1}}, KernelInput{TensorType{DType::kBF16, {m}}, {1}}};
  widen.exprs = {Expr{ScalarOp::kInput, DType::kF16, {}, 0, 0}, Expr{ScalarOp::kInput, DType::kBF16, {}, 1, 0},
                 Expr{ScalarOp::kCast, DType::kF32, {0}, -1, 0}, Expr{ScalarOp::kCast, DType::kF32, {1}, -1, 0}};
  widen.outputs = {KernelOutput{TensorType{DType::kF32, {m}}, 2, false},
                   KernelOutput{TensorType{DType::kF32, {m}}, 3, false}};
  KernelTable table;
  ASSERT_EQ(table.add(narrow), 0);
  ASSERT_EQ(table.add(widen), 1);
  void* lib = loadLibrary(table, "pcc_kernel_half_conv.so");
  ASSERT_TRUE(lib);
  auto narrowFn = reinterpret_cast<KernelFn>(dlsym(lib, table.name(0).c_str()));
  auto widenFn = reinterpret_cast<KernelFn>(dlsym(lib, table.name(1).c_str()));
  ASSERT_TRUE(narrowFn && widenFn);

  std::vector<uint16_t> h(n), b(n);
  const void* in[] = {bits.data()};
  void* out[] = {h.data(), b.data()};
  narrowFn(in, out);
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 10; ++i) {
    float f;
    std::memcpy(&f, &bits[i], 4);
    uint16_t wantH = floatToHalf(f), wantB = floatToBf16(f);
    if (h[i] != wantH || b[i] != wantB) {
      ++bad;
      ADD_FAILURE() << std::hex << "float bits 0x" << bits[i] << ": f16 0x" << h[i] << " want 0x" << wantH
                    << ", bf16 0x" << b[i] << " want 0x" << wantB;
    }
  }
  std::vector<uint16_t> all(m);
  for (int64_t i = 0; i < m; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> fromH(m), fromB(m);
  const void* in2[] = {all.data(), all.data()};
  void* out2[] = {fromH.data(), fromB.data()};
  widenFn(in2, out2);
  for (int64_t i = 0; i < m && bad < 20; ++i) {
    float wantH = halfToFloat(all[i]), wantB = bf16ToFloat(all[i]);
    if (std::memcmp(&fromH[i], &wantH, 4) != 0 || std::memcmp(&fromB[i], &wantB, 4) != 0) {
      ++bad;
      ADD_FAILURE() << std::hex << "bits 0x" << i << ": from f16 " << fromH[i] << " want " << wantH << ", from bf16 "
                    << fromB[i] << " want " << wantB;
    }
  }
  dlclose(lib);
}

TEST(KernelHalfGenerated, SingleRoundingsAreExact) {
  // A product of two float16 (bfloat16) values is exact in float32, as in
  // the reference's double, and |x| and -x are exact: each result is rounded
  // once on both sides, so they must agree bit for bit.
  const char kText[] =
      "graph @g(%x: f32[6,40], %a: f16[6,40], %b: f16[6,40], %c: bf16[6,40], %d: bf16[6,40])"
      " -> (%h: f16[6,40], %g: bf16[6,40], %m: f16[6,40], %n: bf16[6,40]) {\n"
      "  %x1 = Cast(%x) {to = 10} : f16[6,40]\n"
      "  %h = Abs(%x1) : f16[6,40]\n"
      "  %x2 = Cast(%x) {to = 16} : bf16[6,40]\n"
      "  %g = Neg(%x2) : bf16[6,40]\n"
      "  %p = Mul(%a, %b) : f16[6,40]\n"
      "  %m = Neg(%p) : f16[6,40]\n"
      "  %q = Mul(%c, %d) : bf16[6,40]\n"
      "  %n = Abs(%q) : bf16[6,40]\n"
      "  return %h, %g, %m, %n\n}\n";
  plan::Plan p = runGenerated(kText, 1, "pcc_kernel_half_exact.pcc", 0, 0);
  EXPECT_EQ(p.kernel_fallbacks_size(), 0);
  for (const plan::KernelFallback& f : p.kernel_fallbacks()) ADD_FAILURE() << f.node() << ": " << f.reason();
  ASSERT_EQ(p.ranks_size(), 1);
  EXPECT_GE(launches(p.ranks(0)), 1);
}

TEST(KernelHalfGenerated, ElementwiseGroupsAndCastsEqualTheReference) {
  // float16 with a bias row, a column, a scalar constant, Gelu, a mask and
  // a cast to float32; bfloat16 from float32 inputs through a cast.
  const char kF16[] =
      "graph @g(%x: f16[6,40], %bias: f16[40], %col: f16[6,1], %m: bool[6,40],"
      " %k: f16[] const dense<f16[]: 0.75>) -> (%r: f16[6,40], %f: f32[6,40]) {\n"
      "  %a = Add(%x, %bias) : f16[6,40]\n"
      "  %s = Mul(%a, %col) : f16[6,40]\n"
      "  %e = Sub(%s, %k) : f16[6,40]\n"
      "  %ge = Gelu(%e) : f16[6,40]\n"
      "  %r = Where(%m, %ge, %k) : f16[6,40]\n"
      "  %t = Transpose(%r) {perm = [0, 1]} : f16[6,40]\n"
      "  %sg = Sigmoid(%t) : f16[6,40]\n"
      "  %f = Cast(%sg) {to = 1} : f32[6,40]\n"
      "  return %r, %f\n}\n";
  plan::Plan p = runGenerated(kF16, 1, "pcc_kernel_half_f16.pcc", kF16Tol, kF16Tol);
  EXPECT_EQ(p.kernel_fallbacks_size(), 0);
  for (const plan::KernelFallback& f : p.kernel_fallbacks()) ADD_FAILURE() << f.node() << ": " << f.reason();
  ASSERT_EQ(p.ranks_size(), 1);
  EXPECT_EQ(launches(p.ranks(0)), 2);

  const char kBf16[] =
      "graph @g(%x: f32[6,40], %y: bf16[6,40], %bias: bf16[40]) -> (%r: bf16[6,40], %q: f32[6,40]) {\n"
      "  %c = Cast(%x) {to = 16} : bf16[6,40]\n"
      "  %a = Add(%c, %y) : bf16[6,40]\n"
      "  %b = Mul(%a, %bias) : bf16[6,40]\n"
      "  %r = Tanh(%b) : bf16[6,40]\n"
      "  %e = Exp(%y) : bf16[6,40]\n"
      "  %w = Cast(%e) {to = 1} : f32[6,40]\n"
      "  %q = Sub(%w, %x) : f32[6,40]\n"
      "  return %r, %q\n}\n";
  p = runGenerated(kBf16, 1, "pcc_kernel_half_bf16.pcc", kBf16Tol, kBf16Tol);
  EXPECT_EQ(p.kernel_fallbacks_size(), 0);
  for (const plan::KernelFallback& f : p.kernel_fallbacks()) ADD_FAILURE() << f.node() << ": " << f.reason();
}

TEST(KernelHalfGenerated, ReductionsInFloat16AndBfloat16EqualTheReference) {
  // Softmax after a scale and LayerNorm after a residual add in float16,
  // RMSNorm and ReduceMean in bfloat16; all sums in float32.
  const char kF16[] =
      "graph @g(%x: f16[2,3,40], %y: f16[2,3,40], %s: f16[40], %b: f16[40],"
      " %k: f16[] const dense<f16[]: 0.25>) -> (%o1: f16[2,3,40], %a: f16[2,3,40], %o2: f16[2,3,40]) {\n"
      "  %d = Mul(%x, %k) : f16[2,3,40]\n"
      "  %o1 = Softmax(%d) {axis = -1} : f16[2,3,40]\n"
      "  %a = Add(%x, %y) : f16[2,3,40]\n"
      "  %o2 = LayerNormalization(%a, %s, %b) {axis = -1, epsilon = 0.00001} : f16[2,3,40]\n"
      "  return %o1, %a, %o2\n}\n";
  plan::Plan p = runGenerated(kF16, 1, "pcc_kernel_half_reduce_f16.pcc", kF16Tol, kF16Tol);
  EXPECT_EQ(p.kernel_fallbacks_size(), 0);
  for (const plan::KernelFallback& f : p.kernel_fallbacks()) ADD_FAILURE() << f.node() << ": " << f.reason();
  ASSERT_EQ(p.ranks_size(), 1);
  EXPECT_EQ(launches(p.ranks(0)), 2);
  for (const plan::Instruction& ins : p.ranks(0).instructions())
    EXPECT_TRUE(ins.op() != "LayerNormalization" && ins.op() != "Softmax") << ins.op() << " " << ins.node();

  const char kBf16[] =
      "graph @g(%x: bf16[4,64], %s: bf16[64]) -> (%o1: bf16[4,64], %o2: bf16[4,1]) {\n"
      "  %e = Tanh(%x) : bf16[4,64]\n"
      "  %o1 = RMSNormalization(%e, %s) {axis = -1, epsilon = 0.00001} : bf16[4,64]\n"
      "  %q = Mul(%x, %x) : bf16[4,64]\n"
      "  %o2 = ReduceMean(%q) {axes = [-1], keepdims = 1} : bf16[4,1]\n"
      "  return %o1, %o2\n}\n";
  p = runGenerated(kBf16, 1, "pcc_kernel_half_reduce_bf16.pcc", kBf16Tol, kBf16Tol);
  EXPECT_EQ(p.kernel_fallbacks_size(), 0);
  for (const plan::KernelFallback& f : p.kernel_fallbacks()) ADD_FAILURE() << f.node() << ": " << f.reason();
}

TEST(KernelHalf, CudaVectorPathAndNvrtc) {
  struct Case {
    std::string text;
    int width;  // cudaVectorWidth
  };
  auto flat = [](const std::string& t) {
    return "graph @g(%x: " + t + "[1000], %y: " + t + "[1000], %k: " + t + "[]) -> (%r: " + t + "[1000]) {\n  %a = Add(%x, %y) : " +
           t + "[1000]\n  %m = Mul(%a, %k) : " + t + "[1000]\n  %r = Relu(%m) : " + t + "[1000]\n  return %r\n}\n";
  };
  std::vector<Case> cases = {
      {flat("f32"), 4},
      {flat("f16"), 8},
      {flat("bf16"), 8},
      // A bias row: two merged dims, no vector path.
      {"graph @g(%x: f16[8,40], %b: f16[40]) -> (%r: f16[8,40]) {\n  %a = Add(%x, %b) : f16[8,40]\n"
       "  %r = Tanh(%a) : f16[8,40]\n  return %r\n}\n", 0},
      // A reduction in float16: warp form.
      {"graph @g(%x: f16[8,40], %k: f16[]) -> (%r: f16[8,40]) {\n  %a = Mul(%x, %k) : f16[8,40]\n"
       "  %r = Softmax(%a) {axis = -1} : f16[8,40]\n  return %r\n}\n", 0},
      // An int64 input: no vector path.
      {"graph @g(%x: i64[64], %y: f32[64]) -> (%r: f32[64]) {\n  %c = Cast(%x) {to = 1} : f32[64]\n"
       "  %r = Add(%c, %y) : f32[64]\n  return %r\n}\n", 0},
  };
  KernelTable table;
  std::vector<int> widths;
  for (const Case& c : cases) {
    auto spec = describeFirst(c.text);
    ASSERT_TRUE(spec.ok()) << c.text << spec.status().message();
    EXPECT_EQ(cudaVectorWidth(*spec), c.width) << c.text;
    std::string src = emitCudaKernel("pcc_k_test", *spec);
    EXPECT_EQ(src.find("uint4") != std::string::npos, c.width > 0) << src;
    if (c.width) {
      EXPECT_NE(src.find("& 15ull) == 0ull"), std::string::npos) << src;
      EXPECT_EQ(cudaGridFor(*spec), 1) << src;  // 250 or 125 vector steps
    }
    ASSERT_EQ(table.add(*spec), static_cast<int>(widths.size()));
    widths.push_back(c.width);
  }
  if (!haveCudaCodegen()) PCC_SKIP_UNLESS_REQUIRED("no CUDA toolkit: NVRTC not run (the sources were checked above)");
  KernelOptions ko;
  ko.target = "cuda";
  auto images = compileCudaKernels(table, ko);
  ASSERT_TRUE(images.ok()) << images.status().message();
  EXPECT_EQ(images->size(), 2 * cases.size());  // sm_80 and sm_90
  const std::regex vload(R"(ld\.global(\.nc)?\.v4\.(u32|b32|f32))"), vstore(R"(st\.global\.v4\.(u32|b32|f32))");
  for (const CudaImageBytes& im : *images) {
    EXPECT_FALSE(im.cubin.empty()) << im.arch;
    bool vector = widths.at(im.kernel) > 0;
    EXPECT_EQ(std::regex_search(im.ptx, vload), vector) << "kernel " << im.kernel << " " << im.arch << "\n" << im.ptx;
    EXPECT_EQ(std::regex_search(im.ptx, vstore), vector) << "kernel " << im.kernel << " " << im.arch;
  }
}

}  // namespace
}  // namespace pcc
