// Pipeline stages: where the partitioned graph is cut into pp stages.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "passes/partition/cost_model.h"
#include "passes/partition/partitioner.h"

namespace pcc {

/// What stage cutting measures of a partitioned graph, per global node:
/// its time, the weight bytes it reads first, the peak of live activation
/// bytes while it runs, and per cut position the bytes crossing it.
struct StageCosts {
  std::vector<double> seconds;
  std::vector<int64_t> weights;
  std::vector<int64_t> activation;
  std::vector<int64_t> crossing;
};

/// Stage costs kept across partitions of copies of one graph whose tp
/// search agrees (PartitionOptions::stageCache): the mesh search's
/// candidates of one dp · micro-batches × tp measure the same costs whatever
/// their pp, by (data-parallel ranks of the shape mesh, tp, weights first).
struct StageCostCache {
  std::map<std::tuple<int, int, bool>, StageCosts> costs;
};

/// Cuts the nodes of `g` (sharded for `p`, whose mesh has pp > 1) into
/// p.mesh.pp contiguous ranges of its topological order, sets every node's
/// stage (Node::stage) and fills p.stages. The cut minimizes the slowest
/// stage's time per micro-batch (its nodes on one rank, costed by `cm` at
/// their local shapes, plus sending what later stages read) among the cuts
/// whose every stage fits one device's memory (its weights plus the peak of
/// live activations); when no cut fits, the fastest cut is kept and a note
/// says so (the mesh search then finds the plan infeasible).
/// \returns OK, or an error when the graph has fewer nodes than stages or
/// cannot be lowered.
/// `cache` (may be null) keeps the measured costs under `key`.
Status cutStages(Graph& g, Partition& p, const CostModel& cm, StageCostCache* cache = nullptr,
                 std::tuple<int, int, bool> key = {});

/// Sets each node's stage from `stages` (by partitionKey; a node not named
/// takes the stage of the node before it) and p.stages from the ranges.
/// \returns an invalid-input error when the stages do not rise in graph order.
Status followStages(Graph& g, Partition& p, const CostModel& cm, const std::map<std::string, int>& stages);

}  // namespace pcc
