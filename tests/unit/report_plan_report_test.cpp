// The partition report of a plan: report.json must parse back to the plan's
// names and figures, whatever characters the model's names hold.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "report/plan_report.h"
#include "runtime/plan_convert.h"

namespace pcc {
namespace {

using Json = nlohmann::json;

/// Adds buffer `id` of type `t` to `prog`; `weight` >= 0 binds it to a weight.
void addBuffer(plan::RankProgram& prog, const TensorType& t, int weight = -1) {
  plan::Buffer* b = prog.add_buffers();
  b->set_id(prog.buffers_size() - 1);
  *b->mutable_desc() = toDesc(t);
  b->set_weight(weight);
}

/// x[4,8] · w[8,16] -> y[4,16] by kernel `op`, then an all-reduce of y, on
/// `ranks` ranks.
plan::Plan matMulPlan(const std::string& model, const std::string& op, int ranks) {
  plan::Plan p;
  p.set_schema_version(7);
  p.set_model(model);
  p.mutable_mesh()->set_pp(1);
  p.mutable_mesh()->set_dp(1);
  p.mutable_mesh()->set_tp(ranks);
  plan::Group* tpGroup = p.add_groups();
  tpGroup->set_axis("tp");
  for (int r = 0; r < ranks; ++r) tpGroup->add_ranks(r);
  auto fill = [&](plan::RankProgram& prog, int rank) {
    prog.set_rank(rank);
    for (int c : {0, 0, rank}) prog.add_mesh_coord(c);
    plan::Weight* w = prog.add_weights();
    w->set_name("w");
    w->set_nbytes(8 * 16 * 4);
    addBuffer(prog, {DType::kF32, {4, 8}});
    addBuffer(prog, {DType::kF32, {8, 16}}, 0);
    addBuffer(prog, {DType::kF32, {4, 16}});
    prog.add_inputs()->set_buffer(0);
    plan::Instruction* mm = prog.add_instructions();
    mm->set_kind(plan::Instruction::KERNEL);
    mm->set_op(op);
    mm->add_inputs(0);
    mm->add_inputs(1);
    mm->add_outputs(2);
    plan::Instruction* ar = prog.add_instructions();
    ar->set_kind(plan::Instruction::ALL_REDUCE);
    ar->set_group(0);
    ar->add_inputs(2);
    ar->add_outputs(2);
  };
  for (int r = 0; r < ranks; ++r) fill(*p.add_ranks(), r);
  fill(*p.mutable_reference(), 0);
  return p;
}

TEST(PlanReport, JsonRoundTripsNamesWithQuotesBackslashesAndUnicode) {
  const std::string model = "models/\"quoted\" back\\slash\tü 模型 🙂.onnx";
  const std::string op = "My\"Op\\\n";
  plan::Plan p = matMulPlan(model, op, 2);
  p.add_notes("note with \"quotes\", a \\ and a control \x01 byte");
  p.add_tensor_parallel("MatMul '/fc1/Gemm ∑': split dim 1");

  Json doc = Json::parse(planReportJson(p));
  EXPECT_EQ(doc["schema_version"], 7);
  EXPECT_EQ(doc["model"], model);
  EXPECT_EQ(doc["mesh"], (Json{{"pp", 1}, {"dp", 1}, {"tp", 2}}));
  EXPECT_EQ(doc["world_size"], 2);
  EXPECT_EQ(doc["notes"], Json::array({p.notes(0)}));
  EXPECT_EQ(doc["tensor_parallel"], Json::array({p.tensor_parallel(0)}));
  ASSERT_EQ(doc["ranks"].size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const Json& rank = doc["ranks"][r];
    EXPECT_EQ(rank["rank"], r);
    EXPECT_EQ(rank["mesh_coord"], Json::array({0, 0, r}));
    EXPECT_EQ(rank["ops"], (Json{{op, 1}}));
    EXPECT_EQ(rank["flops"], 4 * 16);  // one per output element: the op is not a MatMul
    EXPECT_EQ(rank["weight_bytes"], 8 * 16 * 4);
    EXPECT_EQ(rank["peak_activation_bytes"], (4 * 8 + 4 * 16) * 4);
    EXPECT_EQ(rank["comm_bytes"], (Json{{"all_reduce", 4 * 16 * 4}}));
    EXPECT_EQ(rank["comm_count"], (Json{{"all_reduce", 1}}));
    // The collectives table: one all-reduce per rank over its tp group of 2.
    EXPECT_EQ(doc["collectives"][r], (Json{{"rank", r}, {"kind", "all_reduce"}, {"axis", "tp"}, {"group_size", 2},
                                           {"bytes", 4 * 16 * 4}, {"count", 1}}));
  }
  EXPECT_EQ(doc["collectives"].size(), 2u);
  EXPECT_EQ(doc["reference"]["ops"], (Json{{op, 1}}));

  // The figures are those the text report prints from the same statistics.
  PlanStats s = computePlanStats(p);
  EXPECT_EQ(doc["ranks"][1]["flops"], s.ranks[1].flops);
  EXPECT_EQ(doc["reference"]["peak_activation_bytes"], s.reference.peakActivationBytes);
}

TEST(PlanReport, JsonKeepsTheKeyOrder) {
  std::string text = planReportJson(matMulPlan("m.onnx", "MatMul", 1));
  nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  std::vector<std::string> keys;
  for (const auto& [k, v] : ordered.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"schema_version", "model", "mesh", "world_size", "notes",
                                            "tensor_parallel", "fusion", "kernels", "ranks", "collectives",
                                            "reference"}));
  EXPECT_EQ(ordered["ranks"][0]["flops"], 2 * 4 * 16 * 8);  // 2·MACs of the MatMul
  EXPECT_TRUE(ordered["notes"].is_array());
  EXPECT_TRUE(ordered["ranks"][0]["comm_bytes"].is_object());
}

TEST(PlanReport, FusionCountsComeFromThePlanAndMissingPatternsAreZero) {
  plan::Plan p = matMulPlan("m.onnx", "MatMul", 1);
  // A plan without the field (written before it existed) reports zeros.
  Json empty = Json::parse(planReportJson(p))["fusion"];
  EXPECT_EQ(empty["ops_before"], 0);
  EXPECT_EQ(empty["kernels_after"], 0);
  for (const char* name : {"LayerNormalization", "RMSNormalization", "Gelu", "Swish", "Attention", "fused_epilogue",
                           "fused_elementwise", "batchnorm_folded"})
    EXPECT_EQ(empty["patterns"][name], 0) << name;
  p.mutable_fusion()->set_ops_before(58);
  p.mutable_fusion()->set_kernels_after(31);
  (*p.mutable_fusion()->mutable_patterns())["fused_epilogue"] = 10;
  (*p.mutable_fusion()->mutable_patterns())["SomethingNew"] = 2;
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(planReportJson(p));
  EXPECT_EQ(doc["fusion"]["ops_before"], 58);
  EXPECT_EQ(doc["fusion"]["kernels_after"], 31);
  EXPECT_EQ(doc["fusion"]["patterns"]["fused_epilogue"], 10);
  EXPECT_EQ(doc["fusion"]["patterns"]["Gelu"], 0);
  EXPECT_EQ(doc["fusion"]["patterns"]["SomethingNew"], 2);  // a count this build has no name for is kept
  EXPECT_EQ(doc["fusion"]["patterns"].begin().key(), "LayerNormalization");
  std::string text = planReportText(p);
  EXPECT_NE(text.find("fusion:  58 kernels before, 31 after; LayerNormalization 0"), std::string::npos) << text;
  EXPECT_NE(text.find("fused_epilogue 10"), std::string::npos) << text;
}

TEST(PlanReport, TheBatchCurveIsListedWhenPccChoseTheBatch) {
  plan::Plan p = matMulPlan("m.onnx", "MatMul", 1);
  EXPECT_FALSE(Json::parse(planReportJson(p)).contains("batch"));  // plans made before it
  plan::BatchReport* b = p.mutable_batch();
  b->set_batch(2);
  b->set_automatic(true);
  b->set_how("batch 2 for the symbolic leading dim 'n' of x: the most estimated samples/s within memory");
  b->set_max_batch(1024);
  b->set_min_gain(0.05);
  for (int k : {1, 2, 4}) {
    plan::BatchPoint* q = b->add_curve();
    q->set_batch(k);
    q->mutable_mesh()->set_dp(k == 4 ? 2 : k);
    q->mutable_mesh()->set_tp(1);
    q->mutable_mesh()->set_pp(1);
    q->set_estimated_time_ms(0.5);
    q->set_samples_per_second(k / 0.5e-3);
    q->set_memory_bytes(1000 * k);
    q->set_feasible(k < 4);
    if (k == 4) q->set_why("rank 0 needs 2 GiB of the 1 GiB one tiny offers");
  }
  Json doc = Json::parse(planReportJson(p))["batch"];
  EXPECT_EQ(doc["batch"], 2);
  EXPECT_EQ(doc["automatic"], true);
  ASSERT_EQ(doc["curve"].size(), 3u);
  EXPECT_EQ(doc["curve"][1]["mesh"]["dp"], 2);
  EXPECT_EQ(doc["curve"][1]["samples_per_second"], 4000.0);
  EXPECT_EQ(doc["curve"][2]["feasible"], false);
  EXPECT_EQ(doc["curve"][2]["why"], "rank 0 needs 2 GiB of the 1 GiB one tiny offers");
  EXPECT_FALSE(doc["curve"][0].contains("why"));
  std::string text = planReportText(p);
  EXPECT_NE(text.find("batch:   batch 2 for the symbolic leading dim 'n' of x"), std::string::npos) << text;
  EXPECT_NE(text.find("dp=2 tp=1 pp=1"), std::string::npos) << text;
  EXPECT_NE(text.find("chosen"), std::string::npos) << text;
  EXPECT_NE(text.find("does not fit: rank 0 needs 2 GiB"), std::string::npos) << text;
  // A batch given by the user: no curve.
  p.mutable_batch()->Clear();
  p.mutable_batch()->set_batch(8);
  p.mutable_batch()->set_how("--batch");
  doc = Json::parse(planReportJson(p))["batch"];
  EXPECT_EQ(doc["automatic"], false);
  EXPECT_FALSE(doc.contains("curve"));
  EXPECT_NE(planReportText(p).find("batch:   8 (--batch)"), std::string::npos);
}

TEST(PlanReport, PeakMemoryIsThePlannedEstimateWhereThePlanHasIt) {
  plan::Plan p = matMulPlan("m.onnx", "MatMul", 2);
  plan::MeshEstimate* chosen = p.mutable_search()->add_candidates();
  plan::MeshEstimate* other = p.mutable_search()->add_candidates();
  for (int r = 0; r < 2; ++r) {
    plan::RankEstimate* a = chosen->add_ranks();
    a->set_rank(r);
    a->set_weight_bytes(512);
    a->set_activation_bytes(1000);
    plan::RankEstimate* b = other->add_ranks();
    b->set_rank(r);
    b->set_weight_bytes(1024);
    b->set_activation_bytes(2000);  // a candidate the compiler did not emit: the search's figure
  }
  chosen->mutable_ranks(1)->set_arena_bytes(256);
  chosen->mutable_ranks(1)->set_memory_bytes(900);  // rank 1 has the planned estimate
  Json doc = Json::parse(planReportJson(p));
  EXPECT_EQ(doc["ranks"][0]["peak_memory_bytes"], 512 + 1000);
  EXPECT_FALSE(doc["ranks"][0].contains("memory_estimate"));
  EXPECT_EQ(doc["ranks"][1]["peak_memory_bytes"], 900);
  EXPECT_EQ(doc["ranks"][1]["estimated_memory_bytes"], 900);
  EXPECT_EQ(doc["ranks"][1]["memory_estimate"]["arena_bytes"], 256);
  EXPECT_EQ(doc["ranks"][1]["memory_estimate"]["search_bytes"], 512 + 1000);
  EXPECT_EQ(doc["alternatives"][0]["peak_memory_bytes"], 512 + 1000);  // the larger of its ranks
  EXPECT_EQ(doc["alternatives"][1]["peak_memory_bytes"], 1024 + 2000);
}

TEST(PlanReport, NamesThatAreNotUtf8BecomeReplacementCharacters) {
  // ONNX names are not checked for UTF-8; the report must still be valid JSON.
  plan::Plan p = matMulPlan(std::string("bad\xff\xfename.onnx"), "MatMul", 1);
  std::string text;
  ASSERT_NO_THROW(text = planReportJson(p));
  Json doc = Json::parse(text);
  EXPECT_EQ(doc["model"], "bad\xEF\xBF\xBD\xEF\xBF\xBDname.onnx");
}

}  // namespace
}  // namespace pcc
