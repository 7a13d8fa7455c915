// The compiler pipeline: import -> passes -> partition -> lower -> emit.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/plan_emitter.h"
#include "compiler/ir/ir.h"
#include "compiler/options.h"
#include "passes/partition/partitioner.h"
#include "passes/partition/search.h"

namespace pcc {

/// Everything one compilation produced, for the tools and tests to inspect.
struct Compilation {
  std::unique_ptr<Graph> reference;    ///< as imported: the oracle
  std::unique_ptr<Graph> partitioned;  ///< optimized, with sharding annotations
  Partition partition;
  /// The mesh search: the chosen mesh's estimate first, then the alternatives.
  SearchResult search;
  std::vector<RankGraph> ranks;
  EmittedPlan plan;
};

/// Runs the whole pipeline on opts.modelPath. When the model's batch is
/// symbolic and nothing gives it (--batch, --shape), the batch is chosen
/// (compiler/batch_search.h): each candidate is imported and planned up to
/// the mesh search, and the chosen one is compiled on; the plan records how
/// (Plan.batch). Progress goes to `log` (may be null).
/// \returns the compilation, or the first error (bad model: invalid input).
StatusOr<Compilation> compileModel(const CompileOptions& opts, std::ostream* log);

/// Runs the pipeline after import on `reference` (the imported graph, which
/// becomes Compilation::reference); opts.modelPath only names the model. Lets
/// a caller inspect or protect the imported weights before planning (planning
/// reads no weight bytes: docs/plan-format.md#weight-files). The batch is
/// the imported graph's: nothing is chosen.
/// \returns the compilation, or the first error.
StatusOr<Compilation> compileImported(std::unique_ptr<Graph> reference, const CompileOptions& opts,
                                      std::ostream* log);

/// \returns the names of the passes of the optimization pipeline, in order,
/// the per-rank ones last (what --print-after accepts).
std::vector<std::string> pipelinePasses();

/// \returns the annotated global graph, then every rank's program, as text.
std::string emitIr(const Compilation& c);

}  // namespace pcc
