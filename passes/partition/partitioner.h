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
struct PartitionOptions {
  int gpus = 1;
  /// Requested mesh extents; 0 = derive (dp fills what tp and pp leave).
  int dp = 0, tp = 0, pp = 0;
};

/// The result of sharding propagation over a global graph. Value shardings
/// are annotations on the graph itself; this holds the rest.
struct Partition {
  Mesh mesh;
  /// How node input (node, index) must be laid out when the node reads it.
  /// Where it differs from the value's own sharding, lowering inserts the
  /// collective or local slice that converts it.
  std::map<std::pair<const Node*, size_t>, Sharding> inputSharding;
  /// Megatron pairs found: "column 'fc1' -> row 'fc2'".
  std::vector<std::string> tensorParallelPairs;
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

}  // namespace pcc
