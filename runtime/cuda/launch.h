// Generated kernels on a GPU: which image of a kernel the device loads and
// with what launch configuration. Pure functions (no device), unit-tested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/support/status.h"

namespace pcc::cuda {

/// One CudaImage of a plan's kernel, as far as choosing needs it.
struct ImageChoice {
  std::string arch;  ///< "sm_80", "sm_90a"
  bool hasCubin = false;
  bool hasPtx = false;
};

/// The image a device of compute capability major.minor runs.
struct SelectedImage {
  int index = -1;      ///< into the list given
  bool ptx = false;    ///< JIT-compile the PTX (no cubin for this device)
};

/// \returns the numeric arch of "sm_XY" / "sm_XYa" (80, 90), or -1.
int archNumber(const std::string& arch);

/// Picks the image for a device of compute capability `major`.`minor`:
///  1. a cubin built for exactly that arch ("sm_90" on 9.0; "sm_90a" too);
///  2. else a cubin of the same major arch and a lower minor (cubins run on
///     later minors of their major arch);
///  3. else the PTX of the highest arch not above the device's, JIT-compiled
///     by the driver (an arch-specific "a" PTX only on its own arch).
/// \returns the choice, or an invalid-input error listing the arches there are.
StatusOr<SelectedImage> selectImage(const std::vector<ImageChoice>& images, int major, int minor);

/// A kernel's launch configuration (one-dimensional grid and block).
struct LaunchConfig {
  unsigned grid = 1, block = 1;
};

/// \returns the launch configuration of a kernel table entry (Kernel.
/// cuda_block, cuda_grid), or an invalid-input error when the block is not in
/// [1, maxThreadsPerBlock] or the grid not in [1, 2^31 - 1] (the generated
/// kernels' loops stride over any size, so any valid grid is correct).
StatusOr<LaunchConfig> launchConfig(int64_t block, int64_t grid, int maxThreadsPerBlock = 1024);

}  // namespace pcc::cuda
