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
    kAllReduce,  ///< partial over `axis` -> whole
    kAllGather,  ///< dimension `dim` split over `axis` -> whole
    kSlice,      ///< dimension `dim` whole -> this rank's chunk over `axis` (a local Slice)
  };
  Kind kind;
  MeshAxis axis;
  int dim;  ///< -1 for kAllReduce
  /// The layout after this step; every intermediate layout is cached by
  /// lowering, so two readers that share a prefix of steps share its nodes.
  Sharding result;
};

/// \returns the steps from `cur` to `req`, in the order lowering emits them:
/// the all-reduce of a partial sum that `req` does not keep, then an all-gather
/// per split dimension `req` does not keep (in dimension order), then a local
/// slice per dimension `req` splits and the value has whole. Empty when equal.
std::vector<ReshardStep> reshardSteps(const Sharding& cur, const Sharding& req);

}  // namespace pcc
