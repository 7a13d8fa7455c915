#include "passes/partition/reshard.h"

namespace pcc {

std::vector<ReshardStep> reshardSteps(const Sharding& cur, const Sharding& req) {
  std::vector<ReshardStep> steps;
  Sharding s = cur;
  if (s.partial != MeshAxis::kNone && s.partial != req.partial) {
    MeshAxis a = s.partial;
    s.partial = MeshAxis::kNone;
    steps.push_back({ReshardStep::kAllReduce, a, -1, s});
  }
  for (size_t d = 0; d < s.dims.size(); ++d) {
    MeshAxis a = s.dims[d];
    if (a == MeshAxis::kNone || (d < req.dims.size() && a == req.dims[d])) continue;
    s.dims[d] = MeshAxis::kNone;
    steps.push_back({ReshardStep::kAllGather, a, static_cast<int>(d), s});
  }
  for (size_t d = 0; d < s.dims.size() && d < req.dims.size(); ++d) {
    MeshAxis a = req.dims[d];
    if (a == MeshAxis::kNone || s.dims[d] == a) continue;
    s.dims[d] = a;
    steps.push_back({ReshardStep::kSlice, a, static_cast<int>(d), s});
  }
  return steps;
}

}  // namespace pcc
