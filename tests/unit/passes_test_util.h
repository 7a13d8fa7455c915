// Helpers of the pass tests: run one pass, and check numeric equivalence of a
// graph before and after (STYLE.md #2).
#pragma once

#include <gtest/gtest.h>

#include "compiler/eval/evaluator.h"
#include "ir_test_util.h"
#include "passes/pass_manager.h"
#include "passes/registry.h"

namespace pcc::testing {

/// Runs pass `name` on `g` with the verifier on. \returns whether it changed g
/// (fails the test on error).
inline bool runPass(Graph& g, std::string_view name) {
  PassManager pm;
  std::unique_ptr<Pass> p = createPass(name);
  EXPECT_NE(p, nullptr) << name;
  if (!p) return false;
  pm.add(std::move(p));
  PassContext ctx;
  auto changed = pm.run(g, ctx);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  return changed.ok() && *changed;
}

/// Evaluates both graphs on the same random inputs (several seeds) and
/// expects every output to match within the tolerances.
inline void expectNumericallyEquivalent(const Graph& before, const Graph& after, double rtol = 1e-6,
                                        double atol = 1e-6) {
  ASSERT_EQ(before.inputs().size(), after.inputs().size());
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<Tensor> inputs = randomInputs(before, seed);
    auto want = evaluateGraph(before, inputs);
    auto got = evaluateGraph(after, inputs);
    ASSERT_TRUE(want.ok()) << want.status().message();
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      Diff d = compareTensors((*got)[i], (*want)[i], rtol, atol);
      EXPECT_TRUE(d.ok) << "output " << i << ", seed " << seed << ": " << d.where;
    }
  }
}

/// \returns the op names of g's nodes, in order.
inline std::vector<std::string> opNames(const Graph& g) {
  std::vector<std::string> names;
  for (const Node* n : g.nodes()) names.emplace_back(n->opName());
  return names;
}

}  // namespace pcc::testing
