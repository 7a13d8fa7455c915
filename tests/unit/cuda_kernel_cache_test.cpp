// Kernel cache: hits and misses, keys, damaged entries, atomic writes.
#include "codegen/cuda/kernel_cache.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "cuda_test_kernels.h"

namespace pcc::cuda {
namespace {

using namespace pcc::cuda::testing;
namespace fs = std::filesystem;

CudaCompileOptions sm80Only() {
  CudaCompileOptions o;
  o.arches = {"sm_80"};
  return o;
}

std::vector<std::string> filesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void expectSameKernels(const std::vector<CompiledKernel>& a, const std::vector<CompiledKernel>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].arch, b[i].arch);
    EXPECT_EQ(a[i].ptx, b[i].ptx);
    EXPECT_EQ(a[i].cubin, b[i].cubin);
    EXPECT_EQ(a[i].log, b[i].log);
  }
}

TEST(KernelCacheTest, MissThenHit) {
  TempDir dir;
  KernelCache cache(dir.path() + "/kernels");  // created on first store
  auto first = cache.getOrCompile(kGeluErfSource, "fused_gelu_affine", CudaCompileOptions{});
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.hits(), 0);
  // One entry per arch, and no temporary left behind.
  std::vector<std::string> files = filesIn(cache.dir());
  ASSERT_EQ(files.size(), 2u);
  for (const std::string& f : files) EXPECT_EQ(fs::path(f).extension(), ".pcck") << f;

  auto second = cache.getOrCompile(kGeluErfSource, "fused_gelu_affine", CudaCompileOptions{});
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.corruptEntries(), 0);
  expectSameKernels(*first, *second);

  // The entries outlive the cache object.
  KernelCache again(cache.dir());
  auto third = again.getOrCompile(kGeluErfSource, "fused_gelu_affine", CudaCompileOptions{});
  ASSERT_TRUE(third.ok()) << third.status().message();
  EXPECT_EQ(again.hits(), 1);
  EXPECT_EQ(again.misses(), 0);
  expectSameKernels(*first, *third);
}

TEST(KernelCacheTest, KeyCoversSourceNameArchAndOptions) {
  TempDir dir;
  KernelCache cache(dir.path());
  CudaCompileOptions base;
  auto key = [&](const std::string& src, const std::string& name, const std::string& arch,
                 const CudaCompileOptions& o) {
    auto k = cache.key(src, name, arch, o);
    EXPECT_TRUE(k.ok()) << k.status().message();
    return k.ok() ? *k : std::string();
  };
  std::string k0 = key(kGeluErfSource, "fused_gelu_affine", "sm_80", base);
  EXPECT_EQ(k0.size(), 64u);
  EXPECT_EQ(k0, key(kGeluErfSource, "fused_gelu_affine", "sm_80", base)) << "keys must be stable";
  EXPECT_NE(k0, key(std::string(kGeluErfSource) + " ", "fused_gelu_affine", "sm_80", base));
  EXPECT_NE(k0, key(kGeluErfSource, "other_name", "sm_80", base));
  EXPECT_NE(k0, key(kGeluErfSource, "fused_gelu_affine", "sm_90", base));
  CudaCompileOptions fast = base;
  fast.fastMath = true;
  EXPECT_NE(k0, key(kGeluErfSource, "fused_gelu_affine", "sm_80", fast));
  CudaCompileOptions flags = base;
  flags.extraFlags = {"-DX=1"};
  EXPECT_NE(k0, key(kGeluErfSource, "fused_gelu_affine", "sm_80", flags));
  // The other arches of the request do not matter to one arch's entry.
  CudaCompileOptions only80 = sm80Only();
  EXPECT_EQ(k0, key(kGeluErfSource, "fused_gelu_affine", "sm_80", only80));
}

TEST(KernelCacheTest, ChangedSourceOrOptionsMiss) {
  TempDir dir;
  KernelCache cache(dir.path());
  ASSERT_TRUE(cache.getOrCompile(kGeluErfSource, "fused_gelu_affine", sm80Only()).ok());
  CudaCompileOptions fast = sm80Only();
  fast.fastMath = true;
  auto f = cache.getOrCompile(kGeluErfSource, "fused_gelu_affine", fast);
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto t = cache.getOrCompile(kGeluTanhSource, "fused_gelu_tanh", sm80Only());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(cache.misses(), 3);
  EXPECT_EQ(cache.hits(), 0);
  EXPECT_EQ(filesIn(dir.path()).size(), 3u);
  EXPECT_NE((*t)[0].ptx.find(".entry fused_gelu_tanh("), std::string::npos);
}

TEST(KernelCacheTest, PartialHitCompilesOnlyTheMissingArch) {
  TempDir dir;
  KernelCache cache(dir.path());
  auto a = cache.getOrCompile(kHalfSource, "add_relu_half", sm80Only());
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto k80 = cache.key(kHalfSource, "add_relu_half", "sm_80", sm80Only());
  ASSERT_TRUE(k80.ok());
  auto stamp = fs::last_write_time(cache.pathFor(*k80));

  auto both = cache.getOrCompile(kHalfSource, "add_relu_half", CudaCompileOptions{});
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(cache.misses(), 2);
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[0].arch, "sm_80");
  EXPECT_EQ((*both)[1].arch, "sm_90");
  EXPECT_EQ((*both)[0].cubin, (*a)[0].cubin);
  EXPECT_EQ(fs::last_write_time(cache.pathFor(*k80)), stamp) << "the sm_80 entry must not be rewritten";
  EXPECT_EQ(filesIn(dir.path()).size(), 2u);

  ASSERT_TRUE(cache.getOrCompile(kHalfSource, "add_relu_half", CudaCompileOptions{}).ok());
  EXPECT_EQ(cache.hits(), 1);
}

/// Compiles into the cache, damages its one entry with `damage`, and checks
/// that the next lookup rejects it, recompiles the same kernel and repairs the
/// entry.
void checkDamageIsRepaired(const std::function<void(const std::string& path)>& damage) {
  TempDir dir;
  KernelCache cache(dir.path());
  auto good = cache.getOrCompile(kGeluErfSource, "fused_gelu_affine", sm80Only());
  ASSERT_TRUE(good.ok()) << good.status().message();
  auto key = cache.key(kGeluErfSource, "fused_gelu_affine", "sm_80", sm80Only());
  ASSERT_TRUE(key.ok());
  std::string path = cache.pathFor(*key);
  ASSERT_TRUE(fs::exists(path));
  damage(path);

  auto again = cache.getOrCompile(kGeluErfSource, "fused_gelu_affine", sm80Only());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(cache.corruptEntries(), 1);
  EXPECT_EQ(cache.misses(), 2);
  EXPECT_EQ(cache.hits(), 0);
  expectSameKernels(*good, *again);

  auto third = cache.getOrCompile(kGeluErfSource, "fused_gelu_affine", sm80Only());
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(cache.hits(), 1) << "the entry should have been rewritten";
  EXPECT_EQ(cache.corruptEntries(), 1);
}

TEST(KernelCacheTest, FlippedByteIsDetectedAndRecompiled) {
  checkDamageIsRepaired([](const std::string& path) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    auto size = fs::file_size(path);
    // A byte in the middle: inside the PTX or cubin, not the framing.
    f.seekg(std::streamoff(size / 2));
    char c = 0;
    f.read(&c, 1);
    f.seekp(std::streamoff(size / 2));
    c ^= 0x20;
    f.write(&c, 1);
  });
}

TEST(KernelCacheTest, TruncatedEntryIsDetectedAndRecompiled) {
  checkDamageIsRepaired([](const std::string& path) { fs::resize_file(path, fs::file_size(path) / 2); });
}

TEST(KernelCacheTest, EmptyOrForeignEntryIsDetectedAndRecompiled) {
  checkDamageIsRepaired([](const std::string& path) { fs::resize_file(path, 0); });
  checkDamageIsRepaired([](const std::string& path) { std::ofstream(path, std::ios::trunc) << "not a cache entry"; });
}

TEST(KernelCacheTest, IntactEntryForOtherInputsIsNotTrusted) {
  // A well-formed entry copied over another key's file (e.g. by a user) must
  // not be served for that key.
  TempDir dir;
  KernelCache cache(dir.path());
  ASSERT_TRUE(cache.getOrCompile(kGeluTanhSource, "fused_gelu_tanh", sm80Only()).ok());
  auto tanhKey = cache.key(kGeluTanhSource, "fused_gelu_tanh", "sm_80", sm80Only());
  auto erfKey = cache.key(kGeluErfSource, "fused_gelu_affine", "sm_80", sm80Only());
  ASSERT_TRUE(tanhKey.ok() && erfKey.ok());
  fs::copy_file(cache.pathFor(*tanhKey), cache.pathFor(*erfKey));

  auto r = cache.getOrCompile(kGeluErfSource, "fused_gelu_affine", sm80Only());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(cache.corruptEntries(), 1);
  EXPECT_NE((*r)[0].ptx.find(".entry fused_gelu_affine("), std::string::npos);
  EXPECT_EQ((*r)[0].ptx.find("fused_gelu_tanh"), std::string::npos);
}

TEST(KernelCacheTest, CompileErrorIsReturnedAndNothingStored) {
  TempDir dir;
  KernelCache cache(dir.path());
  auto r = cache.getOrCompile(kSyntaxErrorSource, "broken_kernel", CudaCompileOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("broken_kernel"), std::string::npos) << r.status().message();
  EXPECT_TRUE(filesIn(dir.path()).empty());
}

TEST(KernelCacheTest, UnwritableDirectoryStillCompiles) {
  KernelCache cache("/proc/pcc-kernel-cache-cannot-exist");
  auto r = cache.getOrCompile(kGeluErfSource, "fused_gelu_affine", sm80Only());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 1u);
  EXPECT_EQ(cache.writeFailures(), 1);
  EXPECT_NE(cache.lastWriteError().find("/proc/pcc-kernel-cache-cannot-exist"), std::string::npos)
      << cache.lastWriteError();
}

TEST(KernelCacheTest, DefaultDirFollowsEnvironment) {
  const char* oldCache = std::getenv("PCC_CACHE_DIR");
  const char* oldHome = std::getenv("HOME");
  std::string savedCache = oldCache ? oldCache : "", savedHome = oldHome ? oldHome : "";

  ::setenv("PCC_CACHE_DIR", "/some/cache", 1);
  EXPECT_EQ(KernelCache::defaultDir(), "/some/cache");
  ::unsetenv("PCC_CACHE_DIR");
  ::setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(KernelCache::defaultDir(), "/home/someone/.cache/pcc/kernels");
  ::unsetenv("HOME");
  EXPECT_NE(KernelCache::defaultDir().find("pcc-kernels"), std::string::npos);

  if (oldCache) ::setenv("PCC_CACHE_DIR", savedCache.c_str(), 1);
  if (oldHome) ::setenv("HOME", savedHome.c_str(), 1);
}

}  // namespace
}  // namespace pcc::cuda
