#include "passes/partition/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/ops/registry.h"

namespace pcc {

const char* collectiveName(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kSendRecv: return "send_recv";
  }
  return "?";
}

double CostModel::computeTime(const OpWork& work, DType dtype) const {
  const DeviceSpec& d = spec_.device;
  double rate = work.unit == WorkUnit::kMatrix ? d.matrixRate(dtype) * d.matrixEfficiency
                                               : d.vectorRate(dtype) * d.vectorEfficiency;
  double arithmetic = static_cast<double>(work.flops) / rate;
  double bytes = static_cast<double>(work.bytes), memory = 0;
  if (d.cacheBytes > 0 && d.cacheBandwidth > 0) {
    // The first cacheBytes of traffic stay in the cache; the rest streams from memory.
    const double cached = std::min(bytes, static_cast<double>(d.cacheBytes));
    memory = cached / (d.cacheBandwidth * d.memoryEfficiency);
    bytes -= cached;
  }
  memory += bytes / (d.memoryBandwidth * d.memoryEfficiency);
  return d.launchOverhead + std::max(arithmetic, memory);
}

namespace {
std::vector<TensorType> typesOf(const std::vector<Value*>& values) {
  std::vector<TensorType> t;
  for (const Value* v : values) t.push_back(v ? v->type() : TensorType{});
  return t;
}

// The element type the arithmetic runs in: the first input's (a quantized
// MatMulInteger's is its 8-bit input), else the first output's.
DType workType(const std::vector<TensorType>& inputs, const std::vector<TensorType>& outputs) {
  if (!inputs.empty() && inputs[0].dtype != DType::kUndefined) return inputs[0].dtype;
  return outputs.empty() ? DType::kF32 : outputs[0].dtype;
}

// A view of its input (Reshape, Squeeze, ...) runs no kernel.
bool isView(const Node& n) {
  const KernelEntry* k = referenceKernel(n.op());
  return k && k->viewOfInput0;
}
}  // namespace

OpWork nodeWork(const Node& n) {
  if (n.numBodies() > 0) {
    OpWork sum;
    for (const auto& body : n.bodies())
      for (const Node* inner : body->nodes()) {
        OpWork w = nodeWork(*inner);
        sum.flops = w.flops > INT64_MAX - sum.flops ? INT64_MAX : sum.flops + w.flops;
        sum.bytes = w.bytes > INT64_MAX - sum.bytes ? INT64_MAX : sum.bytes + w.bytes;
      }
    return sum;
  }
  if (isView(n)) return {};
  return opWork(n.opName(), typesOf(n.inputs()), typesOf(n.outputs()), n.attrs());
}

double CostModel::nodeTime(const Node& n) const {
  if (n.numBodies() > 0) {
    double t = 0;
    for (const auto& body : n.bodies())
      for (const Node* inner : body->nodes()) t += nodeTime(*inner);
    return t;
  }
  return opTime(n, typesOf(n.inputs()), typesOf(n.outputs()));
}

double CostModel::opTime(const Node& n, const std::vector<TensorType>& inputs,
                         const std::vector<TensorType>& outputs) const {
  if (isView(n)) return 0;
  const double t = computeTime(opWork(n.opName(), inputs, outputs, n.attrs()), workType(inputs, outputs));
  const double factor = spec_.device.opFactor(n.opName());
  if (factor == 1.0) return t;
  // The factor scales the op's own time; the fixed cost of a kernel stays.
  const double launch = std::min(spec_.device.launchOverhead, t);
  return launch + factor * (t - launch);
}

double CostModel::collectiveTime(CollectiveKind kind, int64_t bytes, int groupSize, bool crossesNodes) const {
  if (groupSize <= 1 || bytes <= 0) return 0;
  const LinkSpec& link = crossesNodes ? spec_.interNode : spec_.intraNode;
  const double n = groupSize, alpha = link.latency, s = static_cast<double>(bytes);
  const double beta = 1.0 / (link.bandwidth * link.efficiency);  // seconds per byte
  // Every collective is one launch on the device, as a kernel is: an
  // all-reduce costs one, the reduce-scatter and all-gather that move the
  // same bytes cost two (what makes small all-reduces win a decode step).
  const double launch = spec_.device.launchOverhead;
  switch (kind) {
    case CollectiveKind::kAllReduce: {
      // Ring: a reduce-scatter and an all-gather, 2(n-1) steps of S/n each.
      double ring = 2 * (n - 1) / n * s * beta + 2 * (n - 1) * alpha;
      // Tree (pipelined up and down a binary tree): 2 log2(n) steps, and the
      // whole tensor crosses each device's link twice.
      double tree = 2 * std::ceil(std::log2(n)) * alpha + 2 * s * beta;
      return launch + std::min(ring, tree);
    }
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      // n-1 steps; each device sends (n-1)/n of the tensor.
      return launch + (n - 1) / n * s * beta + (n - 1) * alpha;
    case CollectiveKind::kSendRecv:
      return launch + s * beta + alpha;
  }
  return 0;
}

bool CostModel::crossesNodes(const std::vector<int>& ranks) const {
  if (ranks.empty()) return false;
  const int node = ranks[0] / spec_.gpusPerNode;
  return std::any_of(ranks.begin(), ranks.end(), [&](int r) { return r / spec_.gpusPerNode != node; });
}

}  // namespace pcc
