// The partition report, computed from a plan: what each rank runs, holds and
// sends. pcc writes it as report.json; pcc-report renders it from plan.pb.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/plan.pb.h"

namespace pcc {

struct RankStats {
  int rank = 0;
  std::vector<int> meshCoord;              ///< (pp, dp, tp)
  std::map<std::string, int> opCounts;     ///< kernel op -> instructions
  int64_t flops = 0;                       ///< 2·MACs for MatMul/Gemm/Conv, one per element otherwise
  int64_t weightBytes = 0;
  int64_t peakActivationBytes = 0;         ///< largest live set of non-weight buffers
  // Memory plan (codegen/memory_plan.h): the planned arena and, for
  // comparison, the sum of its buffers' sizes.
  int64_t arenaBytes = 0;
  int64_t naiveArenaBytes = 0;
  std::map<std::string, int64_t> commBytes;  ///< collective -> payload bytes (per rank)
  std::map<std::string, int> commCount;
};

struct PlanStats {
  std::vector<RankStats> ranks;
  RankStats reference;  ///< the unpartitioned program
};

/// \returns per-rank statistics of `p`.
PlanStats computePlanStats(const plan::Plan& p);
/// \returns the report as JSON (mesh, notes, pairs, per-rank stats).
std::string planReportJson(const plan::Plan& p);
/// \returns the report as text, for people.
std::string planReportText(const plan::Plan& p);

}  // namespace pcc
