// PassManager and the pass registry.
#include <sstream>

#include "passes_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

/// A pass that breaks the graph (gives a node a wrong type), to show the
/// verifier runs after each pass.
class BreakTypesPass : public Pass {
 public:
  std::string_view name() const override { return "break-types"; }
  StatusOr<bool> run(Graph& g, PassContext&) override {
    g.nodes()[0]->output()->setType({DType::kF32, {99}});
    return true;
  }
};

class FailingPass : public Pass {
 public:
  std::string_view name() const override { return "fail"; }
  StatusOr<bool> run(Graph&, PassContext&) override { return unsupported("cannot do this"); }
};

std::unique_ptr<Graph> sample() {
  return parseOrFail(
      "graph @m(%x: f32[2], %c: f32[2] const dense<f32[2]: 1, 2>) -> (%y: f32[2]) {\n"
      "  %a = Relu(%x) : f32[2]\n"
      "  %b = Relu(%x) : f32[2]\n"
      "  %k = Add(%c, %c) : f32[2]\n"
      "  %s = Add(%a, %b) : f32[2]\n"
      "  %y = Add(%s, %k) : f32[2]\n"
      "  %dead = Tanh(%y) : f32[2]\n"
      "  return %y\n"
      "}\n");
}

TEST(PassesManager, RegistryKnowsEveryPass) {
  EXPECT_EQ(passNames(), (std::vector<std::string>{"canonicalize", "cse", "dce", "fold-batchnorm", "fold-constants",
                                                  "fuse", "recognize", "unit-transposes"}));
  for (const std::string& n : passNames()) {
    std::unique_ptr<Pass> p = createPass(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(p->name(), n);
  }
  EXPECT_EQ(createPass("no-such-pass"), nullptr);
}

TEST(PassesManager, RunsInOrderPrintsAfterANamedPassAndReportsChange) {
  auto g = sample();
  ASSERT_NE(g, nullptr);
  auto before = g->clone();
  PassManager pm;
  pm.add(createPass("fold-constants"));
  pm.add(createPass("cse"));
  pm.add(createPass("dce"));
  std::ostringstream log;
  PassContext ctx;
  ctx.printAfter = "cse";
  ctx.log = &log;
  auto changed = pm.run(*g, ctx);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(opNames(*g), (std::vector<std::string>{"Relu", "Add", "Add"}));
  // Printed once, after cse and before dce removed the Tanh.
  EXPECT_EQ(log.str().find("// -----// IR after cse //----- //\ngraph @m("), 0u) << log.str();
  EXPECT_NE(log.str().find("Tanh"), std::string::npos);
  EXPECT_EQ(log.str().find("IR after dce"), std::string::npos);
  expectNumericallyEquivalent(*before, *g);

  auto again = pm.run(*g, ctx);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

TEST(PassesManager, VerifierAfterEachPassBlamesThePass) {
  auto g = sample();
  ASSERT_NE(g, nullptr);
  PassManager pm;
  pm.add(std::make_unique<BreakTypesPass>());
  pm.add(createPass("dce"));
  PassContext ctx;
  auto r = pm.run(*g, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().message().rfind("IR invalid after pass 'break-types': verifier: ", 0), 0u) << r.status().message();

  // Without verifyEach the broken graph goes through unchecked.
  auto g2 = sample();
  ASSERT_NE(g2, nullptr);
  PassContext noVerify;
  noVerify.verifyEach = false;
  PassManager pm2;
  pm2.add(std::make_unique<BreakTypesPass>());
  EXPECT_TRUE(pm2.run(*g2, noVerify).ok());
}

TEST(PassesManager, PassErrorsCarryThePassName) {
  auto g = sample();
  ASSERT_NE(g, nullptr);
  PassManager pm;
  pm.add(createPass("dce"));
  pm.add(std::make_unique<FailingPass>());
  PassContext ctx;
  auto r = pm.run(*g, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(r.status().message(), "pass 'fail': cannot do this");
}

}  // namespace
}  // namespace pcc
