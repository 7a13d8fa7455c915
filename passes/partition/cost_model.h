// The cost model: how long an op takes on one device (roofline), how long a
// collective takes over a group of devices (alpha-beta per link level), and how
// much memory a device offers. The mesh search and the reports ask it; its
// hooks are virtual so that tests can hand in a made-up device.
// docs/cost-model.md gives the formulas and where the figures come from.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/ir/ir.h"
#include "passes/partition/device_spec.h"
#include "runtime/schema/op_cost.h"

namespace pcc {

enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };

/// \returns "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv".
const char* collectiveName(CollectiveKind k);

/// \returns the work of node `n` with the types it has (opWork on its
/// operands); a node with bodies sums its bodies' nodes.
OpWork nodeWork(const Node& n);

class CostModel {
 public:
  explicit CostModel(ClusterSpec spec) : spec_(std::move(spec)) {}
  virtual ~CostModel() = default;

  const ClusterSpec& spec() const { return spec_; }

  /// \returns the seconds one device takes for `work` on elements of `dtype`:
  /// the launch overhead plus the larger of the arithmetic time (flops over
  /// the achievable matrix or vector rate) and the memory time (bytes over the
  /// achievable bandwidth; with a cache in the spec, the first cacheBytes at
  /// the cache's bandwidth).
  virtual double computeTime(const OpWork& work, DType dtype) const;

  /// \returns the seconds of node `n` with the types it has (local types on a
  /// rank program, global ones on the global graph). A node with bodies costs
  /// the sum of its bodies' nodes (a Loop's body once per unrolled trip is
  /// already unrolled; a dynamic one is costed for one trip). The spec's
  /// factor for the node's op (DeviceSpec::opFactors) scales computeTime less
  /// the launch overhead.
  double nodeTime(const Node& n) const;

  /// \returns the seconds of node `n` (without bodies) were its operands of
  /// types `inputs` and `outputs` (kUndefined: an absent input), e.g. the
  /// local types a sharding gives it. A view of its input costs nothing.
  double opTime(const Node& n, const std::vector<TensorType>& inputs, const std::vector<TensorType>& outputs) const;

  /// \returns the seconds of a collective of kind `kind` among `groupSize`
  /// devices, where `bytes` is the size of the full tensor: the all-reduced
  /// tensor, the gathered result, the reduce-scatter's input, the all-to-all's
  /// input on one device, or the message sent. `crossesNodes`: the group spans
  /// more than one node (the inter-node link is then the bottleneck).
  virtual double collectiveTime(CollectiveKind kind, int64_t bytes, int groupSize, bool crossesNodes) const;

  /// \returns the bytes a plan may use on one device.
  virtual int64_t memoryCapacity() const { return spec_.device.usableMemory(); }

  /// \returns whether the devices `ranks` (global device numbers; nodes are
  /// filled in order, spec().gpusPerNode each) span more than one node.
  bool crossesNodes(const std::vector<int>& ranks) const;

 private:
  ClusterSpec spec_;
};

}  // namespace pcc
