// Import of If, Loop and Scan: folded and unrolled by default where static
// (checked by hand and against the region nodes that keepControlFlow imports,
// run by the evaluator), kept as region nodes when their condition or trip
// count is computed at run time, refused with one clear line when an output
// would have no static type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "compiler/eval/evaluator.h"
#include "compiler/ir/regions.h"
#include "compiler/ir/verifier.h"
#include "ir_test_util.h"
#include "onnx_test_util.h"
#include "tests/unit/prerequisite.h"

namespace pcc {
namespace {

using namespace pcc::testing;

/// A body or branch under construction.
struct Body {
  onnx::GraphProto* g;
  Body& input(const std::string& name, DType dt, const std::vector<Dim>& dims) {
    declare(g->add_input(), name, dt, dims);
    return *this;
  }
  Body& output(const std::string& name, DType dt = DType::kUndefined, const std::vector<Dim>& dims = {}) {
    declare(g->add_output(), name, dt, dims, !dims.empty());
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& ins, const std::vector<std::string>& outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    for (const auto& s : ins) n->add_input(s);
    for (const auto& s : outs) n->add_output(s);
    return *n;
  }
};

Body graphAttr(onnx::NodeProto& n, const std::string& name) {
  auto* a = newAttr(n, name, onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return Body{a->mutable_g()};
}

Tensor flag(bool b) {
  Tensor t = Tensor::zeros(DType::kBool, {});
  t.setInt(0, b);
  return t;
}

/// If(c) then Relu(x) (x captured by name) else x * 2.
ModelBuilder ifModel() {
  ModelBuilder b(17);
  b.input("c", DType::kBool, {}).input("x", DType::kF32, {3}).output("y", DType::kF32);
  b.init("two", Tensor::scalarF32(2));
  auto& n = b.node("If", {"c"}, {"y"}, "if");
  graphAttr(n, "then_branch").output("t").node("Relu", {"x"}, {"t"});
  graphAttr(n, "else_branch").output("e").node("Mul", {"x", "two"}, {"e"});
  return b;
}

TEST(OnnxControl, IfOnAConstantConditionBecomesTheBranch) {
  for (bool c : {true, false}) {
    ModelBuilder b = ifModel();
    ImportOptions o;
    o.inputValues["c"] = flag(c);
    PCC_IMPORT_OK(g, b, o);
    ASSERT_TRUE(verifyGraph(*g).ok());
    EXPECT_TRUE(nodesOf(*g, OpKind::If).empty());
    EXPECT_EQ(nodesOf(*g, c ? OpKind::Relu : OpKind::Mul).size(), 1u);
    auto out = evaluateGraph(*g, {f32({3}, {-1, 0.5f, 2})});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(floatsOf((*out)[0]), c ? (std::vector<float>{0, 0.5f, 2}) : (std::vector<float>{-2, 1, 4}));
  }
}

TEST(OnnxControl, IfOnARunTimeConditionIsKeptAsARegion) {
  ModelBuilder b = ifModel();
  for (bool keepAll : {false, true}) {
    ImportOptions o;
    o.keepControlFlow = keepAll;
    PCC_IMPORT_OK(g, b, o);
    ASSERT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
    auto ifs = nodesOf(*g, OpKind::If);
    ASSERT_EQ(ifs.size(), 1u);
    EXPECT_EQ(g->numNodes(), 1u);
    // x is captured (a parameter of both branches); the constant 2 is copied in.
    EXPECT_EQ(ifs[0]->inputs().size(), 2u);
    EXPECT_EQ(ifs[0]->input(1)->name(), "x");
    EXPECT_EQ(ifs[0]->body(1)->constants().size(), 1u);
    for (bool c : {true, false}) {
      auto out = evaluateGraph(*g, {flag(c), f32({3}, {-1, 0.5f, 2})});
      ASSERT_TRUE(out.ok()) << out.status().message();
      EXPECT_EQ(floatsOf((*out)[0]), c ? (std::vector<float>{0, 0.5f, 2}) : (std::vector<float>{-2, 1, 4}));
    }
  }
}

TEST(OnnxControl, IfOnARunTimeConditionWithBranchesOfDifferentTypesIsRefused) {
  ModelBuilder b(17);
  b.input("c", DType::kBool, {}).input("x", DType::kF32, {3}).output("y", DType::kF32);
  b.init("axes", Tensor::fromVector<int64_t>(DType::kI64, {1}, {0}));
  auto& n = b.node("If", {"c"}, {"y"}, "if");
  graphAttr(n, "then_branch").output("t").node("Relu", {"x"}, {"t"});
  graphAttr(n, "else_branch").output("e").node("Unsqueeze", {"x", "axes"}, {"e"});
  auto r = importModel(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().exitCode(), 2);
  EXPECT_NE(r.status().message().find("model.onnx: node 'if' (If, opset 17): unsupported: the condition is computed at "
                                      "run time and output 0 has no static type: the then branch gives f32[3], the "
                                      "else branch f32[1,3]"),
            std::string::npos)
      << r.status().message();
}

/// Loop(M, cond, v): v = v + x (x captured) each iteration, stops early when
/// the iteration number reaches `stopAt` (cond_out = iter + 1 < stopAt);
/// scan output: v before the step.
ModelBuilder loopModel(bool withStop) {
  ModelBuilder b(17);
  b.input("m", DType::kI64, {}).input("cond", DType::kBool, {}).input("v0", DType::kF32, {2}).input("x", DType::kF32, {2});
  b.output("v", DType::kF32).output("scan", DType::kF32);
  b.init("one", Tensor::scalarI64(1)).init("stop", Tensor::scalarI64(2));
  auto& n = b.node("Loop", {"m", "cond", "v0"}, {"v", "scan"}, "loop");
  Body body = graphAttr(n, "body");
  body.input("i", DType::kI64, {}).input("c_in", DType::kBool, {}).input("acc", DType::kF32, {2});
  body.output("c_out").output("next").output("prev");
  body.node("Add", {"acc", "x"}, {"next"});
  body.node("Identity", {"acc"}, {"prev"});
  if (withStop) {
    body.node("Add", {"i", "one"}, {"i1"});
    body.node("Less", {"i1", "stop"}, {"c_out"});
  } else {
    body.node("Identity", {"c_in"}, {"c_out"});
  }
  return b;
}

TEST(OnnxControl, LoopWithAConstantTripCountIsUnrolled) {
  for (bool withStop : {false, true}) {
    ModelBuilder b = loopModel(withStop);
    ImportOptions o;
    o.inputValues["m"] = Tensor::scalarI64(3);
    o.inputValues["cond"] = flag(true);
    PCC_IMPORT_OK(g, b, o);
    ASSERT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
    EXPECT_TRUE(nodesOf(*g, OpKind::Loop).empty());
    int iterations = withStop ? 2 : 3;
    EXPECT_EQ(nodesOf(*g, OpKind::Add).size(), static_cast<size_t>(iterations));
    auto out = evaluateGraph(*g, {f32({2}, {1, 2}), f32({2}, {10, 20})});
    ASSERT_TRUE(out.ok()) << out.status().message();
    if (withStop) {
      EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{21, 42}));
      EXPECT_EQ(floatsOf((*out)[1]), (std::vector<float>{1, 2, 11, 22}));
    } else {
      EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{31, 62}));
      EXPECT_EQ(floatsOf((*out)[1]), (std::vector<float>{1, 2, 11, 22, 21, 42}));
    }

    // The same model kept as a Loop region node evaluates to the same numbers.
    ImportOptions keep = o;
    keep.keepControlFlow = true;
    PCC_IMPORT_OK(r, b, keep);
    ASSERT_TRUE(verifyGraph(*r).ok()) << verifyGraph(*r).message();
    if (!withStop) {  // with the early stop the scan output is shorter than M: the region refuses at run time
      ASSERT_EQ(nodesOf(*r, OpKind::Loop).size(), 1u);
      auto rout = evaluateGraph(*r, {f32({2}, {1, 2}), f32({2}, {10, 20})});
      ASSERT_TRUE(rout.ok()) << rout.status().message();
      EXPECT_EQ(floatsOf((*rout)[0]), floatsOf((*out)[0]));
      EXPECT_EQ(floatsOf((*rout)[1]), floatsOf((*out)[1]));
    }
  }
}

TEST(OnnxControl, LoopWithARunTimeTripCountAndScanOutputsIsRefused) {
  ModelBuilder b = loopModel(false);
  auto r = importModel(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().exitCode(), 2);
  EXPECT_NE(r.status().message().find("node 'loop' (Loop, opset 17): unsupported: dynamic trip count: the trip count M "
                                      "is computed at run time: the Loop runs at run time and its scan outputs have no "
                                      "static shape"),
            std::string::npos)
      << r.status().message();
}

TEST(OnnxControl, LoopWithoutScanOutputsKeptWithARunTimeTripCount) {
  ModelBuilder b(17);
  b.input("m", DType::kI64, {}).input("v0", DType::kF32, {2}).output("v", DType::kF32);
  auto& n = b.node("Loop", {"m", "", "v0"}, {"v"}, "loop");
  Body body = graphAttr(n, "body");
  body.input("i", DType::kI64, {}).input("c_in", DType::kBool, {}).input("acc", DType::kF32, {2});
  body.output("c_in").output("next");
  body.node("Add", {"acc", "acc"}, {"next"});
  for (bool keepAll : {false, true}) {
    ImportOptions o;
    o.keepControlFlow = keepAll;
    PCC_IMPORT_OK(g, b, o);
    ASSERT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
    ASSERT_EQ(nodesOf(*g, OpKind::Loop).size(), 1u);
    for (int64_t m : {-2, 0, 1, 4}) {  // a negative trip count runs no iteration
      auto out = evaluateGraph(*g, {Tensor::scalarI64(m), f32({2}, {1, 3})});
      ASSERT_TRUE(out.ok()) << out.status().message();
      float f = static_cast<float>(1 << std::max<int64_t>(m, 0));
      EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{f, 3 * f}));
    }
  }
}

/// Loop(no M, cond true, v): v = 2 v while the sum of v stays below 100: the
/// condition the body computes depends on the data.
ModelBuilder doublingLoop(bool withScan) {
  ModelBuilder b(17);
  b.input("v0", DType::kF32, {2}).output("v", DType::kF32);
  if (withScan) b.output("vs", DType::kF32);
  b.init("go", flag(true)).init("two", Tensor::scalarF32(2)).init("limit", Tensor::scalarF32(100));
  std::vector<std::string> outs{"v"};
  if (withScan) outs.push_back("vs");
  auto& n = b.node("Loop", {"", "go", "v0"}, outs, "loop");
  Body body = graphAttr(n, "body");
  body.input("i", DType::kI64, {}).input("c_in", DType::kBool, {}).input("acc", DType::kF32, {2});
  body.output("c_out").output("next");
  if (withScan) body.output("next_copy");
  body.node("Mul", {"acc", "two"}, {"next"});
  body.node("ReduceSum", {"next"}, {"sum"});
  body.node("Less", {"sum", "limit"}, {"c_out"});
  if (withScan) body.node("Identity", {"next"}, {"next_copy"});
  return b;
}

TEST(OnnxControl, LoopWithADataDependentConditionIsKeptAsARegion) {
  ModelBuilder b = doublingLoop(false);
  PCC_IMPORT_OK(g, b, ImportOptions{});
  ASSERT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
  // The abandoned unrolling leaves no node behind: the Loop is the graph.
  ASSERT_EQ(nodesOf(*g, OpKind::Loop).size(), 1u);
  EXPECT_EQ(g->numNodes(), 1u);
  auto out = evaluateGraph(*g, {f32({2}, {1, 3})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{32, 96}));  // sums 8, 16, 32, 64, 128: stops at 128

  ModelBuilder withScan = doublingLoop(true);
  auto r = importModel(withScan);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().exitCode(), 2);
  EXPECT_NE(r.status().message().find("node 'loop' (Loop, opset 17): unsupported: dynamic trip count: the condition the "
                                      "body computes is known only at run time: the Loop runs at run time and its scan "
                                      "outputs have no static shape"),
            std::string::npos)
      << r.status().message();
}

TEST(OnnxControl, LoopTooLargeToUnrollIsKeptAsARegion) {
  ModelBuilder b = loopModel(false);
  ImportOptions o;
  o.inputValues["m"] = Tensor::scalarI64(int64_t{1} << 17);
  o.inputValues["cond"] = flag(true);
  PCC_IMPORT_OK(g, b, o);
  ASSERT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
  ASSERT_EQ(nodesOf(*g, OpKind::Loop).size(), 1u);
  EXPECT_EQ(g->numNodes(), 1u);
  // It runs exactly M times: its scan output keeps its static shape.
  EXPECT_EQ(g->outputs()[1]->type().str(), "f32[131072,2]");
  auto out = evaluateGraph(*g, {f32({2}, {0, 1}), f32({2}, {1, 2})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{131072, 262145}));
}

TEST(OnnxControl, Scan8UnrollingIsBounded) {
  // Scan-8 is always unrolled: past the limit it is refused.
  ModelBuilder b(8);
  b.input("s0", DType::kF32, {1, 1}).input("xs", DType::kF32, {1, 70000, 1}).output("s", DType::kF32);
  auto& n = b.node("Scan", {"", "s0", "xs"}, {"s"}, "scan");
  setInt(n, "num_scan_inputs", 1);
  Body body = graphAttr(n, "body");
  body.input("acc", DType::kF32, {1}).input("x", DType::kF32, {1}).output("next");
  body.node("Add", {"acc", "x"}, {"next"});
  auto r = importModel(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("unsupported: unrolling stops at 65536 nodes or iterations"), std::string::npos)
      << r.status().message();
}

/// Scan (opset 9+): running sum over axis `axis` of xs [2,3], optionally in
/// reverse; the scan output stacks the partial sums along axis 0.
ModelBuilder scanModel(int64_t opset, bool reverse) {
  ModelBuilder b(opset);
  b.input("s0", DType::kF32, {2}).input("xs", DType::kF32, {2, 3}).output("s", DType::kF32).output("ys", DType::kF32);
  auto& n = b.node("Scan", {"s0", "xs"}, {"s", "ys"}, "scan");
  setInt(n, "num_scan_inputs", 1);
  setInts(n, "scan_input_axes", {1});
  if (reverse) setInts(n, "scan_input_directions", {1});
  Body body = graphAttr(n, "body");
  body.input("st", DType::kF32, {2}).input("x", DType::kF32, {2});
  body.output("sum").output("sum_out");
  body.node("Add", {"st", "x"}, {"sum"});
  body.node("Identity", {"sum"}, {"sum_out"});
  return b;
}

TEST(OnnxControl, ScanIsUnrolledAndMatchesTheRegionNode) {
  for (bool reverse : {false, true}) {
    ModelBuilder b = scanModel(16, reverse);
    PCC_IMPORT_OK(g, b);
    ASSERT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
    EXPECT_TRUE(nodesOf(*g, OpKind::Scan).empty());
    std::vector<Tensor> in{f32({2}, {0, 100}), f32({2, 3}, {1, 2, 3, 10, 20, 30})};
    auto out = evaluateGraph(*g, in);
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{6, 160}));
    EXPECT_EQ(floatsOf((*out)[1]), reverse ? (std::vector<float>{3, 130, 5, 150, 6, 160})
                                           : (std::vector<float>{1, 110, 3, 130, 6, 160}));
    ImportOptions keep;
    keep.keepControlFlow = true;
    PCC_IMPORT_OK(r, b, keep);
    ASSERT_TRUE(verifyGraph(*r).ok()) << verifyGraph(*r).message();
    ASSERT_EQ(nodesOf(*r, OpKind::Scan).size(), 1u);
    auto rout = evaluateGraph(*r, in);
    ASSERT_TRUE(rout.ok()) << rout.status().message();
    EXPECT_EQ(floatsOf((*rout)[0]), floatsOf((*out)[0]));
    EXPECT_EQ(floatsOf((*rout)[1]), floatsOf((*out)[1]));
  }
}

TEST(OnnxControl, Scan8ScansEachBatchEntry) {
  // Scan-8: batch dim 0 everywhere, the sequence along dim 1, no sequence_lens.
  ModelBuilder b(8);
  b.input("s0", DType::kF32, {2, 1}).input("xs", DType::kF32, {2, 3, 1}).output("s", DType::kF32).output("ys", DType::kF32);
  auto& n = b.node("Scan", {"", "s0", "xs"}, {"s", "ys"}, "scan");
  setInt(n, "num_scan_inputs", 1);
  Body body = graphAttr(n, "body");
  body.input("st", DType::kF32, {1}).input("x", DType::kF32, {1});
  body.output("sum").output("sum_out");
  body.node("Add", {"st", "x"}, {"sum"});
  body.node("Identity", {"sum"}, {"sum_out"});
  PCC_IMPORT_OK(g, b);
  ASSERT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
  auto out = evaluateGraph(*g, {f32({2, 1}, {0, 100}), f32({2, 3, 1}, {1, 2, 3, 10, 20, 30})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(floatsOf((*out)[0]), (std::vector<float>{6, 160}));
  EXPECT_EQ((*out)[1].shape(), (Dims{2, 3, 1}));
  EXPECT_EQ(floatsOf((*out)[1]), (std::vector<float>{1, 3, 6, 110, 130, 160}));
}

TEST(OnnxControl, BodiesAreCheckedForUnsupportedOps) {
  ModelBuilder b = ifModel();
  b.model().mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g()->mutable_node(0)->set_op_type("NoSuchOp");
  auto r = importModel(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unsupported operators (opset 17): NoSuchOp"), std::string::npos)
      << r.status().message();
}

TEST(OnnxControl, ABodyReadingAnUndefinedNameIsInvalid) {
  ModelBuilder b = ifModel();
  b.model().mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g()->mutable_node(0)->set_input(0, "nowhere");
  ImportOptions o;
  o.inputValues["c"] = flag(true);
  auto r = importModel(b, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(r.status().message().find("reads 'nowhere', which is not defined in it or an enclosing graph"),
            std::string::npos)
      << r.status().message();
}

/// The ONNX backend test data of If, Loop and Scan against the outputs the
/// data set holds (computed by the ONNX reference implementation), through
/// region nodes run by the evaluator (keepControlFlow) or, where a body's
/// shapes depend on the iteration number (test_loop11 slices by it) or for
/// Scan-8, unrolled. `frozen` names the inputs given as constants.
struct DataCase {
  const char* name;
  std::vector<std::string> frozen;
  bool keep;
  OpKind region;  // the region op the kept graph holds
};

TEST(OnnxControl, RegionsMatchTheOnnxTestData) {
  const std::string root = "/usr/share/libonnx-testdata/data/node/";
  if (!std::filesystem::exists(root + "test_if")) PCC_SKIP_UNLESS_REQUIRED("no ONNX test data at " << root);
  const DataCase cases[] = {
      {"test_if", {}, true, OpKind::If},
      {"test_loop11", {"trip_count", "cond"}, false, OpKind::Loop},
      {"test_scan9_sum", {}, true, OpKind::Scan},
      {"test_scan9_sum", {}, false, OpKind::Scan},
      {"test_scan_sum", {}, false, OpKind::Scan},
      {"test_range_float_type_positive_delta_expanded", {"start", "limit", "delta"}, true, OpKind::Loop},
      {"test_range_int32_type_negative_delta_expanded", {"start", "limit", "delta"}, false, OpKind::Loop},
  };
  for (const DataCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::string dir = root + c.name;
    onnx::ModelProto m;
    std::ifstream f(dir + "/model.onnx", std::ios::binary);
    ASSERT_TRUE(m.ParseFromIstream(&f));
    std::vector<Tensor> inputs;
    ImportOptions o;
    o.keepControlFlow = c.keep;
    for (int i = 0; i < m.graph().input_size(); ++i) {
      auto t = readTensorFile(strCat(dir, "/test_data_set_0/input_", i, ".pb"));
      ASSERT_TRUE(t.ok()) << t.status().message();
      const std::string& name = m.graph().input(i).name();
      if (std::find(c.frozen.begin(), c.frozen.end(), name) != c.frozen.end()) o.inputValues[name] = *t;
      else inputs.push_back(*t);
    }
    auto g = importOnnxModel(m, dir, c.name, o);
    ASSERT_TRUE(g.ok()) << g.status().message();
    ASSERT_TRUE(verifyGraph(**g).ok()) << verifyGraph(**g).message();
    EXPECT_EQ(nodesOf(**g, c.region).size(), c.keep ? 1u : 0u);
    auto out = evaluateGraph(**g, inputs);
    ASSERT_TRUE(out.ok()) << out.status().message();
    for (size_t k = 0; k < out->size(); ++k) {
      auto want = readTensorFile(strCat(dir, "/test_data_set_0/output_", k, ".pb"));
      ASSERT_TRUE(want.ok()) << want.status().message();
      Diff d = compareTensors((*out)[k], *want, 1e-5, 1e-6);
      EXPECT_TRUE(d.ok) << "output " << k << ": " << d.where;
    }
  }
}

}  // namespace
}  // namespace pcc
