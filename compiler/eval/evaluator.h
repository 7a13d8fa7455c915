// The reference evaluator: runs a Graph on the CPU reference kernels, one node
// at a time. It is the oracle of every numeric-equivalence test.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
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

/// Told each node of the top-level graph and the tensors it computed, as
/// evaluateGraphObserved runs it (the calibration of --precision).
using NodeObserver = std::function<void(const Node& n, const std::vector<Tensor>& outputs)>;

/// evaluateGraph, telling `observe` each node's results before they are bound.
StatusOr<std::vector<Tensor>> evaluateGraphObserved(const Graph& g, const std::vector<Tensor>& inputs,
                                                    const NodeObserver& observe);

/// Runs node `n` of some graph on `args` (one per input, nullptr for an absent
/// one): the one way the compiler runs a node. A region node (If, Loop, Scan)
/// runs its bodies with evaluateGraph; any other op goes through the kernel
/// entry of runtime/ops (runKernel), with `n`'s outputs as the declared types.
/// Collectives are an error (they need peers; see evaluateGraph).
/// \returns one tensor per output of `n`, of its declared types, or an error
/// whose context names the node.
StatusOr<std::vector<Tensor>> runNode(const Node& n, const std::vector<const Tensor*>& args);

/// \returns "node 'NAME' (Op)" or, for a node without a name, the value it defines.
std::string nodeWhere(const Node& n);

/// \returns one deterministic random tensor per graph input, derived from
/// `seed` and the input's position: floats uniform in [-1, 1], integers in
/// [0, 4), bools 0/1.
std::vector<Tensor> randomInputs(const Graph& g, uint64_t seed);

}  // namespace pcc
