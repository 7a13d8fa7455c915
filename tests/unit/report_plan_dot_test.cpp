// The graph reports on hand-built plans: how plan_layout reads the split of
// each kernel from the rank shapes, how plan_dot colours and escapes it, and
// what the HTML page holds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "report/graphviz.h"
#include "report/plan_dot.h"
#include "report/plan_html.h"
#include "report/plan_layout.h"
#include "report/text_escape.h"
#include "runtime/plan_convert.h"

namespace pcc {
namespace {

/// Builds one program: buffers by name, kernels and collectives over them.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(plan::RankProgram& prog) : prog_(prog) {}

  /// \returns the id of a new buffer `name` of type `t`; `weight` binds it to a new weight.
  int buffer(const std::string& name, const TensorType& t, bool weight = false) {
    plan::Buffer* b = prog_.add_buffers();
    b->set_id(prog_.buffers_size() - 1);
    b->set_name(name);
    *b->mutable_desc() = toDesc(t);
    b->set_weight(-1);
    if (weight) {
      plan::Weight* w = prog_.add_weights();
      w->set_name(name);
      w->set_nbytes(t.bytes());
      b->set_weight(prog_.weights_size() - 1);
    }
    return b->id();
  }
  void kernel(const std::string& op, const std::string& node, std::vector<int> in, int out) {
    plan::Instruction* ins = prog_.add_instructions();
    ins->set_kind(plan::Instruction::KERNEL);
    ins->set_op(op);
    ins->set_node(node);
    for (int i : in) ins->add_inputs(i);
    ins->add_outputs(out);
  }
  void allReduce(const std::string& node, int in, int out, int group) {
    plan::Instruction* ins = prog_.add_instructions();
    ins->set_kind(plan::Instruction::ALL_REDUCE);
    ins->set_op("AllReduce");
    ins->set_node(node);
    ins->add_inputs(in);
    ins->add_outputs(out);
    ins->set_group(group);
  }
  void input(int buffer, int index, int splitDim = -1) {
    plan::IoBinding* b = prog_.add_inputs();
    b->set_buffer(buffer);
    b->set_index(index);
    b->set_split_dim(splitDim);
  }
  void output(int buffer, int index) {
    plan::IoBinding* b = prog_.add_outputs();
    b->set_buffer(buffer);
    b->set_index(index);
    b->set_split_dim(-1);
  }

 private:
  plan::RankProgram& prog_;
};

const std::string kFc1 = "fc1";

/// x[B,8] -> fc1: MatMul with w1[8,16] -> act: Relu -> fc2: MatMul with
/// w2[16,8] -> y[B,8], on a dp x tp mesh (one stage): the batch split over dp,
/// fc1 and act split over tp (columns), fc2's partial sums all-reduced over tp
/// (Megatron's pair). `fc1` names the first MatMul.
plan::Plan mlpPlan(int dp, int tp, int batch = 8, const std::string& fc1 = kFc1) {
  plan::Plan p;
  p.set_schema_version(7);
  p.set_model("mlp.onnx");
  p.mutable_mesh()->set_pp(1);
  p.mutable_mesh()->set_dp(dp);
  p.mutable_mesh()->set_tp(tp);
  for (const char* name : {"x"}) {
    plan::IoDesc* d = p.add_inputs();
    d->set_name(name);
    *d->mutable_desc() = toDesc({DType::kF32, {batch, 8}});
  }
  plan::IoDesc* out = p.add_outputs();
  out->set_name("y");
  *out->mutable_desc() = toDesc({DType::kF32, {batch, 8}});
  // The tp groups: ranks with one dp coordinate.
  for (int d = 0; d < dp && tp > 1; ++d) {
    plan::Group* g = p.add_groups();
    g->set_axis("tp");
    for (int t = 0; t < tp; ++t) g->add_ranks(d * tp + t);
  }
  auto program = [&](plan::RankProgram& prog, int rank, int dpParts, int tpParts, int d) {
    prog.set_rank(rank);
    ProgramBuilder b(prog);
    int64_t rows = batch / dpParts, cols = 16 / tpParts;
    int x = b.buffer("x", {DType::kF32, {rows, 8}});
    int w1 = b.buffer("w1", {DType::kF32, {8, cols}}, true);
    int h = b.buffer("h", {DType::kF32, {rows, cols}});
    int a = b.buffer("a", {DType::kF32, {rows, cols}});
    int w2 = b.buffer("w2", {DType::kF32, {cols, 8}}, true);
    int y = b.buffer("y", {DType::kF32, {rows, 8}});
    b.input(x, 0, dpParts > 1 ? 0 : -1);
    b.kernel("MatMul", fc1, {x, w1}, h);
    b.kernel("Relu", "act", {h}, a);
    b.kernel("MatMul", "fc2", {a, w2}, y);
    if (tpParts > 1) {
      int sum = b.buffer("y.allreduce", {DType::kF32, {rows, 8}});
      b.allReduce("y.allreduce", y, sum, d);
      y = sum;
    }
    b.output(y, 0);
  };
  for (int d = 0; d < dp; ++d)
    for (int t = 0; t < tp; ++t) {
      plan::RankProgram* prog = p.add_ranks();
      program(*prog, d * tp + t, dp, tp, d);
      for (int c : {0, d, t}) prog->add_mesh_coord(c);
    }
  program(*p.mutable_reference(), 0, 1, 1, 0);
  return p;
}

/// \returns the attributes of node `id` in `dot` ("" if absent).
std::string nodeAttrs(const std::string& dot, const std::string& id) {
  std::smatch m;
  if (!std::regex_search(dot, m, std::regex("\\n *" + id + " \\[(.*)\\];\\n"))) return "";
  return m[1];
}

std::string fillOf(const std::string& layoutClass) { return "fillcolor=\"" + styleOf(layoutClass).fill + "\""; }

TEST(PlanLayout, TensorParallelColumnsAreSplitOverTpAndTheRowProductIsReplicated) {
  PlanLayout l = planLayout(mlpPlan(1, 2));
  ASSERT_EQ(l.kernels.size(), 3u);
  const KernelLayout& fc1 = l.kernels[0];
  EXPECT_EQ(fc1.node, "fc1");
  EXPECT_EQ(fc1.layoutClass(), "tp");
  ASSERT_EQ(fc1.splits.size(), 1u);
  EXPECT_EQ(fc1.splits[0].dim, 1);
  EXPECT_EQ(fc1.splits[0].extent, 16);
  EXPECT_EQ(fc1.splits[0].rankExtent, 8);
  EXPECT_EQ(l.kernels[1].layoutClass(), "tp");
  EXPECT_EQ(l.kernels[2].layoutClass(), "replicated");
  EXPECT_EQ(l.kernels[2].rankCount, 2);
  // The all-reduce sits between fc2 and the output: fc2 -> c0 -> out0.
  ASSERT_EQ(l.collectives.size(), 1u);
  const CollectiveSite& c = l.collectives[0];
  EXPECT_EQ(c.kind, "all_reduce");
  EXPECT_EQ(c.axis, "tp");
  EXPECT_EQ(c.groupSize, 2);
  EXPECT_EQ(c.producer, 2);
  EXPECT_EQ(c.outputs, std::vector<int>{0});
  EXPECT_EQ(c.rankCount, 2);
  EXPECT_EQ(l.outputProducers, std::vector<int>{-1});
  EXPECT_EQ(l.edges, (std::vector<std::pair<int, int>>{{0, 1}, {1, 2}}));
  EXPECT_EQ(l.inputConsumers, std::vector<std::vector<int>>{{0}});
}

TEST(PlanLayout, DataParallelSplitsTheBatch) {
  PlanLayout l = planLayout(mlpPlan(4, 1, 8));
  for (const KernelLayout& k : l.kernels) {
    EXPECT_EQ(k.layoutClass(), "dp") << k.node;
    ASSERT_EQ(k.splits.size(), 1u);
    EXPECT_EQ(k.splits[0].dim, 0);
    EXPECT_EQ(k.splits[0].rankExtent, 2);
  }
  EXPECT_TRUE(l.collectives.empty());
}

TEST(PlanLayout, EqualDpAndTpAreToldApartByTheBatch) {
  // dp = tp = 2: along both lines of ranks the pieces add up, so only the batch
  // says which dimension dp splits.
  PlanLayout l = planLayout(mlpPlan(2, 2, 8));
  const KernelLayout& fc1 = l.kernels[0];
  EXPECT_EQ(fc1.layoutClass(), "dp+tp");
  ASSERT_EQ(fc1.splits.size(), 2u);
  EXPECT_EQ(fc1.splits[0].dim, 0);
  EXPECT_EQ(fc1.splits[0].axis, "dp");
  EXPECT_EQ(fc1.splits[1].dim, 1);
  EXPECT_EQ(fc1.splits[1].axis, "tp");
  EXPECT_EQ(l.kernels[2].layoutClass(), "dp");
  // Two tp groups run the same all-reduce: one site, four ranks.
  ASSERT_EQ(l.collectives.size(), 1u);
  EXPECT_EQ(l.collectives[0].rankCount, 4);
}

TEST(PlanLayout, UnevenBatchPiecesStillAddUp) {
  PlanLayout l = planLayout(mlpPlan(1, 1, 6));
  EXPECT_EQ(l.kernels[0].layoutClass(), "replicated");
  // 6 rows over dp=4: 2, 2, 1, 1.
  plan::Plan p = mlpPlan(4, 1, 8);
  for (int r = 0; r < 4; ++r) {
    plan::RankProgram* prog = p.mutable_ranks(r);
    for (plan::Buffer& b : *prog->mutable_buffers())
      if (b.weight() < 0) b.mutable_desc()->set_shape(0, r < 2 ? 2 : 1);
  }
  for (plan::Buffer& b : *p.mutable_reference()->mutable_buffers())
    if (b.weight() < 0) b.mutable_desc()->set_shape(0, 6);
  l = planLayout(p);
  EXPECT_EQ(l.kernels[0].layoutClass(), "dp");
  EXPECT_EQ(l.kernels[0].splits[0].rankExtent, 2);
}

TEST(PlanLayout, KernelsNoRankRunsAreAbsentAndUnknownSplitsAreSaid) {
  plan::Plan p = mlpPlan(1, 2);
  // The passes fused act away on every rank; fc2's output shrank along rows
  // although no line of ranks adds up to the whole.
  for (plan::RankProgram& prog : *p.mutable_ranks()) {
    prog.mutable_instructions(1)->set_node("fused act");
    prog.mutable_buffers(5)->mutable_desc()->set_shape(0, 3);
  }
  PlanLayout l = planLayout(p);
  EXPECT_EQ(l.kernels[1].layoutClass(), "absent");
  EXPECT_EQ(l.kernels[1].stage, -1);
  EXPECT_EQ(l.kernels[2].layoutClass(), "?");
  EXPECT_EQ(styleOf(l.kernels[2].layoutClass()).layoutClass, "split");
}

TEST(PlanLayout, ARewrittenNodeStandsForThePatternsRoot) {
  plan::Plan p = mlpPlan(1, 2);
  // A rewrite replaced the pattern rooted at act: its node is "act/Gelu".
  for (plan::RankProgram& prog : *p.mutable_ranks()) {
    prog.mutable_instructions(1)->set_node("act/Gelu");
    prog.mutable_instructions(1)->set_op("Gelu");
  }
  PlanLayout l = planLayout(p);
  EXPECT_EQ(l.kernels[1].layoutClass(), "tp");
  EXPECT_EQ(l.kernels[1].fusedAs, "Gelu");
  EXPECT_EQ(l.kernels[0].fusedAs, "");
  EXPECT_NE(nodeAttrs(planGraphDot(p), "k1").find("run as Gelu (rewritten)"), std::string::npos);
}

TEST(PlanDot, ColoursATensorParallelNodeApartFromAReplicatedOne) {
  std::string dot = planGraphDot(mlpPlan(1, 2));
  std::string fc1 = nodeAttrs(dot, "k0"), fc2 = nodeAttrs(dot, "k2");
  EXPECT_NE(fc1.find(fillOf("tp")), std::string::npos) << fc1;
  EXPECT_NE(fc1.find("class=\"layout-tp\""), std::string::npos) << fc1;
  EXPECT_NE(fc1.find("split d1 16->8 over tp"), std::string::npos) << fc1;
  EXPECT_NE(fc2.find(fillOf("replicated")), std::string::npos) << fc2;
  EXPECT_NE(fc2.find("class=\"layout-replicated\""), std::string::npos) << fc2;
  EXPECT_NE(styleOf("tp").fill, styleOf("replicated").fill);
  // The collective is a node of its own on the path fc2 -> output.
  EXPECT_NE(nodeAttrs(dot, "c0").find("all_reduce\\nover tp (2 ranks)"), std::string::npos) << dot;
  for (const char* edge : {"k2 -> c0", "c0 -> out0", "k0 -> k1", "k1 -> k2", "in0 -> k0"})
    EXPECT_NE(dot.find(edge), std::string::npos) << edge;
  EXPECT_EQ(dot.find("k2 -> out0"), std::string::npos) << "the collective sits on that edge";
  // The legend names every class.
  for (const LayoutStyle& s : layoutStyles()) EXPECT_NE(dot.find(">" + s.layoutClass + "<br/>"), std::string::npos);
}

TEST(PlanDot, OneClusterPerStage) {
  plan::Plan p = mlpPlan(1, 2);
  p.mutable_ranks(1)->set_stage(1);  // as pipelining would place it
  p.mutable_ranks(1)->mutable_instructions(0)->set_node("elsewhere");
  p.mutable_ranks(0)->mutable_instructions(1)->set_node("elsewhere too");
  p.mutable_ranks(0)->mutable_instructions(2)->set_node("and here");
  std::string dot = planGraphDot(p);
  size_t s0 = dot.find("subgraph cluster_stage_0 {"), s1 = dot.find("subgraph cluster_stage_1 {");
  ASSERT_NE(s0, std::string::npos) << dot;
  ASSERT_NE(s1, std::string::npos) << dot;
  size_t k0 = dot.find("    k0 ["), k1 = dot.find("    k1 ["), k2 = dot.find("    k2 [");
  EXPECT_TRUE(s0 < k0 && k0 < s1) << dot;  // fc1 only on rank 0, stage 0
  EXPECT_TRUE(s1 < k1 && s1 < k2) << dot;  // act and fc2 only on rank 1, stage 1
}

TEST(PlanDot, EscapesQuotesBackslashesNewlinesAndBytesThatAreNotUtf8) {
  const std::string nasty = "fc1 \"quoted\" back\\slash\nline\xff\xfe end\x01";
  plan::Plan p = mlpPlan(1, 2, 8, nasty);
  p.set_model("m\"o\\d<el>.onnx");
  std::string dot = planGraphDot(p);
  EXPECT_NE(dot.find("fc1 \\\"quoted\\\" back\\\\slash\\nline\xEF\xBF\xBD\xEF\xBF\xBD end\xEF\xBF\xBD"),
            std::string::npos)
      << dot;
  EXPECT_EQ(dot.find('\xff'), std::string::npos);
  EXPECT_EQ(dot.find('\x01'), std::string::npos);
  EXPECT_NE(dot.find("m&quot;o\\d&lt;el&gt;.onnx"), std::string::npos) << "HTML-like title label";
  // Graphviz reads it, and draws the name.
  StatusOr<std::string> svg = renderDotToSvg(dot);
  ASSERT_TRUE(svg.ok()) << svg.status().message() << " (Graphviz is installed by tools/setup.sh)";
  EXPECT_NE(svg->find("fc1 &quot;quoted&quot; back\\slash"), std::string::npos) << *svg;
}

TEST(PlanDot, TheSamePlanGivesTheSameBytes) {
  plan::Plan p = mlpPlan(2, 2);
  std::string first = planGraphDot(p);
  plan::Plan copy;
  ASSERT_TRUE(copy.ParseFromString(p.SerializeAsString()));
  EXPECT_EQ(planGraphDot(copy), first);
  EXPECT_EQ(planGraphDot(p), first);
}

TEST(TextEscape, CleansUtf8) {
  EXPECT_EQ(cleanUtf8("ok ü 模型 🙂"), "ok ü 模型 🙂");
  EXPECT_EQ(cleanUtf8("a\xC0\xAF" "b"), "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");  // overlong '/'
  EXPECT_EQ(cleanUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(cleanUtf8("\xF4\x90\x80\x80").find('\xF4'), std::string::npos);      // past U+10FFFF
  EXPECT_EQ(cleanUtf8("cut \xE6\xA8"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(cleanUtf8("tab\tnl\ncr\r"), "tab\tnl\ncr\xEF\xBF\xBD");
  EXPECT_EQ(htmlEscaped("<script>alert('x&y')</script>\""),
            "&lt;script&gt;alert(&#39;x&amp;y&#39;)&lt;/script&gt;&quot;");
  EXPECT_EQ(dotQuoted("a\"b\\c\nd\te"), "\"a\\\"b\\\\c\\nd e\"");
}

TEST(Graphviz, AMissingDotIsAnErrorNotACrash) {
  const char* old = std::getenv("PATH");
  std::string saved = old ? old : "";
  setenv("PATH", "/nonexistent-pcc-test", 1);
  StatusOr<std::string> svg = renderDotToSvg("digraph { a -> b }");
  setenv("PATH", saved.c_str(), 1);
  ASSERT_FALSE(svg.ok());
  EXPECT_NE(svg.status().message().find("not installed"), std::string::npos) << svg.status().message();
  // And a graph dot refuses is reported with dot's message.
  StatusOr<std::string> bad = renderDotToSvg("digraph { a -> }");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("failed"), std::string::npos) << bad.status().message();
}

plan::Plan searchedPlan() {
  plan::Plan p = mlpPlan(1, 2);
  p.set_model("<script>alert(1)</script>.onnx");
  p.add_notes("note <script>x</script> & more");
  plan::SearchReport* s = p.mutable_search();
  s->set_objective("latency");
  s->set_device("h100");
  s->set_device_description("<b>bold</b>");
  s->set_device_memory_bytes(int64_t(1) << 20);
  for (int tp : {2, 1}) {
    plan::MeshEstimate* e = s->add_candidates();
    e->mutable_mesh()->set_pp(1);
    e->mutable_mesh()->set_dp(1);
    e->mutable_mesh()->set_tp(tp);
    e->set_estimated_time_ms(tp == 2 ? 1.5 : 2.5);
    for (int r = 0; r < tp; ++r) {
      plan::RankEstimate* rk = e->add_ranks();
      rk->set_rank(r);
      rk->set_compute_ms(1.0);
      rk->set_comm_ms(0.5);
      rk->set_weight_bytes(1000);
      rk->set_activation_bytes(2000);
    }
  }
  s->mutable_candidates(1)->set_infeasible("needs <more> than 1 MiB");
  plan::MeshEstimate* broken = s->add_candidates();
  broken->set_error("cannot split \"x\"");
  return p;
}

TEST(PlanHtml, EscapesThePlansStringsAndListsEveryAlternative) {
  plan::Plan p = searchedPlan();
  std::string html = planReportHtml(p, planGraphDot(p), std::string("<?xml version=\"1.0\"?>\n<svg id=\"g\"></svg>\n"));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>bold"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;.onnx"), std::string::npos);
  EXPECT_NE(html.find("note &lt;script&gt;x&lt;/script&gt; &amp; more"), std::string::npos);
  EXPECT_NE(html.find("<svg id=\"g\"></svg>"), std::string::npos);
  EXPECT_EQ(html.find("<?xml"), std::string::npos) << "the SVG's prologue is cut";
  std::smatch m;
  std::regex table("<table class=\"alternatives\">([\\s\\S]*?)</table>");
  ASSERT_TRUE(std::regex_search(html, m, table));
  std::string rows = m[1];
  size_t n = 0;
  for (size_t at = rows.find("<tr"); at != std::string::npos; at = rows.find("<tr", at + 1)) ++n;
  EXPECT_EQ(n, 1u + 3u) << "a header and one row per candidate";
  EXPECT_NE(rows.find("does not fit: needs &lt;more&gt; than 1 MiB"), std::string::npos) << rows;
  EXPECT_NE(rows.find("cannot be partitioned: cannot split &quot;x&quot;"), std::string::npos) << rows;
  EXPECT_NE(html.find("1.00 MiB usable per device"), std::string::npos);
}

TEST(PlanHtml, WithoutGraphvizTheDotSourceIsShown) {
  plan::Plan p = searchedPlan();
  std::string dot = planGraphDot(p);
  std::string html = planReportHtml(p, dot, environmentError("Graphviz's dot program is not installed"));
  EXPECT_NE(html.find("The graph could not be drawn: Graphviz&#39;s dot program is not installed"), std::string::npos);
  EXPECT_NE(html.find("<pre class=\"dot\">" + htmlEscaped(dot) + "</pre>"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

}  // namespace
}  // namespace pcc
