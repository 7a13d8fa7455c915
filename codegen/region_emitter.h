// Code generation of region nodes (If, Loop, Scan): a REGION instruction that
// carries its bodies as programs of their own (plan::Body, schema version 4).
#pragma once

#include "compiler/ir/ir.h"
#include "runtime/plan.pb.h"
#include "runtime/plan_io.h"

namespace pcc {

/// Makes `ins` (already holding `n`'s operands and attributes) a REGION
/// instruction with one plan::Body per body of region node `n`, nested
/// regions included. Body constants become weights of `prog`, written to
/// `weights`; body buffers are numbered per body and stay outside the arena.
/// \returns ok, or an internal error for a body node the plan cannot hold (a
/// collective).
Status emitRegion(const Node& n, WeightFileWriter& weights, plan::RankProgram* prog, plan::Instruction* ins);

}  // namespace pcc
