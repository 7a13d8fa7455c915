// REGION instructions in plans built by hand: the executor runs If and Loop
// bodies through the backend's kernels, a Loop that never stops ends at the
// run's time limit, and validatePlan refuses malformed regions with one line.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>

#include "runtime/executor.h"
#include "runtime/plan_convert.h"
#include "runtime/plan_io.h"
#include "runtime_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing_rt;

TensorType boolScalar() { return {DType::kBool, {}}; }
TensorType i64Scalar() { return {DType::kI64, {}}; }

/// Adds a body to `ins`: buffers of `types` (ids 0..n-1), params and results by id.
plan::Body* addBody(plan::Instruction* ins, const std::string& name, const std::vector<TensorType>& types,
                    std::vector<int> params, std::vector<int> results) {
  plan::Body* b = ins->add_bodies();
  b->set_name(name);
  for (size_t i = 0; i < types.size(); ++i) {
    plan::Buffer* buf = b->add_buffers();
    buf->set_id(static_cast<int>(i));
    buf->set_name(name + std::to_string(i));
    *buf->mutable_desc() = toDesc(types[i]);
    buf->set_weight(-1);
    buf->set_arena_offset(-1);
    buf->set_in_place_of(-1);
  }
  for (int p : params) b->add_params(p);
  for (int r : results) b->add_results(r);
  return b;
}

plan::Instruction* addKernel(plan::Body* b, const std::string& op, std::vector<int> in, std::vector<int> out) {
  plan::Instruction* k = b->add_instructions();
  k->set_kind(plan::Instruction::KERNEL);
  k->set_op(op);
  k->set_node(op);
  for (int x : in) k->add_inputs(x);
  for (int x : out) k->add_outputs(x);
  return k;
}

/// y = If(c, x): then Relu(x), else Neg(x).
plan::Plan ifPlan() {
  plan::Plan p;
  addIo(&p, true, "c", boolScalar());
  addIo(&p, true, "x", f32({3}));
  addIo(&p, false, "y", f32({3}));
  ProgBuilder b(p.add_ranks(), 0);
  int c = b.buffer("c", boolScalar()), x = b.buffer("x", f32({3})), y = b.buffer("y", f32({3}));
  b.input(c, 0);
  b.input(x, 1);
  plan::Instruction* r = b.kernel("If", {c, x}, {y}, "branch");
  r->set_kind(plan::Instruction::REGION);
  addKernel(addBody(r, "then", {f32({3}), f32({3})}, {0}, {1}), "Relu", {0}, {1});
  addKernel(addBody(r, "else", {f32({3}), f32({3})}, {0}, {1}), "Neg", {0}, {1});
  b.output(y, 0);
  return p;
}

/// v = Loop(M, no cond, v0): v = v + v each iteration (body condition: its input).
plan::Plan loopPlan() {
  plan::Plan p;
  addIo(&p, true, "m", i64Scalar());
  addIo(&p, true, "v0", f32({2}));
  addIo(&p, false, "v", f32({2}));
  ProgBuilder b(p.add_ranks(), 0);
  int m = b.buffer("m", i64Scalar()), v0 = b.buffer("v0", f32({2})), v = b.buffer("v", f32({2}));
  b.input(m, 0);
  b.input(v0, 1);
  plan::Instruction* r = b.kernel("Loop", {m, -1, v0}, {v}, "loop");
  r->set_kind(plan::Instruction::REGION);
  plan::Body* body = addBody(r, "body", {i64Scalar(), boolScalar(), f32({2}), f32({2})}, {0, 1, 2}, {1, 3});
  addKernel(body, "Add", {2, 2}, {3});
  b.output(v, 0);
  return p;
}

Tensor flagTensor(bool v) {
  Tensor t = Tensor::zeros(boolScalar());
  t.setInt(0, v);
  return t;
}

StatusOr<Tensor> runOnce(const LoadedPlan& lp, const std::vector<Tensor>& inputs, int timeLimit = 0) {
  ASSIGN_OR_RETURN(auto exec, Executor::create(lp, lp.plan.ranks(0), true, /*fastKernels=*/true));
  exec->setTimeLimit(timeLimit);
  std::vector<OutputPiece> pieces;
  RETURN_IF_ERROR(exec->run(inputs, nullptr, &pieces));
  return pieces.at(0).tensor;
}

TEST(RuntimeRegions, IfRunsTheTakenBranch) {
  LoadedPlan lp = writeAndLoad("region_if", ifPlan());
  Tensor x = Tensor::fromVector<float>(DType::kF32, {3}, {-1, 0.5f, 2});
  auto t = runOnce(lp, {flagTensor(true), x});
  ASSERT_TRUE(t.ok()) << t.status().message();
  expectClose(*t, Tensor::fromVector<float>(DType::kF32, {3}, {0, 0.5f, 2}));
  auto e = runOnce(lp, {flagTensor(false), x});
  ASSERT_TRUE(e.ok()) << e.status().message();
  expectClose(*e, Tensor::fromVector<float>(DType::kF32, {3}, {1, -0.5f, -2}));
}

TEST(RuntimeRegions, LoopRunsMTimes) {
  LoadedPlan lp = writeAndLoad("region_loop", loopPlan());
  for (int64_t m : {-1, 0, 1, 5}) {
    auto t = runOnce(lp, {Tensor::scalarI64(m), Tensor::fromVector<float>(DType::kF32, {2}, {1, -3})});
    ASSERT_TRUE(t.ok()) << t.status().message();
    float f = static_cast<float>(1 << std::max<int64_t>(m, 0));
    expectClose(*t, Tensor::fromVector<float>(DType::kF32, {2}, {f, -3 * f}));
  }
}

TEST(RuntimeRegions, ALoopPastTheTimeLimitStopsWithOneLine) {
  LoadedPlan lp = writeAndLoad("region_loop_long", loopPlan());
  auto start = std::chrono::steady_clock::now();
  auto t = runOnce(lp, {Tensor::scalarI64(int64_t{1} << 62), Tensor::fromVector<float>(DType::kF32, {2}, {0, 0})}, 1);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kEnvironment);
  EXPECT_NE(t.status().message().find("rank 0: node 'loop' (Loop): still looping after "), std::string::npos)
      << t.status().message();
  EXPECT_NE(t.status().message().find("iterations when the run's time limit of 1 s (--timeout) passed; its trip count "
                                      "is 4611686018427387904"),
            std::string::npos)
      << t.status().message();
  EXPECT_LT(seconds, 30);
}

TEST(RuntimeRegions, BodyTypesAreCheckedWhenPrepared) {
  plan::Plan p = ifPlan();
  // The else branch gives f32[3] from an f32[2] buffer: Neg's kernel refuses it.
  *p.mutable_ranks(0)->mutable_instructions(0)->mutable_bodies(1)->mutable_buffers(1)->mutable_desc() = toDesc(f32({2}));
  LoadedPlan lp = writeAndLoad("region_types", p);
  auto e = Executor::create(lp, lp.plan.ranks(0), true, true);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("rank 0: node 'branch' (If): body 'else'"), std::string::npos)
      << e.status().message();
}

struct Bad {
  const char* what;
  std::function<void(plan::Instruction*)> edit;
  const char* message;
};

TEST(RuntimeRegions, MalformedRegionsAreRefusedAtLoad) {
  const std::vector<Bad> cases = {
      {"one body for If", [](plan::Instruction* r) { r->mutable_bodies()->RemoveLast(); },
       "instruction #0 (node 'branch'): If has 1 bodies, expected 2"},
      {"an op that is not a region", [](plan::Instruction* r) { r->set_op("Relu"); },
       "REGION op 'Relu' is not If, Loop or Scan"},
      {"a parameter too many", [](plan::Instruction* r) { r->mutable_bodies(0)->add_params(1); },
       "body 'then' has 2 parameters and 1 results, the If passes 1 and takes 1"},
      {"a body buffer in the arena",
       [](plan::Instruction* r) { r->mutable_bodies(0)->mutable_buffers(1)->set_arena_offset(0); },
       "body 'then': buffer 1 'then1': a body buffer is placed in the arena or in place"},
      {"a collective in a body",
       [](plan::Instruction* r) { r->mutable_bodies(0)->mutable_instructions(0)->set_kind(plan::Instruction::ALL_REDUCE); },
       "body 'then': instruction #0 (node 'Relu'): a body holds KERNEL, FREE and REGION instructions only, not "
       "ALL_REDUCE"},
      {"a result naming no buffer", [](plan::Instruction* r) { r->mutable_bodies(1)->set_results(0, 9); },
       "body 'else': result names no buffer (9)"},
      {"a body writing its parameter",
       [](plan::Instruction* r) { r->mutable_bodies(0)->mutable_instructions(0)->set_outputs(0, 0); },
       "writes buffer 0, which holds a parameter or a weight"},
      {"a weight index out of range",
       [](plan::Instruction* r) { r->mutable_bodies(0)->mutable_buffers(0)->set_weight(3); },
       "body 'then': buffer 0 'then0': weight index 3 is out of range (0 weights)"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.what);
    plan::Plan p = withMesh(ifPlan());
    p.set_schema_version(kPlanSchemaVersion);
    c.edit(p.mutable_ranks(0)->mutable_instructions(0));
    Status st = validatePlan(p);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  }
  // Regions nest at most 32 deep.
  plan::Plan p = withMesh(ifPlan());
  plan::Instruction* r = p.mutable_ranks(0)->mutable_instructions(0);
  for (int depth = 0; depth < 40; ++depth) {
    plan::Body* then = r->mutable_bodies(0);
    plan::Instruction* inner = then->add_instructions();
    inner->set_kind(plan::Instruction::REGION);
    inner->set_op("If");
    inner->set_node("nested");
    inner->add_inputs(0);  // the enclosing body's buffer 0 as the condition
    for (const char* n : {"then", "else"}) {
      plan::Body* b = inner->add_bodies();
      b->set_name(n);
      plan::Buffer* c = b->add_buffers();
      c->set_id(0);
      *c->mutable_desc() = toDesc(boolScalar());
      c->set_weight(-1);
      c->set_arena_offset(-1);
      c->set_in_place_of(-1);
    }
    r = inner;
  }
  Status st = validatePlan(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("regions nest deeper than 32 levels"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace pcc
