// The cuda backend's driver loader and backend choice on a machine without a
// GPU: a library that is not there, and a stand-in driver (fake_libcuda.c)
// whose cuInit fails, that sees no device, or that lacks entry points.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/backend.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/device.h"

namespace pcc::cuda {
namespace {

/// Sets an environment variable for the scope.
struct ScopedEnv {
  ScopedEnv(const char* n, const char* v) : name(n) {
    const char* old = std::getenv(n);
    had = old != nullptr;
    if (had) before = old;
    if (v)
      setenv(n, v, 1);
    else
      unsetenv(n);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name, before.c_str(), 1);
    else
      unsetenv(name);
  }
  const char* name;
  bool had = false;
  std::string before;
};

TEST(CudaLoader, MissingLibraryIsNamed) {
  auto api = loadDriverApi("libpcc-no-such-driver.so.1");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kEnvironment);
  EXPECT_NE(api.status().message().find("cannot load libpcc-no-such-driver.so.1"), std::string::npos)
      << api.status().message();
  auto probe = probeCuda("libpcc-no-such-driver.so.1");
  ASSERT_FALSE(probe.ok());
  EXPECT_NE(probe.status().message().find("cannot load libpcc-no-such-driver.so.1"), std::string::npos);
}

TEST(CudaLoader, DriverLibraryNameFollowsTheEnvironment) {
  {
    ScopedEnv e("PCC_CUDA_DRIVER_LIB", nullptr);
    EXPECT_EQ(driverLibraryName(), "libcuda.so.1");
  }
  ScopedEnv e("PCC_CUDA_DRIVER_LIB", "/nowhere/libcuda.so.1");
  EXPECT_EQ(driverLibraryName(), "/nowhere/libcuda.so.1");
}

TEST(CudaLoader, CuInitErrorIsNamed) {
  ScopedEnv init("PCC_FAKE_CUDA_INIT", "100");
  auto probe = probeCuda(PCC_FAKE_LIBCUDA);
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), StatusCode::kEnvironment);
  EXPECT_NE(probe.status().message().find("cuInit failed: CUDA_ERROR_NO_DEVICE 100 (no CUDA-capable device is detected)"),
            std::string::npos)
      << probe.status().message();
}

TEST(CudaLoader, NoDeviceIsNamed) {
  ScopedEnv init("PCC_FAKE_CUDA_INIT", "0");
  ScopedEnv devs("PCC_FAKE_CUDA_DEVICES", "0");
  auto probe = probeCuda(PCC_FAKE_LIBCUDA);
  ASSERT_FALSE(probe.ok());
  EXPECT_NE(probe.status().message().find("no CUDA device"), std::string::npos) << probe.status().message();
}

TEST(CudaLoader, MissingEntryPointIsNamed) {
  ScopedEnv init("PCC_FAKE_CUDA_INIT", "0");
  ScopedEnv devs("PCC_FAKE_CUDA_DEVICES", "1");
  auto probe = probeCuda(PCC_FAKE_LIBCUDA);
  ASSERT_FALSE(probe.ok());
  // The first entry point after the probe's, by its versioned name.
  EXPECT_NE(probe.status().message().find("has no entry point cuDevicePrimaryCtxRetain"), std::string::npos)
      << probe.status().message();
  auto api = loadDriverApi(PCC_FAKE_LIBCUDA);
  ASSERT_FALSE(api.ok());
  EXPECT_NE(api.status().message().find("has no entry point cuDevicePrimaryCtxRetain"), std::string::npos);
}

TEST(CudaLoader, VersionedEntryPointNames) {
  // cuda.h maps the names the table uses to the versioned symbols libcuda exports.
  auto lib = DynLib::open(PCC_FAKE_LIBCUDA);
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  auto missing = (*lib)->symbol("cuMemAlloc_v2");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("has no entry point cuMemAlloc_v2"), std::string::npos);
  EXPECT_TRUE((*lib)->symbol("cuInit").ok());
}

TEST(CudaLoader, CudaBackendRefusedWithTheReason) {
  registerCudaBackend();
  ScopedEnv lib("PCC_CUDA_DRIVER_LIB", "libpcc-no-such-driver.so.1");
  auto cuda = resolveBackend("cuda", nullptr);
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().message().rfind("--backend cuda: cannot load libpcc-no-such-driver.so.1", 0), 0u)
      << cuda.status().message();
  std::string note;
  auto pick = resolveBackend("auto", &note);
  ASSERT_TRUE(pick.ok());
  EXPECT_EQ(*pick, "cpu");
  EXPECT_NE(note.find("--backend auto: no usable GPU (cannot load libpcc-no-such-driver.so.1"), std::string::npos)
      << note;
  EXPECT_NE(note.find("running on CPU ranks"), std::string::npos);
  // The maker says why too (a rank asking for "cuda" without the probe).
  BackendOptions o;
  o.rank = 3;
  auto made = makeBackend("cuda", o);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("rank 3"), std::string::npos) << made.status().message();
}

TEST(CudaLoader, ResolveBackendNames) {
  std::string note;
  auto cpu = resolveBackend("cpu", &note);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(*cpu, "cpu");
  EXPECT_TRUE(note.empty());
  auto bad = resolveBackend("tpu", &note);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(bad.status().message().find("unknown backend 'tpu' (registered: cpu"), std::string::npos)
      << bad.status().message();
  // A usable device backend is chosen by auto.
  registerBackendOr(
      "cuda", [](const BackendOptions& o) { return makeBackend("cpu", o); }, [] { return Status::OK(); });
  auto pick = resolveBackend("auto", &note);
  ASSERT_TRUE(pick.ok());
  EXPECT_EQ(*pick, "cuda");
  registerCudaBackend();  // back to the real one
}

TEST(CudaDevice, DeviceIndexFollowsLocalRankThenRank) {
  ScopedEnv a("LOCAL_RANK", nullptr);
  ScopedEnv b("OMPI_COMM_WORLD_LOCAL_RANK", nullptr);
  EXPECT_EQ(deviceIndexFor(5, 4), 1);
  EXPECT_EQ(deviceIndexFor(0, 1), 0);
  {
    ScopedEnv l("LOCAL_RANK", "2");
    EXPECT_EQ(deviceIndexFor(7, 4), 2);
    EXPECT_EQ(deviceIndexFor(7, 2), 0);
  }
  ScopedEnv m("OMPI_COMM_WORLD_LOCAL_RANK", "3");
  EXPECT_EQ(deviceIndexFor(0, 8), 3);
}

}  // namespace
}  // namespace pcc::cuda
