#include "passes/pass_manager.h"

#include "compiler/ir/text.h"
#include "compiler/ir/verifier.h"

namespace pcc {

StatusOr<bool> PassManager::run(Graph& g, PassContext& ctx) {
  bool changed = false;
  for (auto& pass : passes_) {
    auto r = pass->run(g, ctx);
    if (!r.ok()) return r.status().withContext(strCat("pass '", pass->name(), "'"));
    changed |= *r;
    if (ctx.verifyEach) {
      Status s = verifyGraph(g);
      // The input was valid (or the previous pass would have been blamed), so
      // an invalid graph now is a bug in this pass.
      if (!s.ok()) return internalError("IR invalid after pass '", pass->name(), "': ", s.message());
    }
    if (ctx.log && ctx.printAfter == pass->name())
      *ctx.log << "// -----// IR after " << pass->name() << " //----- //\n" << printGraph(g);
  }
  return changed;
}

}  // namespace pcc
