// The pass registry: every pass by its flag name, for pcc-opt and the driver.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/fold_policy.h"
#include "passes/pass.h"

namespace pcc {

/// \returns a new instance of the pass named `name` (default options), or
/// nullptr if there is none.
std::unique_ptr<Pass> createPass(std::string_view name);

/// \returns the names of every registered pass, sorted.
std::vector<std::string> passNames();

// Factories of the individual passes (one file each).

/// FoldConstants folds what shouldFold accepts under `limits` (by default the
/// importer's limits, compiler/ir/fold_policy.h), so folding cannot blow up the weights.
std::unique_ptr<Pass> createFoldConstantsPass(FoldLimits limits = {});
std::unique_ptr<Pass> createDcePass();
std::unique_ptr<Pass> createCsePass();
std::unique_ptr<Pass> createCanonicalizePass();
std::unique_ptr<Pass> createUnitTransposesPass();  // passes/canonicalize.cpp
std::unique_ptr<Pass> createFoldBatchNormPass();
std::unique_ptr<Pass> createRecognizePass();
/// Fuse groups epilogues and elementwise chains into Fused nodes (passes/fuse.cpp).
std::unique_ptr<Pass> createFusePass();

}  // namespace pcc
