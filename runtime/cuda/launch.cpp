// Image choice and launch configuration of generated kernels (launch.h).
//
// Algorithm (selectImage):
//  1. Parse every image's arch; the device's arch is major * 10 + minor.
//  2. A cubin of exactly the device's arch wins.
//  3. Else the cubin of the highest lower arch of the same major.
//  4. Else the PTX of the highest arch not above the device's (JIT).
//  5. Else an error listing the arches the kernel has.
#include "runtime/cuda/launch.h"

#include <cctype>

namespace pcc::cuda {

int archNumber(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return -1;
  size_t i = 3;
  int n = 0;
  while (i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i]))) n = n * 10 + (arch[i++] - '0');
  if (i == 3 || n < 10) return -1;
  if (i < arch.size() && !(i + 1 == arch.size() && arch[i] == 'a')) return -1;
  return n;
}

StatusOr<SelectedImage> selectImage(const std::vector<ImageChoice>& images, int major, int minor) {
  // Step 1.
  const int dev = major * 10 + minor;
  auto specific = [](const std::string& a) { return !a.empty() && a.back() == 'a'; };
  SelectedImage best;
  int bestArch = -1;
  // Step 2.
  for (size_t i = 0; i < images.size(); ++i)
    if (images[i].hasCubin && archNumber(images[i].arch) == dev)
      return SelectedImage{static_cast<int>(i), false};
  // Step 3.
  for (size_t i = 0; i < images.size(); ++i) {
    int a = archNumber(images[i].arch);
    if (!images[i].hasCubin || a < 0 || specific(images[i].arch) || a / 10 != major || a > dev || a <= bestArch) continue;
    best = {static_cast<int>(i), false};
    bestArch = a;
  }
  if (best.index >= 0) return best;
  // Step 4.
  for (size_t i = 0; i < images.size(); ++i) {
    int a = archNumber(images[i].arch);
    if (!images[i].hasPtx || a < 0 || a > dev || a <= bestArch) continue;
    if (specific(images[i].arch) && a != dev) continue;
    best = {static_cast<int>(i), true};
    bestArch = a;
  }
  if (best.index >= 0) return best;
  // Step 5.
  std::string have;
  for (const ImageChoice& c : images) have += (have.empty() ? "" : ", ") + c.arch;
  return invalidInput("no CUDA image for sm_", dev, " (the plan has ", have.empty() ? "none" : have,
                      "; compile with pcc --target cuda --arch sm_", dev, ")");
}

StatusOr<LaunchConfig> launchConfig(int64_t block, int64_t grid, int maxThreadsPerBlock) {
  if (block < 1 || block > maxThreadsPerBlock)
    return invalidInput("kernel block of ", block, " threads (the device takes 1 to ", maxThreadsPerBlock, ")");
  if (grid < 1 || grid > int64_t{0x7fffffff}) return invalidInput("kernel grid of ", grid, " blocks (1 to 2^31-1)");
  return LaunchConfig{static_cast<unsigned>(grid), static_cast<unsigned>(block)};
}

}  // namespace pcc::cuda
