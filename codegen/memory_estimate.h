// The memory a rank program will hold at its peak, estimated from the emitted
// program once its memory is planned: the mesh search's figure (weights plus
// live activations with no reuse, an upper bound) replaced, for the chosen
// mesh, by one made of what the runtime allocates. See memory_estimate.cpp
// for the terms and docs/cost-model.md for why each is there.
#pragma once

#include <cstdint>

#include "runtime/plan.pb.h"

namespace pcc {

/// The terms of a rank's estimated peak memory, in bytes.
struct RankMemoryEstimate {
  int64_t weights = 0;  ///< the weights of its weight file (mapped, all read)
  int64_t arena = 0;    ///< RankProgram.arena_bytes, rounded as the runtime allocates it
  int64_t inputs = 0;   ///< the model input slices it binds
  int64_t outputs = 0;  ///< the model output pieces it writes
  int64_t comm = 0;     ///< the largest collective's staging buffers
  int64_t kernel = 0;   ///< the largest result set or buffers a kernel allocates outside the arena
  int64_t kernelWeights = 0;  ///< copies of weights kernels keep (oneDNN Conv's reordered weights, packed MatMul/Gemm weights)
  int64_t states = 0;   ///< its session state pieces (a generation plan's KV cache), held across runs
  /// \returns the estimate: what stays held through a run plus the largest
  /// transient (one instruction runs at a time).
  int64_t total() const {
    return weights + kernelWeights + states + arena + inputs + outputs + (comm > kernel ? comm : kernel);
  }
};

/// \returns the terms for rank program `prog` (its memory planned).
RankMemoryEstimate estimateRankMemory(const plan::RankProgram& prog);

/// Sets the memory fields of the chosen mesh's rank estimates
/// (plan->search().candidates(0)) from the emitted rank programs; nothing
/// when the plan carries no search.
void recordPlannedMemory(plan::Plan* plan);

}  // namespace pcc
