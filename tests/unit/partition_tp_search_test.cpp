// The tensor-parallel sharding search (passes/partition/tp_search.h):
//  - no assignment of the choices, enumerated exhaustively on small graphs, is
//    cheaper than the search's (for both objectives, several meshes; one
//    graph reads a row in every layer, where states are dropped by dominance);
//  - the cost the search optimizes is the cost model's estimate of the plan
//    lowering emits, for the search's choice and for random ones;
//  - at a LLaMA-13B layer's size on 8 H100s it finds Megatron's plan: the
//    attention heads and the MLP's hidden units split, two all-reduces a layer.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "ir_test_util.h"
#include "partition_test_util.h"
#include "passes/partition/dim_map.h"
#include "passes/partition/search.h"
#include "passes/partition/tp_search.h"

namespace pcc {
namespace {

using testing::addInferred;

using testing::h100;

Value* i64Const(Graph& g, const std::string& name, std::vector<int64_t> v) {
  return g.addConstant(name, Tensor::fromVector<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v));
}

// x[b,s,h] -> MatMul -> Relu -> MatMul -> + x: an MLP block with its residual.
std::unique_ptr<Graph> mlpBlock() {
  const int64_t b = 4, s = 64, h = 256, f = 1024;
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {b, s, h}});
  Value* w1 = g->addConstant("w1", Tensor::zeros(DType::kF32, {h, f}));
  Value* w2 = g->addConstant("w2", Tensor::zeros(DType::kF32, {f, h}));
  Node* up = addInferred(*g, OpKind::MatMul, {x, w1}, {}, "up");
  Node* act = addInferred(*g, OpKind::Relu, {up->output()}, {}, "act");
  Node* down = addInferred(*g, OpKind::MatMul, {act->output(), w2}, {}, "down");
  Node* res = addInferred(*g, OpKind::Add, {x, down->output()}, {}, "res");
  g->addOutput(res->output());
  return g;
}

// Gemm (bias) -> Sigmoid -> Gemm (bias, transB) -> Tanh -> MatMul.
std::unique_ptr<Graph> gemmChain() {
  const int64_t b = 8, k = 512, n = 768, m = 256;
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {b, k}});
  Value* w1 = g->addConstant("w1", Tensor::zeros(DType::kF32, {k, n}));
  Value* b1 = g->addConstant("b1", Tensor::zeros(DType::kF32, {n}));
  Value* w2 = g->addConstant("w2", Tensor::zeros(DType::kF32, {m, n}));
  Value* b2 = g->addConstant("b2", Tensor::zeros(DType::kF32, {1, m}));
  Value* w3 = g->addConstant("w3", Tensor::zeros(DType::kF32, {m, 64}));
  Node* g1 = addInferred(*g, OpKind::Gemm, {x, w1, b1}, {}, "g1");
  Node* s = addInferred(*g, OpKind::Sigmoid, {g1->output()}, {}, "s");
  AttrMap tb;
  tb.set("transB", int64_t{1});
  Node* g2 = addInferred(*g, OpKind::Gemm, {s->output(), w2, b2}, tb, "g2");
  Node* t = addInferred(*g, OpKind::Tanh, {g2->output()}, {}, "t");
  Node* mm = addInferred(*g, OpKind::MatMul, {t->output(), w3}, {}, "mm");
  g->addOutput(mm->output());
  return g;
}

// Self-attention over heads without projections: Reshape into heads,
// Transpose, scores, Softmax, weighted sum.
std::unique_ptr<Graph> headsBlock() {
  const int64_t b = 2, s = 32, heads = 4, d = 16;
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {b, s, heads * d}});
  Node* r = addInferred(*g, OpKind::Reshape, {x, i64Const(*g, "shape", {b, s, heads, d})}, {}, "r");
  AttrMap p1, p2;
  p1.set("perm", std::vector<int64_t>{0, 2, 1, 3});
  p2.set("perm", std::vector<int64_t>{0, 2, 3, 1});
  Node* q = addInferred(*g, OpKind::Transpose, {r->output()}, p1, "q");
  Node* kt = addInferred(*g, OpKind::Transpose, {r->output()}, p2, "kt");
  Node* sc = addInferred(*g, OpKind::MatMul, {q->output(), kt->output()}, {}, "scores");
  Node* sm = addInferred(*g, OpKind::Softmax, {sc->output()}, {}, "probs");
  Node* o = addInferred(*g, OpKind::MatMul, {sm->output(), q->output()}, {}, "o");
  g->addOutput(o->output());
  return g;
}

// Two layers that each scale their hidden units by one shared row (a
// value every layer reads, like a rotary table): the row stays live across
// the layers, and the layouts made of it differ between states (the
// dominance rule's case).
std::unique_ptr<Graph> sharedRow() {
  const int64_t b = 2, s = 16, h = 64, f = 128;
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {b, s, h}});
  Value* row = g->addInput("row", {DType::kF32, {1, 1, f}});
  for (int l = 0; l < 2; ++l) {
    Value* w1 = g->addConstant(strCat("w1_", l), Tensor::zeros(DType::kF32, {h, f}));
    Value* w2 = g->addConstant(strCat("w2_", l), Tensor::zeros(DType::kF32, {f, h}));
    Node* up = addInferred(*g, OpKind::MatMul, {x, w1}, {}, strCat("up", l));
    Node* scaled = addInferred(*g, OpKind::Mul, {up->output(), row}, {}, strCat("scaled", l));
    Node* down = addInferred(*g, OpKind::MatMul, {scaled->output(), w2}, {}, strCat("down", l));
    // the last layer's output is its product alone (fewer assignments to enumerate)
    x = l == 1 ? down->output() : addInferred(*g, OpKind::Add, {x, down->output()}, {}, strCat("res", l))->output();
  }
  g->addOutput(x);
  return g;
}

struct Problem {
  std::unique_ptr<Graph> g;
  Partition dp;  // data-parallel layouts only
};

Problem dataParallelOnly(const std::function<std::unique_ptr<Graph>()>& make, int dp, int tp) {
  Problem pr;
  pr.g = make();
  PartitionOptions po;
  po.gpus = dp * tp;
  po.dp = dp;
  po.tp = tp;
  po.tensorParallelSearch = false;
  auto p = partitionGraph(*pr.g, po);
  EXPECT_TRUE(p.ok()) << p.status().message();
  if (p.ok()) pr.dp = std::move(*p);
  return pr;
}

// \returns whether `a` is strictly better than `b` for the objective, beyond rounding.
bool strictlyBetter(const TpCost& a, const TpCost& b, bool minimizeWeights) {
  if (minimizeWeights && a.matrixBytes != b.matrixBytes) return a.matrixBytes < b.matrixBytes;
  return a.seconds < b.seconds * (1 - 1e-12);
}

struct Graphs {
  const char* name;
  std::function<std::unique_ptr<Graph>()> make;
};

const Graphs kGraphs[] = {
    {"mlp_block", mlpBlock}, {"gemm_chain", gemmChain}, {"heads", headsBlock}, {"shared_row", sharedRow}};

TEST(TpSearch, NoAssignmentIsCheaperThanTheSearchs) {
  CostModel cm(h100());
  struct Mesh2 { int dp, tp; };
  for (const Graphs& gr : kGraphs) {
    for (Mesh2 m : {Mesh2{1, 2}, Mesh2{2, 2}, Mesh2{1, 4}}) {
      for (bool minimizeWeights : {false, true}) {
        SCOPED_TRACE(strCat(gr.name, " dp=", m.dp, " tp=", m.tp, minimizeWeights ? " weights first" : " time"));
        Problem pr = dataParallelOnly(gr.make, m.dp, m.tp);
        std::vector<Node*> nodes = pr.g->nodes();
        ASSERT_LE(nodes.size(), 12u);
        std::vector<std::vector<TpChoice>> options;
        size_t combos = 1;
        for (const Node* n : nodes) {
          options.push_back(tpChoicesFor(*n, pr.dp));
          ASSERT_FALSE(options.back().empty());
          combos *= options.back().size();
        }
        ASSERT_LE(combos, 100000u);
        TpSearchOptions so;
        so.cost = &cm;
        so.minimizeWeights = minimizeWeights;
        auto found = searchTensorParallel(*pr.g, pr.dp, so);
        ASSERT_TRUE(found.ok()) << found.status().message();
        EXPECT_TRUE(found->exact);
        auto again = evaluateTpChoices(*pr.g, pr.dp, found->choices, cm);
        ASSERT_TRUE(again.ok()) << again.status().message();
        EXPECT_DOUBLE_EQ(again->seconds, found->cost.seconds);
        EXPECT_EQ(again->weightBytes, found->cost.weightBytes);
        // Every assignment, odometer order.
        std::vector<size_t> at(nodes.size(), 0);
        std::vector<TpChoice> choice(nodes.size());
        size_t evaluated = 0, cheaper = 0;
        std::string witness;
        for (;;) {
          for (size_t i = 0; i < nodes.size(); ++i) choice[i] = options[i][at[i]];
          auto c = evaluateTpChoices(*pr.g, pr.dp, choice, cm);
          ASSERT_TRUE(c.ok()) << c.status().message();
          ++evaluated;
          if (strictlyBetter(*c, found->cost, minimizeWeights)) {
            ++cheaper;
            if (witness.empty())
              for (size_t i = 0; i < nodes.size(); ++i)
                witness += strCat(nodes[i]->name(), "=", tpChoiceName(choice[i]), " ");
          }
          size_t i = 0;
          while (i < nodes.size() && ++at[i] == options[i].size()) at[i++] = 0;
          if (i == nodes.size()) break;
        }
        EXPECT_EQ(evaluated, combos);
        EXPECT_EQ(cheaper, 0u) << "cheaper: " << witness;
      }
    }
  }
}

TEST(TpSearch, ItsCostIsTheEstimateOfTheLoweredPlan) {
  CostModel cm(h100());
  std::mt19937 rng(11);
  for (const Graphs& gr : kGraphs) {
    for (int tp : {2, 4}) {
      SCOPED_TRACE(strCat(gr.name, " tp=", tp));
      Problem base = dataParallelOnly(gr.make, 1, tp);
      std::vector<std::vector<TpChoice>> options;
      for (const Node* n : base.g->nodes()) options.push_back(tpChoicesFor(*n, base.dp));
      TpSearchOptions so;
      so.cost = &cm;
      auto found = searchTensorParallel(*base.g, base.dp, so);
      ASSERT_TRUE(found.ok()) << found.status().message();
      for (int trial = 0; trial < 25; ++trial) {
        std::vector<TpChoice> choice = found->choices;
        if (trial > 0)
          for (size_t i = 0; i < choice.size(); ++i) choice[i] = options[i][rng() % options[i].size()];
        Problem pr = dataParallelOnly(gr.make, 1, tp);
        auto counted = evaluateTpChoices(*pr.g, pr.dp, choice, cm);
        ASSERT_TRUE(counted.ok()) << counted.status().message();
        applyTpChoices(*pr.g, pr.dp, choice);
        auto ranks = lowerToRanks(*pr.g, pr.dp);
        ASSERT_TRUE(ranks.ok()) << ranks.status().message();
        PlanEstimate e = estimatePlan(*ranks, pr.dp.mesh, cm, 1);
        EXPECT_NEAR(e.ranks[0].seconds(), counted->seconds, 1e-9 * counted->seconds) << "trial " << trial;
        // Lowering adds small index constants (slice bounds, local shapes) to
        // the weights, but no matrix; the matrices are the weights named w*.
        EXPECT_GE(e.ranks[0].weightBytes, counted->weightBytes);
        EXPECT_LE(e.ranks[0].weightBytes, counted->weightBytes + 4096);
        int64_t matrices = 0;
        for (const Value* c : (*ranks)[0].graph->constants())
          if (c->name()[0] == 'w') matrices += static_cast<int64_t>(c->type().bytes());  // w1, w2, w3
        EXPECT_EQ(matrices, counted->matrixBytes);
      }
    }
  }
}

// Zero pages that are never written: views of them hold a layer's weights
// without using memory, until something reads them.
struct ZeroPages {
  explicit ZeroPages(size_t bytes) : size(bytes) {
    base = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  ~ZeroPages() {
    if (base != MAP_FAILED) munmap(base, size);
  }
  Tensor view(DType t, Dims shape) const { return Tensor::view(t, std::move(shape), base, nullptr); }
  void* base;
  size_t size;
};

// One LLaMA-13B decoder layer, fp16: RMSNorm, q/k/v projections, 40 heads of
// 128 by Reshape/Transpose, softmax attention, output projection, residual,
// RMSNorm, SwiGLU MLP (13824), residual, and the next layer's RMSNorm.
std::unique_ptr<Graph> llamaLayer(const ZeroPages& zeros, int64_t seq) {
  const int64_t h = 5120, heads = 40, d = 128, f = 13824;
  const DType t = DType::kF16;
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {t, {1, seq, h}});
  auto weight = [&](const std::string& name, Dims shape) { return g->addConstant(name, zeros.view(t, shape)); };
  auto mm = [&](Value* a, Value* w, const std::string& name) {
    return addInferred(*g, OpKind::MatMul, {a, w}, {}, name)->output();
  };
  AttrMap norm;
  norm.set("axis", int64_t{-1});
  Value* h1 = addInferred(*g, OpKind::RMSNormalization, {x, weight("norm1", {h})}, norm, "norm1")->output();
  Value* shape = i64Const(*g, "heads", {1, seq, heads, d});
  AttrMap toHeads, toHeadsT, back;
  toHeads.set("perm", std::vector<int64_t>{0, 2, 1, 3});
  toHeadsT.set("perm", std::vector<int64_t>{0, 2, 3, 1});
  back.set("perm", std::vector<int64_t>{0, 2, 1, 3});
  auto heads4 = [&](Value* v, const AttrMap& perm, const std::string& name) {
    Value* r = addInferred(*g, OpKind::Reshape, {v, shape}, {}, name + ".r")->output();
    return addInferred(*g, OpKind::Transpose, {r}, perm, name + ".t")->output();
  };
  Value* q = heads4(mm(h1, weight("wq", {h, h}), "q"), toHeads, "q");
  Value* k = heads4(mm(h1, weight("wk", {h, h}), "k"), toHeadsT, "k");
  Value* v = heads4(mm(h1, weight("wv", {h, h}), "v"), toHeads, "v");
  Value* s = mm(q, k, "scores");
  Value* scale = g->addConstant("scale", Tensor::zeros(t, {}));
  Value* ss = addInferred(*g, OpKind::Mul, {s, scale}, {}, "scaled")->output();
  Value* p = addInferred(*g, OpKind::Softmax, {ss}, {}, "probs")->output();
  Value* o = mm(p, v, "attn");
  Value* ot = addInferred(*g, OpKind::Transpose, {o}, back, "attn.t")->output();
  Value* merged = addInferred(*g, OpKind::Reshape, {ot, i64Const(*g, "merge", {1, seq, h})}, {}, "attn.r")->output();
  Value* r1 = addInferred(*g, OpKind::Add, {x, mm(merged, weight("wo", {h, h}), "o")}, {}, "res1")->output();
  Value* h2 = addInferred(*g, OpKind::RMSNormalization, {r1, weight("norm2", {h})}, norm, "norm2")->output();
  Value* gate = mm(h2, weight("wgate", {h, f}), "gate");
  Value* sg = addInferred(*g, OpKind::Sigmoid, {gate}, {}, "gate.sigmoid")->output();
  Value* silu = addInferred(*g, OpKind::Mul, {gate, sg}, {}, "gate.silu")->output();
  Value* up = mm(h2, weight("wup", {h, f}), "up");
  Value* prod = addInferred(*g, OpKind::Mul, {silu, up}, {}, "swiglu")->output();
  Value* down = mm(prod, weight("wdown", {f, h}), "down");
  Value* r2 = addInferred(*g, OpKind::Add, {r1, down}, {}, "res2")->output();
  // The next layer (or the final norm) reads the stream whole along its width.
  g->addOutput(addInferred(*g, OpKind::RMSNormalization, {r2, weight("norm3", {h})}, norm, "norm3")->output());
  return g;
}

// Megatron's plan for llamaLayer, node by node.
std::vector<TpChoice> megatron(const Graph& g) {
  const TpChoice rep{}, contract{TpChoice::kContract, 0};
  auto dim = [](int d) { return TpChoice{TpChoice::kSplitOutput, d}; };
  std::map<std::string, TpChoice> plan = {
      {"q", dim(2)},        {"k", dim(2)},        {"v", dim(2)},         {"q.r", dim(2)},   {"k.r", dim(2)},
      {"v.r", dim(2)},      {"q.t", dim(1)},      {"k.t", dim(1)},       {"v.t", dim(1)},   {"scores", dim(1)},
      {"scaled", dim(1)},   {"probs", dim(1)},    {"attn", dim(1)},      {"attn.t", dim(2)}, {"attn.r", dim(2)},
      {"o", contract},      {"gate", dim(2)},     {"gate.sigmoid", dim(2)}, {"gate.silu", dim(2)},
      {"up", dim(2)},       {"swiglu", dim(2)},   {"down", contract}};
  std::vector<TpChoice> out;
  for (const Node* n : g.nodes()) out.push_back(plan.count(n->name()) ? plan.at(n->name()) : rep);
  return out;
}

std::string layoutOf(const Graph& g, const char* name) {
  for (Node* n : g.nodes())
    if (n->name() == name) return n->output()->sharding()->str();
  return std::string("(no node ") + name + ")";
}

TEST(TpSearch, ALlama13bLayerSplitsItsHeadsAndBeatsMegatronOnTime) {
  ZeroPages zeros(size_t{5120} * 13824 * 2);
  ASSERT_NE(zeros.base, MAP_FAILED);
  Problem pr = dataParallelOnly([&] { return llamaLayer(zeros, 2048); }, 1, 8);
  const Graph& g = *pr.g;
  CostModel cm(h100());
  TpSearchOptions so;
  so.cost = &cm;
  auto found = searchTensorParallel(g, pr.dp, so);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_TRUE(found->exact);
  auto meg = evaluateTpChoices(g, pr.dp, megatron(g), cm);
  ASSERT_TRUE(meg.ok()) << meg.status().message();
  // Time alone: at least as fast as Megatron's plan (on this cost model it is
  // faster: the heads split as Megatron's, then the MLP takes a slice of the
  // positions with whole weights, one all-gather instead of two all-reduces).
  EXPECT_LE(found->cost.seconds, meg->seconds);
  std::vector<Node*> nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i]->name() == "scores") {
      EXPECT_EQ(tpChoiceName(found->choices[i]), "split dim 1");
    }
  }
}

// Megatron's plan for llamaLayer(zeros, seq) at tp=8 costs, and `p` (the
// search's, weights first) is no slower and holds the same weight bytes.
void expectNoWorseThanMegatron(ZeroPages& zeros, int64_t seq, const Partition& p, const CostModel& cm) {
  Problem base = dataParallelOnly([&] { return llamaLayer(zeros, seq); }, 1, 8);
  auto megCost = evaluateTpChoices(*base.g, base.dp, megatron(*base.g), cm);
  ASSERT_TRUE(megCost.ok()) << megCost.status().message();
  EXPECT_LE(p.tpSeconds, megCost->seconds);
  EXPECT_EQ(p.tpWeightBytes, megCost->weightBytes);
}

TEST(TpSearch, ALlama13bLayerSavingWeightsCommunicatesNoMoreThanMegatron) {
  ZeroPages zeros(size_t{5120} * 13824 * 2);
  ASSERT_NE(zeros.base, MAP_FAILED);
  auto g = llamaLayer(zeros, 2048);
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 8;
  po.tp = 8;
  po.cost = &cm;
  po.minimizeWeights = true;  // as for --strategy tp=8, or a model too large otherwise
  auto p = partitionGraph(*g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->tpExact);
  // The projections that open each half split their output features (column
  // parallel); the heads follow through Reshape/Transpose.
  for (const char* col : {"q", "k", "v", "gate", "up"}) EXPECT_EQ(layoutOf(*g, col), "[-,-,tp]") << col;
  EXPECT_EQ(layoutOf(*g, "scores"), "[-,tp,-,-]");
  EXPECT_EQ(layoutOf(*g, "attn"), "[-,tp,-,-]");
  // No slower than Megatron's plan, and communicating no more: two
  // all-reduces of the [1, 2048, 5120] stream, or the equivalent all-gathers
  // and reduce-scatters (a ring all-reduce moves twice what an all-gather of
  // the same tensor does, or a reduce-scatter of it; an all-to-all moves 1/n
  // of what an all-gather of its output would).
  expectNoWorseThanMegatron(zeros, 2048, *p, cm);
  auto r0 = lowerRank(*g, *p, 0);
  ASSERT_TRUE(r0.ok()) << r0.status().message();
  const int64_t stream = 2 * 2048 * 5120;
  int64_t moved = 0;
  for (Node* n : r0->graph->nodes()) {
    if (n->op() == OpKind::AllReduce) moved += 2 * static_cast<int64_t>(n->output()->type().bytes());
    else if (n->op() == OpKind::AllGather) moved += static_cast<int64_t>(n->output()->type().bytes());
    else if (n->op() == OpKind::ReduceScatter) moved += static_cast<int64_t>(n->input(0)->type().bytes());
    else if (n->op() == OpKind::AllToAll) moved += static_cast<int64_t>(n->input(0)->type().bytes());
    else EXPECT_FALSE(isCollective(n->op())) << n->describe();
  }
  // The partial sum of the attention's output projection is reduce-scattered
  // over the positions and gathered before the MLP's column-split
  // projections, and the MLP's partial sum is reduce-scattered and stays
  // split (a graph output keeps one split dimension): three units where
  // Megatron's two all-reduces, which also make the output whole, are four.
  EXPECT_EQ(moved, 3 * stream);
  // Every weight matrix is an eighth on each rank.
  int64_t matrices = 0;
  for (const Value* c : r0->graph->constants())
    if (c->type().rank() == 2) matrices += static_cast<int64_t>(c->type().numel());
  EXPECT_EQ(matrices, (4 * 5120 * 5120 + 3 * 5120 * 13824) / 8);
}

}  // namespace
}  // namespace pcc

namespace pcc {
namespace {

// A decode step: one token of one sequence, [1, 1, width]. Dims of size 1 link
// to nothing in a Reshape (they once tied the heads' split to the batch and
// sequence dims, which cannot split, so the heads could not split at all).
TEST(TpSearch, ADecodeStepOfOneTokenSplitsItsHeadsWithTwoAllReducesALayer) {
  std::vector<DimLink> l = reshapeLinks({1, 1, 64}, {1, 1, 4, 16});
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].outDim, -1);
  EXPECT_EQ(l[1].outDim, -1);
  EXPECT_EQ(l[2].outDim, 2);
  ZeroPages zeros(size_t{5120} * 13824 * 2);
  ASSERT_NE(zeros.base, MAP_FAILED);
  auto g = llamaLayer(zeros, 1);
  CostModel cm(h100());
  PartitionOptions po;
  po.gpus = 8;
  po.tp = 8;
  po.cost = &cm;
  po.minimizeWeights = true;
  auto p = partitionGraph(*g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(layoutOf(*g, "q.r"), "[-,-,tp,-]");
  EXPECT_EQ(layoutOf(*g, "scores"), "[-,tp,-,-]");
  // Megatron's plan is a valid assignment at this shape, and the search's is
  // no slower and holds no more weight bytes.
  expectNoWorseThanMegatron(zeros, 1, *p, cm);
  // A token's stream is a few KiB: each collective costs its launch and its
  // latency, so the layer's two all-reduces are all it communicates.
  auto r0 = lowerRank(*g, *p, 0);
  ASSERT_TRUE(r0.ok()) << r0.status().message();
  int allReduces = 0;
  for (Node* n : r0->graph->nodes()) {
    if (n->op() == OpKind::AllReduce) ++allReduces;
    else EXPECT_FALSE(isCollective(n->op())) << n->describe();
  }
  EXPECT_EQ(allReduces, 2);
}

// Tile: a dimension repeated once keeps the input's split (grouped-query
// attention's kv heads repeated by Tile split by kv head).
TEST(TpSearch, TileLinksTheDimensionsItRepeatsOnce) {
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {2, 4, 1, 8, 16}});
  Node* t = addInferred(*g, OpKind::Tile, {x, i64Const(*g, "repeats", {1, 1, 3, 1, 1})}, {}, "tile");
  g->addOutput(t->output());
  OpDimMap m = dimMapFor(*t);
  ASSERT_EQ(m.links[0].size(), 5u);
  for (int d : {0, 1, 3, 4}) EXPECT_EQ(m.links[0][d].outDim, d);
  EXPECT_EQ(m.links[0][2].outDim, -1);
  EXPECT_TRUE(m.links[1].empty() || m.links[1][0].outDim == -1);  // the repeats link to nothing
}

// A generation plan's prefill follows its decode step (docs/generation.md#prefill):
// pinned to another partition's choices, the search takes them whatever it
// would choose itself, and refuses one the node cannot take.
TEST(TpSearch, PinnedChoicesAreTakenAndAnImpossibleOneIsRefused) {
  CostModel cm(h100());
  auto a = mlpBlock();
  PartitionOptions po;
  po.gpus = 2;
  po.tp = 2;
  po.cost = &cm;
  auto searched = partitionGraph(*a, po);
  ASSERT_TRUE(searched.ok()) << searched.status().message();
  ASSERT_FALSE(searched->tpChoices.empty());
  // Pinned to "replicate" everywhere: nothing is split, though splitting was faster.
  std::map<std::string, TpChoice> replicate;
  for (const auto& [key, c] : searched->tpChoices) replicate[key] = TpChoice{};
  auto b = mlpBlock();
  po.pinnedTp = &replicate;
  auto pinned = partitionGraph(*b, po);
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  EXPECT_TRUE(pinned->tensorParallel.empty());
  for (const auto& [key, c] : pinned->tpChoices) EXPECT_EQ(c, TpChoice{}) << key;
  // The searched choices, pinned on a fresh copy: the same choice for every node.
  auto c = mlpBlock();
  po.pinnedTp = &searched->tpChoices;
  auto same = partitionGraph(*c, po);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(same->tpChoices, searched->tpChoices);
  // Splitting the Relu's output dim 0 (batch 4) is possible; dim 5 is not a dim.
  std::map<std::string, TpChoice> impossible = searched->tpChoices;
  for (auto& [key, ch] : impossible)
    if (key.rfind("Relu ", 0) == 0) ch = TpChoice{TpChoice::kSplitOutput, 5};
  auto d = mlpBlock();
  po.pinnedTp = &impossible;
  auto refused = partitionGraph(*d, po);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("'act'"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("the plan it follows"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace pcc

namespace pcc {
namespace {

// `layers` small LLaMA-like layers (width 64, 4 heads, FFN 128, 16 positions,
// batch 2), each also multiplying its queries by one table all layers share
// (as a rotary table is), and a final norm and head.
std::unique_ptr<Graph> stackedLayers(int layers) {
  const int64_t b = 2, seq = 16, h = 64, heads = 4, d = 16, f = 128;
  const DType t = DType::kF32;
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {t, {b, seq, h}});
  Value* table = g->addConstant("table", Tensor::zeros(t, {seq, h}));
  Value* heads4 = i64Const(*g, "heads", {b, seq, heads, d});
  Value* merge = i64Const(*g, "merge", {b, seq, h});
  AttrMap norm, toHeads, toHeadsT, back;
  norm.set("axis", int64_t{-1});
  toHeads.set("perm", std::vector<int64_t>{0, 2, 1, 3});
  toHeadsT.set("perm", std::vector<int64_t>{0, 2, 3, 1});
  back.set("perm", std::vector<int64_t>{0, 2, 1, 3});
  for (int l = 0; l < layers; ++l) {
    const std::string p = "l" + std::to_string(l) + ".";
    auto w = [&](const std::string& name, Dims shape) { return g->addConstant(p + name, Tensor::zeros(t, shape)); };
    auto node = [&](OpKind op, std::vector<Value*> ins, const std::string& name, const AttrMap& a = {}) {
      return addInferred(*g, op, std::move(ins), a, p + name)->output();
    };
    auto split = [&](Value* v, const AttrMap& perm, const std::string& name) {
      return node(OpKind::Transpose, {node(OpKind::Reshape, {v, heads4}, name + ".r")}, name + ".t", perm);
    };
    Value* n1 = node(OpKind::RMSNormalization, {x, w("norm1", {h})}, "norm1", norm);
    Value* q = node(OpKind::Mul, {node(OpKind::MatMul, {n1, w("wq", {h, h})}, "q"), table}, "q.rot");
    Value* k = node(OpKind::MatMul, {n1, w("wk", {h, h})}, "k");
    Value* v = node(OpKind::MatMul, {n1, w("wv", {h, h})}, "v");
    Value* s = node(OpKind::MatMul, {split(q, toHeads, "q"), split(k, toHeadsT, "k")}, "scores");
    Value* pr = node(OpKind::Softmax, {s}, "probs");
    Value* o = node(OpKind::MatMul, {pr, split(v, toHeads, "v")}, "attn");
    Value* merged = node(OpKind::Reshape, {node(OpKind::Transpose, {o}, "attn.t", back), merge}, "attn.r");
    Value* r1 = node(OpKind::Add, {x, node(OpKind::MatMul, {merged, w("wo", {h, h})}, "o")}, "res1");
    Value* n2 = node(OpKind::RMSNormalization, {r1, w("norm2", {h})}, "norm2", norm);
    Value* up = node(OpKind::Relu, {node(OpKind::MatMul, {n2, w("wup", {h, f})}, "up")}, "act");
    x = node(OpKind::Add, {r1, node(OpKind::MatMul, {up, w("wdown", {f, h})}, "down")}, "res2");
  }
  Value* out = addInferred(*g, OpKind::RMSNormalization, {x, g->addConstant("normf", Tensor::zeros(t, {h}))}, norm,
                           "normf")->output();
  g->addOutput(addInferred(*g, OpKind::MatMul, {out, g->addConstant("head", Tensor::zeros(t, {h, 96}))}, {}, "head")
                   ->output());
  return g;
}

// Folding the repeated layers gives the search's result: the same cost (to
// the rounding of summed times) and weight bytes, and choices that cost what
// the search says when evaluated on their own; and it skips layers (time
// first).
TEST(TpSearch, FoldedLayersCostWhatSearchingEveryLayerCosts) {
  for (int tp : {2, 4}) {
    for (bool weightsFirst : {false, true}) {
      for (int dp : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << "tp=" << tp << " dp=" << dp << " weightsFirst=" << weightsFirst);
        Problem pr = dataParallelOnly([] { return stackedLayers(6); }, dp, tp);
        CostModel cm(h100());
        TpSearchOptions so;
        so.cost = &cm;
        so.minimizeWeights = weightsFirst;
        so.fold = false;
        auto full = searchTensorParallel(*pr.g, pr.dp, so);
        ASSERT_TRUE(full.ok()) << full.status().message();
        so.fold = true;
        auto folded = searchTensorParallel(*pr.g, pr.dp, so);
        ASSERT_TRUE(folded.ok()) << folded.status().message();
        EXPECT_EQ(full->foldedBlocks, 0);
        // The first layer (which reads the input and the shared table first)
        // and the last (which the final norm reads) differ from the others.
        EXPECT_EQ(folded->repeats, 4);
        // Time first, every state's cost grows by the same amount a layer once
        // the layers are steady; weights first, states of equal weight bytes
        // may grow by different times, and the search does not skip then.
        if (!weightsFirst) {
          EXPECT_GT(folded->foldedBlocks, 0);
        }
        EXPECT_EQ(folded->exact, full->exact);
        if (!weightsFirst) {
          EXPECT_TRUE(full->exact);
        }
        EXPECT_NEAR(folded->cost.seconds, full->cost.seconds, 1e-9 * full->cost.seconds);
        EXPECT_EQ(folded->cost.weightBytes, full->cost.weightBytes);
        EXPECT_EQ(folded->cost.matrixBytes, full->cost.matrixBytes);
        auto replay = evaluateTpChoices(*pr.g, pr.dp, folded->choices, cm);
        ASSERT_TRUE(replay.ok()) << replay.status().message();
        EXPECT_NEAR(replay->seconds, folded->cost.seconds, 1e-9 * folded->cost.seconds);
        EXPECT_EQ(replay->weightBytes, folded->cost.weightBytes);
        // Every layer got the same choices (the steady state's).
        std::vector<Node*> nodes = pr.g->nodes();
        std::map<std::string, std::string> first;
        for (size_t i = 0; i < nodes.size(); ++i) {
          const std::string& name = nodes[i]->name();
          if (name.size() < 3 || name[0] != 'l') continue;
          const std::string role = name.substr(name.find('.') + 1);
          const int layer = std::stoi(name.substr(1));
          if (layer < 2) continue;  // the layers before the steady state may differ
          auto [it, added] = first.emplace(role, tpChoiceName(folded->choices[i]));
          if (!added) {
            EXPECT_EQ(it->second, tpChoiceName(folded->choices[i])) << name;
          }
        }
      }
    }
  }
}

// A graph whose layers differ (every layer's width differs) has no repeats:
// nothing is folded.
TEST(TpSearch, LayersThatDifferAreNotFolded) {
  const int64_t b = 2, seq = 8;
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {b, seq, 32}});
  int64_t width = 32;
  for (int l = 0; l < 6; ++l) {
    const int64_t next = 32 + 16 * (l + 1);
    Value* w = g->addConstant("w" + std::to_string(l), Tensor::zeros(DType::kF32, {width, next}));
    Value* m = addInferred(*g, OpKind::MatMul, {x, w}, {}, "mm" + std::to_string(l))->output();
    x = addInferred(*g, OpKind::Relu, {m}, {}, "relu" + std::to_string(l))->output();
    width = next;
  }
  g->addOutput(x);
  Problem pr;
  pr.g = std::move(g);
  PartitionOptions po;
  po.gpus = 2;
  po.tp = 2;
  po.tensorParallelSearch = false;
  auto p = partitionGraph(*pr.g, po);
  ASSERT_TRUE(p.ok()) << p.status().message();
  CostModel cm(h100());
  TpSearchOptions so;
  so.cost = &cm;
  auto r = searchTensorParallel(*pr.g, *p, so);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->foldedBlocks, 0);
  EXPECT_EQ(r->repeats, 0);
}

}  // namespace
}  // namespace pcc
