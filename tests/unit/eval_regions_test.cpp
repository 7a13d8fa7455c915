// The evaluator runs region nodes: If's taken branch, Loop and Scan once per
// iteration. Numbers checked by hand.
#include <gtest/gtest.h>

#include "compiler/eval/evaluator.h"
#include "ir_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

Tensor flag(bool b) {
  Tensor t = Tensor::zeros(DType::kBool, {});
  t.setInt(0, b);
  return t;
}

TEST(EvalRegions, IfRunsTheTakenBranch) {
  auto g = parseOrFail(
      "graph @main(%c: bool[], %x: f32[3]) -> (%y: f32[3]) {\n"
      "  %y = If(%c, %x) : f32[3] {\n"
      "    graph @then(%a: f32[3]) -> (%t: f32[3]) {\n"
      "      %t = Relu(%a) : f32[3]\n"
      "      return %t\n"
      "    }\n"
      "    graph @else(%a: f32[3], %k: f32[] const dense<f32[]: 2>) -> (%e: f32[3]) {\n"
      "      %e = Mul(%a, %k) : f32[3]\n"
      "      return %e\n"
      "    }\n"
      "  }\n"
      "  return %y\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  Tensor x = f32({3}, {-1, 0.5f, 2});
  auto t = evaluateGraph(*g, {flag(true), x});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(floatsOf((*t)[0]), (std::vector<float>{0, 0.5f, 2}));
  auto e = evaluateGraph(*g, {flag(false), x});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(floatsOf((*e)[0]), (std::vector<float>{-2, 1, 4}));
}

TEST(EvalRegions, LoopCarriesValuesAndStacksScanOutputs) {
  // v += w three times; the scan output records v before each step, and the
  // iteration number is added to a second carried value.
  auto g = parseOrFail(
      "graph @main(%m: i64[] const dense<i64[]: 3>, %v0: f32[2], %w: f32[2]) -> (%v: f32[2], %n: i64[], %s: f32[3,2]) {\n"
      "  %n0 = Identity(%m) : i64[]\n"
      "  %v, %n, %s = Loop(%m, _, %v0, %n0, %w) {captures = 1} : f32[2], i64[], f32[3,2] {\n"
      "    graph @body(%i: i64[], %cond: bool[], %acc: f32[2], %cnt: i64[], %w: f32[2]) -> (%cond: bool[], %next: f32[2], %c2: i64[], %acc: f32[2]) {\n"
      "      %next = Add(%acc, %w) : f32[2]\n"
      "      %c2 = Add(%cnt, %i) : i64[]\n"
      "      return %cond, %next, %c2, %acc\n"
      "    }\n"
      "  }\n"
      "  return %v, %n, %s\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto out = evaluateGraph(*g, {f32({2}, {1, 2}), f32({2}, {10, 20})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{31, 62}));
  EXPECT_EQ((*out)[1].getInt(0), 3 + 0 + 1 + 2);
  EXPECT_EQ(floatsOf((*out)[2]), (std::vector<float>{1, 2, 11, 22, 21, 42}));
}

TEST(EvalRegions, LoopStopsWhenTheBodySaysSo) {
  // while (v < 10) v *= 2, with no trip count: 1 -> 2 -> 4 -> 8 -> 16.
  auto g = parseOrFail(
      "graph @main(%go: bool[], %v0: f32[]) -> (%v: f32[]) {\n"
      "  %v = Loop(_, %go, %v0) : f32[] {\n"
      "    graph @body(%i: i64[], %cond: bool[], %a: f32[], %two: f32[] const dense<f32[]: 2>, %ten: f32[] const dense<f32[]: 10>) -> (%more: bool[], %b: f32[]) {\n"
      "      %b = Mul(%a, %two) : f32[]\n"
      "      %more = Less(%b, %ten) : bool[]\n"
      "      return %more, %b\n"
      "    }\n"
      "  }\n"
      "  return %v\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  auto out = evaluateGraph(*g, {flag(true), f32({}, {1})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{16}));
  // A false condition runs no iteration.
  out = evaluateGraph(*g, {flag(false), f32({}, {1})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{1}));
}

TEST(EvalRegions, ScanSlicesAlongItsAxesAndDirections) {
  // A running sum over the columns of %xs, right to left; the scan output is
  // stacked along axis 1, reversed back to column order.
  auto g = parseOrFail(
      "graph @main(%s0: f32[2], %xs: f32[2,3]) -> (%s: f32[2], %ys: f32[2,3]) {\n"
      "  %s, %ys = Scan(%s0, %xs) {num_scan_inputs = 1, scan_input_axes = [1], scan_input_directions = [1],"
      " scan_output_axes = [1], scan_output_directions = [1]} : f32[2], f32[2,3] {\n"
      "    graph @body(%st: f32[2], %x: f32[2]) -> (%sum: f32[2], %sum: f32[2]) {\n"
      "      %sum = Add(%st, %x) : f32[2]\n"
      "      return %sum, %sum\n"
      "    }\n"
      "  }\n"
      "  return %s, %ys\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  // xs = [[1, 2, 3], [10, 20, 30]]; from the right: col 2, then 1, then 0.
  auto out = evaluateGraph(*g, {f32({2}, {0, 0}), f32({2, 3}, {1, 2, 3, 10, 20, 30})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{6, 60}));
  // Partial sums in iteration order: [3,30], [5,50], [6,60]; reversed: columns 0..2 = 6, 5, 3.
  EXPECT_EQ(floatsOf((*out)[1]), (std::vector<float>{6, 5, 3, 60, 50, 30}));
}

}  // namespace
}  // namespace pcc
