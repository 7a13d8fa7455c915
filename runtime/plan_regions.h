// REGION instructions of a plan: If, Loop and Scan with their bodies (schema
// version 4, docs/plan-format.md). How a region's operands line up with its
// bodies' parameters and results, and the checks of a body that need no
// weight file (plan_io's validatePlan runs them on every REGION).
//
// Operands, as in the IR (compiler/ir/regions.h):
//   If(cond, captures...)            then/else: (captures...) -> (outputs...)
//   Loop(M, cond, v..., captures...) body: (iter, cond, v..., captures...) -> (cond, v..., scans...)
//   Scan(s..., xs..., captures...)   body: (s..., x slices..., captures...) -> (s..., y slices...)
// Loop and Scan name their captures with the int attribute `captures`
// (default 0), Scan its scan inputs with `num_scan_inputs`.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/plan.pb.h"
#include "runtime/support/status.h"

namespace pcc {

/// How deep regions may nest in a plan (a body's REGION counts one level).
inline constexpr int kMaxRegionDepth = 32;

/// The operand layout of a REGION instruction.
struct RegionLayout {
  enum class Op { kIf, kLoop, kScan };
  Op op = Op::kIf;
  int64_t captures = 0;     ///< trailing inputs passed to every body
  int64_t carried = 0;      ///< Loop: loop-carried values; Scan: states
  int64_t scanInputs = 0;   ///< Scan: num_scan_inputs
  int64_t scanOutputs = 0;  ///< Loop, Scan: results stacked over the iterations
};

/// \returns the layout of REGION instruction `ins` after checking its op, its
/// number of bodies and every body's parameter and result counts against the
/// instruction's inputs and outputs (and that only Loop's first two inputs
/// may be absent), or an invalid-input error "CTX: problem".
StatusOr<RegionLayout> regionLayout(const plan::Instruction& ins, const std::string& ctx);

/// Checks REGION instruction `ins` of `prog` (nested `depth` regions deep):
/// its layout, and each body's buffers (ids unique and non-negative, types
/// known and at most 2^48 bytes, weights in range of prog's and of the same
/// type, none in the arena or in place), parameters and results (naming its
/// buffers, parameters distinct) and instructions (KERNEL, FREE and REGION
/// only, naming its buffers; nested regions checked the same way).
/// \returns ok or an invalid-input error naming the body and buffer or instruction.
Status checkRegion(const plan::Instruction& ins, const plan::RankProgram& prog, const std::string& ctx, int depth);

}  // namespace pcc
