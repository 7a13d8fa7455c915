// Code generation of region nodes (If, Loop, Scan): a REGION instruction that
// carries its bodies as programs of their own (plan::Body, schema version 4).
#pragma once

#include "compiler/ir/ir.h"
#include "runtime/plan.pb.h"
#include "runtime/plan_io.h"

namespace pcc {

/// Adds constant `v` to `weights` as weight `name`: a block of a larger tensor
/// (Value::constantBlock, a rank's piece of a weight) as a block, streamed when
/// the file is written; nothing is read or copied here.
/// \returns its plan::Weight (crc32 filled in when the file is written).
plan::Weight addWeight(WeightFileWriter& weights, const std::string& name, const Value& v);

/// Makes `ins` (already holding `n`'s operands and attributes) a REGION
/// instruction with one plan::Body per body of region node `n`, nested
/// regions included. Body constants become weights of `prog`, written to
/// `weights`; body buffers are numbered per body and stay outside the arena.
/// \returns ok, or an internal error for a body node the plan cannot hold (a
/// collective).
Status emitRegion(const Node& n, WeightFileWriter& weights, plan::RankProgram* prog, plan::Instruction* ins);

}  // namespace pcc
