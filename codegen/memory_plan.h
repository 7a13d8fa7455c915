// The memory planner: places every intermediate buffer of a rank program at an
// offset in one per-rank arena, so that the runtime allocates once per rank and
// the planned peak is the memory the rank really uses. See memory_plan.cpp for
// the algorithm and docs/plan-format.md for what the plan records.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "runtime/plan.pb.h"
#include "runtime/support/status.h"

namespace pcc {

/// Alignment of every buffer in the arena, in bytes.
constexpr uint64_t kArenaAlignment = 64;

/// \returns true when op `op` may write its output 0 over its input 0 (of the
/// same dtype and element count) when input 0 dies at the op: output element i
/// depends only on element i of input 0 (and of inputs of the output's size),
/// as in elementwise ops, or output 0 is input 0's bytes (Reshape).
using InPlacePredicate = std::function<bool(std::string_view op)>;

/// The in-place rule pcc plans with, read from the op table: ops of kind
/// Elementwise (runtime/schema/Ops.def), and ops of kind Injective whose kernel
/// output is input 0's bytes under another shape (KernelEntry::viewOfInput0, runtime/ops/registry.h:
/// Reshape, Flatten, Squeeze, Unsqueeze). Unknown op names: false.
bool opMayRunInPlace(std::string_view op);

struct MemoryPlanStats {
  uint64_t arenaBytes = 0;   ///< the planned arena
  uint64_t naiveBytes = 0;   ///< sum of the arena buffers' 64-byte rounded sizes
  int inPlace = 0;           ///< buffers placed over an input that dies at their op
};

/// Plans `prog`'s memory: sets Buffer.arena_offset and Buffer.in_place_of on
/// every buffer (-1 for weights, model inputs and model outputs, which stay
/// outside the arena) and RankProgram.arena_bytes / naive_arena_bytes.
/// `inPlaceOk` says which kernel ops may run in place (nullptr: none).
/// \returns the figures, or an internal error when the program reads a buffer
/// no instruction, binding or weight defines.
StatusOr<MemoryPlanStats> planMemory(plan::RankProgram* prog, const InPlacePredicate& inPlaceOk);

}  // namespace pcc
