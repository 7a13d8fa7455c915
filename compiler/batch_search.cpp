// The batch sweep: the steps are listed at BatchSweep (batch_search.h).
#include "compiler/batch_search.h"

#include <algorithm>

namespace pcc {

BatchPoint batchPointOf(int64_t batch, const SearchResult& r) {
  BatchPoint p;
  p.batch = batch;
  if (r.candidates.empty()) {
    p.why = "no mesh was costed";
    return p;
  }
  const PlanEstimate& best = r.candidates.front();
  p.mesh = best.mesh;
  p.microbatches = best.microbatches;
  p.seconds = best.seconds;
  p.samplesPerSecond = best.samplesPerSecond;
  for (const RankEstimate& rk : best.ranks) p.memoryBytes = std::max(p.memoryBytes, rk.memoryBytes());
  p.why = !best.error.empty() ? best.error : best.infeasible;
  p.feasible = p.why.empty();
  return p;
}

std::optional<int64_t> BatchSweep::next() const {
  if (!stop_.empty()) return std::nullopt;
  return curve_.empty() ? 1 : curve_.back().batch * 2;
}

bool BatchSweep::add(BatchPoint p) {
  curve_.push_back(std::move(p));
  const BatchPoint& pt = curve_.back();
  const int64_t b = pt.batch;
  // Step 3.
  if (!pt.feasible) {
    stop_ = strCat("batch ", b, " does not fit or cannot be planned");
    return false;
  }
  bool improved = false;
  double gain = 0;
  if (!chosen_) {
    chosen_ = curve_.size() - 1;
    improved = true;
  } else {
    const double best = curve_[*chosen_].samplesPerSecond;
    gain = best > 0 ? pt.samplesPerSecond / best - 1 : 0;
    if (gain > 0.01) {  // step 5
      chosen_ = curve_.size() - 1;
      improved = true;
    }
  }
  // Steps 1, 2 and 4.
  if (opts_.objective == Objective::kLatency)
    stop_ = "--objective latency takes batch 1";
  else if (curve_.size() > 1 && gain < opts_.minGain)
    stop_ = strCat("doubling to ", b, " raised the estimated samples/s by less than ",
                   static_cast<int>(opts_.minGain * 100 + 0.5), "%");
  else if (b * 2 > opts_.maxBatch)
    stop_ = strCat("reached the largest batch tried, ", opts_.maxBatch);
  return improved;
}

}  // namespace pcc
