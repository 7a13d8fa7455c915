// Partitioning: choose a mesh, annotate every value with its sharding, and
// lower the annotated graph to one local graph per rank with collectives.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/ir.h"
#include "passes/partition/mesh.h"

namespace pcc {

/// What the user asked for (CompileOptions carries it here).
class CostModel;

struct PartitionOptions {
  int gpus = 1;
  /// Requested mesh extents; 0 = derive (dp fills what tp and pp leave).
  int dp = 0, tp = 0, pp = 0;
  /// What the tensor-parallel search (tp_search.h) costs with; nullptr: the
  /// shipped h100 spec.
  const CostModel* cost = nullptr;
  /// The tp search saves weight memory first, then time (set for a forced
  /// tp, and by the mesh search for a model that does not fit otherwise).
  bool minimizeWeights = false;
  /// Off: the tp axis exists but every node replicates over it (the
  /// data-parallel layouts alone, what the tp search starts from; tests).
  bool tensorParallelSearch = true;
};

/// The result of sharding propagation over a global graph. Value shardings
/// are annotations on the graph itself; this holds the rest.
struct Partition {
  Mesh mesh;
  /// How node input (node, index) must be laid out when the node reads it.
  /// Where it differs from the value's own sharding, lowering inserts the
  /// collective or local slice that converts it.
  std::map<std::pair<const Node*, size_t>, Sharding> inputSharding;
  /// What the tp search chose, one line per node split over tp:
  /// "MatMul 'fc1': split dim 1".
  std::vector<std::string> tensorParallel;
  /// The tp search's own estimate of the rank-0 program (0 without tp).
  double tpSeconds = 0;
  int64_t tpWeightBytes = 0;
  /// Whether the tp search kept every state (its choice is optimal for its cost).
  bool tpExact = true;
  /// Decisions worth telling the user (fewer ranks, fallbacks).
  std::vector<std::string> notes;
};

/// Replaces every Fused node of `g` by its body's ops (compiler/ir/regions.h
/// inlineBody), its outputs' names kept. \returns OK or an internal error.
Status inlineFusedNodes(Graph& g);

/// Inlines Fused nodes (inlineFusedNodes), then chooses the mesh for `opts`
/// and propagates shardings through `g` (sets every value's sharding
/// annotation). \returns the partition, or an error
/// for a request that cannot be honoured (e.g. tp not dividing --gpus).
StatusOr<Partition> partitionGraph(Graph& g, const PartitionOptions& opts);

/// Binds a local value to a slice of a global input or output.
struct IoBind {
  size_t index = 0;      ///< position in the global graph's inputs / outputs
  Value* value = nullptr;
  int splitDim = -1;     ///< -1: the whole tensor
  int64_t offset = 0, length = 0;
};

struct RankGraph {
  int rank = 0;
  std::unique_ptr<Graph> graph;  ///< local shapes; collectives carry axis/dim/group_size
  std::vector<IoBind> inputs, outputs;
};

/// How lowering gives each rank its piece of a constant.
struct LowerOptions {
  /// A piece of at most this many elements is copied at once (passes may
  /// read it); a larger one stays a TensorBlock of the global constant
  /// (Value::constantBlock), which the plan writer streams from the source: no
  /// weight byte is read or copied while planning.
  int64_t eagerSliceElements = 65536;
};

/// Lowers the annotated global graph to one local graph per rank. Every local
/// type is re-inferred and checked against the shape the sharding predicts.
StatusOr<std::vector<RankGraph>> lowerToRanks(const Graph& g, const Partition& p, const LowerOptions& opts = {});

/// Lowers the program of rank `rank` alone (as lowerToRanks does for each).
StatusOr<RankGraph> lowerRank(const Graph& g, const Partition& p, int rank, const LowerOptions& opts = {});

}  // namespace pcc
