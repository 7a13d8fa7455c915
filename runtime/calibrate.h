// Calibration: measures what the cost model needs to know of this machine's
// CPU ranks, with the kernels and the communicators the runtime uses
// (pcc-calibrate writes it as a cluster spec; docs/cost-model.md#calibration).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/schema/op_cost.h"
#include "runtime/support/status.h"

namespace pcc {

struct CalibrationOptions {
  /// Ranks sharing the machine: the gloo measurements run this many rank
  /// threads, and each kernel measurement runs with threadsPerRank threads.
  int ranks = 2;
  /// OpenMP threads of each rank's kernels; 0: the processors this process
  /// may use divided by `ranks` (what pcc-run uses).
  int threadsPerRank = 0;
  /// Seconds spent timing each case (after one untimed call); a case's time
  /// is its fastest call.
  double secondsPerCase = 0.15;
  /// Called with one line per finished measurement (may be empty).
  std::function<void(const std::string&)> progress;
};

/// What a timed case is for.
enum class CalibrationKind {
  kMatrix,    ///< a contraction: its rate sets the matrix rate
  kMemory,    ///< an elementwise op on operands larger than the caches
  kCache,     ///< an elementwise op whose operands fill half a core's L2
  kVector,    ///< a cheap elementwise op on cache-resident operands
  kLaunch,    ///< a kernel on one element
  kOp,        ///< an op at a standard size: its time against the model's
  kAllReduce, ///< a gloo all-reduce over the rank threads
};

/// One timed case: a kernel (or a collective) at one size.
struct CalibrationSample {
  CalibrationKind kind = CalibrationKind::kOp;
  std::string op;         ///< ONNX op type ("all_reduce" for the collective)
  std::string what;       ///< "MatMul f32[128,768] x f32[768,768]", ...
  /// The work as the cost model counts it (runtime/schema/op_cost.h); for
  /// an all-reduce, bytes is the tensor's size.
  OpWork work;
  double seconds = 0;     ///< seconds of the fastest call
};

struct Calibration {
  int ranks = 0, threadsPerRank = 0;
  /// Every case, in the order measured.
  std::vector<CalibrationSample> samples;
  /// Best float32 rate of the contractions (MatMul, Gemm, Conv), operations/s.
  double matrixFlops = 0;
  /// The median of the contractions' rates over the best one: the fraction
  /// of matrixFlops a contraction of ordinary size reaches.
  double matrixEfficiency = 1;
  /// Elements/s of the compute-bound elementwise cases (cache-resident).
  double vectorFlops = 0;
  /// Bytes/s of elementwise ops on operands larger than the caches.
  double memoryBandwidth = 0;
  /// A core's L2 (sysconf; 1 MiB when unknown), and the bytes/s of an
  /// elementwise op whose operands fill half of it, its fixed cost taken off.
  int64_t cacheBytes = 0;
  double cacheBandwidth = 0;
  /// Seconds of a kernel on one element: the fixed cost of any kernel.
  double launchOverhead = 0;
  /// Gloo all-reduce between the rank threads (alpha-beta of a ring): the
  /// latency of one step and the bandwidth one rank sends at. 0 for one rank.
  double linkLatency = 0, linkBandwidth = 0;
  /// Physical memory of the machine over the ranks.
  int64_t memoryBytesPerRank = 0;
};

/// Runs every measurement. \returns the figures, or the first error (a kernel
/// that cannot be prepared, a connection that fails).
StatusOr<Calibration> calibrateCpu(const CalibrationOptions& o);

}  // namespace pcc
