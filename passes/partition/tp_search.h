// The sharding search for the tensor-parallel axis: which dimension of each
// op, if any, the tp ranks split, chosen by the cost model over the whole
// graph (with resharding costs), not by per-model rules.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "passes/partition/cost_model.h"
#include "passes/partition/partitioner.h"

namespace pcc {

/// \returns "replicate", "split dim 1" or "split contraction (partial sum)".
std::string tpChoiceName(const TpChoice& c);

struct TpSearchOptions {
  const CostModel* cost = nullptr;
  /// Bytes of weight matrices (constants a contraction reads: MatMul's and
  /// Gemm's operands, and Gather's table) per rank weigh
  /// before time: the fewest such bytes first, the fastest among those (a
  /// forced tp, or a model that does not fit otherwise). Without it, time alone.
  bool minimizeWeights = false;
  /// Session states (a generation plan's KV cache: input name, output name):
  /// their pieces persist on the ranks like weights, so their bytes count
  /// with the weight matrices' (split, they save as much), the input is read
  /// in the layout its writer needs at no cost (placeStates gives it that
  /// layout), and the output stays in its layout (it is never returned).
  std::vector<std::pair<std::string, std::string>> states;
  /// Frontier states kept per step; the search is exact when no step had more.
  size_t beam = 8192;
  /// Nodes whose choice is given (PartitionOptions::pinnedTp), by partitionKey.
  const std::map<std::string, TpChoice>* pinned = nullptr;
  /// Repeated blocks (a model's layers) are searched until the search
  /// reaches a steady state, and the rest are given the same choices
  /// without being searched (tp_search.cpp, step 6). Off: every node is
  /// searched (tests compare the two).
  bool fold = true;
};

/// The cost of a complete assignment, as the search counts it: the time of
/// the rank-0 program (every node at its local shapes, every resharding step
/// that lowering emits, each once), and its weight bytes (each distinct
/// slice of a weight once).
struct TpCost {
  double seconds = 0;
  int64_t weightBytes = 0;
  /// The part of weightBytes in weight matrices and session states (what
  /// minimizeWeights saves first; TpSearchOptions::minimizeWeights says which).
  int64_t matrixBytes = 0;
  /// Whether a collective reads a session state (a cache gathered every
  /// step): such assignments rank after every other.
  bool movesState = false;
};

struct TpSearchResult {
  /// One choice per node of the graph, in g.nodes() order.
  std::vector<TpChoice> choices;
  TpCost cost;
  /// Whether the frontier never exceeded the beam (the result is optimal).
  bool exact = true;
  size_t maxStates = 0;
  /// Step 6: the blocks given their choices without being searched, and the
  /// length in nodes of the repeated block (0: no repeats found).
  int foldedBlocks = 0;
  int blockNodes = 0;
  /// The blocks of the longest repeated run (0: none).
  int repeats = 0;
};

/// Tp search results by (data-parallel ranks of the shape mesh, tp, weights
/// first), for PartitionOptions::tpCache.
struct TpSearchCache {
  std::map<std::tuple<int, int, bool>, TpSearchResult> results;
};

/// The choices node `n` may take on `mesh`, given the data-parallel layouts in
/// `dpOnly` (its inputs' required layouts and its outputs' layouts): always
/// kReplicate, plus every output dimension and contraction the dim map links
/// and the extents divide evenly by tp.
std::vector<TpChoice> tpChoicesFor(const Node& n, const Partition& dpOnly);

/// Finds the assignment of minimal cost (time, or weight bytes then time) for
/// `g`, whose values carry data-parallel shardings only and whose
/// `dpOnly.inputSharding` holds the data-parallel layout each node needs.
StatusOr<TpSearchResult> searchTensorParallel(const Graph& g, const Partition& dpOnly, const TpSearchOptions& opts);

/// \returns the cost of `choices` (one per node, in g.nodes() order) as the
/// search counts it.
StatusOr<TpCost> evaluateTpChoices(const Graph& g, const Partition& dpOnly, const std::vector<TpChoice>& choices,
                                   const CostModel& cost);

/// Overlays `choices` on the data-parallel layouts: sets every node output's
/// sharding and every node input's required layout in `p`.
void applyTpChoices(Graph& g, Partition& p, const std::vector<TpChoice>& choices);

}  // namespace pcc
