#include "report/plan_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/schema/op_cost.h"
#include "runtime/plan_convert.h"
#include "runtime/support/status.h"

namespace pcc {

namespace {

int64_t bytesOf(const plan::Buffer& b) {
  TensorType t = fromDesc(b.desc());
  return static_cast<int64_t>(t.bytes());
}

// The work of one instruction as the cost model counts it (runtime/schema/op_cost.h).
int64_t instructionFlops(const plan::Instruction& ins, const plan::RankProgram& prog) {
  std::vector<TensorType> in, out;
  for (int32_t id : ins.inputs())
    in.push_back(id >= 0 && id < prog.buffers_size() ? fromDesc(prog.buffers(id).desc()) : TensorType{});
  for (int32_t id : ins.outputs())
    out.push_back(id >= 0 && id < prog.buffers_size() ? fromDesc(prog.buffers(id).desc()) : TensorType{});
  StatusOr<AttrMap> attrs = fromAttrProtos(ins.attrs());
  return opWork(ins.op(), in, out, attrs.ok() ? *attrs : AttrMap{}).flops;
}

// `groups`: the plan's process groups (nullptr for the reference program).
RankStats statsOf(const plan::RankProgram& prog, const google::protobuf::RepeatedPtrField<plan::Group>* groups) {
  RankStats s;
  s.rank = prog.rank();
  s.meshCoord.assign(prog.mesh_coord().begin(), prog.mesh_coord().end());
  s.stage = prog.stage();
  s.microbatches = std::max(1, prog.microbatches());
  for (const plan::Weight& w : prog.weights()) s.weightBytes += static_cast<int64_t>(w.nbytes());
  s.arenaBytes = static_cast<int64_t>(prog.arena_bytes());
  s.naiveArenaBytes = static_cast<int64_t>(prog.naive_arena_bytes());
  std::vector<bool> live(prog.buffers_size(), false);
  std::vector<bool> state(prog.buffers_size(), false);
  for (const plan::StateBinding& sb : prog.states())
    for (int32_t id : {sb.buffer(), sb.out_buffer()})
      if (id >= 0 && id < prog.buffers_size() && !state[id]) {
        state[id] = true;
        if (id == sb.buffer()) s.stateBytes += bytesOf(prog.buffers(id));
      }
  int64_t cur = 0;
  auto touch = [&](int32_t id) {
    if (id < 0 || id >= prog.buffers_size() || live[id] || prog.buffers(id).weight() >= 0 || state[id]) return;
    live[id] = true;
    cur += bytesOf(prog.buffers(id));
  };
  for (const plan::IoBinding& b : prog.inputs()) touch(b.buffer());
  s.peakActivationBytes = cur;
  for (const plan::Instruction& ins : prog.instructions()) {
    switch (ins.kind()) {
      case plan::Instruction::FREE:
        for (int32_t id : ins.inputs())
          if (id >= 0 && live[id]) {
            live[id] = false;
            cur -= bytesOf(prog.buffers(id));
          }
        continue;
      case plan::Instruction::KERNEL:
        ++s.opCounts[ins.op()];
        s.flops += instructionFlops(ins, prog);
        break;
      case plan::Instruction::REGION:  // If, Loop, Scan: counted as one op; their bodies' work is not known statically
        ++s.opCounts[ins.op()];
        break;
      case plan::Instruction::LAUNCH:  // a generated kernel: one op, elementwise (its flops are not counted)
        ++s.opCounts[ins.op()];
        break;
      default: {
        std::string name = plan::Instruction::Kind_Name(ins.kind());
        std::transform(name.begin(), name.end(), name.begin(), ::tolower);
        int64_t bytes = ins.inputs_size() > 0 && ins.inputs(0) >= 0 ? bytesOf(prog.buffers(ins.inputs(0))) : 0;
        if (ins.kind() == plan::Instruction::RECV && ins.outputs_size() > 0 && ins.outputs(0) >= 0)
          bytes = bytesOf(prog.buffers(ins.outputs(0)));
        s.commBytes[name] += bytes;
        ++s.commCount[name];
        std::string axis = "-";
        int groupSize = 0;  // unknown: no such group
        if (ins.kind() == plan::Instruction::SEND || ins.kind() == plan::Instruction::RECV) {
          groupSize = 2;  // a pair
        } else if (groups && ins.group() >= 0 && ins.group() < groups->size()) {
          axis = (*groups)[ins.group()].axis();
          groupSize = (*groups)[ins.group()].ranks_size();
        }
        auto same = [&](const RankStats::Collective& c) {
          return c.kind == name && c.axis == axis && c.groupSize == groupSize && c.bytes == bytes;
        };
        auto it = std::find_if(s.collectives.begin(), s.collectives.end(), same);
        if (it == s.collectives.end()) s.collectives.push_back({name, axis, groupSize, bytes, 1});
        else ++it->count;
        break;
      }
    }
    for (int32_t id : ins.outputs()) touch(id);
    s.peakActivationBytes = std::max(s.peakActivationBytes, cur);
  }
  return s;
}

using Json = nlohmann::ordered_json;  // keys in the order written here

Json rankJson(const RankStats& r) {
  return Json{{"rank", r.rank},
              {"mesh_coord", r.meshCoord},
              {"stage", r.stage},
              {"microbatches", r.microbatches},
              {"ops", r.opCounts},
              {"flops", r.flops},
              {"weight_bytes", r.weightBytes},
              {"peak_activation_bytes", r.peakActivationBytes},
              {"state_bytes", r.stateBytes},
              {"arena_bytes", r.arenaBytes},
              {"naive_arena_bytes", r.naiveArenaBytes},
              {"comm_bytes", r.commBytes},
              {"comm_count", r.commCount}};
}

// \returns `v` with three significant digits ("0.201", "145"), or as a
// whole number from 1000 on ("5433", not "5.43e+03").
std::string sig3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, std::fabs(v) >= 1000 ? "%.0f" : "%.3g", v);
  return buf;
}

std::string meshText(const plan::Mesh& m) { return strCat("dp=", m.dp(), " tp=", m.tp(), " pp=", m.pp()); }

}  // namespace

int64_t estimatedMemory(const plan::RankEstimate& rk) {
  return rk.memory_bytes() > 0 ? rk.memory_bytes() : rk.weight_bytes() + rk.activation_bytes();
}

namespace {

// The mesh search's part of report.json (plans that carry it).
void addSearchJson(const plan::SearchReport& r, Json& doc, Json& ranks) {
  doc["objective"] = r.objective();
  doc["device"] = {{"name", r.device()},
                   {"description", r.device_description()},
                   {"gpus_per_node", r.gpus_per_node()},
                   {"memory_bytes", r.device_memory_bytes()}};
  if (r.candidates_size() > 0) {
    const plan::MeshEstimate& best = r.candidates(0);
    doc["estimated_time_ms"] = best.estimated_time_ms();
    if (best.mesh().pp() > 1)
      doc["pipeline"] = {{"stages", best.mesh().pp()},
                         {"microbatches", std::max(1, best.microbatches())},
                         {"schedule", "fill-drain"},
                         {"stage_ms", std::vector<double>(best.stage_ms().begin(), best.stage_ms().end())},
                         {"predicted_bubble", best.bubble()}};
  }
  doc["search_time_ms"] = r.search_time_ms();
  doc["pruned_pipelines"] = r.pruned_pipelines();
  if (!r.phase_ms().empty()) {
    // In the order the phases run (a protobuf map iterates in no fixed order).
    Json phases = Json::object();
    for (const char* phase : {"propagate", "tp_search", "stage_cut", "lower", "cost"})
      if (auto it = r.phase_ms().find(phase); it != r.phase_ms().end()) phases[phase] = it->second;
    doc["search_phases_ms"] = phases;
  }
  doc["repeated_blocks"] = {{"folded", r.folded_blocks()}, {"block_nodes", r.block_nodes()},
                            {"repeats", r.block_repeats()}};
  Json alternatives = Json::array();
  for (const plan::MeshEstimate& e : r.candidates()) {
    Json a{{"mesh", {{"pp", e.mesh().pp()}, {"dp", e.mesh().dp()}, {"tp", e.mesh().tp()}}},
           {"microbatches", std::max(1, e.microbatches())}};
    if (!e.error().empty()) {
      a["error"] = e.error();
    } else {
      a["estimated_time_ms"] = e.estimated_time_ms();
      a["samples_per_second"] = e.samples_per_second();
      int64_t peak = 0;
      for (const plan::RankEstimate& rk : e.ranks()) peak = std::max(peak, estimatedMemory(rk));
      a["peak_memory_bytes"] = peak;
      if (!e.infeasible().empty()) a["infeasible"] = e.infeasible();
    }
    alternatives.push_back(std::move(a));
  }
  doc["alternatives"] = std::move(alternatives);
  // The chosen mesh's estimate of each rank, next to what the plan holds.
  if (r.candidates_size() == 0) return;
  for (const plan::RankEstimate& rk : r.candidates(0).ranks()) {
    if (rk.rank() < 0 || static_cast<size_t>(rk.rank()) >= ranks.size()) continue;
    Json& j = ranks[rk.rank()];
    j["estimated_time_ms"] = rk.compute_ms() + rk.comm_ms();
    j["estimated_compute_ms"] = rk.compute_ms();
    j["estimated_comm_ms"] = rk.comm_ms();
    j["estimated_memory_bytes"] = estimatedMemory(rk);
    j["peak_memory_bytes"] = estimatedMemory(rk);
    if (rk.memory_bytes() > 0)
      j["memory_estimate"] = {{"weight_bytes", rk.weight_bytes()}, {"arena_bytes", rk.arena_bytes()},
                              {"input_bytes", rk.input_bytes()},   {"output_bytes", rk.output_bytes()},
                              {"kernel_weight_bytes", rk.kernel_weight_bytes()},
                              {"comm_bytes", rk.comm_bytes()},     {"kernel_bytes", rk.kernel_bytes()},
                              {"search_bytes", rk.weight_bytes() + rk.activation_bytes()}};
  }
}

// What --precision did and the error it measured (report.json "precision").
Json precisionJson(const plan::PrecisionReport& r) {
  Json kept = Json::array();
  for (const plan::PrecisionReport::Kept& k : r.kept())
    kept.push_back(Json{{"node", k.node()}, {"op", k.op()}, {"reason", k.reason()}});
  Json outs = Json::array();
  // NaN is not JSON: a cosine that is not a number is null.
  auto num = [](double v) { return std::isfinite(v) ? Json(v) : Json(); };
  for (const plan::PrecisionReport::OutputError& o : r.outputs()) {
    Json e{{"name", o.name()},     {"max_abs", num(o.max_abs())}, {"max_rel", num(o.max_rel())},
           {"cosine", num(o.cosine())}, {"finite", o.finite()}};
    if (o.top1() >= 0) e["top1"] = o.top1();
    outs.push_back(std::move(e));
  }
  return Json{{"target", r.target()},
              {"quantize", r.quantize()},
              {"quantized_nodes", r.quantized_nodes()},
              {"nodes_converted", r.nodes_converted()},
              {"kept", std::move(kept)},
              {"casts", r.casts()},
              {"overflowing_constants", Json(std::vector<std::string>(r.overflowing_constants().begin(),
                                                                     r.overflowing_constants().end()))},
              {"weight_bytes_before", r.weight_bytes_before()},
              {"weight_bytes_after", r.weight_bytes_after()},
              {"kv_cache_dtype", r.kv_cache_dtype()},
              {"measured", r.measured()},
              {"input_sets", r.input_sets()},
              {"inputs_from", r.inputs_from()},
              {"outputs", std::move(outs)},
              {"seconds", r.seconds()}};
}

// How the batch was set, with the curve of a chosen one (report.json "batch").
Json batchJson(const plan::BatchReport& b) {
  Json doc{{"batch", b.batch()}, {"automatic", b.automatic()}, {"how", b.how()}};
  if (!b.automatic()) return doc;
  doc["search_time_ms"] = b.search_time_ms();
  doc["max_batch"] = b.max_batch();
  doc["min_gain"] = b.min_gain();
  Json curve = Json::array();
  for (const plan::BatchPoint& q : b.curve()) {
    Json e{{"batch", q.batch()},
           {"mesh", {{"pp", q.mesh().pp()}, {"dp", q.mesh().dp()}, {"tp", q.mesh().tp()}}},
           {"microbatches", std::max(1, q.microbatches())},
           {"estimated_time_ms", q.estimated_time_ms()},
           {"samples_per_second", q.samples_per_second()},
           {"memory_bytes", q.memory_bytes()},
           {"feasible", q.feasible()}};
    if (!q.why().empty()) e["why"] = q.why();
    curve.push_back(std::move(e));
  }
  doc["curve"] = std::move(curve);
  return doc;
}

}  // namespace

std::string humanBytes(int64_t b) {
  char buf[32];
  if (b >= (1 << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1 << 30));
  else if (b >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / double(1 << 20));
  else if (b >= (1 << 10)) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

PlanStats computePlanStats(const plan::Plan& p) {
  PlanStats s;
  for (const plan::RankProgram& r : p.ranks()) s.ranks.push_back(statsOf(r, &p.groups()));
  s.reference = statsOf(p.reference(), nullptr);
  return s;
}

namespace {

/// The pattern names every report lists, in this order (missing ones are 0).
const char* const kPatterns[] = {"LayerNormalization", "RMSNormalization", "Gelu",     "Swish",
                                 "Attention",          "fused_epilogue",   "fused_elementwise",
                                 "batchnorm_folded"};

/// \returns the count of `name` in the plan's fusion patterns, 0 if absent.
int64_t patternCount(const plan::Plan& p, const std::string& name) {
  auto it = p.fusion().patterns().find(name);
  return it == p.fusion().patterns().end() ? 0 : it->second;
}

Json fusionJson(const plan::Plan& p) {
  Json patterns = Json::object();
  for (const char* name : kPatterns) patterns[name] = patternCount(p, name);
  // Names a newer compiler counts that this list does not know yet.
  std::map<std::string, int64_t> extra(p.fusion().patterns().begin(), p.fusion().patterns().end());
  for (const auto& e : extra)
    if (!patterns.contains(e.first)) patterns[e.first] = e.second;
  return Json{{"ops_before", p.fusion().ops_before()},
              {"kernels_after", p.fusion().kernels_after()},
              {"patterns", std::move(patterns)}};
}

/// The generated kernels (docs/kernels.md): target, count, and the fused
/// groups left on the reference kernels with the reason.
Json kernelsJson(const plan::Plan& p) {
  Json fallbacks = Json::array();
  for (const plan::KernelFallback& f : p.kernel_fallbacks())
    fallbacks.push_back(Json{{"node", f.node()}, {"reason", f.reason()}});
  int64_t launches = 0;
  for (const plan::RankProgram& r : p.ranks())
    for (const plan::Instruction& ins : r.instructions()) launches += ins.kind() == plan::Instruction::LAUNCH;
  return Json{{"target", p.kernel_target()},
              {"generated", p.kernels_size()},
              {"launches", launches},
              {"fallbacks", std::move(fallbacks)}};
}

}  // namespace

std::string planReportJson(const plan::Plan& p) {
  PlanStats s = computePlanStats(p);
  Json ranks = Json::array();
  for (const RankStats& r : s.ranks) ranks.push_back(rankJson(r));
  Json doc{{"schema_version", p.schema_version()},
           {"model", p.model()},
           {"mesh", {{"pp", p.mesh().pp()}, {"dp", p.mesh().dp()}, {"tp", p.mesh().tp()}}},
           {"world_size", p.ranks_size()},
           {"notes", std::vector<std::string>(p.notes().begin(), p.notes().end())},
           {"tensor_parallel",
            std::vector<std::string>(p.tensor_parallel().begin(), p.tensor_parallel().end())},
           {"fusion", fusionJson(p)},
           {"kernels", kernelsJson(p)},
           {"ranks", Json()},
           {"collectives", Json::array()},
           {"reference", rankJson(s.reference)}};
  for (const RankStats& r : s.ranks)
    for (const RankStats::Collective& c : r.collectives)
      doc["collectives"].push_back(Json{{"rank", r.rank}, {"kind", c.kind}, {"axis", c.axis},
                                        {"group_size", c.groupSize}, {"bytes", c.bytes}, {"count", c.count}});
  if (p.has_search()) addSearchJson(p.search(), doc, ranks);
  if (p.has_batch()) doc["batch"] = batchJson(p.batch());
  if (p.has_generation()) {
    const plan::Generation& g = p.generation();
    Json states = Json::array();
    for (const plan::GenerationState& st : g.states())
      states.push_back(Json{{"name", st.name()}, {"present", st.present()}, {"type", fromDesc(st.desc()).str()}});
    doc["generation"] = Json{{"batch", g.batch()}, {"max_context", g.max_context()}, {"vocab", g.vocab()},
                             {"eos_token_ids", Json(std::vector<int64_t>(g.eos_token_ids().begin(), g.eos_token_ids().end()))},
                             {"state_bytes", g.state_bytes()}, {"states", std::move(states)}};
    if (g.has_estimate()) {
      const plan::GenerationEstimate& e = g.estimate();
      doc["generation"]["estimate"] = Json{{"step_ms", e.step_ms()},
                                           {"tokens_per_second", e.tokens_per_second()},
                                           {"roofline_ms", e.roofline_ms()},
                                           {"bytes_per_step", e.bytes_per_step()},
                                           {"comm_ms", e.comm_ms()},
                                           {"memory_bandwidth", e.memory_bandwidth()}};
    }
    if (g.has_prefill()) {
      const plan::Prefill& f = g.prefill();
      int64_t arena = 0;
      for (const plan::RankProgram& r : f.ranks()) arena = std::max<int64_t>(arena, static_cast<int64_t>(r.arena_bytes()));
      doc["generation"]["prefill"] = Json{{"max_prompt", f.max_prompt()},
                                          {"estimate_ms", f.estimate_ms()},
                                          {"extra_weight_bytes", f.extra_weight_bytes()},
                                          {"arena_bytes", arena},
                                          {"logits_last_only", f.logits_last_only()}};
      Json shorter = Json::array();
      for (const plan::Prefill& s : g.shorter_prefills()) {
        int64_t a = 0;
        for (const plan::RankProgram& r : s.ranks()) a = std::max<int64_t>(a, static_cast<int64_t>(r.arena_bytes()));
        shorter.push_back(Json{{"max_prompt", s.max_prompt()}, {"estimate_ms", s.estimate_ms()}, {"arena_bytes", a}});
      }
      doc["generation"]["prefill"]["shorter"] = std::move(shorter);
    }
  }
  if (p.has_precision()) doc["precision"] = precisionJson(p.precision());
  doc["ranks"] = std::move(ranks);
  // Names come from the model: bytes that are not UTF-8 become U+FFFD rather
  // than an exception.
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

/// A cosine similarity to six decimals: 0.999999 and 1 differ.
std::string cosineText(double c) {
  if (std::isnan(c)) return "nan";
  char b[32];
  std::snprintf(b, sizeof b, "%.6f", c);
  return b;
}

std::string precisionLine(const plan::PrecisionReport& r) {
  std::string s = "precision";
  if (!r.target().empty())
    s += strCat(" ", r.target(), ": ", r.nodes_converted(), " nodes converted, ", r.kept_size(), " kept in float32, ",
                r.casts(), " casts");
  if (!r.quantize().empty())
    s += strCat(r.target().empty() ? " " : "; ", r.quantize(), " weights on ", r.quantized_nodes(), " MatMul/Gemm");
  s += strCat("; weights ", humanBytes(r.weight_bytes_before()), " -> ", humanBytes(r.weight_bytes_after()));
  if (!r.kv_cache_dtype().empty()) s += strCat("; KV cache ", r.kv_cache_dtype());
  if (r.overflowing_constants_size() > 0)
    s += strCat("; ", r.overflowing_constants_size(), " constant(s) beyond ", r.target(), "'s range kept (",
                r.overflowing_constants(0), r.overflowing_constants_size() > 1 ? ", ..." : "", ")");
  if (r.measured() != "measured") return s + "; error " + r.measured();
  const plan::PrecisionReport::OutputError* worst = nullptr;
  for (const plan::PrecisionReport::OutputError& o : r.outputs())
    if (!worst || !(o.cosine() >= worst->cosine())) worst = &o;
  if (!worst) return s + "; no float output to measure";
  s += strCat("; error on ", r.input_sets(), " ", r.inputs_from() == "seeded" ? "seeded input sets" : "input sets",
              ", worst output '", worst->name(), "': cosine ", cosineText(worst->cosine()), ", max abs ",
              sig3(worst->max_abs()), ", max rel ", sig3(worst->max_rel()));
  if (worst->top1() >= 0) s += strCat(", top-1 ", sig3(worst->top1() * 100), "%");
  if (!worst->finite()) s += " (not finite)";
  return s;
}

std::string planReportText(const plan::Plan& p) {
  PlanStats s = computePlanStats(p);
  std::ostringstream o;
  o << "model:   " << p.model() << "\n";
  o << "mesh:    pp=" << p.mesh().pp() << " dp=" << p.mesh().dp() << " tp=" << p.mesh().tp() << "  ("
    << p.ranks_size() << " rank" << (p.ranks_size() == 1 ? "" : "s") << ")\n";
  for (const std::string& n : p.notes()) o << "note:    " << n << "\n";
  // The tp search's choices: a few lines, then how many more (pcc-report
  // --format json lists them all).
  constexpr int kShown = 12;
  for (int i = 0; i < p.tensor_parallel_size() && i < kShown; ++i) o << "tp:      " << p.tensor_parallel(i) << "\n";
  if (p.tensor_parallel_size() > kShown)
    o << "tp:      ... and " << p.tensor_parallel_size() - kShown << " more (--format json lists every one)\n";
  if (p.has_search() && p.search().candidates_size() > 0) {
    const plan::SearchReport& r = p.search();
    o << "device:  " << r.device() << " (" << r.device_description() << "), " << r.gpus_per_node() << " per node\n";
    o << "search:  " << r.objective() << " objective, " << r.candidates_size() << " meshes costed in "
      << sig3(r.search_time_ms()) << " ms";
    if (r.pruned_pipelines() > 0) o << " (" << r.pruned_pipelines() << " pipelines bounded out)";
    o << "; estimated " << sig3(r.candidates(0).estimated_time_ms()) << " ms per batch\n";
    if (!r.phase_ms().empty()) {
      // std::map order would be alphabetical; the phases in the order they run.
      o << "search phases:";
      const char* sep = " ";
      for (const char* phase : {"propagate", "tp_search", "stage_cut", "lower", "cost"}) {
        auto it = r.phase_ms().find(phase);
        if (it == r.phase_ms().end()) continue;
        o << sep << phase << " " << sig3(it->second) << " ms";
        sep = ", ";
      }
      o << "\n";
    }
    if (r.folded_blocks() > 0)
      o << "repeats: the tp search took " << r.folded_blocks() << " of " << r.block_repeats() << " repeated blocks of "
        << r.block_nodes() << " nodes from the block before, unsearched\n";
    const plan::MeshEstimate& best = r.candidates(0);
    if (best.mesh().pp() > 1) {
      o << "pipeline: " << best.mesh().pp() << " stages, " << std::max(1, best.microbatches())
        << " micro-batches, fill-drain; per micro-batch";
      for (int i = 0; i < best.stage_ms_size(); ++i) o << (i ? ", " : " ") << "stage " << i << " " << sig3(best.stage_ms(i)) << " ms";
      o << "; predicted bubble " << sig3(best.bubble() * 100) << "%\n";
    }
    for (int i = 1; i < r.candidates_size(); ++i) {
      const plan::MeshEstimate& e = r.candidates(i);
      o << "  alternative " << meshText(e.mesh());
      if (e.microbatches() > 1) o << " (" << e.microbatches() << " micro-batches)";
      o << ": ";
      if (!e.error().empty()) o << "cannot be partitioned: " << e.error();
      else o << sig3(e.estimated_time_ms()) << " ms" << (e.infeasible().empty() ? "" : " — does not fit: " + e.infeasible());
      o << "\n";
    }
  }
  if (p.has_generation() && p.generation().states_size() > 0) {
    const plan::Generation& g = p.generation();
    int64_t least = -1, most = 0;
    for (const RankStats& r : s.ranks) {
      least = least < 0 ? r.stateBytes : std::min(least, r.stateBytes);
      most = std::max(most, r.stateBytes);
    }
    o << "generate: decode step of " << g.batch() << " sequence" << (g.batch() == 1 ? "" : "s") << ", context "
      << g.max_context() << " positions; KV cache " << g.states_size() << " tensors, "
      << humanBytes(static_cast<int64_t>(g.state_bytes())) << " in all, "
      << (least == most ? humanBytes(most) + " per rank" : strCat(humanBytes(least), " to ", humanBytes(most), " per rank"))
      << "\n";
    if (g.has_estimate()) {
      const plan::GenerationEstimate& e = g.estimate();
      o << "decode:  estimated " << sig3(e.step_ms()) << " ms per step, " << sig3(e.tokens_per_second())
        << " tokens/s (" << sig3(e.comm_ms()) << " ms of it collectives); memory-bound floor " << sig3(e.roofline_ms())
        << " ms: " << humanBytes(e.bytes_per_step()) << " of weights and cache read per step by the busiest rank at "
        << sig3(e.memory_bandwidth() / 1e9) << " GB/s\n";
    }
    if (g.has_prefill()) {
      const plan::Prefill& f = g.prefill();
      int64_t arena = 0;
      for (const plan::RankProgram& r : f.ranks()) arena = std::max<int64_t>(arena, static_cast<int64_t>(r.arena_bytes()));
      o << "prefill: up to " << f.max_prompt() << " prompt tokens per sequence in one run, estimated "
        << sig3(f.estimate_ms()) << " ms (time to first token)"
        << (f.logits_last_only() ? "; logits of each sequence's last prompt position only" : "") << "; arena "
        << humanBytes(arena)
        << " per rank at most; weights shared with the decode step"
        << (f.extra_weight_bytes() > 0 ? strCat(" but ", humanBytes(f.extra_weight_bytes()), " of its own") : "")
        << "\n";
      if (g.shorter_prefills_size() > 0) {
        o << "prefill: also for shorter prompts (a run takes the shortest that holds its longest prompt):";
        for (const plan::Prefill& s : g.shorter_prefills())
          o << " " << s.max_prompt() << " tokens, estimated " << sig3(s.estimate_ms()) << " ms;";
        o << "\n";
      }
    } else {
      o << "prefill: none (prompts go through the decode step, one token per run)\n";
    }
  }
  if (p.has_batch()) {
    const plan::BatchReport& b = p.batch();
    if (b.automatic()) o << "batch:   " << b.how() << "\n";
    else o << "batch:   " << b.batch() << " (" << b.how() << ")\n";
    if (b.curve_size() > 0) {
      char head[160];
      std::snprintf(head, sizeof head, "  %8s  %-16s %12s %12s %12s  %s\n", "batch", "mesh", "time ms",
                    p.has_generation() ? "tokens/s" : "samples/s", "memory", "");
      o << head;
    }
    for (const plan::BatchPoint& q : b.curve()) {
      std::string fit = q.feasible() ? (q.batch() == b.batch() ? "chosen" : "") : "does not fit: " + q.why();
      if (!q.feasible() && q.memory_bytes() == 0 && q.estimated_time_ms() == 0) fit = "cannot be planned: " + q.why();
      char row[160];
      std::snprintf(row, sizeof row, "  %8lld  %-16s %12s %12s %12s  ", static_cast<long long>(q.batch()),
                    meshText(q.mesh()).c_str(), sig3(q.estimated_time_ms()).c_str(),
                    sig3(q.samples_per_second()).c_str(), humanBytes(q.memory_bytes()).c_str());
      o << row << fit << "\n";
    }
  }
  o << "fusion:  " << p.fusion().ops_before() << " kernels before, " << p.fusion().kernels_after() << " after;";
  Json fusion = fusionJson(p);
  for (const auto& e : fusion["patterns"].items()) o << " " << e.key() << " " << e.value().get<int64_t>();
  o << "\n";
  if (!p.kernel_target().empty()) {
    o << "kernels: " << p.kernels_size() << " generated (" << p.kernel_target() << "), "
      << p.kernel_fallbacks_size() << " fused group" << (p.kernel_fallbacks_size() == 1 ? "" : "s")
      << " not generated whole\n";
    for (int i = 0; i < p.kernel_fallbacks_size() && i < kShown; ++i)
      o << "  not generated: " << p.kernel_fallbacks(i).node() << ": " << p.kernel_fallbacks(i).reason() << "\n";
    if (p.kernel_fallbacks_size() > kShown)
      o << "  ... and " << p.kernel_fallbacks_size() - kShown << " more (--format json lists every one)\n";
  }
  if (p.has_precision()) {
    const plan::PrecisionReport& r = p.precision();
    o << precisionLine(r) << "\n";
    for (const plan::PrecisionReport::OutputError& e : r.outputs()) {
      o << "  output '" << e.name() << "': cosine " << cosineText(e.cosine()) << ", max abs " << sig3(e.max_abs())
        << ", max rel " << sig3(e.max_rel());
      if (e.top1() >= 0) o << ", top-1 agreement " << sig3(e.top1() * 100) << "%";
      o << (e.finite() ? "" : ", not finite") << "\n";
    }
    for (int i = 0; i < r.kept_size() && i < kShown; ++i)
      o << "  float32: " << r.kept(i).node() << " (" << r.kept(i).op() << "): " << r.kept(i).reason() << "\n";
    if (r.kept_size() > kShown) o << "  ... and " << r.kept_size() - kShown << " more (--format json lists every one)\n";
  }
  o << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-6s %-11s %8s %12s %12s %12s %12s %12s  %s\n", "rank", "(pp,dp,tp)", "kernels",
                "GFLOP", "weights", "peak act.", "arena", "naive sum", "communication");
  o << line;
  auto row = [&](const RankStats& r, const std::string& label) {
    int kernels = 0;
    for (const auto& [op, c] : r.opCounts) kernels += c;
    std::string coord = "(";
    for (size_t i = 0; i < r.meshCoord.size(); ++i) coord += strCat(i ? "," : "", r.meshCoord[i]);
    coord += ")";
    std::string comm;
    for (const auto& [k, b] : r.commBytes) comm += strCat(comm.empty() ? "" : ", ", k, " x", r.commCount.at(k), " ", humanBytes(b));
    if (comm.empty()) comm = "none";
    std::snprintf(line, sizeof line, "%-6s %-11s %8d %12.4f %12s %12s %12s %12s  %s\n", label.c_str(), coord.c_str(),
                  kernels, r.flops / 1e9, humanBytes(r.weightBytes).c_str(), humanBytes(r.peakActivationBytes).c_str(),
                  humanBytes(r.arenaBytes).c_str(), humanBytes(r.naiveArenaBytes).c_str(), comm.c_str());
    o << line;
  };
  for (const RankStats& r : s.ranks) row(r, std::to_string(r.rank));
  row(s.reference, "ref");
  o << "\noperators per rank:\n";
  for (const RankStats& r : s.ranks) {
    o << "  rank " << r.rank << ":";
    for (const auto& [op, c] : r.opCounts) o << " " << op << " x" << c;
    o << "\n";
  }
  return o.str();
}

}  // namespace pcc
