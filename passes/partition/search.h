// The mesh search: which dp × tp split of the devices (and how many devices)
// the cost model says is fastest for the objective, within each device's memory.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "passes/partition/cost_model.h"
#include "passes/partition/partitioner.h"

namespace pcc {

enum class Objective {
  kLatency,     ///< the least time for one batch
  /// The most samples per second. With the batch fixed, this ranks meshes as
  /// latency does; the two part once the batch and micro-batches are chosen
  /// by the search too (pipelining).
  kThroughput,
};

/// \returns "latency" or "throughput".
const char* objectiveName(Objective o);

/// The cost model's view of one rank program.
struct RankEstimate {
  int rank = 0;
  int stage = 0;
  double computeSeconds = 0, commSeconds = 0;
  int64_t flops = 0;
  int64_t weightBytes = 0;
  /// Session state held between runs (a generation plan's KV cache pieces).
  int64_t stateBytes = 0;
  /// Peak bytes of live activations in program order (inputs, intermediates
  /// and outputs; no in-place reuse), an upper bound of the arena.
  int64_t activationBytes = 0;
  /// One run of the rank's program (one micro-batch).
  double seconds() const { return computeSeconds + commSeconds; }
  int64_t memoryBytes() const { return weightBytes + stateBytes + activationBytes; }
};

/// One candidate mesh, costed.
struct PlanEstimate {
  Mesh mesh;
  /// Micro-batches per replica's batch (1 without pipelining).
  int microbatches = 1;
  /// The time for one batch: with stage times t_s (the slowest rank of each
  /// stage, one micro-batch; ranks run in lockstep at the collectives) and m
  /// micro-batches, fill-drain takes Σ t_s + (m − 1) · max t_s.
  double seconds = 0;
  /// Per stage: t_s above.
  std::vector<double> stageSeconds;
  /// The fraction of the time an average stage waits: 1 − m · Σ t_s / (pp · seconds).
  double bubble = 0;
  /// batch / seconds.
  double samplesPerSecond = 0;
  std::vector<RankEstimate> ranks;
  /// Empty when every rank fits its device's memory; else why not.
  std::string infeasible;
  /// Set when the candidate could not even be partitioned (the reason).
  std::string error;
  /// The tp search saved weight memory first (the time-first plan did not fit).
  bool minimizeWeights = false;
  /// Its tp search's repeated blocks (Partition::tpFoldedBlocks and so on).
  int foldedBlocks = 0, blockNodes = 0, repeats = 0;
};

/// Costs the rank programs `ranks` of `mesh`, each run `microbatches` times
/// per batch; `batch` is the global batch (1 when the model has none).
PlanEstimate estimatePlan(const std::vector<RankGraph>& ranks, const Mesh& mesh, const CostModel& cm,
                          int64_t batch, int microbatches = 1);

/// \returns the seconds node `n` of the program of `rank` takes: a
/// collective over its group of `mesh` (the inter-node link when the group
/// spans nodes), a Send over the link to its peer (a Recv costs nothing: its
/// sender pays), any other node its cost-model time. `programRank`: the rank
/// whose program `n` is from, when it stands for `rank` (the same stage; a
/// Send's peer is then as far from `rank` as from it); -1: `rank`'s own.
double rankNodeSeconds(const Node& n, int rank, const Mesh& mesh, const CostModel& cm, int programRank = -1);

struct SearchResult {
  /// The chosen mesh first, then every other candidate, best first; the
  /// infeasible and the failed ones last.
  std::vector<PlanEstimate> candidates;
  Objective objective = Objective::kLatency;
  double searchSeconds = 0;
  /// Pipeline meshes not costed: their lower bound could not beat a plan
  /// already costed (search.cpp step 1).
  int pruned = 0;
  /// Meshes not listed: their dp, capped by the batch, makes them a mesh
  /// already listed (search.cpp step 1).
  int folded = 0;
  /// Seconds by phase, summed over the candidates: "propagate", "tp_search",
  /// "stage_cut", "lower", "cost".
  std::map<std::string, double> phaseSeconds;
};

/// Partitions a copy of `g` for every mesh pp × dp × tp = d, for d = --gpus
/// and each divisor of it (less the meshes the model cannot use: tp past its
/// largest dimension, pp past its node count, a dp past the batch folded onto
/// dp = batch), lowers it, and costs it with `cm`; the tp search
/// and the stage cut inside the partitioner cost with `cm` too. With pp > 1,
/// micro-batch counts 1, 2, 4, ... (dividing each replica's batch, at most
/// 4 · pp) are tried until the time stops improving, unless
/// opts.microbatches forces one. A candidate that does not fit is partitioned again with the tp search
/// saving weight memory first. A mesh forced in `opts` (dp or tp given) is the
/// only candidate. Ties go to the larger dp, then the smaller tp; then, among
/// the candidates within 1% of the best, the one with the smallest tp (then
/// the largest dp, then the smallest pp) is moved first (the chosen one).
/// \returns the candidates, or an error when none can be partitioned (the
/// first candidate's error).
StatusOr<SearchResult> searchMesh(const Graph& g, const PartitionOptions& opts, const CostModel& cm,
                                  Objective objective);

}  // namespace pcc
