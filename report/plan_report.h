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
  int stage = 0;                           ///< pipeline stage
  int microbatches = 1;                    ///< runs of the program per batch
  std::map<std::string, int> opCounts;     ///< kernel op -> instructions
  int64_t flops = 0;                       ///< as the cost model counts them (runtime/schema/op_cost.h)
  int64_t weightBytes = 0;
  int64_t peakActivationBytes = 0;         ///< largest live set of non-weight, non-state buffers
  int64_t stateBytes = 0;                  ///< session state held (a generation plan's KV cache pieces)
  // Memory plan (codegen/memory_plan.h): the planned arena and, for
  // comparison, the sum of its buffers' sizes.
  int64_t arenaBytes = 0;
  int64_t naiveArenaBytes = 0;
  std::map<std::string, int64_t> commBytes;  ///< collective -> payload bytes (per rank)
  std::map<std::string, int> commCount;
  /// Each distinct collective of the program: kind ("all_reduce", ...), mesh
  /// axis of its group ("tp", "dp"; "-" for point-to-point), group size,
  /// payload bytes (its input), and how many times the program runs it.
  struct Collective {
    std::string kind, axis;
    int groupSize = 0;
    int64_t bytes = 0;
    int count = 0;
  };
  std::vector<Collective> collectives;
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

/// \returns a rank's estimated peak memory: RankEstimate.memory_bytes where the
/// compiler set it (the chosen mesh, from the planned arena), else its
/// weights plus the search's upper bound of live activations.
int64_t estimatedMemory(const plan::RankEstimate& rk);

/// \returns the one line on a precision conversion (Plan.precision): its
/// type, the nodes kept in float32, the weights' bytes and the worst error.
std::string precisionLine(const plan::PrecisionReport& r);

/// \returns `bytes` for people: "512 B", "4.0 KiB", "1.50 MiB", "2.00 GiB".
std::string humanBytes(int64_t bytes);

}  // namespace pcc
