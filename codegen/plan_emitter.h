// From local graphs to a plan bundle: one RankProgram per rank (buffers,
// weights, instructions, input/output bindings), plus the reference program.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"
#include "runtime/plan.pb.h"
#include "runtime/plan_io.h"

namespace pcc {

// The partitioner's results, read by emitPlan (passes/partition/partitioner.h);
// declared only, so that code generation does not include the partitioner.
struct Partition;
struct RankGraph;
class KernelTable;

/// A plan in memory with the weight files it still has to write.
struct EmittedPlan {
  plan::Plan plan;
  /// Weight file name (relative to the bundle) -> writer; owned here.
  std::map<std::string, std::unique_ptr<WeightFileWriter>> weights;
  /// Other files of the bundle (name relative to it -> bytes): the generated
  /// kernels under kernels/ (codegen/kernel_build.h).
  std::map<std::string, std::string> files;
};

/// Builds the plan for `ranks` (lowered from `partitioned`) and the reference
/// program from `reference` (the unpartitioned, unoptimized graph). With
/// `kernels`, each Fused node of the rank programs that describeFused accepts
/// becomes a LAUNCH of its entry in `kernels` (buildKernels then fills the
/// plan's kernel table); the others stay their bodies and are recorded as
/// fallbacks. The reference program never launches generated kernels.
/// \returns the plan, or an internal error when a node cannot be expressed.
/// With `generation` (a plan that generates tokens, docs/generation.md), the
/// partition's state inputs and outputs are no model inputs and outputs: each
/// rank binds its pieces as RankProgram.states, and Plan.generation is a copy
/// of `*generation`.
StatusOr<EmittedPlan> emitPlan(const Graph& reference, const Graph& partitioned, const Partition& partition,
                               const std::vector<RankGraph>& ranks, const std::string& modelPath,
                               KernelTable* kernels = nullptr, const plan::Generation* generation = nullptr);

/// Emits the prefill program of a generation plan (docs/generation.md#prefill)
/// into `out` (its inputs, outputs, groups and rank programs; the roles are
/// the caller's): `ranks` lowered from `partitioned` on the mesh of `into`,
/// each rank's weights added to the decode program's weight file of that rank
/// (`into.weights`), where a piece the decode program already holds is not
/// stored again (out.extra_weight_bytes counts the rest); generated kernels
/// go to `kernels`, the table the decode programs used.
Status emitPrefill(const Graph& partitioned, const Partition& partition, const std::vector<RankGraph>& ranks,
                   KernelTable* kernels, EmittedPlan& into, plan::Prefill& out);

/// Writes `p` as a bundle directory `dir` (weight files, streamed from their
/// sources; plan.pb with their checksums; report.json). `progress` (optional)
/// is told how far the weight files have come.
Status writeEmittedPlan(const std::string& dir, const EmittedPlan& p, const WriteProgress& progress = {});

}  // namespace pcc
