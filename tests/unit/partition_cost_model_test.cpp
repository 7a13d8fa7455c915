// The device specs and the cost model: every shipped spec parses and is
// plausible, bad specs are refused naming the key, and the roofline and
// alpha-beta formulas give the figures worked out here by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "ir_test_util.h"
#include "passes/partition/cost_model.h"
#include "passes/partition/device_spec.h"

namespace pcc {
namespace {

using testing::addInferred;

ClusterSpec builtin(const std::string& name) {
  auto s = builtinClusterSpec(name);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : ClusterSpec{};
}

// A minimal valid spec with round numbers, edited by the error tests.
std::string specJson(const std::string& deviceExtra = "", const std::string& top = "") {
  return R"({"name": "toy", "description": "round numbers", )" + top + R"("device": {
    "memory_bytes": 1000, "reserved_bytes": 100, "memory_bandwidth": 100.0,
    "matrix_flops": {"f32": 1000.0, "f16": 4000.0}, "vector_flops": {"f32": 10.0},
    "launch_overhead_s": 0.5, "efficiency": {"matrix": 0.5, "vector": 1.0, "memory": 0.5})" +
         deviceExtra + R"(},
    "gpus_per_node": 4,
    "intra_node": {"name": "fast", "bandwidth": 100.0, "latency_s": 1.0, "efficiency": 0.5},
    "inter_node": {"name": "slow", "bandwidth": 10.0, "latency_s": 10.0, "efficiency": 1.0}})";
}

ClusterSpec toy() {
  auto s = parseClusterSpec(specJson(), "toy.json");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : ClusterSpec{};
}

void expectRefused(const std::string& json, const std::string& phrase) {
  auto s = parseClusterSpec(json, "bad.json");
  ASSERT_FALSE(s.ok()) << "accepted: " << json;
  EXPECT_NE(s.status().message().find("bad.json: "), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find(phrase), std::string::npos) << s.status().message();
}

TEST(DeviceSpec, ShippedSpecsParseAndArePlausible) {
  std::vector<std::string> names = builtinClusterSpecNames();
  EXPECT_EQ(names, (std::vector<std::string>{"a100-40g", "a100-80g", "cpu", "h100", "h200"}));
  for (const std::string& n : names) {
    SCOPED_TRACE(n);
    ClusterSpec c = builtin(n);
    EXPECT_EQ(c.name, n);
    EXPECT_GT(c.device.usableMemory(), 0);
    EXPECT_LT(c.device.usableMemory(), c.device.memoryBytes);
    // The matrix units are never slower than the vector units on f32, and a
    // node's own link is faster than the one between nodes.
    EXPECT_GE(c.device.matrixRate(DType::kF32), c.device.vectorRate(DType::kF32));
    EXPECT_GT(c.intraNode.bandwidth, c.interNode.bandwidth);
    EXPECT_LT(c.intraNode.latency, c.interNode.latency);
  }
  // Datasheet relations between the GPUs.
  ClusterSpec a40 = builtin("a100-40g"), a80 = builtin("a100-80g"), h100 = builtin("h100"), h200 = builtin("h200");
  EXPECT_EQ(a80.device.memoryBytes, 2 * a40.device.memoryBytes);
  EXPECT_GT(a80.device.memoryBandwidth, a40.device.memoryBandwidth);
  EXPECT_GT(h200.device.memoryBytes, h100.device.memoryBytes);
  EXPECT_GT(h200.device.memoryBandwidth, h100.device.memoryBandwidth);
  EXPECT_EQ(h200.device.matrixRate(DType::kBF16), h100.device.matrixRate(DType::kBF16));
  EXPECT_GT(h100.device.matrixRate(DType::kF16), 3 * a80.device.matrixRate(DType::kF16));
  EXPECT_GT(h100.device.matrixRate(DType::kF16), 10 * h100.device.matrixRate(DType::kF32));
  // A type the spec does not list takes the f32 rate; the float8 types share "f8".
  EXPECT_EQ(h100.device.matrixRate(DType::kI64), h100.device.matrixRate(DType::kF32));
  EXPECT_EQ(h100.device.matrixRate(DType::kF8E5M2), h100.device.matrixRate(DType::kF8E4M3FN));
  EXPECT_EQ(a80.device.matrixRate(DType::kF8E4M3FN), a80.device.matrixRate(DType::kF32));  // A100 has no f8
}

TEST(DeviceSpec, UnknownDeviceListsTheKnownOnes) {
  auto s = builtinClusterSpec("h900");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown device 'h900'"), std::string::npos);
  EXPECT_NE(s.status().message().find("a100-40g, a100-80g, cpu, h100, h200"), std::string::npos);
}

TEST(DeviceSpec, BadSpecsAreRefusedNamingTheKey) {
  expectRefused("{", "not valid JSON");
  expectRefused("[1]", "must be a JSON object");
  expectRefused(specJson(", \"memory_bandwith\": 5"), "device.memory_bandwith: unknown key");
  expectRefused(specJson("", "\"gpus_per_nodes\": 2, "), "gpus_per_nodes: unknown key");
  std::string noBw = specJson();
  noBw.replace(noBw.find("\"memory_bandwidth\": 100.0,"), 26, "");
  expectRefused(noBw, "device.memory_bandwidth: missing");
  std::string negative = specJson();
  negative.replace(negative.find("\"bandwidth\": 10.0"), 17, "\"bandwidth\": -1");
  expectRefused(negative, "inter_node.bandwidth: must be a number from 1 to 1e+18 (got -1)");
  std::string eff = specJson();
  eff.replace(eff.find("\"memory\": 0.5"), 13, "\"memory\": 1.5");
  expectRefused(eff, "device.efficiency.memory: must be a number from 0.001 to 1 (got 1.5)");
  std::string reserved = specJson();
  reserved.replace(reserved.find("\"reserved_bytes\": 100"), 21, "\"reserved_bytes\": 1000");
  expectRefused(reserved, "device.reserved_bytes: must be less than device.memory_bytes");
  std::string rateKey = specJson();
  rateKey.replace(rateKey.find("\"f16\": 4000.0"), 13, "\"fp16\": 4000.0");
  expectRefused(rateKey, "device.matrix_flops.fp16: unknown element type");
  std::string noF32 = specJson();
  noF32.replace(noF32.find("{\"f32\": 10.0}"), 13, "{\"f16\": 10.0}");
  expectRefused(noF32, "device.vector_flops.f32: missing");
  std::string nodes = specJson();
  nodes.replace(nodes.find("\"gpus_per_node\": 4"), 18, "\"gpus_per_node\": 0");
  expectRefused(nodes, "gpus_per_node: must be an integer from 1 to 65536 (got 0)");
  std::string text = specJson();
  text.replace(text.find("\"memory_bytes\": 1000"), 20, "\"memory_bytes\": \"1000\"");
  expectRefused(text, "device.memory_bytes: must be an integer");
}

TEST(DeviceSpec, FiguresOutsideTheirRangeAreRefusedNamingTheRange) {
  // Each once accepted: a positive but absurd figure made every estimate
  // infinite or zero (printed as null), so the ranges bound every figure.
  struct Case {
    const char* from;
    const char* to;
    const char* expect;
  };
  const Case cases[] = {
      {"\"memory_bandwidth\": 100.0", "\"memory_bandwidth\": 1e-300",
       "toy.json: device.memory_bandwidth: must be a number from 1 to 1e+18 (got 1e-300)"},
      {"\"f32\": 1000.0", "\"f32\": 1e300", "toy.json: device.matrix_flops.f32: must be a number from 1 to 1e+21"},
      {"\"launch_overhead_s\": 0.5", "\"launch_overhead_s\": 0", "device.launch_overhead_s: must be a number from 1e-12 to 3600"},
      {"\"launch_overhead_s\": 0.5", "\"launch_overhead_s\": 1e400", "toy.json: not valid JSON"},  // no inf in JSON
      {"\"matrix\": 0.5", "\"matrix\": 1e-300", "device.efficiency.matrix: must be a number from 0.001 to 1"},
      {"\"latency_s\": 1.0", "\"latency_s\": -1.0", "intra_node.latency_s: must be a number from 1e-12 to 3600 (got -1.0)"},
      {"\"memory_bytes\": 1000", "\"memory_bytes\": 9223372036854775807",
       "device.memory_bytes: must be an integer from 1 to 1125899906842624"},
  };
  for (const Case& c : cases) {
    std::string json = specJson();
    ASSERT_NE(json.find(c.from), std::string::npos) << c.from;
    json.replace(json.find(c.from), std::string(c.from).size(), c.to);
    auto s = parseClusterSpec(json, "toy.json");
    ASSERT_FALSE(s.ok()) << c.to;
    EXPECT_EQ(s.status().exitCode(), 2);
    EXPECT_NE(s.status().message().find(c.expect), std::string::npos) << s.status().message();
  }
}

TEST(DeviceSpec, LoadsAFileAndRefusesAnOversizedOne) {
  std::string path = ::testing::TempDir() + "/cluster.json";
  {
    std::ofstream(path) << specJson();
  }
  auto s = loadClusterSpec(path);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->name, "toy");
  EXPECT_EQ(s->gpusPerNode, 4);
  {
    std::ofstream f(path);
    f << specJson() << std::string(2 << 20, ' ');
  }
  auto big = loadClusterSpec(path);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("over 1 MiB"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_FALSE(loadClusterSpec(path).ok());
}

TEST(CostModel, RooflineTakesTheSlowerOfArithmeticAndMemory) {
  CostModel m(toy());
  // Matrix: 1000 flop/s x 0.5 = 500 flop/s for f32, 2000 for f16; memory 50 B/s.
  EXPECT_DOUBLE_EQ(m.computeTime({1000, 10, WorkUnit::kMatrix}, DType::kF32), 0.5 + 2.0);
  EXPECT_DOUBLE_EQ(m.computeTime({1000, 10, WorkUnit::kMatrix}, DType::kF16), 0.5 + 0.5);
  EXPECT_DOUBLE_EQ(m.computeTime({1000, 500, WorkUnit::kMatrix}, DType::kF16), 0.5 + 10.0);  // memory-bound
  // Vector: 10 flop/s for every type (only f32 listed).
  EXPECT_DOUBLE_EQ(m.computeTime({20, 10, WorkUnit::kVector}, DType::kF16), 0.5 + 2.0);
  EXPECT_DOUBLE_EQ(m.computeTime({0, 0, WorkUnit::kVector}, DType::kF32), 0.5);
  EXPECT_EQ(m.memoryCapacity(), 900);
}

TEST(CostModel, NodeTimeCountsTheOpsWork) {
  ClusterSpec h100 = builtin("h100");
  CostModel m(h100);
  Graph g;
  Value* x = g.addInput("x", {DType::kF16, {64, 1024}});
  Value* w = g.addInput("w", {DType::kF16, {1024, 4096}});
  Node* mm = addInferred(g, OpKind::MatMul, {x, w});
  ASSERT_NE(mm, nullptr);
  const DeviceSpec& d = h100.device;
  double flops = 2.0 * 64 * 4096 * 1024;
  double bytes = 2.0 * (64 * 1024 + 1024 * 4096 + 64 * 4096);
  double expected = d.launchOverhead + std::max(flops / (9.894e14 * d.matrixEfficiency),
                                                bytes / (3.35e12 * d.memoryEfficiency));
  EXPECT_NEAR(m.nodeTime(*mm), expected, 1e-15);
  // At this size the MatMul is memory-bound on an H100 (arithmetic intensity
  // about 60 flop/byte, below the ~300 of its roofline ridge).
  EXPECT_GT(bytes / (3.35e12 * d.memoryEfficiency), flops / (9.894e14 * d.matrixEfficiency));

  Node* act = addInferred(g, OpKind::Relu, {mm->output()});
  ASSERT_NE(act, nullptr);
  double actBytes = 2.0 * 2 * 64 * 4096;
  EXPECT_NEAR(m.nodeTime(*act),
              d.launchOverhead + std::max(64.0 * 4096 / (1.338e14 * d.vectorEfficiency),
                                          actBytes / (3.35e12 * d.memoryEfficiency)),
              1e-15);
  // A view runs no kernel.
  Value* shape = g.addConstant("shape", testing::i64({2}, {64 * 4096, 1}));
  Node* view = addInferred(g, OpKind::Reshape, {act->output(), shape});
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(m.nodeTime(*view), 0);
}

TEST(DeviceSpec, OpFactorsAreOptionalAndChecked) {
  EXPECT_TRUE(toy().device.opFactors.empty());
  EXPECT_EQ(toy().device.opFactor("Softmax"), 1.0);
  auto s = parseClusterSpec(specJson(R"(, "op_factors": {"Softmax": 4.0, "Add": 0.25})"), "f.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->device.opFactor("Softmax"), 4.0);
  EXPECT_EQ(s->device.opFactor("Add"), 0.25);
  EXPECT_EQ(s->device.opFactor("Relu"), 1.0);
  expectRefused(specJson(R"(, "op_factors": {"Softmax": 0})"),
                "device.op_factors.Softmax: must be a number from 0.0001 to 10000 (got 0)");
  expectRefused(specJson(R"(, "op_factors": {"Softmax": "x"})"), "device.op_factors.Softmax: must be a number");
  expectRefused(specJson(R"(, "op_factors": [1])"), "device.op_factors: must be an object");
}

TEST(CostModel, OpFactorsScaleAnOpsTimeButNotTheLaunchOverhead) {
  auto s = parseClusterSpec(specJson(R"(, "op_factors": {"Relu": 3.0})"), "f.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  CostModel plain(toy()), scaled(*s);
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {10}});
  Node* relu = addInferred(g, OpKind::Relu, {x});
  Node* neg = addInferred(g, OpKind::Neg, {x});
  ASSERT_NE(relu, nullptr);
  ASSERT_NE(neg, nullptr);
  // Relu on 10 floats: 10 flops at 10 flop/s = 1 s, 80 bytes at 50 B/s = 1.6 s; launch 0.5 s.
  EXPECT_DOUBLE_EQ(plain.nodeTime(*relu), 0.5 + 1.6);
  EXPECT_DOUBLE_EQ(scaled.nodeTime(*relu), 0.5 + 3.0 * 1.6);
  EXPECT_DOUBLE_EQ(scaled.nodeTime(*neg), plain.nodeTime(*neg));  // no factor listed
}

TEST(CostModel, TheCacheTakesTheFirstBytesOfTraffic) {
  auto s = parseClusterSpec(specJson(R"(, "cache": {"bytes": 20, "bandwidth": 200.0})"), "c.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->device.cacheBytes, 20);
  CostModel m(*s);
  // Memory: 100 B/s x 0.5 = 50 B/s; cache 200 x 0.5 = 100 B/s for the first 20 bytes.
  EXPECT_DOUBLE_EQ(m.computeTime({0, 10, WorkUnit::kVector}, DType::kF32), 0.5 + 10.0 / 100);
  EXPECT_DOUBLE_EQ(m.computeTime({0, 120, WorkUnit::kVector}, DType::kF32), 0.5 + 20.0 / 100 + 100.0 / 50);
  expectRefused(specJson(R"(, "cache": {"bytes": 0, "bandwidth": 200.0})"),
                "device.cache.bytes: must be an integer from 1 to 1125899906842624 (got 0)");
  expectRefused(specJson(R"(, "cache": {"bytes": 20})"), "device.cache.bandwidth: missing");
  expectRefused(specJson(R"(, "cache": {"bytes": 20, "bandwidth": 1.0, "ways": 8})"), "device.cache.ways: unknown key");
}

TEST(CostModel, CollectivesFollowTheAlphaBetaFormulas) {
  CostModel m(toy());
  // Intra-node: 100 B/s x 0.5 = 50 B/s, alpha 1 s; inter-node 10 B/s, alpha 10 s.
  // Each collective is one launch (the device's 0.5 s) plus its steps.
  const double s = 1000, L = 0.5;
  // Ring all-reduce over 4: 2*3/4*S/50 + 2*3*1 = 30 + 6 = 36; tree:
  // 2*2*1 + 2*S/50 = 44; the ring wins.
  EXPECT_DOUBLE_EQ(m.collectiveTime(CollectiveKind::kAllReduce, 1000, 4, false), L + 36);
  // A small message over many devices is latency-bound: the tree wins.
  // n = 64, S = 10: ring 2*63/64*10/50 + 126 = 126.39; tree 2*6 + 0.4 = 12.4.
  EXPECT_NEAR(m.collectiveTime(CollectiveKind::kAllReduce, 10, 64, false), L + 12.4, 1e-12);
  EXPECT_DOUBLE_EQ(m.collectiveTime(CollectiveKind::kAllGather, 1000, 4, false), L + 3.0 / 4 * s / 50 + 3);
  EXPECT_DOUBLE_EQ(m.collectiveTime(CollectiveKind::kReduceScatter, 1000, 4, false), L + 3.0 / 4 * s / 50 + 3);
  EXPECT_DOUBLE_EQ(m.collectiveTime(CollectiveKind::kAllToAll, 1000, 2, false), L + 0.5 * s / 50 + 1);
  EXPECT_DOUBLE_EQ(m.collectiveTime(CollectiveKind::kSendRecv, 1000, 2, false), L + s / 50 + 1);
  // Across nodes the slower link sets the time.
  EXPECT_DOUBLE_EQ(m.collectiveTime(CollectiveKind::kSendRecv, 1000, 2, true), L + s / 10 + 10);
  // Nothing to do alone or with nothing to send.
  EXPECT_EQ(m.collectiveTime(CollectiveKind::kAllReduce, 1000, 1, false), 0);
  EXPECT_EQ(m.collectiveTime(CollectiveKind::kAllReduce, 0, 8, false), 0);
}

// Groups whose size is not a power of two: the tree all-reduce still takes
// ceil(log2 n) steps up and down (a partial level is a whole step), and the
// ring formulas take n - 1 steps.
TEST(CostModel, CollectivesOnGroupsThatAreNotPowersOfTwo) {
  CostModel m(toy());  // intra-node 50 B/s, alpha 1 s, launch 0.5 s
  const double L = 0.5;
  // n = 48, S = 10: ring 2*47/48*10/50 + 94 = 94.39; tree 2*ceil(5.58)*1 + 2*10/50 = 12.4.
  EXPECT_NEAR(m.collectiveTime(CollectiveKind::kAllReduce, 10, 48, false), L + 12.4, 1e-12);
  // n = 3, S = 10: ring 2*2/3*10/50 + 4 = 4.1333; tree 2*2 + 0.4 = 4.4: the ring wins.
  EXPECT_NEAR(m.collectiveTime(CollectiveKind::kAllReduce, 10, 3, false), L + 4.0 + 4.0 / 3 * 0.2, 1e-12);
  // n = 5, S = 1: ring 2*4/5/50 + 8 = 8.032; tree 2*3 + 0.04 = 6.04.
  EXPECT_NEAR(m.collectiveTime(CollectiveKind::kAllReduce, 1, 5, false), L + 6.04, 1e-12);
  // n = 6: gathers and all-to-alls move 5/6 of the tensor in 5 steps.
  EXPECT_NEAR(m.collectiveTime(CollectiveKind::kAllGather, 600, 6, false), L + 5.0 / 6 * 600 / 50 + 5, 1e-12);
  EXPECT_NEAR(m.collectiveTime(CollectiveKind::kReduceScatter, 600, 6, false), L + 5.0 / 6 * 600 / 50 + 5, 1e-12);
  EXPECT_NEAR(m.collectiveTime(CollectiveKind::kAllToAll, 600, 3, false), L + 2.0 / 3 * 600 / 50 + 2, 1e-12);
}

// Each element type is priced at the rate its spec lists (f32's only for
// types not listed): on an H100 a bf16 or f16 MatMul of 4096 x 4096 over a
// batch of 4096 runs on the tensor cores, about 0.2 ms, where f32 takes 2.9 ms.
TEST(CostModel, EachTypeIsPricedAtItsOwnRate) {
  ClusterSpec spec = builtin("h100");
  const DeviceSpec& d = spec.device;
  CostModel m(spec);
  const double flops = 2.0 * 4096 * 4096 * 4096;
  for (auto [t, key] : {std::pair{DType::kBF16, "bf16"}, std::pair{DType::kF16, "f16"},
                        std::pair{DType::kF32, "f32"}, std::pair{DType::kF64, "f64"},
                        std::pair{DType::kF8E4M3FN, "f8"}, std::pair{DType::kI8, "i8"}}) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(d.matrixFlops.count(key));
    // Compute-bound work (no bytes): the rate alone.
    EXPECT_NEAR(m.computeTime({static_cast<int64_t>(flops), 0, WorkUnit::kMatrix}, t),
                d.launchOverhead + flops / (d.matrixFlops.at(key) * d.matrixEfficiency), 1e-15);
    if (t == DType::kF8E4M3FN || t == DType::kI8) continue;  // no ONNX MatMul of these
    Graph g;
    Value* x = g.addInput("x", {t, {4096, 4096}});
    Value* w = g.addInput("w", {t, {4096, 4096}});
    Node* mm = addInferred(g, OpKind::MatMul, {x, w});
    ASSERT_NE(mm, nullptr);
    // At this size every type is compute-bound on an H100.
    EXPECT_NEAR(m.nodeTime(*mm), d.launchOverhead + flops / (d.matrixFlops.at(key) * d.matrixEfficiency), 1e-12);
  }
  // The figures, by hand: 1.374e11 flop at 9.894e14 x 0.7 and at 6.7e13 x 0.7, plus 4 us.
  Graph g;
  Value* x = g.addInput("x", {DType::kBF16, {4096, 4096}});
  Value* w = g.addInput("w", {DType::kBF16, {4096, 4096}});
  EXPECT_NEAR(m.nodeTime(*addInferred(g, OpKind::MatMul, {x, w})), 0.202e-3, 0.002e-3);
  Value* x32 = g.addInput("x32", {DType::kF32, {4096, 4096}});
  Value* w32 = g.addInput("w32", {DType::kF32, {4096, 4096}});
  EXPECT_NEAR(m.nodeTime(*addInferred(g, OpKind::MatMul, {x32, w32})), 2.934e-3, 0.002e-3);
}

TEST(CostModel, GroupsCrossNodesByDeviceNumber) {
  CostModel m(toy());  // 4 devices per node
  EXPECT_FALSE(m.crossesNodes({0, 1, 2, 3}));
  EXPECT_TRUE(m.crossesNodes({2, 3, 4}));
  EXPECT_FALSE(m.crossesNodes({4, 6}));
  EXPECT_TRUE(m.crossesNodes({1, 5}));  // a dp group with tp = 4
  EXPECT_FALSE(m.crossesNodes({}));
}

// The hooks are virtual: a made-up device decides node times.
class FixedCostDevice : public CostModel {
 public:
  FixedCostDevice() : CostModel(toy()) {}
  double computeTime(const OpWork& work, DType) const override { return work.unit == WorkUnit::kMatrix ? 7 : 1; }
};

TEST(CostModel, AMadeUpDeviceReplacesTheRoofline) {
  FixedCostDevice m;
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2, 3}});
  Value* w = g.addInput("w", {DType::kF32, {3, 4}});
  Node* mm = addInferred(g, OpKind::MatMul, {x, w});
  Node* act = addInferred(g, OpKind::Tanh, {mm->output()});
  EXPECT_EQ(m.nodeTime(*mm), 7);
  EXPECT_EQ(m.nodeTime(*act), 1);
}

TEST(OpWork, CountsContractionsAndElementwiseOps) {
  auto f32 = [](Dims d) { return TensorType{DType::kF32, std::move(d)}; };
  AttrMap none;
  OpWork mm = opWork("MatMul", {f32({8, 16, 32}), f32({32, 64})}, {f32({8, 16, 64})}, none);
  EXPECT_EQ(mm.unit, WorkUnit::kMatrix);
  EXPECT_EQ(mm.flops, 2 * 8 * 16 * 64 * 32);
  EXPECT_EQ(mm.bytes, 4 * (8 * 16 * 32 + 32 * 64 + 8 * 16 * 64));
  AttrMap transA;
  transA.set("transA", Attribute(int64_t{1}));
  EXPECT_EQ(opWork("Gemm", {f32({32, 8}), f32({32, 64})}, {f32({8, 64})}, transA).flops, 2 * 8 * 64 * 32);
  // Conv 3x3, 16 -> 32 channels, groups 1, output 1x32x10x10.
  EXPECT_EQ(opWork("Conv", {f32({1, 16, 12, 12}), f32({32, 16, 3, 3})}, {f32({1, 32, 10, 10})}, none).flops,
            2 * 32 * 10 * 10 * 16 * 9);
  // Attention, 4-D: B 2, 8 query heads of 64 over 128 queries and 256 keys.
  OpWork att = opWork("Attention", {f32({2, 8, 128, 64}), f32({2, 8, 256, 64}), f32({2, 8, 256, 64})},
                      {f32({2, 8, 128, 64})}, none);
  EXPECT_EQ(att.flops, 2 * (2 * 8 * 128 * 64) * 256 * 2);
  // LSTM: 10 steps x 3 rows, hidden 5, input 4, one direction: 4 gates.
  EXPECT_EQ(opWork("LSTM", {f32({10, 3, 4}), f32({1, 20, 4}), f32({1, 20, 5})}, {f32({10, 1, 3, 5})}, none).flops,
            2 * 30 * (80 + 100));
  // Elementwise: one per output element; a reduction: one per input element.
  EXPECT_EQ(opWork("Add", {f32({4, 5}), f32({5})}, {f32({4, 5})}, none).flops, 20);
  EXPECT_EQ(opWork("ReduceSum", {f32({4, 5})}, {f32({4, 1})}, none).flops, 20);
  EXPECT_EQ(opWork("Add", {f32({4, 5}), f32({5})}, {f32({4, 5})}, none).unit, WorkUnit::kVector);
  // Data movement computes nothing but moves its bytes.
  OpWork tr = opWork("Transpose", {f32({4, 5})}, {f32({5, 4})}, none);
  EXPECT_EQ(tr.flops, 0);
  EXPECT_EQ(tr.bytes, 2 * 4 * 20);
  // Absent optional inputs count nothing; huge shapes saturate.
  EXPECT_EQ(opWork("Clip", {f32({3}), TensorType{}, f32({})}, {f32({3})}, none).bytes, 4 * (3 + 1 + 3));
  OpWork huge = opWork("MatMul", {f32({int64_t{1} << 40, int64_t{1} << 20}), f32({int64_t{1} << 20, int64_t{1} << 20})},
                       {f32({int64_t{1} << 40, int64_t{1} << 20})}, none);
  EXPECT_EQ(huge.flops, INT64_MAX);
}

}  // namespace
}  // namespace pcc
