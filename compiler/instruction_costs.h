// Per-instruction estimates: the cost model's time of every instruction of
// every rank program, stored in the plan (Instruction.estimated_seconds) so
// that a profile of a run can be set against what the compiler predicted
// (pcc-report --format costs, tools/bench_calibration.py).
#pragma once

#include <vector>

#include "passes/partition/cost_model.h"
#include "passes/partition/mesh.h"
#include "passes/partition/partitioner.h"
#include "runtime/plan.pb.h"
#include "runtime/support/status.h"

namespace pcc {

/// Sets Instruction.estimated_seconds of every instruction of `plan`'s rank
/// programs from `ranks` (the rank graphs the plan was emitted from, fusion
/// done), costed by `cm` as the mesh search costs them: CostModel::nodeTime
/// for kernels and regions, collectiveTime over the group for collectives.
/// \returns ok, or an internal error when a program's instructions do not
/// follow its graph's nodes.
Status recordInstructionEstimates(const std::vector<RankGraph>& ranks, const Mesh& mesh, const CostModel& cm,
                                  plan::Plan& plan);

}  // namespace pcc
