// Image choice and launch configuration of generated kernels (runtime/cuda/launch.h).
#include <gtest/gtest.h>

#include "runtime/cuda/launch.h"

namespace pcc::cuda {
namespace {

std::vector<ImageChoice> both() { return {{"sm_80", true, true}, {"sm_90", true, true}}; }

TEST(CudaLaunch, ArchNumbers) {
  EXPECT_EQ(archNumber("sm_80"), 80);
  EXPECT_EQ(archNumber("sm_90a"), 90);
  EXPECT_EQ(archNumber("sm_120"), 120);
  EXPECT_EQ(archNumber("compute_80"), -1);
  EXPECT_EQ(archNumber("sm_"), -1);
  EXPECT_EQ(archNumber("sm_8x"), -1);
}

TEST(CudaLaunch, ExactCubinWins) {
  auto h100 = selectImage(both(), 9, 0);
  ASSERT_TRUE(h100.ok());
  EXPECT_EQ(h100->index, 1);
  EXPECT_FALSE(h100->ptx);
  auto a100 = selectImage(both(), 8, 0);
  ASSERT_TRUE(a100.ok());
  EXPECT_EQ(a100->index, 0);
  EXPECT_FALSE(a100->ptx);
}

TEST(CudaLaunch, LaterMinorRunsTheCubinOfItsMajor) {
  auto ada = selectImage(both(), 8, 9);  // sm_89 runs sm_80's cubin
  ASSERT_TRUE(ada.ok());
  EXPECT_EQ(ada->index, 0);
  EXPECT_FALSE(ada->ptx);
}

TEST(CudaLaunch, NewerArchJitsTheHighestPtx) {
  auto blackwell = selectImage(both(), 10, 0);
  ASSERT_TRUE(blackwell.ok());
  EXPECT_EQ(blackwell->index, 1);
  EXPECT_TRUE(blackwell->ptx);
  // PTX only: no cubin anywhere.
  auto ptxOnly = selectImage({{"sm_80", false, true}}, 9, 0);
  ASSERT_TRUE(ptxOnly.ok());
  EXPECT_TRUE(ptxOnly->ptx);
}

TEST(CudaLaunch, ArchSpecificImagesOnlyOnTheirArch) {
  std::vector<ImageChoice> a = {{"sm_90a", true, true}};
  auto h100 = selectImage(a, 9, 0);
  ASSERT_TRUE(h100.ok());
  EXPECT_FALSE(h100->ptx);
  EXPECT_FALSE(selectImage(a, 10, 0).ok());
}

TEST(CudaLaunch, OlderDeviceHasNoImage) {
  auto v100 = selectImage(both(), 7, 0);
  ASSERT_FALSE(v100.ok());
  EXPECT_EQ(v100.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(v100.status().message().find("no CUDA image for sm_70 (the plan has sm_80, sm_90"), std::string::npos)
      << v100.status().message();
  EXPECT_FALSE(selectImage({}, 9, 0).ok());
}

TEST(CudaLaunch, LaunchConfiguration) {
  auto c = launchConfig(256, 4096);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->block, 256u);
  EXPECT_EQ(c->grid, 4096u);
  EXPECT_FALSE(launchConfig(0, 1).ok());
  EXPECT_FALSE(launchConfig(2048, 1).ok());
  EXPECT_FALSE(launchConfig(512, 1, 256).ok());
  EXPECT_FALSE(launchConfig(256, 0).ok());
  EXPECT_FALSE(launchConfig(256, int64_t{1} << 31).ok());
  EXPECT_TRUE(launchConfig(256, (int64_t{1} << 31) - 1).ok());
}

}  // namespace
}  // namespace pcc::cuda
