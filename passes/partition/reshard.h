// Resharding: the steps that bring a value from the layout it has to the
// layout a reader needs. Lowering (lower.cpp) emits them and the sharding
// search (tp_search.cpp) costs them, from this one definition, so what the
// search prices is what the plan runs.
#pragma once

#include <vector>

#include "compiler/ir/ir.h"
#include "passes/partition/mesh.h"

namespace pcc {

struct ReshardStep {
  enum Kind {
    kAllReduce,      ///< partial over `axis` -> whole
    kReduceScatter,  ///< partial over `axis` -> dimension `dim` split over `axis`
    kAllGather,      ///< dimension `dim` split over `axis` -> whole
    kAllToAll,       ///< dimension `fromDim` split over `axis` -> dimension `dim` split over it
    kSlice,          ///< dimension `dim` whole -> this rank's chunk over `axis` (a local Slice)
  };
  Kind kind;
  MeshAxis axis;
  int dim;  ///< -1 for kAllReduce; for kAllToAll the dimension that becomes split
  /// The layout after this step; every intermediate layout is cached by
  /// lowering, so two readers that share a prefix of steps share its nodes.
  Sharding result;
  /// kAllToAll only: the dimension that was split and becomes whole.
  int fromDim = -1;
};

/// \returns the steps from `cur` to `req`, in the order lowering emits them:
///  1. a partial sum over axis X that `req` does not keep: a reduce-scatter
///     along dimension d when `req` splits d over X, `cur` has d whole and
///     splits nothing else over X; otherwise an all-reduce;
///  2. per split dimension a (in dimension order) that `req` does not keep:
///     an all-to-all to dimension b when `req` splits b over the same axis and
///     `cur` has b whole (b is then done); otherwise an all-gather;
///  3. a local slice per dimension `req` splits and the value has whole.
/// Uneven extents follow chunkSize/chunkOffset in every step. Empty when equal.
std::vector<ReshardStep> reshardSteps(const Sharding& cur, const Sharding& req);

/// \returns whether `steps` are local slices only (no collective). A value
/// already materialized in a layout that reaches the target this way is
/// sliced from there instead (lowering and the search both do).
bool isLocal(const std::vector<ReshardStep>& steps);

}  // namespace pcc
