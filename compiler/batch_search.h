// Choosing the batch (--batch auto, or a symbolic leading dimension with no
// --batch): the batch whose plan the cost model estimates to process the most
// samples per second within each device's memory (--objective throughput), or
// 1 (--objective latency). The driver costs each candidate batch with the
// mesh search (compiler/driver.cpp); this file decides which batches to try
// and which one wins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "passes/partition/mesh.h"
#include "passes/partition/search.h"

namespace pcc {

/// One batch costed: the mesh search's chosen plan at that batch.
struct BatchPoint {
  int64_t batch = 0;
  Mesh mesh;
  /// Estimated time of one batch (the slowest rank).
  double seconds = 0;
  double samplesPerSecond = 0;
  /// The largest rank's weights plus peak activations.
  int64_t memoryBytes = 0;
  /// Fits every device's memory and could be partitioned.
  bool feasible = false;
  /// Why not feasible: does not fit (the search's reason) or an error.
  std::string why;
  /// Micro-batches of the mesh's pipeline (1 without stages).
  int microbatches = 1;
};

/// \returns the point of batch `batch` from the mesh search's result there:
/// its chosen (first) candidate.
BatchPoint batchPointOf(int64_t batch, const SearchResult& r);

struct BatchSweepOptions {
  Objective objective = Objective::kThroughput;
  /// The largest candidate (candidates are 1, 2, 4, ... up to it).
  int64_t maxBatch = 1024;
  /// Doubling stops once a doubling raises the best samples/s by less than this fraction.
  double minGain = 0.05;
};

/// The candidates, one at a time: next() names the batch to cost, add()
/// takes its point. Algorithm:
///  1. latency: the only candidate is 1;
///  2. throughput: 1, 2, 4, ... up to maxBatch;
///  3. the sweep stops at the first point that does not fit (or cannot be
///     planned): a larger batch needs more memory;
///  4. it stops after a point that raises the best samples/s by less than
///     minGain (the estimate has levelled off);
///  5. the chosen batch is the feasible point with the most samples/s; a
///     larger batch must be more than 1% faster than a smaller one (the mesh
///     search's resolution) to replace it.
class BatchSweep {
 public:
  explicit BatchSweep(BatchSweepOptions opts) : opts_(opts) {}

  /// \returns the batch to cost next, or nothing when the sweep is over.
  std::optional<int64_t> next() const;

  /// Records the point of the batch next() named. \returns whether it is now
  /// the chosen one.
  bool add(BatchPoint p);

  /// \returns the points costed, in order.
  const std::vector<BatchPoint>& curve() const { return curve_; }
  /// \returns the index in curve() of the chosen point; nothing when no
  /// point is feasible.
  std::optional<size_t> chosen() const { return chosen_; }
  /// \returns why the sweep stopped ("" while it runs).
  const std::string& stopReason() const { return stop_; }

 private:
  BatchSweepOptions opts_;
  std::vector<BatchPoint> curve_;
  std::optional<size_t> chosen_;
  std::string stop_;
};

}  // namespace pcc
