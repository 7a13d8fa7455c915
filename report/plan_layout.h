// How a plan lays out its model, recovered from the plan alone: for each
// kernel of the reference program, which dimensions of its output the rank
// programs split and over which mesh axis, and where the partitioner inserted
// collectives. The graph reports (dot, HTML) draw it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/plan.pb.h"
#include "runtime/support/dtype.h"

namespace pcc {

/// One split dimension of a kernel's output.
struct DimSplit {
  int dim = 0;
  /// The mesh axis whose groups hold the pieces: "dp", "tp", "dp+tp" (the
  /// pieces cover the dimension only over both), or "?" (the rank shapes are
  /// smaller but no group's pieces add up to the whole).
  std::string axis;
  int64_t extent = 0;      ///< the reference program's extent
  int64_t rankExtent = 0;  ///< the largest piece a rank holds
};

/// A kernel of the reference program and its layout in the rank programs.
struct KernelLayout {
  enum class Kind {
    kReplicated,  ///< every rank that runs it computes the whole output
    kSplit,       ///< some rank computes a piece of it (see `splits`)
    kAbsent,      ///< no rank runs it (folded, fused or removed by the passes)
  };
  std::string op, node;
  TensorType type;  ///< of output 0 in the reference program
  Kind kind = Kind::kAbsent;
  std::vector<DimSplit> splits;
  /// The op of the node that computes its output in the rank programs when a
  /// rewrite replaced the pattern it is the root of ("<node>/<Op>"); else "".
  std::string fusedAs;
  int stage = -1;    ///< the lowest pipeline stage that runs it; -1 if absent
  int rankCount = 0; ///< ranks that run it
  /// \returns "replicated", "absent", or the axes of the splits joined with
  /// '+' in the order dp, tp, then "?" ("dp", "tp", "dp+tp", "tp+?", ...).
  std::string layoutClass() const;
};

/// A collective the partitioner inserted, as the rank programs run it,
/// placed between reference kernels.
struct CollectiveSite {
  std::string kind;       ///< "all_reduce", "all_gather", "reduce_scatter", "send", "recv"
  std::string axis;       ///< of its group; "-" for point-to-point
  int groupSize = 0;
  int64_t bytes = 0;      ///< payload (its input) on the largest rank
  std::string node;       ///< its node name in the first rank program that runs it
  int producer = -1;      ///< reference kernel whose output it carries; -1 if unknown
  int input = -1;         ///< or the model input it carries; -1 if none
  std::vector<int> consumers;  ///< reference kernels that read its result, ascending
  std::vector<int> outputs;    ///< model outputs its result is (a piece of), ascending
  int stage = 0;
  int rankCount = 0;      ///< ranks that run it
};

/// The reference program as a graph, annotated with the plan's layout.
struct PlanLayout {
  std::vector<KernelLayout> kernels;  ///< in reference program order
  /// Data edges between kernels (from, to), ascending and unique; an edge that
  /// a collective now sits on is left out (the collective's edges replace it).
  std::vector<std::pair<int, int>> edges;
  /// Model inputs: the kernels reading each, and model outputs: the kernel
  /// writing each (-1 when none does, or when a collective now sits between).
  std::vector<std::vector<int>> inputConsumers;
  std::vector<int> outputProducers;
  std::vector<CollectiveSite> collectives;  ///< in first appearance, rank by rank
  std::vector<int> stages;                  ///< the stages of the rank programs, ascending
};

/// \returns the layout of `p`. Rank instructions are matched to reference
/// kernels by `node` name (the k-th instruction of a name to the k-th kernel of
/// that name; "<root>/<Op>", a rewrite's node, to kernel `<root>`); collectives
/// by the names of the buffers they read and write.
PlanLayout planLayout(const plan::Plan& p);

}  // namespace pcc
