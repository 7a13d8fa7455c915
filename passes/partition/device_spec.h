// What the cost model knows of the hardware: one device type, the links
// between devices inside a node and across nodes, and how many devices a node
// holds. Specs are data: JSON files shipped in passes/partition/devices/
// (compiled into pcc, chosen with --gpu NAME) or given with --cluster FILE.json.
// The format is in docs/cost-model.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/support/dtype.h"
#include "runtime/support/status.h"

namespace pcc {

struct DeviceSpec {
  /// Memory capacity, and the part of it a plan may not use (runtime context,
  /// library workspaces).
  int64_t memoryBytes = 0, reservedBytes = 0;
  /// Memory bandwidth, bytes/s.
  double memoryBandwidth = 0;
  /// Peak rates in operations/s by element type ("f32", "tf32", "f16", "bf16",
  /// "f8", "i8", "f64"): of the matrix units (contractions) and of the vector
  /// units (everything else).
  std::map<std::string, double> matrixFlops, vectorFlops;
  /// Fixed cost of one kernel, seconds.
  double launchOverhead = 0;
  /// The fraction of each peak that real kernels reach.
  double matrixEfficiency = 1, vectorEfficiency = 1, memoryEfficiency = 1;
  /// Optional: a cache of `cacheBytes` per device read and written at
  /// `cacheBandwidth` bytes/s. An op's first cacheBytes of traffic move at
  /// that rate, the rest at memoryBandwidth. 0: no cache term.
  int64_t cacheBytes = 0;
  double cacheBandwidth = 0;
  /// Optional, by ONNX op type: the factor an op's roofline time (launch
  /// overhead excepted) is multiplied by, where its kernel is slower or faster
  /// than the rates above say (pcc-calibrate measures them). Absent ops: 1.
  std::map<std::string, double> opFactors;

  /// \returns the peak matrix rate for elements of `t` (the f32 rate for a type
  /// the spec does not list).
  double matrixRate(DType t) const;
  /// \returns the peak vector rate for elements of `t` (likewise).
  double vectorRate(DType t) const;
  /// \returns opFactors[op], or 1 when the spec lists none for `op`.
  double opFactor(std::string_view op) const;
  /// \returns the bytes a plan may use on one device.
  int64_t usableMemory() const { return memoryBytes - reservedBytes; }
};

struct LinkSpec {
  std::string name;
  /// Bytes/s one device sends (and receives) at once over this link.
  double bandwidth = 0;
  /// Seconds per message step (the alpha of the alpha-beta model).
  double latency = 0;
  /// The fraction of `bandwidth` collectives reach.
  double efficiency = 1;
};

struct ClusterSpec {
  std::string name, description, source;
  DeviceSpec device;
  int gpusPerNode = 1;
  LinkSpec intraNode, interNode;
};

/// Parses a cluster spec from JSON text; `origin` (a file name) prefixes errors.
/// Unknown keys, missing keys and values out of range are errors naming the key's
/// path ("h100.json: device.memory_bandwidth: must be a number > 0").
StatusOr<ClusterSpec> parseClusterSpec(std::string_view json, std::string_view origin);

/// Reads and parses a cluster spec file (--cluster).
StatusOr<ClusterSpec> loadClusterSpec(const std::string& path);

/// \returns the shipped spec named `name` (--gpu), or an error listing the names.
StatusOr<ClusterSpec> builtinClusterSpec(std::string_view name);

/// \returns the names of the shipped specs, sorted.
std::vector<std::string> builtinClusterSpecNames();

}  // namespace pcc
