// The pass interface. A pass rewrites a Graph in place and says whether it
// changed anything; the PassManager runs passes in order and checks the IR.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>

#include "compiler/ir/ir.h"

namespace pcc {

/// What a pass run may consult besides the graph.
struct PassContext {
  /// Run the verifier after every pass (tests and debug runs).
  bool verifyEach = true;
  /// Print the IR after the pass with this name (flag name, e.g. "cse") to `log`.
  std::string printAfter;
  /// Where printAfter and passes' diagnostics go; nullptr: nowhere.
  std::ostream* log = nullptr;
  std::map<std::string, int64_t> stats;  ///< pattern counts by name (report.json "fusion.patterns")
};

class Pass {
 public:
  virtual ~Pass() = default;
  /// \returns the flag name of the pass, e.g. "fold-constants".
  virtual std::string_view name() const = 0;
  /// Rewrites `g`. \returns true if the graph changed, or an error.
  virtual StatusOr<bool> run(Graph& g, PassContext& ctx) = 0;
};

}  // namespace pcc
