// PassManager: an ordered pipeline of passes.
#pragma once

#include <memory>
#include <vector>

#include "passes/pass.h"

namespace pcc {

class PassManager {
 public:
  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  size_t size() const { return passes_.size(); }

  /// Runs every pass in order. After each pass, verifies the graph when
  /// ctx.verifyEach (a failure there is an internal error naming the pass) and
  /// prints it to ctx.log when ctx.printAfter names the pass.
  /// \returns true if any pass changed the graph, or the first error, prefixed
  /// with the failing pass's name.
  StatusOr<bool> run(Graph& g, PassContext& ctx);

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

}  // namespace pcc
