// Resharding steps (reshard.h).
//
// Algorithm:
//  1. A partial sum over X that the target drops becomes whole: by one
//     reduce-scatter when the target splits exactly one dimension d over X,
//     the value has d whole and nothing else split over X (each rank then
//     receives only its chunk of the sum), else by an all-reduce.
//  2. Each split dimension a the target does not keep, in dimension order:
//     when the target splits another dimension b over the same axis and the
//     value has b whole, one all-to-all moves the split from a to b (each
//     rank sends chunk j of b to rank j and concatenates the chunks of a it
//     receives); else an all-gather makes a whole.
//  3. Each dimension the target splits and the value still has whole: a
//     local slice of this rank's chunk.
#include "passes/partition/reshard.h"

namespace pcc {

namespace {

/// \returns the dimension of `s` split over `axis` other than `except`, or -1.
int splitOver(const Sharding& s, MeshAxis axis, int except = -1) {
  for (size_t d = 0; d < s.dims.size(); ++d)
    if (static_cast<int>(d) != except && s.dims[d] == axis) return static_cast<int>(d);
  return -1;
}

}  // namespace

std::vector<ReshardStep> reshardSteps(const Sharding& cur, const Sharding& req) {
  std::vector<ReshardStep> steps;
  Sharding s = cur;
  // Step 1.
  if (s.partial != MeshAxis::kNone && s.partial != req.partial) {
    MeshAxis a = s.partial;
    s.partial = MeshAxis::kNone;
    const int d = splitOver(req, a);
    const bool scatter = d >= 0 && d < static_cast<int>(s.dims.size()) && splitOver(req, a, d) < 0 &&
                         s.dims[d] == MeshAxis::kNone && splitOver(s, a) < 0;
    if (scatter) {
      s.dims[d] = a;
      steps.push_back({ReshardStep::kReduceScatter, a, d, s});
    } else {
      steps.push_back({ReshardStep::kAllReduce, a, -1, s});
    }
  }
  // Step 2.
  for (size_t d = 0; d < s.dims.size(); ++d) {
    MeshAxis a = s.dims[d];
    if (a == MeshAxis::kNone || (d < req.dims.size() && a == req.dims[d])) continue;
    const int to = splitOver(req, a, static_cast<int>(d));
    s.dims[d] = MeshAxis::kNone;
    if (to >= 0 && to < static_cast<int>(s.dims.size()) && s.dims[to] == MeshAxis::kNone) {
      s.dims[to] = a;
      steps.push_back({ReshardStep::kAllToAll, a, to, s, static_cast<int>(d)});
    } else {
      steps.push_back({ReshardStep::kAllGather, a, static_cast<int>(d), s});
    }
  }
  // Step 3.
  for (size_t d = 0; d < s.dims.size() && d < req.dims.size(); ++d) {
    MeshAxis a = req.dims[d];
    if (a == MeshAxis::kNone || s.dims[d] == a) continue;
    s.dims[d] = a;
    steps.push_back({ReshardStep::kSlice, a, static_cast<int>(d), s});
  }
  return steps;
}

bool isLocal(const std::vector<ReshardStep>& steps) {
  for (const ReshardStep& s : steps)
    if (s.kind != ReshardStep::kSlice) return false;
  return true;
}

}  // namespace pcc
