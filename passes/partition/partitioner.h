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
struct TpSearchCache;
struct StageCostCache;

/// What a node does over the tp axis (tp_search.h).
struct TpChoice {
  enum Kind {
    kReplicate,    ///< every tp rank computes the whole op
    kSplitOutput,  ///< output dimension `index` split over tp (and every input dimension linked to it)
    kContract,     ///< contraction `index` of its dim map split: the output is a partial sum over tp
  };
  Kind kind = kReplicate;
  int index = -1;
  bool operator==(const TpChoice& o) const { return kind == o.kind && index == o.index; }
};

/// \returns the name a node's choices are known by across two imports of a
/// model: its op and its first output's name (unique in a graph).
std::string partitionKey(const Node& n);

struct PartitionOptions {
  int gpus = 1;
  /// Requested mesh extents; 0 = derive (dp fills what tp and pp leave).
  int dp = 0, tp = 0, pp = 0;
  /// Micro-batches each data-parallel replica's batch is cut into (pipeline
  /// stages work on them in turn); 0 or 1: one.
  int microbatches = 0;
  /// What the tensor-parallel search (tp_search.h) costs with; nullptr: the
  /// shipped h100 spec.
  const CostModel* cost = nullptr;
  /// The tp search saves weight memory first, then time (set for a forced
  /// tp, and by the mesh search for a model that does not fit otherwise).
  bool minimizeWeights = false;
  /// Off: the tp axis exists but every node replicates over it (the
  /// data-parallel layouts alone, what the tp search starts from; tests).
  bool tensorParallelSearch = true;
  /// The tp search skips the repeats of a block once it reaches a steady
  /// state (TpSearchOptions::fold); off: every node is searched.
  bool foldRepeats = true;
  /// Session state (a generation plan's KV cache, passes/kv_cache.h): pairs
  /// of (graph input, graph output) value names, each output written by a
  /// TensorScatter whose input 0 is the input. The input takes the layout of
  /// the output, so that each rank keeps its piece in place, and lowering
  /// binds both as the rank's state (RankGraph::states), not as model inputs
  /// and outputs.
  std::vector<std::pair<std::string, std::string>> states;
  /// Decisions taken from another partition of the same model (a generation
  /// plan's prefill follows its decode step, so that both hold the same weight
  /// and cache pieces): per node key (partitionKey), its tp choice and its
  /// pipeline stage. A node not named keeps the search's choice (tp) or the
  /// stage of the node before it; a pinned choice the node cannot take, or
  /// stages out of order, is an error.
  const std::map<std::string, TpChoice>* pinnedTp = nullptr;
  const std::map<std::string, int>* pinnedStages = nullptr;
  /// Tp search results kept across partitions of copies of one graph with
  /// the same options but the mesh (tp_search.h): the mesh search's
  /// candidates of one dp · micro-batches × tp differ only in their stages,
  /// which the tp search does not see. nullptr: none kept.
  TpSearchCache* tpCache = nullptr;
  /// Likewise the costs stage cutting measures (pipeline.h).
  StageCostCache* stageCache = nullptr;
};

/// The result of sharding propagation over a global graph. Value shardings
/// are annotations on the graph itself; this holds the rest.
/// One pipeline stage of a partition (pipeline.h).
struct StageInfo {
  size_t firstNode = 0, numNodes = 0;  ///< a range of the global graph's nodes
  double seconds = 0;                  ///< its estimated time per micro-batch, sends included
  int64_t weightBytes = 0, activationBytes = 0;  ///< one rank's, estimated
  int64_t sendBytes = 0;               ///< what it sends on, per micro-batch
};

struct Partition {
  /// The devices: pp stages of dp replicas of tp ranks.
  Mesh mesh;
  /// Each replica's batch is cut into this many micro-batches, run in turn;
  /// every rank program is lowered for one micro-batch.
  int microbatches = 1;
  /// The pipeline stages (empty when pp = 1); each node's stage is Node::stage.
  std::vector<StageInfo> stages;

  /// \returns the mesh that gives local shapes: one stage of dp · microbatches
  /// replicas (a micro-batch is a data-parallel piece run later in time).
  Mesh shapeMesh() const { return Mesh{1, mesh.dp * microbatches, mesh.tp}; }
  /// \returns the rank of shapeMesh() whose shapes physical rank `rank` has
  /// (its replica's first micro-batch).
  int shapeRank(int rank) const {
    return shapeMesh().rankOf(0, mesh.coord(rank, MeshAxis::kDP) * microbatches, mesh.coord(rank, MeshAxis::kTP));
  }

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
  /// The tp search's repeated blocks (TpSearchResult): those given their
  /// choices without being searched, the block's nodes, the blocks of the run.
  int tpFoldedBlocks = 0, tpBlockNodes = 0, tpRepeats = 0;
  /// Seconds spent in the tp search and in cutting the stages.
  double tpSearchSeconds = 0, stageCutSeconds = 0;
  /// Decisions worth telling the user (fewer ranks, fallbacks).
  std::vector<std::string> notes;
  /// PartitionOptions::states, as partitioned.
  std::vector<std::pair<std::string, std::string>> states;
  /// The tp choice of every node, by partitionKey (empty without tp).
  std::map<std::string, TpChoice> tpChoices;
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
  /// The split is the batch's: micro-batch m binds offset + m · length.
  bool perMicrobatch = false;
};

/// A rank's piece of a session state (PartitionOptions::states).
struct StateBind {
  size_t state = 0;       ///< position in Partition::states
  Value* in = nullptr;    ///< the local input that reads the piece
  Value* out = nullptr;   ///< the local value the step writes it back as (the same memory)
  std::vector<int64_t> offsets;  ///< the piece's start in every dimension
};

struct RankGraph {
  int rank = 0;
  int stage = 0;  ///< the pipeline stage whose nodes it holds
  /// Local shapes; collectives carry axis/dim/group_size. Null for a replica
  /// once the driver has rewritten its lead (makeReplica): programOf gives
  /// the program it runs.
  std::unique_ptr<Graph> graph;
  std::vector<IoBind> inputs, outputs;
  /// The state pieces this rank holds (those its stage reads).
  std::vector<StateBind> states;
  /// nodeStarts[i]: the number of local nodes before those global node i
  /// lowered to (its input conversions, then the node); the last entry is
  /// the total. Nodes of other stages lower to none.
  std::vector<size_t> nodeStarts;
  /// The rank whose program this one is, with every Send and Recv peer
  /// (rank − replicaOf) further (findReplicas); -1: a program of its own.
  int replicaOf = -1;
};

/// How lowering gives each rank its piece of a constant.
struct LowerOptions {
  /// A piece of a constant of at most this many elements is copied at once
  /// (passes may read it); a piece of a larger one, however small, stays a
  /// TensorBlock of the global constant
  /// (Value::constantBlock), which the plan writer streams from the source: no
  /// weight byte is read or copied while planning.
  int64_t eagerSliceElements = 65536;
};

/// Adds to `g` a constant named `name` that is the block of constant `of`
/// starting at `start` with extents `extent`: a copy when the tensor it is
/// cut from has at most `eagerElements` elements and is not a weight mapped
/// from a file (passes may read it), else a TensorBlock of the
/// source `of` reads from (Value::constantBlock, composed when `of` is a
/// block already), so that no weight byte is read or copied while planning.
/// \returns it, or an invalid-input error when the block is not inside `of`.
StatusOr<Value*> addConstantSlice(Graph& g, const std::string& name, const Value* of, const Dims& start,
                                  const Dims& extent, int64_t eagerElements = LowerOptions{}.eagerSliceElements);

/// Lowers the annotated global graph to one local graph per rank. Every local
/// type is re-inferred and checked against the shape the sharding predicts.
StatusOr<std::vector<RankGraph>> lowerToRanks(const Graph& g, const Partition& p, const LowerOptions& opts = {});

/// Lowers the program of rank `rank` alone (as lowerToRanks does for each).
StatusOr<RankGraph> lowerRank(const Graph& g, const Partition& p, int rank, const LowerOptions& opts = {});

/// Sets RankGraph::replicaOf of each of `ranks` (lowered, not yet rewritten;
/// ranks[i].rank == i) whose program is, node for node (graphsIdentical), the
/// program of the rank of its stage and tp coordinate at dp = 0 with its
/// Send and Recv peers shifted: the data-parallel replicas of a stage when
/// the batch splits evenly, which differ only in the samples they read and
/// the outputs they write (their bindings). Such a program needs no rewrite
/// of its own: makeReplica copies the lead's. \returns how many it found.
int findReplicas(std::vector<RankGraph>& ranks, const Mesh& mesh);

/// Makes `replica` (RankGraph::replicaOf) run `lead`'s program, rewritten
/// as it may be since: its bindings move onto the lead's values of the same
/// names and its own graph is dropped (no copy is made; programOf finds the
/// program, replicaProgram copies it with the replica's peers). \returns an
/// internal error when a bound value is missing.
Status makeReplica(RankGraph& replica, const RankGraph& lead);

/// \returns the program `rg` runs: its graph, or its lead's when it is a
/// replica whose graph was dropped (its Send and Recv peers are then
/// rg.rank − rg.replicaOf further than the graph says). `ranks[i].rank == i`.
const Graph& programOf(const std::vector<RankGraph>& ranks, const RankGraph& rg);

/// \returns a copy of `lead`'s program with every Send and Recv peer `shift`
/// ranks further: a replica's program as it would be written out.
std::unique_ptr<Graph> replicaProgram(const Graph& lead, int shift);

}  // namespace pcc
