// The reference evaluator: runs a Graph on the CPU reference kernels, one node
// at a time. It is the oracle of every numeric-equivalence test.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/support/compare.h"
#include "compiler/ir/ir.h"

namespace pcc {

/// Runs `g` on `inputs` (one per graph input, in order). Values are freed after
/// their last use, so peak memory follows the graph's live set.
/// \returns the graph outputs, or an error naming the input (count, dtype,
/// shape mismatch) or the node whose kernel failed. Collective ops are an
/// error: they only exist in partitioned, per-rank graphs.
StatusOr<std::vector<Tensor>> evaluateGraph(const Graph& g, const std::vector<Tensor>& inputs);

/// \returns one deterministic random tensor per graph input, derived from
/// `seed` and the input's position: floats uniform in [-1, 1], integers in
/// [0, 4), bools 0/1.
std::vector<Tensor> randomInputs(const Graph& g, uint64_t seed);

}  // namespace pcc
