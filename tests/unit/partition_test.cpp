// Partitioning: structure (meshes, split weights, collectives) and numbers
// (every rank program, run in lockstep with simulated collectives, must
// reproduce the unpartitioned graph on the reference evaluator).
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/eval/evaluator.h"
#include "compiler/ir/text.h"
#include "compiler/ir/verifier.h"
#include "passes/partition/dim_map.h"
#include "passes/partition/partitioner.h"
#include "passes/partition/tp_search.h"
#include "runtime/ops/kernel_call.h"
#include "runtime/tensor_slice.h"

namespace pcc {
namespace {

const char kMlp[] = R"(
graph @main(%x: f32[6,32], %w1: f32[64,32] const, %b1: f32[64] const, %w2: f32[64,48] const,
             %b2: f32[48] const, %w3: f32[48,8] const) -> (%y: f32[6,8]) {
  %h1 = Gemm(%x, %w1, %b1) {transB = 1} : f32[6,64]
  %a1 = Relu(%h1) : f32[6,64]
  %h2 = MatMul(%a1, %w2) : f32[6,48]
  %h3 = Add(%h2, %b2) : f32[6,48]
  %a2 = Tanh(%h3) : f32[6,48]
  %y = MatMul(%a2, %w3) : f32[6,8]
  return %y
}
)";

// A transformer-block fragment: heads via Reshape/Transpose, softmax, and an
// MLP whose activation reads the first matmul's output twice (erf GELU).
const char kBlock[] = R"(
graph @main(%x: f32[4,8,16], %wq: f32[16,16] const, %wk: f32[16,16] const, %shape: i64[4] const dense<i64[4]: 4, 8, 2, 8>,
             %back: i64[3] const dense<i64[3]: 4, 8, 16>, %scale: f32[] const dense<f32[]: 2.8284271247461903>,
             %w1: f32[16,32] const, %b1: f32[32] const, %sq2: f32[] const dense<f32[]: 1.4142135623730951>,
             %one: f32[] const dense<f32[]: 1>, %half: f32[] const dense<f32[]: 0.5>, %w2: f32[32,16] const,
             %b2: f32[16] const) -> (%out: f32[4,8,16]) {
  %q = MatMul(%x, %wq) : f32[4,8,16]
  %k = MatMul(%x, %wk) : f32[4,8,16]
  %qh = Reshape(%q, %shape) : f32[4,8,2,8]
  %kh = Reshape(%k, %shape) : f32[4,8,2,8]
  %qt = Transpose(%qh) {perm = [0, 2, 1, 3]} : f32[4,2,8,8]
  %kt = Transpose(%kh) {perm = [0, 2, 3, 1]} : f32[4,2,8,8]
  %s = MatMul(%qt, %kt) : f32[4,2,8,8]
  %ss = Div(%s, %scale) : f32[4,2,8,8]
  %p = Softmax(%ss) {axis = -1} : f32[4,2,8,8]
  %o = MatMul(%p, %qt) : f32[4,2,8,8]
  %ot = Transpose(%o) {perm = [0, 2, 1, 3]} : f32[4,8,2,8]
  %att = Reshape(%ot, %back) : f32[4,8,16]
  %r = Add(%x, %att) : f32[4,8,16]
  %f = MatMul(%r, %w1) : f32[4,8,32]
  %fb = Add(%b1, %f) : f32[4,8,32]
  %d = Div(%fb, %sq2) : f32[4,8,32]
  %e = Erf(%d) : f32[4,8,32]
  %e1 = Add(%e, %one) : f32[4,8,32]
  %g = Mul(%fb, %e1) : f32[4,8,32]
  %g2 = Mul(%g, %half) : f32[4,8,32]
  %m = MatMul(%g2, %w2) : f32[4,8,16]
  %mb = Add(%m, %b2) : f32[4,8,16]
  %out = Add(%r, %mb) : f32[4,8,16]
  return %out
}
)";

// Two Gemms with biases: the second is the row-split one, so its bias must be
// added on one rank of the group only.
const char kGemms[] = R"(
graph @main(%x: f32[4,16], %w1: f32[16,32] const, %b1: f32[32] const, %w2: f32[32,8] const,
             %b2: f32[1,8] const) -> (%y: f32[4,8]) {
  %h = Gemm(%x, %w1, %b1) : f32[4,32]
  %s = Sigmoid(%h) : f32[4,32]
  %y = Gemm(%s, %w2, %b2) {alpha = 0.5, beta = 2.0} : f32[4,8]
  return %y
}
)";

std::unique_ptr<Graph> parse(const char* text) {
  auto g = parseGraph(text, "test.ir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(g).value();
}

// Runs every rank's program in lockstep (their node sequences are identical by
// construction) and performs each collective across its group in memory. Nodes
// run through runNode, the evaluator's entry onto the shared kernel call
// (runtime/ops/kernel_call.h) that the constant folder and the runtime use.
StatusOr<std::vector<Tensor>> simulate(const Graph& global, const Partition& p, const std::vector<RankGraph>& ranks,
                                       const std::vector<Tensor>& inputs) {
  size_t n = ranks.size();
  std::vector<std::map<const Value*, Tensor>> env(n);
  std::vector<std::vector<Node*>> progs(n);
  for (size_t r = 0; r < n; ++r) {
    progs[r] = ranks[r].graph->nodes();
    if (progs[r].size() != progs[0].size()) return internalError("rank programs differ in length");
    for (const IoBind& b : ranks[r].inputs) {
      Tensor t = inputs[b.index];
      if (b.splitDim >= 0) {
        ASSIGN_OR_RETURN(t, sliceAlong(t, b.splitDim, b.offset, b.length));
      }
      env[r][b.value] = t;
    }
    for (Value* c : ranks[r].graph->constants()) env[r][c] = c->constantData();
  }
  for (size_t i = 0; i < progs[0].size(); ++i) {
    std::vector<Tensor> results(n);
    for (size_t r = 0; r < n; ++r) {
      Node* node = progs[r][i];
      if (node->op() != progs[0][i]->op()) return internalError("rank programs diverge at node ", i);
      if (!isCollective(node->op())) {
        std::vector<const Tensor*> ins;
        for (Value* v : node->inputs()) ins.push_back(v ? &env[r].at(v) : nullptr);
        ASSIGN_OR_RETURN(auto outs, runNode(*node, ins));  // the evaluator's and runtime's kernel entry
        for (size_t k = 0; k < outs.size(); ++k) env[r][node->output(k)] = outs[k];
        continue;
      }
      MeshAxis axis = *meshAxisFromName(node->attrs().getString("axis", ""));
      Tensor acc;
      std::vector<Tensor> parts;
      const std::vector<int> group = p.mesh.groupOf(static_cast<int>(r), axis);
      const int me = static_cast<int>(std::find(group.begin(), group.end(), static_cast<int>(r)) - group.begin());
      const int parties = static_cast<int>(group.size());
      for (int peer : group) parts.push_back(env[peer].at(progs[peer][i]->input(0)));
      const int dim = static_cast<int>(node->attrs().getInt("dim", 0));
      if (node->op() == OpKind::AllReduce || node->op() == OpKind::ReduceScatter) {
        acc = parts[0];
        for (size_t k = 1; k < parts.size(); ++k) {
          ASSIGN_OR_RETURN(auto sum, runKernel("Add", {&acc, &parts[k]}, {}, "all-reduce"));
          acc = sum[0];
        }
        // A reduce-scatter keeps this rank's chunk of the sum.
        if (node->op() == OpKind::ReduceScatter) {
          const int64_t extent = acc.shape()[dim];
          ASSIGN_OR_RETURN(acc, sliceAlong(acc, dim, chunkOffset(extent, parties, me), chunkSize(extent, parties, me)));
        }
      } else if (node->op() == OpKind::AllToAll) {
        // This rank's chunk of `dim` from every peer, concatenated along concat_dim.
        std::vector<Tensor> chunks;
        for (const Tensor& t : parts) {
          const int64_t extent = t.shape()[dim];
          ASSIGN_OR_RETURN(Tensor c, sliceAlong(t, dim, chunkOffset(extent, parties, me), chunkSize(extent, parties, me)));
          chunks.push_back(std::move(c));
        }
        AttrMap a;
        a.set("axis", node->attrs().getInt("concat_dim", 0));
        std::vector<const Tensor*> ins;
        for (auto& t : chunks) ins.push_back(&t);
        ASSIGN_OR_RETURN(auto cat, runKernel("Concat", ins, a, "all-to-all"));
        acc = cat[0];
      } else {
        AttrMap a;
        a.set("axis", node->attrs().getInt("dim", 0));
        std::vector<const Tensor*> ins;
        for (auto& t : parts) ins.push_back(&t);
        ASSIGN_OR_RETURN(auto cat, runKernel("Concat", ins, a, "all-gather"));
        acc = cat[0];
      }
      results[r] = acc;
    }
    for (size_t r = 0; r < n; ++r)
      if (isCollective(progs[r][i]->op())) env[r][progs[r][i]->output()] = results[r];
  }
  // Assemble the outputs; every element must be written exactly once.
  std::vector<Tensor> outs;
  std::vector<int64_t> written(global.outputs().size(), 0);
  for (Value* o : global.outputs()) outs.push_back(Tensor::zeros(o->type()));
  for (size_t r = 0; r < n; ++r)
    for (const IoBind& b : ranks[r].outputs) {
      const Tensor& piece = env[r].at(b.value);
      if (b.splitDim < 0) outs[b.index] = piece.clone();
      else RETURN_IF_ERROR(insertAlong(outs[b.index], piece, b.splitDim, b.offset));
      written[b.index] += piece.numel();
    }
  for (size_t k = 0; k < outs.size(); ++k)
    if (written[k] != outs[k].numel()) return internalError("output ", k, ": ", written[k], " of ", outs[k].numel(), " elements written");
  return outs;
}

struct Case {
  const char* name;
  const char* text;
  PartitionOptions opts;
  Mesh expectMesh;

};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PartitionNumerics : public ::testing::TestWithParam<Case> {};

TEST_P(PartitionNumerics, RanksReproduceTheGraph) {
  const Case& c = GetParam();
  auto g = parse(c.text);
  auto want = evaluateGraph(*g, randomInputs(*g, 7));
  ASSERT_TRUE(want.ok()) << want.status().message();
  auto p = partitionGraph(*g, c.opts);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->mesh.dp, c.expectMesh.dp);
  EXPECT_EQ(p->mesh.tp, c.expectMesh.tp);
  // With tp (forced, so weights first) every weight matrix of these graphs
  // (the constants named w*, which the matmuls read) divides evenly: each
  // rank holds 1/tp of their bytes.
  int64_t matrixBytes = 0;
  for (const Value* v : g->constants())
    if (v->name()[0] == 'w') matrixBytes += static_cast<int64_t>(v->type().bytes());
  ASSERT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
  auto ranks = lowerToRanks(*g, *p);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  ASSERT_EQ(static_cast<int>(ranks->size()), p->mesh.size());
  for (const RankGraph& rg : *ranks) {
    Status v = verifyGraph(*rg.graph);
    EXPECT_TRUE(v.ok()) << "rank " << rg.rank << ": " << v.message();
    int collectives = 0;
    for (Node* n : rg.graph->nodes()) collectives += isCollective(n->op());
    int64_t local = 0;
    for (const Value* v : rg.graph->constants())
      if (v->name()[0] == 'w') local += static_cast<int64_t>(v->type().bytes());
    if (p->mesh.tp > 1) {
      EXPECT_EQ(local * p->mesh.tp, matrixBytes) << "rank " << rg.rank;
      EXPECT_GT(collectives, 0) << "rank " << rg.rank;  // split matrices need their pieces combined
    } else {
      EXPECT_EQ(local, matrixBytes) << "rank " << rg.rank;
    }
  }
  auto got = simulate(*g, *p, *ranks, randomInputs(*g, 7));
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size(); ++i) {
    Diff d = compareTensors((*got)[i], (*want)[i], 1e-5, 1e-6);
    EXPECT_TRUE(d.ok) << c.name << " output " << i << ": " << d.where;
  }
}

PartitionOptions opt(int gpus, int dp = 0, int tp = 0) {
  PartitionOptions o;
  o.gpus = gpus;
  o.dp = dp;
  o.tp = tp;
  o.minimizeWeights = tp > 0;  // as pcc does for a forced tp
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, PartitionNumerics,
    ::testing::Values(Case{"mlp_1", kMlp, opt(1), Mesh{1, 1, 1}},
                      Case{"mlp_dp2", kMlp, opt(2), Mesh{1, 2, 1}},
                      Case{"mlp_dp4_uneven", kMlp, opt(4), Mesh{1, 4, 1}},
                      Case{"mlp_dp_capped_by_batch", kMlp, opt(8), Mesh{1, 6, 1}},
                      Case{"mlp_tp2", kMlp, opt(2, 0, 2), Mesh{1, 1, 2}},
                      Case{"mlp_tp4", kMlp, opt(4, 0, 4), Mesh{1, 1, 4}},
                      Case{"mlp_dp2_tp2", kMlp, opt(4, 2, 2), Mesh{1, 2, 2}},
                      Case{"gemm_bias_tp2", kGemms, opt(2, 0, 2), Mesh{1, 1, 2}},
                      Case{"gemm_bias_dp2_tp2", kGemms, opt(4, 2, 2), Mesh{1, 2, 2}},
                      Case{"block_dp2", kBlock, opt(2), Mesh{1, 2, 1}},
                      Case{"block_dp3_uneven", kBlock, opt(3), Mesh{1, 3, 1}},
                      Case{"block_tp2", kBlock, opt(2, 0, 2), Mesh{1, 1, 2}},
                      Case{"block_dp2_tp2", kBlock, opt(4, 2, 2), Mesh{1, 2, 2}}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(Partition, ForcedTpSplitsTheHeadsThroughReshapeAndTranspose) {
  auto g = parse(kBlock);
  auto p = partitionGraph(*g, opt(2, 0, 2));
  ASSERT_TRUE(p.ok()) << p.status().message();
  // q and k split their features, the reshape into heads and the transposes
  // carry the split to the heads dimension, and attention runs per head.
  EXPECT_EQ(g->findValue("q")->sharding()->str(), "[-,-,tp]");
  EXPECT_EQ(g->findValue("qh")->sharding()->str(), "[-,-,tp,-]");
  EXPECT_EQ(g->findValue("qt")->sharding()->str(), "[-,tp,-,-]");
  EXPECT_EQ(g->findValue("s")->sharding()->str(), "[-,tp,-,-]");
  EXPECT_EQ(g->findValue("p")->sharding()->str(), "[-,tp,-,-]");
  ASSERT_FALSE(p->tensorParallel.empty());
  EXPECT_NE(p->notes.back().find("tp=2 splits"), std::string::npos) << p->notes.back();
}

TEST(Partition, SmallBatchUsesFewerRanksAndSaysSo) {
  auto g = parse(kMlp);
  auto p = partitionGraph(*g, opt(8));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->mesh.size(), 6);
  ASSERT_FALSE(p->notes.empty());
  EXPECT_NE(p->notes[0].find("smaller than dp=8"), std::string::npos) << p->notes[0];
}

TEST(Partition, BadRequestsAreErrors) {
  auto g = parse(kMlp);
  auto notDividing = partitionGraph(*g, opt(3, 0, 2));
  ASSERT_FALSE(notDividing.ok());
  EXPECT_EQ(notDividing.status().code(), StatusCode::kInvalidInput);
  // More pipeline stages than nodes.
  auto pp = partitionGraph(*g, [] { PartitionOptions o = opt(7); o.pp = 7; return o; }());
  ASSERT_FALSE(pp.ok());
  EXPECT_EQ(pp.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(pp.status().message().find("pp=7 needs at least 7 nodes"), std::string::npos) << pp.status().message();
  // Micro-batches that do not divide the batch of 6.
  auto mb = partitionGraph(*g, [] { PartitionOptions o = opt(2); o.pp = 2; o.microbatches = 4; return o; }());
  ASSERT_FALSE(mb.ok());
  EXPECT_EQ(mb.status().code(), StatusCode::kInvalidInput);
}

TEST(Partition, ReshapeMergingAnUnevenBatchGathersUnevenPieces) {
  auto g = parse(R"(
graph @main(%x: f32[5,4,8], %s: i64[2] const dense<i64[2]: 20, 8>, %w: f32[8,8] const) -> (%y: f32[20,8]) {
  %f = Reshape(%x, %s) : f32[20,8]
  %y = MatMul(%f, %w) : f32[20,8]
  return %y
}
)");
  auto want = evaluateGraph(*g, randomInputs(*g, 5));
  ASSERT_TRUE(want.ok());
  auto p = partitionGraph(*g, opt(2));
  ASSERT_TRUE(p.ok());
  auto ranks = lowerToRanks(*g, *p);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  // Rank 0 holds 3 samples, rank 1 holds 2: the gather carries the whole extent.
  int gathers = 0;
  for (Node* n : (*ranks)[1].graph->nodes())
    if (n->op() == OpKind::AllGather) {
      ++gathers;
      EXPECT_EQ(n->attrs().getInt("gathered_size", -1), 5);
      EXPECT_EQ(n->input(0)->type().shape[0], 2);
      EXPECT_EQ(n->output()->type().shape[0], 5);
    }
  EXPECT_EQ(gathers, 1);
  auto got = simulate(*g, *p, *ranks, randomInputs(*g, 5));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(compareTensors((*got)[0], (*want)[0], 1e-5, 1e-6).ok);
}

// Layouts set by hand on a mesh of 3 (the tp search splits only evenly): a
// partial sum taken split by 5 rows is one reduce-scatter of uneven pieces
// (2, 2, 1), and the rows' split moved to 7 columns is one all-to-all of
// uneven pieces both ways; the rank programs, with the collectives simulated
// apart from the runtime, reproduce the graph.
TEST(Partition, UnevenReduceScatterAndAllToAll) {
  auto g = parse(R"(
graph @main(%x: f32[5,6], %w: f32[6,7] const) -> (%y: f32[5,7], %z: f32[5,7]) {
  %p = MatMul(%x, %w) : f32[5,7]
  %y = Relu(%p) : f32[5,7]
  %z = Sigmoid(%y) : f32[5,7]
  return %y, %z
}
)");
  auto want = evaluateGraph(*g, randomInputs(*g, 4));
  ASSERT_TRUE(want.ok()) << want.status().message();
  const MeshAxis N = MeshAxis::kNone, T = MeshAxis::kTP;
  Partition p;
  p.mesh = Mesh{1, 1, 3};
  std::vector<Node*> nodes = g->nodes();
  g->inputs()[0]->setSharding(Sharding{{N, T}});
  g->constants()[0]->setSharding(Sharding{{N, N}});
  nodes[0]->output()->setSharding(Sharding{{N, N}, T});  // p: a partial sum
  nodes[1]->output()->setSharding(Sharding{{T, N}});     // y: rows split
  nodes[2]->output()->setSharding(Sharding{{N, T}});     // z: columns split
  p.inputSharding[{nodes[0], 0}] = Sharding{{N, T}};
  p.inputSharding[{nodes[0], 1}] = Sharding{{T, N}};
  p.inputSharding[{nodes[1], 0}] = Sharding{{T, N}};
  p.inputSharding[{nodes[2], 0}] = Sharding{{N, T}};
  auto ranks = lowerToRanks(*g, p);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  for (const RankGraph& rg : *ranks) {
    Status v = verifyGraph(*rg.graph);
    EXPECT_TRUE(v.ok()) << "rank " << rg.rank << ": " << v.message();
    int scatters = 0, exchanges = 0;
    for (Node* n : rg.graph->nodes()) {
      EXPECT_TRUE(n->op() != OpKind::AllReduce && n->op() != OpKind::AllGather && n->op() != OpKind::Slice)
          << n->describe();
      if (n->op() == OpKind::ReduceScatter) {
        ++scatters;
        EXPECT_EQ(n->attrs().getInt("piece_size", -1), chunkSize(5, 3, rg.rank)) << "rank " << rg.rank;
      }
      if (n->op() == OpKind::AllToAll) {
        ++exchanges;
        EXPECT_EQ(n->attrs().getInt("dim", -1), 1);
        EXPECT_EQ(n->attrs().getInt("concat_dim", -1), 0);
        EXPECT_EQ(n->attrs().getInt("piece_size", -1), chunkSize(7, 3, rg.rank)) << "rank " << rg.rank;
        EXPECT_EQ(n->attrs().getInt("gathered_size", -1), 5);
        EXPECT_EQ(n->output()->type().shape, (Dims{5, chunkSize(7, 3, rg.rank)}));
      }
    }
    EXPECT_EQ(scatters, 1) << "rank " << rg.rank;
    EXPECT_EQ(exchanges, 1) << "rank " << rg.rank;
  }
  auto got = simulate(*g, p, *ranks, randomInputs(*g, 4));
  ASSERT_TRUE(got.ok()) << got.status().message();
  for (size_t i = 0; i < got->size(); ++i) {
    Diff d = compareTensors((*got)[i], (*want)[i], 1e-5, 1e-6);
    EXPECT_TRUE(d.ok) << "output " << i << ": " << d.where;
  }
}

TEST(Partition, ReshapeMergingAnEvenBatchKeepsItSplit) {
  auto g = parse(R"(
graph @main(%x: f32[4,4,8], %s: i64[2] const dense<i64[2]: 16, 8>, %w: f32[8,8] const) -> (%y: f32[16,8]) {
  %f = Reshape(%x, %s) : f32[16,8]
  %y = MatMul(%f, %w) : f32[16,8]
  return %y
}
)");
  auto want = evaluateGraph(*g, randomInputs(*g, 3));
  ASSERT_TRUE(want.ok());
  auto p = partitionGraph(*g, opt(2));
  ASSERT_TRUE(p.ok());
  auto ranks = lowerToRanks(*g, *p);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  auto got = simulate(*g, *p, *ranks, randomInputs(*g, 3));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(compareTensors((*got)[0], (*want)[0], 1e-5, 1e-6).ok);
}

// Attention splits with its batch (and, with 4-D inputs, its heads): under
// data parallelism nothing is gathered around it.
const char kAttention4d[] = R"(
graph @main(%q: f32[4,4,3,8], %k: f32[4,2,5,8], %v: f32[4,2,5,8], %mask: f32[4,1,3,5],
             %w: f32[8,8] const) -> (%y: f32[4,4,3,8]) {
  %a = Attention(%q, %k, %v, %mask) : f32[4,4,3,8]
  %y = MatMul(%a, %w) : f32[4,4,3,8]
  return %y
}
)";

const char kAttention3d[] = R"(
graph @main(%q: f32[4,3,16], %k: f32[4,5,16], %v: f32[4,5,16]) -> (%y: f32[4,3,16], %pk: f32[4,2,5,8]) {
  %y, %pk = Attention(%q, %k, %v) {q_num_heads = 2, kv_num_heads = 2, num_outputs = 2, is_causal = 1} : f32[4,3,16], f32[4,2,5,8]
  return %y, %pk
}
)";

struct Lowered {
  std::vector<Tensor> outputs;
  int allGathers = 0;  // in rank 0's program
  std::vector<std::string> notes;
};

// Partitions `text` over `gpus` devices (data parallel), runs the ranks and
// checks them against the unpartitioned graph.
Lowered partitionAndRun(const char* text, int gpus) {
  Lowered out;
  auto g = parse(text);
  auto want = evaluateGraph(*g, randomInputs(*g, 5));
  EXPECT_TRUE(want.ok()) << want.status().message();
  PartitionOptions o;
  o.gpus = gpus;
  auto p = partitionGraph(*g, o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  if (!want.ok() || !p.ok()) return out;
  out.notes = p->notes;
  auto ranks = lowerToRanks(*g, *p);
  EXPECT_TRUE(ranks.ok()) << ranks.status().message();
  if (!ranks.ok()) return out;
  for (Node* n : (*ranks)[0].graph->nodes()) out.allGathers += n->op() == OpKind::AllGather;
  auto got = simulate(*g, *p, *ranks, randomInputs(*g, 5));
  EXPECT_TRUE(got.ok()) << got.status().message();
  if (!got.ok()) return out;
  for (size_t i = 0; i < got->size(); ++i) {
    Diff d = compareTensors((*got)[i], (*want)[i], 1e-5, 1e-6);
    EXPECT_TRUE(d.ok) << "output " << i << ": " << d.where;
  }
  out.outputs = std::move(*got);
  return out;
}

TEST(Partition, AttentionSplitsWithTheBatch) {
  for (int gpus : {2, 3}) {
    for (const char* text : {kAttention4d, kAttention3d}) {
      Lowered r = partitionAndRun(text, gpus);
      EXPECT_FALSE(r.outputs.empty());
      EXPECT_EQ(r.allGathers, 0) << "gpus " << gpus << "\n" << text;
      for (const std::string& n : r.notes) EXPECT_EQ(n.find("Attention"), std::string::npos) << n;
    }
  }
}

TEST(Partition, AttentionDimensionMap) {
  auto g4 = parse(kAttention4d);
  const Node* a4 = g4->nodes()[0];
  ASSERT_EQ(a4->op(), OpKind::Attention);
  OpDimMap m = dimMapFor(*a4);
  ASSERT_EQ(m.links.size(), 4u);
  for (size_t i : {0, 1, 2}) {
    EXPECT_EQ(m.links[i][0].outDim, 0) << "input " << i << ": batch";
    EXPECT_FALSE(m.links[i][0].factor);
    EXPECT_EQ(m.links[i][1].outDim, 1) << "input " << i << ": heads";
    EXPECT_TRUE(m.links[i][1].factor) << "input " << i << ": heads split only where every count divides";
    EXPECT_EQ(m.links[i][2].outDim, -1);
    EXPECT_EQ(m.links[i][3].outDim, -1);
  }
  // The mask [4,1,3,5]: its batch follows, its broadcast head dim does not.
  EXPECT_EQ(m.links[3][0].outDim, 0);
  EXPECT_EQ(m.links[3][1].outDim, -1);
  EXPECT_TRUE(m.contractions.empty());

  auto g3 = parse(kAttention3d);
  OpDimMap m3 = dimMapFor(*g3->nodes()[0]);
  for (size_t i : {0, 1, 2}) {
    EXPECT_EQ(m3.links[i][0].outDim, 0);
    EXPECT_EQ(m3.links[i][2].outDim, -1) << "packed heads do not split";
  }
}

TEST(Partition, AnOpMarkedReplicateIsGatheredAndSaysSo) {
  // CumSum has no dimension map (Ops.def marks it Replicate): its batch-split
  // input is gathered first, and the partition notes say so.
  Lowered r = partitionAndRun(R"(
graph @main(%x: f32[4,6], %axis: i64[] const dense<i64[]: 1>) -> (%y: f32[4,6]) {
  %c = CumSum(%x, %axis) : f32[4,6]
  %y = Relu(%c) : f32[4,6]
  return %y
}
)", 2);
  EXPECT_FALSE(r.outputs.empty());
  EXPECT_EQ(r.allGathers, 1);
  bool said = false;
  for (const std::string& n : r.notes) said |= n.find("1 CumSum node runs replicated") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace pcc

namespace pcc {
namespace {

// A 3-D Attention (heads packed in the hidden dimension) split over tp by its
// heads: each rank runs its own heads with local head counts, grouped K/V
// heads included, and the pieces reproduce the whole.
TEST(Partition, PackedAttentionHeadsSplitOverTp) {
  for (const char* text : {R"(
graph @main(%q: f32[4,3,16], %k: f32[4,5,16], %v: f32[4,5,16]) -> (%y: f32[4,3,16]) {
  %y = Attention(%q, %k, %v) {q_num_heads = 2, kv_num_heads = 2} : f32[4,3,16]
  return %y
}
)",
                           R"(
graph @main(%q: f32[4,3,16], %k: f32[4,5,8], %v: f32[4,5,8]) -> (%y: f32[4,3,16]) {
  %y = Attention(%q, %k, %v) {q_num_heads = 4, kv_num_heads = 2, is_causal = 1} : f32[4,3,16]
  return %y
}
)"}) {
    auto g = parse(text);
    auto want = evaluateGraph(*g, randomInputs(*g, 9));
    ASSERT_TRUE(want.ok()) << want.status().message();
    PartitionOptions o = opt(2, 0, 2);
    o.tensorParallelSearch = false;
    auto p = partitionGraph(*g, o);
    ASSERT_TRUE(p.ok()) << p.status().message();
    std::vector<TpChoice> heads = {TpChoice{TpChoice::kSplitOutput, 2}};
    // Replicate, split the batch (4), split the heads; not the odd sequence (3).
    ASSERT_EQ(tpChoicesFor(*g->nodes()[0], *p).size(), 3u);
    applyTpChoices(*g, *p, heads);
    EXPECT_EQ(g->findValue("y")->sharding()->str(), "[-,-,tp]");
    auto ranks = lowerToRanks(*g, *p);
    ASSERT_TRUE(ranks.ok()) << ranks.status().message();
    for (const RankGraph& rg : *ranks) {
      const Node* att = nullptr;
      for (const Node* n : rg.graph->nodes())
        if (n->op() == OpKind::Attention) att = n;
      ASSERT_NE(att, nullptr);
      EXPECT_EQ(att->attrs().getInt("q_num_heads", 0) * 2, g->nodes()[0]->attrs().getInt("q_num_heads", 0));
      EXPECT_EQ(att->attrs().getInt("kv_num_heads", 0) * 2, g->nodes()[0]->attrs().getInt("kv_num_heads", 0));
    }
    auto got = simulate(*g, *p, *ranks, randomInputs(*g, 9));
    ASSERT_TRUE(got.ok()) << got.status().message();
    Diff d = compareTensors((*got)[0], (*want)[0], 1e-5, 1e-6);
    EXPECT_TRUE(d.ok) << d.where;
  }
}

// A packed Attention splits its hidden dimension only in whole heads: with 6
// heads of 8 (hidden 48), tp=2 and tp=3 may split it (3 or 2 heads a rank),
// tp=4 may not, though 48 divides by 4 (a rank would get one and a half
// heads). The tp search, left free, must then still reproduce the whole.
TEST(Partition, PackedAttentionHeadsSplitOnlyWhereTpDividesTheHeadCount) {
  const char* text = R"(
graph @main(%q: f32[12,3,48], %k: f32[12,5,48], %v: f32[12,5,48]) -> (%y: f32[12,3,48]) {
  %y = Attention(%q, %k, %v) {q_num_heads = 6, kv_num_heads = 6} : f32[12,3,48]
  return %y
}
)";
  const TpChoice heads{TpChoice::kSplitOutput, 2};
  for (int tp : {2, 3, 4}) {
    SCOPED_TRACE(strCat("tp=", tp));
    auto g = parse(text);
    PartitionOptions o = opt(tp, 0, tp);
    o.tensorParallelSearch = false;
    auto p = partitionGraph(*g, o);
    ASSERT_TRUE(p.ok()) << p.status().message();
    std::vector<TpChoice> choices = tpChoicesFor(*g->nodes()[0], *p);
    bool offered = std::find(choices.begin(), choices.end(), heads) != choices.end();
    EXPECT_EQ(offered, 6 % tp == 0);
    // Searched freely (time first, then weights first), the plan computes the whole.
    for (bool minimizeWeights : {false, true}) {
      auto g2 = parse(text);
      auto want = evaluateGraph(*g2, randomInputs(*g2, 5));
      ASSERT_TRUE(want.ok()) << want.status().message();
      PartitionOptions so = opt(tp, 0, tp);
      so.minimizeWeights = minimizeWeights;
      auto sp = partitionGraph(*g2, so);
      ASSERT_TRUE(sp.ok()) << sp.status().message();
      auto ranks = lowerToRanks(*g2, *sp);
      ASSERT_TRUE(ranks.ok()) << ranks.status().message();
      auto got = simulate(*g2, *sp, *ranks, randomInputs(*g2, 5));
      ASSERT_TRUE(got.ok()) << got.status().message();
      Diff d = compareTensors((*got)[0], (*want)[0], 1e-5, 1e-6);
      EXPECT_TRUE(d.ok) << (minimizeWeights ? "weights first: " : "time first: ") << d.where
                        << " layout " << g2->findValue("y")->sharding()->str();
    }
  }
}

}  // namespace
}  // namespace pcc
