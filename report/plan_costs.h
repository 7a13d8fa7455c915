// The compiler's per-instruction estimates of a plan, as JSON
// (pcc-report --format costs): what a profile of a run (pcc-run
// --profile-json) is set against.
#pragma once

#include <string>

#include "runtime/plan.pb.h"

namespace pcc {

/// \returns {"device", "ranks": [{"rank", "estimated_seconds", "instructions":
/// [{"index", "kind", "op", "node", "estimated_seconds"}]}]}: every
/// instruction of every rank program (FREE ones included, at 0), indexed like
/// RankProgram.instructions; "estimated_seconds" of a rank is the sum of its
/// instructions'. Plans made before the estimates were recorded give 0s.
std::string planCostsJson(const plan::Plan& p);

}  // namespace pcc
