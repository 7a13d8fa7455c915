// The pass registry: every pass by its flag name, for pcc-opt and the driver.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "passes/pass.h"

namespace pcc {

/// \returns a new instance of the pass named `name` (default options), or
/// nullptr if there is none.
std::unique_ptr<Pass> createPass(std::string_view name);

/// \returns the names of every registered pass, sorted.
std::vector<std::string> passNames();

// Factories of the individual passes (one file each).

/// Default for FoldConstants: results larger than this many elements stay
/// computed at run time, so folding cannot blow up the weights.
inline constexpr int64_t kDefaultFoldMaxElements = int64_t{1} << 16;
std::unique_ptr<Pass> createFoldConstantsPass(int64_t maxOutputElements = kDefaultFoldMaxElements);
std::unique_ptr<Pass> createDcePass();
std::unique_ptr<Pass> createCsePass();

}  // namespace pcc
