// The memory planner on small hand-built programs, and the executor running
// what it plans.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "codegen/memory_plan.h"
#include "compiler/ir/ir.h"
#include "runtime/ops/registry.h"
#include "runtime/executor.h"
#include "runtime/launcher.h"
#include "runtime_test_util.h"

namespace pcc {
namespace {

using namespace testing_rt;

const plan::Buffer& buf(const plan::RankProgram& p, int id) { return p.buffers(id); }

bool elementwise(std::string_view op) {
  static const std::set<std::string_view> ops = {"Relu", "Tanh", "Add", "Cast", "Neg"};
  return ops.count(op) > 0;
}

TEST(MemoryPlan, DisjointLifetimesShareAnOffset) {
  plan::RankProgram p;
  ProgBuilder b(&p, 0);
  int x = b.buffer("x", f32({16})), a = b.buffer("a", f32({16})), c = b.buffer("c", f32({16}));
  int d = b.buffer("d", f32({16})), y = b.buffer("y", f32({16}));
  b.input(x, 0);
  b.kernel("Softmax", {x}, {a});  // a: [0, 1]
  b.kernel("Softmax", {a}, {c});  // c: [1, 2]
  b.kernel("Softmax", {c}, {d});  // d: [2, 3]
  b.kernel("Softmax", {d}, {y});
  b.output(y, 0);
  auto st = planMemory(&p, nullptr);
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(buf(p, x).arena_offset(), -1);  // model input and output stay outside
  EXPECT_EQ(buf(p, y).arena_offset(), -1);
  EXPECT_EQ(buf(p, a).arena_offset(), buf(p, d).arena_offset());
  EXPECT_NE(buf(p, a).arena_offset(), buf(p, c).arena_offset());
  EXPECT_EQ(p.arena_bytes(), 128u);
  EXPECT_EQ(p.naive_arena_bytes(), 192u);
  EXPECT_EQ(st->inPlace, 0);
}

TEST(MemoryPlan, LargestFirstAtTheLowestFreeOffsetWith64ByteAlignment) {
  // A (256 B) lives [0,1], B (4 B) [1,2], C (128 B) [2,3]. Largest first: A at
  // 0; C does not meet A, so also 0; B meets both, so after A: 256. B's 4
  // bytes take 64.
  plan::RankProgram p;
  ProgBuilder b(&p, 0);
  int x = b.buffer("x", f32({64})), A = b.buffer("A", f32({64})), B = b.buffer("B", f32({1}));
  int C = b.buffer("C", f32({32})), y = b.buffer("y", f32({32}));
  b.input(x, 0);
  b.kernel("Softmax", {x}, {A});
  b.kernel("ReduceSum", {A}, {B});
  b.kernel("Expand", {B}, {C});
  b.kernel("Softmax", {C}, {y});
  b.output(y, 0);
  auto st = planMemory(&p, nullptr);
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(buf(p, A).arena_offset(), 0);
  EXPECT_EQ(buf(p, C).arena_offset(), 0);
  EXPECT_EQ(buf(p, B).arena_offset(), 256);
  EXPECT_EQ(p.arena_bytes(), 320u);
  EXPECT_EQ(p.naive_arena_bytes(), 256u + 64u + 128u);
}

TEST(MemoryPlan, ElementwiseChainRunsInPlaceWhereEachInputDies) {
  plan::RankProgram p;
  ProgBuilder b(&p, 0);
  int x = b.buffer("x", f32({4, 8})), a = b.buffer("a", f32({4, 8})), r = b.buffer("r", f32({4, 8}));
  int t = b.buffer("t", f32({4, 8})), y = b.buffer("y", f32({4, 8}));
  b.input(x, 0);
  b.kernel("Softmax", {x}, {a});
  b.kernel("Relu", {a}, {r});  // a dies here
  b.kernel("Tanh", {r}, {t});  // r dies here
  b.kernel("Softmax", {t}, {y});
  b.output(y, 0);
  auto st = planMemory(&p, elementwise);
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(buf(p, r).in_place_of(), a);
  EXPECT_EQ(buf(p, t).in_place_of(), r);
  EXPECT_EQ(buf(p, a).in_place_of(), -1);
  EXPECT_EQ(buf(p, r).arena_offset(), buf(p, a).arena_offset());
  EXPECT_EQ(buf(p, t).arena_offset(), buf(p, a).arena_offset());
  EXPECT_EQ(p.arena_bytes(), 128u);
  EXPECT_EQ(st->inPlace, 2);
}

TEST(MemoryPlan, NoInPlaceWhereTheInputLivesOnTheTypesDifferOrTheOpIsNotElementwise) {
  plan::RankProgram p;
  ProgBuilder b(&p, 0);
  int x = b.buffer("x", f32({4, 8})), s = b.buffer("s", f32({8}));
  int a = b.buffer("a", f32({4, 8})), r = b.buffer("r", f32({4, 8})), sum = b.buffer("sum", f32({4, 8}));
  int i = b.buffer("i", {DType::kI32, {4, 8}}), small = b.buffer("small", f32({8}));
  int big = b.buffer("big", f32({4, 8})), sm = b.buffer("sm", f32({4, 8}));
  int y = b.buffer("y", {DType::kI32, {4, 8}}), z = b.buffer("z", f32({4, 8}));
  b.input(x, 0);
  b.input(s, 1);
  b.kernel("Softmax", {x}, {a});
  b.kernel("Relu", {a}, {r});          // a is read again below: not in place
  b.kernel("Add", {a, r}, {sum});      // a and r die; input 0 (a) has the type: in place
  b.kernel("Cast", {sum}, {i});        // f32 -> i32: same size, other dtype: not in place
  b.kernel("Neg", {s}, {small});
  b.kernel("Add", {small, x}, {big});  // input 0 is [8], the output [4,8]: not in place
  b.kernel("Softmax", {big}, {sm});    // not elementwise: not in place
  b.kernel("Neg", {i}, {y});
  b.kernel("Neg", {sm}, {z});
  b.output(y, 0);
  b.output(z, 1);
  auto st = planMemory(&p, elementwise);
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(buf(p, r).in_place_of(), -1);
  EXPECT_EQ(buf(p, sum).in_place_of(), a);
  EXPECT_EQ(buf(p, i).in_place_of(), -1);
  EXPECT_EQ(buf(p, big).in_place_of(), -1);
  EXPECT_EQ(buf(p, sm).in_place_of(), -1);
  EXPECT_EQ(st->inPlace, 1);
  // Live together, apart in memory.
  EXPECT_NE(buf(p, r).arena_offset(), buf(p, a).arena_offset());
  EXPECT_NE(buf(p, i).arena_offset(), buf(p, sum).arena_offset());
}

// A gather in flight still reads its input until the first reader of its
// output: an independent kernel between them must not take the input's bytes
// (it would wait for the gather), where with the reader right after the
// gather it may. The all-reduce's input dies at it (it works on a copy).
TEST(MemoryPlan, AnInFlightGathersInputLivesUntilItsOutputIsRead) {
  for (bool between : {true, false}) {
    plan::RankProgram p;
    ProgBuilder b(&p, 0);
    // Sizes so that first fit puts a at 0 and, when a is dead by then, k over it.
    int x = b.buffer("x", f32({64})), a = b.buffer("a", f32({64})), g = b.buffer("g", f32({32}));
    int k = b.buffer("k", f32({64})), y = b.buffer("y", f32({32})), z = b.buffer("z", f32({64}));
    b.input(x, 0);
    b.kernel("Softmax", {x}, {a});
    b.collective(plan::Instruction::ALL_GATHER, a, g, 0);
    b.free({a});
    if (between) b.kernel("Softmax", {x}, {k});  // runs while the gather is in flight
    b.kernel("Softmax", {g}, {y});               // the first reader: waits for it
    if (!between) b.kernel("Softmax", {x}, {k});
    b.kernel("Neg", {k}, {z});
    b.output(y, 0);
    b.output(z, 1);
    auto st = planMemory(&p, nullptr);
    ASSERT_TRUE(st.ok()) << st.status().message();
    if (between)
      EXPECT_NE(buf(p, k).arena_offset(), buf(p, a).arena_offset());
    else
      EXPECT_EQ(buf(p, k).arena_offset(), buf(p, a).arena_offset());  // a is dead by then: its bytes are reused
  }
  plan::RankProgram p;
  ProgBuilder b(&p, 0);
  int x = b.buffer("x", f32({64})), a = b.buffer("a", f32({64})), r = b.buffer("r", f32({64}));
  int k = b.buffer("k", f32({64})), y = b.buffer("y", f32({64})), z = b.buffer("z", f32({64}));
  b.input(x, 0);
  b.kernel("Softmax", {x}, {a});
  b.collective(plan::Instruction::ALL_REDUCE, a, r, 0);
  b.free({a});
  b.kernel("Softmax", {x}, {k});
  b.kernel("Softmax", {r}, {y});
  b.kernel("Neg", {k}, {z});
  b.output(y, 0);
  b.output(z, 1);
  ASSERT_TRUE(planMemory(&p, nullptr).ok());
  EXPECT_EQ(buf(p, k).arena_offset(), buf(p, a).arena_offset());
}

// Every collective that reads its input while in flight (an all-gather, a
// reduce-scatter, an all-to-all) keeps that input's bytes until its output's
// first reader: none of the kernels the scheduler runs meanwhile (three here,
// each writing a buffer of the input's size) may be placed over it. With the
// reader right after the collective, the input is dead by the time those
// kernels run, and the arena is smaller.
TEST(MemoryPlan, EveryInFlightCollectivesInputLivesUntilItsOutputIsRead) {
  struct Kind {
    plan::Instruction::Kind kind;
    const char* name;
    int64_t out;  // elements of the output, for an input of 64 over a group of 2
  };
  for (Kind c : {Kind{plan::Instruction::ALL_GATHER, "all-gather", 128},
                 Kind{plan::Instruction::REDUCE_SCATTER, "reduce-scatter", 32},
                 Kind{plan::Instruction::ALL_TO_ALL, "all-to-all", 64}}) {
    int64_t arena[2] = {0, 0};  // by `between`
    for (bool between : {true, false}) {
      SCOPED_TRACE(strCat(c.name, between ? ", kernels in flight" : ", reader right after"));
      plan::RankProgram p;
      ProgBuilder b(&p, 0);
      int x = b.buffer("x", f32({64})), a = b.buffer("a", f32({64})), g = b.buffer("g", f32({c.out}));
      int k1 = b.buffer("k1", f32({64})), k2 = b.buffer("k2", f32({64})), k3 = b.buffer("k3", f32({64}));
      int y = b.buffer("y", f32({c.out})), z = b.buffer("z", f32({64}));
      b.input(x, 0);
      b.kernel("Softmax", {x}, {a});
      b.collective(c.kind, a, g, 0);
      b.free({a});
      auto independent = [&] {
        b.kernel("Softmax", {x}, {k1});
        b.kernel("Neg", {k1}, {k2});
        b.kernel("Softmax", {k2}, {k3});
        b.free({k1, k2});
      };
      if (between) independent();
      b.kernel("Softmax", {g}, {y});  // the first reader: waits for the collective
      if (!between) independent();
      b.kernel("Neg", {k3}, {z});
      b.output(y, 0);
      b.output(z, 1);
      auto st = planMemory(&p, nullptr);
      ASSERT_TRUE(st.ok()) << st.status().message();
      const int64_t a0 = buf(p, a).arena_offset(), a1 = a0 + 64 * 4;
      for (int k : {k1, k2, k3}) {
        const int64_t k0 = buf(p, k).arena_offset(), kEnd = k0 + 64 * 4;
        if (between) {
          EXPECT_FALSE(k0 < a1 && a0 < kEnd) << buf(p, k).name() << " at " << k0 << " over the input at " << a0;
        }
      }
      arena[between] = p.arena_bytes();
    }
    // Read at once, the input's bytes are free for the kernels after the reader.
    EXPECT_LT(arena[false], arena[true]);
  }
}

TEST(MemoryPlan, ABufferReadBeforeItIsWrittenIsAnError) {
  plan::RankProgram p;
  ProgBuilder b(&p, 0);
  int a = b.buffer("a", f32({4})), y = b.buffer("y", f32({4}));
  b.kernel("Relu", {a}, {y}, "relu");
  b.output(y, 0);
  auto st = planMemory(&p, elementwise);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("reads buffer 0 'a' before it is written"), std::string::npos)
      << st.status().message();
}

/// x[4,8] -> MatMul w -> Relu -> Tanh -> Add(., x) -> MatMul w -> y, on one rank.
plan::Plan chainPlan(WeightFileWriter& w0, WeightFileWriter& wr, const Tensor& w) {
  plan::Plan p;
  addIo(&p, true, "x", f32({4, 8}));
  addIo(&p, false, "y", f32({4, 8}));
  for (ProgBuilder b : {ProgBuilder(p.add_ranks(), 0, &w0), ProgBuilder(p.mutable_reference(), 0, &wr)}) {
    int x = b.buffer("x", f32({4, 8})), wb = b.weight("w", w);
    int a = b.buffer("a", f32({4, 8})), r = b.buffer("r", f32({4, 8})), t = b.buffer("t", f32({4, 8}));
    int s = b.buffer("s", f32({4, 8})), y = b.buffer("y", f32({4, 8}));
    b.input(x, 0);
    b.kernel("MatMul", {x, wb}, {a});
    b.kernel("Relu", {a}, {r});
    b.kernel("Tanh", {r}, {t});
    b.kernel("Add", {t, x}, {s});
    b.kernel("MatMul", {s, wb}, {y});
    b.output(y, 0);
  }
  p.mutable_reference()->set_weight_file("reference.bin");
  return p;
}

TEST(MemoryPlan, PlannedProgramComputesWhatTheUnplannedOneDoes) {
  Tensor w = pattern(f32({8, 8}), 0.3f), x = pattern(f32({4, 8}), 0.2f, 0.1f);
  WeightFileWriter w0, wr, v0, vr;
  plan::Plan unplanned = chainPlan(w0, wr, w);
  plan::Plan planned = chainPlan(v0, vr, w);
  auto st = planMemory(planned.mutable_ranks(0), elementwise);
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->inPlace, 3);                 // Relu, Tanh and Add write over their input 0
  EXPECT_EQ(planned.ranks(0).arena_bytes(), 128u);  // one [4,8] block for a, r, t, s
  LoadedPlan a = writeAndLoad("unplanned", unplanned, {{"rank0.bin", &w0}, {"reference.bin", &wr}});
  LoadedPlan b = writeAndLoad("planned", planned, {{"rank0.bin", &v0}, {"reference.bin", &vr}});
  for (bool reference : {false, true}) {
    RunOptions o;
    o.referenceKernels = reference;
    o.iters = 2;  // the second run finds the arena holding the first run's values
    auto ra = runPlan(a, {x}, o), rb = runPlan(b, {x}, o);
    ASSERT_TRUE(ra.ok() && rb.ok()) << (ra.ok() ? rb.status().message() : ra.status().message());
    ASSERT_EQ(ra->outputs[0].type(), rb->outputs[0].type());
    EXPECT_EQ(std::memcmp(ra->outputs[0].raw(), rb->outputs[0].raw(), ra->outputs[0].nbytes()), 0)
        << (reference ? "reference" : "oneDNN") << " kernels: planned " << rb->outputs[0].str() << " vs "
        << ra->outputs[0].str();
  }
}

TEST(MemoryPlan, ReshapeTakesItsInputsBytesAndRunsAsNothing) {
  auto build = [](plan::Plan& p, WeightFileWriter& w0, WeightFileWriter& wr) {
    addIo(&p, true, "x", f32({4, 8}));
    addIo(&p, false, "y", f32({8, 4}));
    Tensor shape = Tensor::fromVector<int64_t>(DType::kI64, {2}, {8, 4});
    for (ProgBuilder b : {ProgBuilder(p.add_ranks(), 0, &w0), ProgBuilder(p.mutable_reference(), 0, &wr)}) {
      int x = b.buffer("x", f32({4, 8})), s = b.weight("shape", shape);
      int a = b.buffer("a", f32({4, 8})), r = b.buffer("r", f32({8, 4})), y = b.buffer("y", f32({8, 4}));
      b.input(x, 0);
      b.kernel("Softmax", {x}, {a});
      b.kernel("Reshape", {a, s}, {r});
      b.kernel("Softmax", {r}, {y});
      b.output(y, 0);
    }
    p.mutable_reference()->set_weight_file("reference.bin");
  };
  plan::Plan unplanned, planned;
  WeightFileWriter w0, wr, v0, vr;
  build(unplanned, w0, wr);
  build(planned, v0, vr);
  auto st = planMemory(planned.mutable_ranks(0), [](std::string_view op) { return op == "Reshape"; });
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(planned.ranks(0).buffers(3).in_place_of(), 2);  // r over a: same dtype and element count
  EXPECT_EQ(planned.ranks(0).arena_bytes(), 128u);
  Tensor x = pattern(f32({4, 8}), 0.4f);
  LoadedPlan a = writeAndLoad("reshape_unplanned", unplanned, {{"rank0.bin", &w0}, {"reference.bin", &wr}});
  LoadedPlan b = writeAndLoad("reshape_planned", planned, {{"rank0.bin", &v0}, {"reference.bin", &vr}});
  auto ra = runPlan(a, {x}, RunOptions()), rb = runPlan(b, {x}, RunOptions());
  ASSERT_TRUE(ra.ok() && rb.ok()) << (ra.ok() ? rb.status().message() : ra.status().message());
  EXPECT_EQ(std::memcmp(ra->outputs[0].raw(), rb->outputs[0].raw(), ra->outputs[0].nbytes()), 0);
}

TEST(MemoryPlan, ExecutorRefusesAnOverlapThePlanDoesNotDeclare) {
  Tensor w = pattern(f32({8, 8}), 0.3f);
  WeightFileWriter w0, wr;
  plan::Plan p = chainPlan(w0, wr, w);
  ASSERT_TRUE(planMemory(p.mutable_ranks(0), elementwise).ok());
  p.mutable_ranks(0)->mutable_buffers(4)->set_in_place_of(-1);  // t over r, now undeclared
  LoadedPlan lp = writeAndLoad("undeclared", p, {{"rank0.bin", &w0}, {"reference.bin", &wr}});
  auto e = Executor::create(lp, lp.plan.ranks(0), true);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(e.status().message().find("overlaps input buffer 3 in the arena, and the plan does not make it in place"),
            std::string::npos)
      << e.status().message();

  p.mutable_ranks(0)->mutable_buffers(4)->set_in_place_of(3);
  p.mutable_ranks(0)->set_arena_bytes(64);  // a [4,8] f32 buffer needs 128
  // The plan reader refuses it before any executor sees it.
  auto f = loadPlanBundle(writeBundle("smallarena", p, {{"rank0.bin", &w0}, {"reference.bin", &wr}}));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(f.status().message().find("lie outside the 64-byte arena"),
            std::string::npos)
      << f.status().message();

  p.mutable_ranks(0)->set_arena_bytes(uint64_t{1} << 62);  // corrupt: never allocated
  LoadedPlan huge = writeAndLoad("hugearena", p, {{"rank0.bin", &w0}, {"reference.bin", &wr}});
  auto g = Executor::create(huge, huge.plan.ranks(0), true);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(g.status().message().find("exceeds the 512 bytes its buffers take"), std::string::npos)
      << g.status().message();
}

}  // namespace
}  // namespace pcc

namespace pcc {
namespace {

// The in-place rule comes from the op table: every Elementwise op, and the
// Injective ops whose kernel says its output is input 0's bytes; nothing else.
TEST(MemoryPlanInPlaceRule, ComesFromTheOpTableKinds) {
  std::set<std::string_view> views;
  for (int i = 0; i < static_cast<int>(OpKind::kNumOps); ++i) {
    OpKind k = static_cast<OpKind>(i);
    std::string_view name = opName(k);
    const KernelEntry* s = referenceKernel(k);
    bool view = s && s->viewOfInput0;
    if (view) {
      views.insert(name);
      EXPECT_TRUE(opClass(k) == OpClass::kInjective || opClass(k) == OpClass::kElementwise)
          << name << " says its output is its input's bytes but the op table says " << opClassName(opClass(k));
    }
    bool want = isElementwiseOp(k) || (opClass(k) == OpClass::kInjective && view);
    EXPECT_EQ(opMayRunInPlace(name), want) << name;
  }
  EXPECT_EQ(views, (std::set<std::string_view>{"Flatten", "Identity", "Reshape", "Squeeze", "Unsqueeze"}));
  EXPECT_TRUE(opMayRunInPlace("Relu"));
  EXPECT_TRUE(opMayRunInPlace("Cast"));  // the planner still requires equal dtypes and sizes
  EXPECT_TRUE(opMayRunInPlace("Reshape"));
  EXPECT_FALSE(opMayRunInPlace("Transpose"));  // Injective, but it moves elements
  EXPECT_FALSE(opMayRunInPlace("MatMul"));
  EXPECT_FALSE(opMayRunInPlace("NoSuchOp"));
}

// What viewOfInput0 promises, checked on the kernels: output 0 holds input 0's
// bytes, in order.
TEST(MemoryPlanInPlaceRule, ViewOpsOutputTheirInputsBytes) {
  Tensor x = Tensor::fromVector<float>(DType::kF32, {2, 1, 3}, {1, 2, 3, 4, 5, 6});
  Tensor shape = Tensor::fromVector<int64_t>(DType::kI64, {2}, {3, 2});
  Tensor axes = Tensor::fromVector<int64_t>(DType::kI64, {1}, {1});
  Tensor axes0 = Tensor::fromVector<int64_t>(DType::kI64, {1}, {0});
  std::vector<std::pair<std::string, std::vector<const Tensor*>>> calls = {
      {"Reshape", {&x, &shape}}, {"Flatten", {&x}}, {"Squeeze", {&x, &axes}},
      {"Unsqueeze", {&x, &axes0}}, {"Identity", {&x}}};
  for (const auto& [op, in] : calls) {
    ASSERT_TRUE(referenceKernel(*opFromName(op))->viewOfInput0) << op;
    auto r = runOp(op, in, {});
    ASSERT_TRUE(r.ok()) << op << ": " << r.status().message();
    ASSERT_EQ((*r)[0].nbytes(), x.nbytes()) << op;
    EXPECT_EQ(std::memcmp((*r)[0].raw(), x.raw(), x.nbytes()), 0) << op;
  }
}

}  // namespace
}  // namespace pcc
