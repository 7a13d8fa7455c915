#include "compiler/driver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <ostream>

#include "compiler/batch_search.h"
#include "compiler/generation.h"
#include "runtime/plan_convert.h"
#include "codegen/memory_estimate.h"
#include "compiler/instruction_costs.h"
#include "compiler/ir/text.h"
#include "compiler/ir/verifier.h"
#include "compiler/precision_error.h"
#include "codegen/kernel_build.h"
#include "compiler/onnx/importer.h"
#include "passes/fuse.h"
#include "passes/pass_manager.h"
#include "passes/precision.h"
#include "passes/registry.h"
#include "passes/schedule.h"
#include "report/plan_report.h"
#include "runtime/onnx_tensor.h"

namespace pcc {

namespace {

class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The optimization pipeline run before partitioning.
constexpr const char* kPipeline[] = {"fold-constants", "canonicalize", "fold-batchnorm", "recognize", "cse", "dce"};

/// \returns whether pass `name` of kPipeline runs under `opts` (--no-fuse
/// turns off recognize and fuse).
bool pipelineRuns(std::string_view name, const CompileOptions& opts) {
  return opts.fuse || (name != "recognize" && name != "fuse");
}

// Run on each rank program after lowering (docs/partitioning.md#fusion):
// collectives are explicit there, so no group crosses one.
constexpr const char* kRankPipeline[] = {"fuse", "unit-transposes"};

/// The pattern names report.json always lists (missing ones count 0).
constexpr const char* kFusionPatterns[] = {"LayerNormalization", "RMSNormalization", "Gelu",
                                           "Swish",              "HardSwish",        "Attention",
                                           "fused_epilogue",     "fused_elementwise", "batchnorm_folded"};

/// Points `binds` at the values of `g` with the same names (a pass may have
/// replaced the values). \returns an internal error if one is gone.
Status rebind(const Graph& g, std::vector<IoBind>& binds, const std::vector<std::string>& names) {
  for (size_t i = 0; i < binds.size(); ++i) {
    Value* v = g.findValue(names[i]);
    if (!v) return internalError("value ", names[i], " bound to the plan's inputs or outputs vanished in the rank pipeline");
    binds[i].value = v;
  }
  return Status::OK();
}

/// Runs kRankPipeline on rank program `rg`, adding the passes' counts to
/// `stats` when `count` (one rank per pipeline stage is counted).
Status optimizeRank(RankGraph& rg, const CompileOptions& opts, std::ostream* log, bool count,
                    std::map<std::string, int64_t>& stats) {
  std::vector<std::string> inNames, outNames;
  for (const IoBind& b : rg.inputs) inNames.push_back(b.value->name());
  for (const IoBind& b : rg.outputs) outNames.push_back(b.value->name());
  PassManager pm;
  for (const char* name : kRankPipeline) pm.add(createPass(name));
  PassContext ctx;
  ctx.verifyEach = opts.verifyEach;
  ctx.printAfter = opts.printAfter;
  ctx.log = log;
  auto changed = pm.run(*rg.graph, ctx);
  if (!changed.ok()) return changed.status().withContext(strCat("rank ", rg.rank, " program"));
  RETURN_IF_ERROR(rebind(*rg.graph, rg.inputs, inNames));
  RETURN_IF_ERROR(rebind(*rg.graph, rg.outputs, outNames));
  if (count)
    for (const auto& [name, n] : ctx.stats) stats[name] += n;
  return Status::OK();
}

StatusOr<ClusterSpec> clusterSpecFor(const CompileOptions& opts) {
  StatusOr<ClusterSpec> spec =
      opts.clusterFile.empty() ? builtinClusterSpec(opts.gpu) : loadClusterSpec(opts.clusterFile);
  if (!spec.ok()) return spec.status().withContext(opts.clusterFile.empty() ? "--gpu" : "--cluster");
  if (opts.gpusPerNode > 0) spec->gpusPerNode = opts.gpusPerNode;
  return spec;
}

std::string ms(double seconds) { return strCat(std::round(seconds * 1e6) / 1e3, " ms"); }

/// \returns `v` with three significant digits, or as a whole number from 1000 on.
std::string sig3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, std::fabs(v) >= 1000 ? "%.0f" : "%.3g", v);
  return buf;
}

std::string bytesText(int64_t bytes) {
  const double mib = bytes / double(1 << 20);
  return mib < 1024 ? strCat(std::round(mib * 10) / 10, " MiB") : strCat(std::round(mib / 1024 * 100) / 100, " GiB");
}

// One line on the chosen mesh and the runner-up.
std::string searchSummary(const SearchResult& r, const ClusterSpec& cluster, int gpus) {
  const PlanEstimate& best = r.candidates.front();
  std::string s = strCat("plan: ", best.mesh.str(), " on ", best.mesh.size(), " of ", gpus, " ", cluster.name,
                         best.microbatches > 1 ? strCat(", ", best.microbatches, " micro-batches") : std::string(),
                         ", estimated ", ms(best.seconds), " per batch (", objectiveName(r.objective), ")");
  for (size_t i = 1; i < r.candidates.size(); ++i) {
    const PlanEstimate& e = r.candidates[i];
    if (!e.error.empty()) continue;
    s += strCat("; runner-up ", e.mesh.str(), ": ", ms(e.seconds), e.infeasible.empty() ? "" : " (does not fit)");
    break;
  }
  return s;
}

// Why the search left devices idle: the batch capped dp (every candidate on
// all the devices ended on a smaller mesh), or the cost model found the
// smaller mesh faster.
std::string fewerDevicesNote(const SearchResult& r, int gpus) {
  const PlanEstimate& best = r.candidates.front();
  std::string why =
      "the cost model estimates no mesh of more devices faster by more than 1% (the search's resolution)";
  for (const PlanEstimate& e : r.candidates) {
    if (e.mesh.size() != gpus || !e.error.empty()) continue;
    why += strCat(" (", e.mesh.str(), ": ", ms(e.seconds), " against ", ms(best.seconds), ")");
    break;
  }
  bool anyFull = std::any_of(r.candidates.begin(), r.candidates.end(),
                             [&](const PlanEstimate& e) { return e.mesh.size() == gpus; });
  if (!anyFull) why = "the batch cannot be split further, and no tensor-parallel split fits the rest";
  return strCat("using ", best.mesh.size(), " of ", gpus, " devices: ", why);
}

// The search's estimates, stored in the plan for the reports.
void recordSearch(const SearchResult& r, const ClusterSpec& cluster, plan::SearchReport& out) {
  out.set_objective(objectiveName(r.objective));
  out.set_device(cluster.name);
  out.set_device_description(cluster.description);
  out.set_gpus_per_node(cluster.gpusPerNode);
  out.set_device_memory_bytes(cluster.device.usableMemory());
  out.set_search_time_ms(r.searchSeconds * 1e3);
  out.set_pruned_pipelines(r.pruned);
  for (const auto& [phase, seconds] : r.phaseSeconds) (*out.mutable_phase_ms())[phase] = seconds * 1e3;
  if (!r.candidates.empty()) {
    out.set_folded_blocks(r.candidates.front().foldedBlocks);
    out.set_block_nodes(r.candidates.front().blockNodes);
    out.set_block_repeats(r.candidates.front().repeats);
  }
  for (const PlanEstimate& e : r.candidates) {
    plan::MeshEstimate* m = out.add_candidates();
    m->mutable_mesh()->set_pp(e.mesh.pp);
    m->mutable_mesh()->set_dp(e.mesh.dp);
    m->mutable_mesh()->set_tp(e.mesh.tp);
    m->set_estimated_time_ms(e.seconds * 1e3);
    m->set_samples_per_second(e.samplesPerSecond);
    m->set_infeasible(e.infeasible);
    m->set_error(e.error);
    if (e.microbatches > 1) m->set_microbatches(e.microbatches);
    if (e.mesh.pp > 1) {
      for (double t : e.stageSeconds) m->add_stage_ms(t * 1e3);
      m->set_bubble(e.bubble);
    }
    for (const RankEstimate& rk : e.ranks) {
      plan::RankEstimate* p = m->add_ranks();
      p->set_rank(rk.rank);
      p->set_compute_ms(rk.computeSeconds * 1e3);
      p->set_comm_ms(rk.commSeconds * 1e3);
      p->set_flops(rk.flops);
      p->set_weight_bytes(rk.weightBytes);
      p->set_activation_bytes(rk.activationBytes);
    }
  }
}

/// What turns a decoder export's decode step into a generation plan.
struct GenerationSetup {
  const GenerationInterface* interface = nullptr;
  int64_t batch = 1, maxContext = 0;
};

/// What the prefill program of a generation plan is imported from
/// (docs/generation.md#prefill): the model as the decode step was, with its
/// initializers shared (ImportOptions::initializers).
struct PrefillSetup {
  const onnx::ModelProto* model = nullptr;
  std::string baseDir;
  ImportOptions io;
  const GenerationInterface* interface = nullptr;
  int64_t batch = 1, maxContext = 0, maxPrompt = 0;
};

/// The fewest prompt tokens a further prefill program is built for
/// (CompileOptions::prefillPrograms).
constexpr int64_t kMinPrefillTokens = 8;

/// A prefill program, partitioned as its decode step and lowered.
struct PrefillBuild {
  std::unique_ptr<Graph> graph;
  Partition partition;
  std::vector<RankGraph> ranks;
  int64_t maxPrompt = 0;
  bool placeholderPast = false;
  bool logitsLastOnly = false;  ///< lastPositionLogits applied
  double seconds = 0;       ///< the cost model's time for one run (before fusion, as the search costs)
  int64_t peakMemory = 0;   ///< the largest rank's estimate
};

/// The state after the pipeline before partitioning and the mesh search.
struct Planned {
  std::unique_ptr<Graph> reference;    ///< as imported
  std::unique_ptr<Graph> partitioned;  ///< after kPipeline, not yet partitioned
  SearchResult search;
  std::map<std::string, int64_t> stats;  ///< the passes' counts
  /// A generation plan's KV cache states (passes/kv_cache.h) and its description.
  std::vector<KvCacheState> states;
  std::optional<plan::Generation> generation;
  const GenerationInterface* interface = nullptr;
  std::optional<PrefillSetup> prefill;
  /// --precision: what the conversion did, the graph before it (the error is
  /// measured against it), and the options the prefill programs convert with
  /// (the decode step's kept nodes by name, so both read the same weights).
  std::optional<PrecisionSummary> precision;
  std::unique_ptr<Graph> unconverted;
  PrecisionOptions precisionOptions;
  std::optional<QuantizeOptions> quantizeOptions;
  QuantizeSummary quantized;
};

/// What --precision measures once for every batch the compiler plans (the
/// ranges do not depend on the batch), and the chosen batch's measurement.
struct PrecisionCache {
  bool rangesTried = false;
  std::map<std::string, double> ranges;
  std::string notMeasured;  ///< why the model is not evaluated ("" when it is)
  std::vector<std::vector<Tensor>> sets, want;  ///< the ranges' inputs and the float32 outputs on them
  std::vector<TensorType> setTypes;             ///< the graph input types the sets were made for
  /// --quantize: each weight quantized once for every program and batch.
  std::shared_ptr<std::map<std::tuple<const void*, int, bool>, std::pair<Tensor, Tensor>>> quantized =
      std::make_shared<std::map<std::tuple<const void*, int, bool>, std::pair<Tensor, Tensor>>>();
};

/// \returns the bytes of the constants of `g`.
int64_t constantBytes(const Graph& g) {
  int64_t b = 0;
  for (const Value* c : g.constants()) b += static_cast<int64_t>(c->type().bytes());
  return b;
}

std::vector<TensorType> inputTypes(const Graph& g) {
  std::vector<TensorType> t;
  for (const Value* v : g.inputs()) t.push_back(v->type());
  return t;
}

/// Converts `p.partitioned` (after kPipeline) to --precision: measures the
/// ranges of its values on the calibration inputs first (once, cached in
/// `pc`), where the model is small enough to evaluate.
Status convertPlanned(Planned& p, const CompileOptions& opts, PrecisionCache& pc) {
  if (!pc.rangesTried) {
    pc.rangesTried = true;
    const int64_t bytes = constantBytes(*p.partitioned);
    if (bytes > opts.measureLimitBytes) {
      pc.notMeasured = strCat("not measured: the model's ", bytes >> 20, " MB of weights exceed --measure-limit ",
                              opts.measureLimitBytes >> 20, " MB");
    } else {
      StatusOr<std::vector<std::vector<Tensor>>> sets =
          calibrationSets(*p.partitioned, opts.calibrationInputs, kSeededSets);
      if (!sets.ok() && !opts.calibrationInputs.empty()) return sets.status();
      if (sets.ok()) {
        pc.sets = std::move(sets).value();
        pc.setTypes = inputTypes(*p.partitioned);
        StatusOr<std::map<std::string, double>> r = measureRanges(*p.partitioned, pc.sets, &pc.want);
        if (r.ok()) pc.ranges = std::move(r).value();
        else pc.notMeasured = strCat("not measured: the reference evaluator failed: ", r.status().message());
      } else {
        pc.notMeasured = strCat("not measured: ", sets.status().message());
      }
      if (!pc.notMeasured.empty()) {
        pc.sets.clear();
        pc.want.clear();
      }
    }
  }
  PrecisionOptions& po = p.precisionOptions;
  po.target = opts.precision;
  po.rules = opts.precisionRules;
  po.keepOps = opts.keepFp32Ops;
  po.keepNodes = opts.keepFp32Nodes;
  po.ranges = pc.notMeasured.empty() ? &pc.ranges : nullptr;
  const DType cache = opts.kvCacheDtype != DType::kUndefined ? opts.kvCacheDtype : opts.precision;
  for (const KvCacheState& st : p.states) {
    po.ioTypes[st.name] = cache;
    po.ioTypes[st.present] = cache;
  }
  p.unconverted = p.partitioned->clone();
  for (const std::string& n : opts.keepFp32Nodes) {
    bool found = false;
    for (const Node* node : p.partitioned->nodes()) found |= node->name() == n;
    if (!found)
      return invalidInput(opts.modelPath, ": --keep-fp32-node '", n,
                          "': no node of that name after the optimization pipeline (pcc --emit ir lists them)");
  }
  PrecisionSummary sum;
  if (opts.precision != DType::kUndefined) {
    ASSIGN_OR_RETURN(sum, convertPrecision(*p.partitioned, po));
  } else {
    sum.weightBytesBefore = constantBytes(*p.partitioned);
  }
  if (opts.quantizeBits != 0) {
    QuantizeOptions q;
    q.bits = opts.quantizeBits;
    q.group = opts.quantizeGroup >= 0 ? opts.quantizeGroup : opts.quantizeBits == 4 ? 32 : 0;
    q.skipNodes = opts.keepFp32Nodes;
    q.cache = pc.quantized;
    ASSIGN_OR_RETURN(p.quantized, quantizeWeights(*p.partitioned, q));
    p.quantizeOptions = q;
  }
  PassManager after;
  after.add(createPass("dce"));
  PassContext ctx;
  ctx.verifyEach = opts.verifyEach;
  ASSIGN_OR_RETURN(bool cleaned, after.run(*p.partitioned, ctx));
  (void)cleaned;
  RETURN_IF_ERROR(verifyGraph(*p.partitioned).withContext("after the precision conversion"));
  sum.weightBytesAfter = constantBytes(*p.partitioned);
  // The prefill programs keep the same nodes in float32, by name, whatever their ranges.
  po.ranges = nullptr;
  for (const KeptNode& k : sum.kept) po.keepNodes.insert(k.node);
  if (p.generation && opts.precision != DType::kUndefined) {
    int64_t bytes = 0;
    for (plan::GenerationState& gs : *p.generation->mutable_states()) {
      gs.mutable_desc()->set_dtype(static_cast<int32_t>(cache));
      bytes += fromDesc(gs.desc()).bytes();
    }
    p.generation->set_state_bytes(bytes);
  }
  p.precision = std::move(sum);
  return Status::OK();
}

/// Measures the error of the converted graph `converted` against
/// `p.unconverted` and fills `rep`. \returns an exit-2 error when an output
/// falls below --max-error.
Status measurePrecision(const Planned& p, const Graph& converted, const CompileOptions& opts, PrecisionCache& pc,
                        plan::PrecisionReport& rep, std::ostream* log) {
  const PrecisionSummary& s = *p.precision;
  rep.set_target(s.target == DType::kUndefined ? std::string() : precisionName(s.target));
  if (p.quantizeOptions) {
    const QuantizeOptions& q = *p.quantizeOptions;
    rep.set_quantize(strCat("int", q.bits, q.group > 0 ? strCat(", blocks of ", q.group) : std::string(", per output channel")));
    rep.set_quantized_nodes(p.quantized.nodes);
  }
  rep.set_nodes_converted(s.nodesConverted);
  for (const KeptNode& k : s.kept) {
    plan::PrecisionReport::Kept* e = rep.add_kept();
    e->set_node(k.node);
    e->set_op(k.op);
    e->set_reason(k.reason);
  }
  rep.set_casts(s.casts);
  for (const std::string& c : s.overflowingConstants) rep.add_overflowing_constants(c);
  rep.set_weight_bytes_before(s.weightBytesBefore);
  rep.set_weight_bytes_after(s.weightBytesAfter);
  if (p.generation && !p.generation->states().empty())
    rep.set_kv_cache_dtype(precisionName(static_cast<DType>(p.generation->states(0).desc().dtype())));
  rep.set_inputs_from(opts.calibrationInputs.empty() ? "seeded" : opts.calibrationInputs);
  Stopwatch sw;
  std::string notMeasured = pc.notMeasured;
  if (notMeasured.empty()) {
    // The chosen batch's inputs: the ranges' sets when the batch is the same.
    const bool same = pc.setTypes == inputTypes(*p.unconverted);
    StatusOr<std::vector<std::vector<Tensor>>> sets =
        same ? StatusOr<std::vector<std::vector<Tensor>>>(pc.sets)
             : calibrationSets(*p.unconverted, opts.calibrationInputs, kSeededSets);
    if (!sets.ok()) return sets.status();
    StatusOr<std::vector<OutputError>> errs = measureError(*p.unconverted, converted, *sets, same ? &pc.want : nullptr);
    if (!errs.ok()) {
      notMeasured = strCat("not measured: the reference evaluator failed: ", errs.status().message());
    } else {
      rep.set_input_sets(static_cast<int32_t>(sets->size()));
      for (const OutputError& e : *errs) {
        plan::PrecisionReport::OutputError* o = rep.add_outputs();
        o->set_name(e.name);
        o->set_max_abs(e.maxAbs);
        o->set_max_rel(e.maxRel);
        o->set_cosine(e.cosine);
        o->set_top1(e.top1);
        o->set_finite(e.finite);
      }
    }
  }
  rep.set_measured(notMeasured.empty() ? "measured" : notMeasured);
  rep.set_seconds(sw.seconds());
  if (log && !opts.quiet) *log << "pcc: " << precisionLine(rep) << "\n";
  if (opts.maxError >= 0 && notMeasured.empty()) {
    const plan::PrecisionReport::OutputError* worst = nullptr;
    for (const plan::PrecisionReport::OutputError& o : rep.outputs())
      if (!(o.cosine() >= opts.maxError) && (!worst || !(o.cosine() >= worst->cosine()))) worst = &o;
    if (worst)
      return invalidInput(opts.modelPath, ": --precision ", rep.target(), ": output '", worst->name(),
                          "' has cosine similarity ", worst->cosine(), worst->finite() ? "" : " (not finite)",
                          " to float32, below --max-error ", opts.maxError, "; computing in ", rep.target(),
                          " upstream of it: ", upstreamOps(converted, worst->name(), s.target),
                          " (--keep-fp32 OP or --keep-fp32-node NAME keeps them in float32)");
  } else if (opts.maxError >= 0) {
    return invalidInput(opts.modelPath, ": --max-error ", opts.maxError, ": the error was ", notMeasured);
  }
  return Status::OK();
}

std::vector<std::pair<std::string, std::string>> statePairs(const std::vector<KvCacheState>& states) {
  std::vector<std::pair<std::string, std::string>> v;
  for (const KvCacheState& s : states) v.emplace_back(s.name, s.present);
  return v;
}

Objective objectiveOf(const CompileOptions& opts) {
  return opts.objective == "throughput" ? Objective::kThroughput : Objective::kLatency;
}

PartitionOptions partitionOptions(const CompileOptions& opts, const CostModel& cost,
                                  const std::vector<KvCacheState>& states = {}) {
  PartitionOptions po;
  po.states = statePairs(states);
  po.gpus = opts.gpus;
  po.dp = opts.dp;
  po.tp = opts.tp;
  po.pp = opts.pp;
  po.microbatches = opts.microbatches;
  po.cost = &cost;
  po.minimizeWeights = opts.tp > 1;  // a forced tp: split the weights, then be fast
  po.foldRepeats = opts.foldRepeats;
  return po;
}

/// Runs kPipeline on a copy of `reference`, then the mesh search over it;
/// `print`: honour --print-after. \returns the state, or the first error.
StatusOr<Planned> planImported(std::unique_ptr<Graph> reference, const CompileOptions& opts, const CostModel& cost,
                               bool print, std::ostream* log, PrecisionCache& pc,
                               const GenerationSetup* gen = nullptr) {
  Planned p;
  p.reference = std::move(reference);
  p.partitioned = p.reference->clone();
  if (gen) {
    // The cache as state (passes/kv_cache.h), on the graph with its shape
    // computations folded (they read the past's shape).
    PassManager pre;
    for (const char* name : {"fold-constants", "dce"}) pre.add(createPass(name));
    PassContext pctx;
    pctx.verifyEach = opts.verifyEach;
    ASSIGN_OR_RETURN(bool folded, pre.run(*p.partitioned, pctx));
    (void)folded;
    ASSIGN_OR_RETURN(p.states, rewriteKvCache(*p.partitioned, gen->interface->pairs, opts.modelPath));
    // A rotary table shorter than the context would fail mid-generation: say so now.
    for (const Node* n : p.partitioned->nodes())
      if (n->op() == OpKind::RotaryEmbedding && n->inputs().size() > 3 && n->input(3) && n->input(1) &&
          n->input(1)->type().rank() == 2 && n->input(1)->type().shape[0] < gen->maxContext)
        return invalidInput(opts.modelPath, ": ", n->describe(), ": its rotary table holds ",
                            n->input(1)->type().shape[0], " positions, fewer than --max-context ", gen->maxContext,
                            " (the model was built for ", n->input(1)->type().shape[0], "; --max-context ",
                            n->input(1)->type().shape[0], " or less)");
    RETURN_IF_ERROR(verifyGraph(*p.partitioned).withContext("after the KV cache rewrite"));
    plan::Generation g;
    g.set_batch(gen->batch);
    g.set_max_context(gen->maxContext);
    g.set_vocab(gen->interface->vocab);
    for (int64_t e : gen->interface->eosTokenIds) g.add_eos_token_ids(e);
    int64_t bytes = 0;
    for (const KvCacheState& st : p.states) {
      plan::GenerationState* gs = g.add_states();
      gs->set_name(st.name);
      gs->set_present(st.present);
      *gs->mutable_desc() = toDesc(st.type);
      gs->set_axis(st.axis);
      gs->set_reference_new_at_position(st.newAtPosition);
      bytes += st.type.bytes();
    }
    g.set_state_bytes(bytes);
    auto describe = [](const std::vector<Value*>& vs, google::protobuf::RepeatedPtrField<plan::IoDesc>* out) {
      for (const Value* v : vs) {
        plan::IoDesc* d = out->Add();
        d->set_name(v->name());
        *d->mutable_desc() = toDesc(v->type());
      }
    };
    describe(p.reference->inputs(), g.mutable_reference_inputs());
    describe(p.reference->outputs(), g.mutable_reference_outputs());
    auto indexIn = [](const std::vector<Value*>& vs, const std::string& name) {
      for (size_t i = 0; i < vs.size(); ++i)
        if (vs[i]->name() == name) return static_cast<int32_t>(i);
      return -1;
    };
    for (const KvCacheState& st : p.states) {
      g.add_reference_past(indexIn(p.reference->inputs(), st.past));
      g.add_reference_present(indexIn(p.reference->outputs(), st.present));
    }
    p.generation = std::move(g);
    p.interface = gen->interface;
  }
  PassManager pm;
  for (const char* name : kPipeline)
    if (pipelineRuns(name, opts)) pm.add(createPass(name));
  PassContext ctx;
  ctx.verifyEach = opts.verifyEach;
  if (print) ctx.printAfter = opts.printAfter;
  ctx.log = log;
  ASSIGN_OR_RETURN(bool changed, pm.run(*p.partitioned, ctx));
  (void)changed;
  p.stats = ctx.stats;
  // --precision: before the search, which charges each value at its type's width and rate.
  if (opts.precision != DType::kUndefined || opts.quantizeBits != 0) RETURN_IF_ERROR(convertPlanned(p, opts, pc));
  PartitionOptions po = partitionOptions(opts, cost, p.states);
  if (!p.states.empty()) po.microbatches = 1;  // state pieces are per sequence, not per micro-batch
  ASSIGN_OR_RETURN(p.search, searchMesh(*p.partitioned, po, cost, objectiveOf(opts)));
  return p;
}

/// \returns the leading dim of the first input of `g` with one (0: none),
/// the batch as the mesh search counts it.
int64_t leadingDim(const Graph& g) {
  for (Value* in : g.inputs())
    if (in->type().rank() >= 1) return in->type().shape[0];
  return 0;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

/// \returns the one line on the batch the compiler chose.
std::string batchLine(const BatchSweep& sweep, const InputDimsInfo& dims, const CompileOptions& opts,
                      double seconds) {
  std::vector<std::string> symbols;
  for (const std::string& s : dims.batchSymbols) symbols.push_back(s.empty() ? "unnamed" : "'" + s + "'");
  const std::vector<BatchPoint>& curve = sweep.curve();
  const BatchPoint& pick = curve[sweep.chosen().value_or(0)];
  std::string s = strCat("batch ", pick.batch, " for the symbolic leading dim ", joined(symbols), " of ",
                         joined(dims.batchInputs), ": ");
  if (objectiveOf(opts) == Objective::kLatency)
    return s + "--objective latency takes 1 (--batch N fixes it; --objective throughput chooses the batch of the "
               "most samples/s)";
  if (!sweep.chosen())
    return s + strCat("no batch fits (", pick.why, ")");
  std::string tried = curve.size() == 1 ? strCat("batch ", curve[0].batch)
                                        : strCat(curve.size(), " batches from ", curve.front().batch, " to ",
                                                 curve.back().batch);
  return s + strCat("the most estimated samples/s within memory (", static_cast<int64_t>(std::round(pick.samplesPerSecond)), " on ",
                    pick.mesh.str(), "; ", tried, " costed in ", std::round(seconds * 100) / 100, " s; ",
                    sweep.stopReason(), "); --batch N fixes it, pcc-report shows the curve");
}

void recordBatch(const BatchSweep* sweep, int64_t batch, const std::string& how, const CompileOptions& opts,
                 double seconds, plan::BatchReport& out) {
  out.set_batch(batch);
  out.set_automatic(sweep != nullptr);
  out.set_how(how);
  out.set_search_time_ms(seconds * 1e3);
  if (!sweep) return;
  out.set_max_batch(objectiveOf(opts) == Objective::kLatency ? 1 : opts.maxAutoBatch);
  out.set_min_gain(opts.autoBatchMinGain);
  for (const BatchPoint& p : sweep->curve()) {
    plan::BatchPoint* q = out.add_curve();
    q->set_batch(p.batch);
    q->mutable_mesh()->set_pp(p.mesh.pp);
    q->mutable_mesh()->set_dp(p.mesh.dp);
    q->mutable_mesh()->set_tp(p.mesh.tp);
    q->set_estimated_time_ms(p.seconds * 1e3);
    q->set_samples_per_second(p.samplesPerSecond);
    q->set_memory_bytes(p.memoryBytes);
    q->set_feasible(p.feasible);
    if (p.microbatches > 1) q->set_microbatches(p.microbatches);
    q->set_why(p.why);
  }
}

/// The batch sweep of --objective throughput (or latency's batch of 1).
BatchSweepOptions sweepOptions(const CompileOptions& opts) {
  BatchSweepOptions so;
  so.objective = objectiveOf(opts);
  so.maxBatch = opts.maxAutoBatch;
  so.minGain = opts.autoBatchMinGain;
  return so;
}

/// Runs `sweep` to its end, planning each batch it proposes with `plan`.
/// \returns the plan to keep (the chosen batch's, else the first one
/// planned), or nullopt with `firstError` set to the first batch's error.
std::optional<Planned> runSweep(BatchSweep& sweep, const std::function<StatusOr<Planned>(int64_t)>& plan,
                                Status& firstError) {
  std::optional<Planned> kept;
  while (std::optional<int64_t> b = sweep.next()) {
    StatusOr<Planned> p = plan(*b);
    if (!p.ok()) {
      if (sweep.curve().empty()) firstError = p.status();
      BatchPoint failed;
      failed.batch = *b;
      failed.why = p.status().message();
      sweep.add(std::move(failed));
      continue;
    }
    bool first = sweep.curve().empty();
    if (sweep.add(batchPointOf(*b, p->search)) || first) kept = std::move(p).value();
  }
  return kept;
}

/// Fills the generation estimate of `plan` from the chosen mesh of `r` and
/// the weights and state pieces of the emitted rank programs
/// (docs/generation.md#estimates).
void recordGenerationEstimate(const SearchResult& r, const ClusterSpec& cluster, plan::Plan& plan) {
  if (r.candidates.empty()) return;
  plan::Generation& g = *plan.mutable_generation();
  const PlanEstimate& best = r.candidates.front();
  const double bandwidth = cluster.device.memoryBandwidth * cluster.device.memoryEfficiency;
  std::map<int, double> floor, comm;  // per stage: the busiest rank's
  int64_t most = 0;
  for (const RankEstimate& k : best.ranks) {
    int64_t bytes = k.weightBytes + k.stateBytes;
    for (const plan::RankProgram& prog : plan.ranks())
      if (prog.rank() == k.rank) {
        const RankMemoryEstimate m = estimateRankMemory(prog);
        bytes = m.weights + m.states;
      }
    most = std::max(most, bytes);
    floor[k.stage] = std::max(floor[k.stage], bandwidth > 0 ? bytes / bandwidth : 0.0);
    comm[k.stage] = std::max(comm[k.stage], k.commSeconds);
  }
  double roofline = 0, commSeconds = 0;
  for (const auto& [stage, t] : floor) roofline += t;
  for (const auto& [stage, t] : comm) commSeconds += t;
  plan::GenerationEstimate* e = g.mutable_estimate();
  e->set_step_ms(best.seconds * 1e3);
  e->set_tokens_per_second(best.seconds > 0 ? g.batch() / best.seconds : 0);
  e->set_roofline_ms(roofline * 1e3);
  e->set_bytes_per_step(most);
  e->set_comm_ms(commSeconds * 1e3);
  e->set_memory_bandwidth(bandwidth);
}

/// Lowers `partitioned` to rank programs, then fuses (kRankPipeline) and
/// schedules each (passes/schedule.h), verifying each at the end (and after
/// each step with --verify-each); the overlap
/// scheduling's note goes to partition.notes. `before` (optional) is told the
/// rank programs as lowered, before fusion (the mesh search costs those).
/// With `stats`, the passes' counts over the ranks at dp = tp = 0 (one per
/// pipeline stage, together the whole model once) are added to it and their
/// kernels counted into `*kernelsAfter`.
StatusOr<std::vector<RankGraph>> lowerAndOptimize(Graph& partitioned, Partition& partition,
                                                  const CompileOptions& opts, std::ostream* log,
                                                  const std::function<void(const std::vector<RankGraph>&)>& before,
                                                  std::map<std::string, int64_t>* stats, int64_t* kernelsAfter) {
  auto say = [&](const std::string& s) {
    if (log && !opts.quiet) *log << "pcc: " << s << "\n";
  };
  LowerOptions lo;
  lo.eagerSliceElements = opts.eagerSliceElements;
  ASSIGN_OR_RETURN(std::vector<RankGraph> ranks, lowerToRanks(partitioned, partition, lo));
  // Lowering re-infers and checks every local type; the verifier runs on
  // each rank program once it is scheduled, and after each step with
  // --verify-each (a 64-rank plan spent a fifth of its compile verifying).
  if (opts.verifyEach)
    for (const RankGraph& rg : ranks)
      RETURN_IF_ERROR(verifyGraph(*rg.graph).withContext(strCat("rank ", rg.rank, " program")));
  if (stats) say(strCat("partitioned: mesh ", partition.mesh.str(), ", ", ranks.size(), " rank programs"));
  if (before) before(ranks);
  // A replica's program is its lead's (findReplicas): rewritten, scheduled
  // and verified once, then copied with its peers shifted.
  const int replicas = findReplicas(ranks, partition.mesh);

  std::map<std::string, int64_t> ignored;
  for (RankGraph& rg : ranks) {
    if (rg.replicaOf >= 0) continue;
    bool count = stats && partition.mesh.coord(rg.rank, MeshAxis::kDP) == 0 &&
                 partition.mesh.coord(rg.rank, MeshAxis::kTP) == 0;
    if (opts.fuse) RETURN_IF_ERROR(optimizeRank(rg, opts, log, count, count ? *stats : ignored));
    if (opts.verifyEach)
      RETURN_IF_ERROR(verifyGraph(*rg.graph).withContext(strCat("rank ", rg.rank, " program after fusion")));
    if (count) *kernelsAfter += countKernels(*rg.graph);
  }

  // Overlap scheduling (passes/schedule.h): collectives first, independent nodes before their readers.
  OverlapScheduleStats sched;
  std::vector<OverlapScheduleStats> scheduled(ranks.size());
  for (RankGraph& rg : ranks) {
    if (rg.replicaOf >= 0) continue;
    OverlapScheduleStats& s = scheduled[rg.rank];
    if (opts.scheduleOverlap) {
      StatusOr<OverlapScheduleStats> r = scheduleOverlap(*rg.graph);
      if (!r.ok()) return r.status().withContext(strCat("rank ", rg.rank, " program"));
      s = r.value();
    } else {
      overlapOrder(*rg.graph, {}, &s);
      s.moved = 0;
      s.overlapAfter = s.overlapBefore;
    }
    RETURN_IF_ERROR(verifyGraph(*rg.graph).withContext(strCat("rank ", rg.rank, " program")));
  }
  for (RankGraph& rg : ranks) {
    if (rg.replicaOf >= 0) {
      RETURN_IF_ERROR(makeReplica(rg, ranks[rg.replicaOf]));
      scheduled[rg.rank] = scheduled[rg.replicaOf];
    }
    const OverlapScheduleStats& s = scheduled[rg.rank];
    sched.collectives += s.collectives;
    sched.moved += s.moved;
    sched.overlapBefore += s.overlapBefore;
    sched.overlapAfter += s.overlapAfter;
  }
  if (sched.collectives > 0)
    partition.notes.push_back(strCat("overlap scheduling", opts.scheduleOverlap ? "" : " off (--no-schedule-overlap)",
                                     ": ", sched.collectives, " collectives over ", ranks.size(), " ranks, ",
                                     sched.moved, " nodes moved, ", sched.overlapAfter,
                                     " nodes between the collectives and their first readers (", sched.overlapBefore,
                                     " in graph order)"));
  if (replicas > 0)
    partition.notes.push_back(strCat(replicas, " of ", ranks.size(), " rank programs are data-parallel replicas of ",
                                     "another's, node for node (peers aside): each was rewritten and checked once ",
                                     "and shares its weight file"));
  return ranks;
}

/// Imports, rewrites and partitions the prefill program of a generation
/// plan as its decode step `decode` was partitioned (the same mesh, tp
/// choices and stages, so that every rank holds the same weight and cache
/// pieces), and lowers it. \returns it, or why it cannot follow the decode step.
StatusOr<PrefillBuild> buildPrefill(const PrefillSetup& s, const std::vector<KvCacheState>& states,
                                    const Graph& decodeGraph, const Partition& decode, PartitionOptions po,
                                    const CompileOptions& opts, const CostModel& cost,
                                    const PrecisionOptions* precision, const QuantizeOptions* quantize) {
  PrefillBuild b;
  b.maxPrompt = s.maxPrompt;
  const size_t atPosition = static_cast<size_t>(
      std::count_if(states.begin(), states.end(), [](const KvCacheState& st) { return st.newAtPosition; }));
  if (atPosition != 0 && atPosition != states.size())
    return invalidInput("its caches are written in two forms (Concat and GroupQueryAttention)");
  b.placeholderPast = atPosition == 0;
  if (b.placeholderPast && s.interface->positionIds.empty())
    return invalidInput("the export has no position_ids input, so its positions would count the placeholder past "
                        "slot");
  ImportOptions io = s.io;
  bindPrefillShapes(*s.interface, s.batch, s.maxContext, s.maxPrompt, b.placeholderPast, io);
  io.batch = s.batch;
  ASSIGN_OR_RETURN(b.graph, importOnnxModel(*s.model, s.baseDir, opts.modelPath, io));
  Graph& g = *b.graph;
  PassContext ctx;
  ctx.verifyEach = opts.verifyEach;
  PassManager pre;
  for (const char* name : {"fold-constants", "dce"}) pre.add(createPass(name));
  ASSIGN_OR_RETURN(bool folded, pre.run(g, ctx));
  (void)folded;
  ASSIGN_OR_RETURN(std::vector<KvCacheState> mine, rewriteKvCachePrefill(g, s.interface->pairs, states, opts.modelPath));
  // A GroupQueryAttention prefill reads the whole cache, all of it masked
  // past the prompt's positions: its attention reads those only.
  if (!b.placeholderPast) RETURN_IF_ERROR(limitPrefillAttention(g, s.maxPrompt).status());
  // Only each sequence's last prompt position gives a token: the vocabulary's
  // product runs on that row alone.
  ASSIGN_OR_RETURN(b.logitsLastOnly, lastPositionLogits(g, s.interface->logits));
  RETURN_IF_ERROR(verifyGraph(g).withContext("after the KV cache rewrite"));
  PassManager pm;
  for (const char* name : kPipeline)
    if (pipelineRuns(name, opts)) pm.add(createPass(name));
  ASSIGN_OR_RETURN(bool changed, pm.run(g, ctx));
  (void)changed;
  if (precision || quantize) {
    // As the decode step was converted: the same nodes kept, the same weights read.
    if (precision) RETURN_IF_ERROR(convertPrecision(g, *precision).status());
    if (quantize) RETURN_IF_ERROR(quantizeWeights(g, *quantize).status());
    PassManager after;
    after.add(createPass("dce"));
    ASSIGN_OR_RETURN(bool cleaned, after.run(g, ctx));
    (void)cleaned;
    RETURN_IF_ERROR(verifyGraph(g).withContext("after the precision conversion"));
  }
  const Value* logits = g.findValue(s.interface->logits);
  const int64_t rows = b.logitsLastOnly ? 1 : s.maxPrompt;
  if (!logits || logits->type().rank() != 3 || logits->type().shape[1] != rows)
    return invalidInput("its logits are ", logits ? logits->type().str() : std::string("missing"), ", not ",
                        b.logitsLastOnly ? "one row per sequence [batch, 1, " : "one row per prompt position [batch, ",
                        b.logitsLastOnly ? std::string() : strCat(s.maxPrompt, ", "), "vocab]");
  std::map<std::string, int> stages;
  if (decode.mesh.pp > 1)
    for (const Node* n : decodeGraph.nodes()) stages[partitionKey(*n)] = n->stage();
  po.states = statePairs(mine);
  po.pinnedTp = &decode.tpChoices;
  po.pinnedStages = decode.mesh.pp > 1 ? &stages : nullptr;
  po.microbatches = 1;
  ASSIGN_OR_RETURN(b.partition, partitionGraph(g, po));
  RETURN_IF_ERROR(verifyGraph(g).withContext("after partitioning"));
  for (const KvCacheState& st : mine) {
    const Value* a = g.findValue(st.name);
    const Value* d = decodeGraph.findValue(st.name);
    if (!a || !d || !a->sharding() || !d->sharding() || !(*a->sharding() == *d->sharding()))
      return invalidInput("its cache '", st.name, "' would be split as ",
                          a && a->sharding() ? a->sharding()->str() : std::string("?"), ", the decode step's as ",
                          d && d->sharding() ? d->sharding()->str() : std::string("?"));
  }
  CompileOptions quiet = opts;
  quiet.printAfter.clear();
  ASSIGN_OR_RETURN(b.ranks, lowerAndOptimize(g, b.partition, quiet, nullptr,
                                             [&](const std::vector<RankGraph>& lowered) {
                                               PlanEstimate e = estimatePlan(lowered, b.partition.mesh, cost, s.batch);
                                               b.seconds = e.seconds;
                                               for (const RankEstimate& r : e.ranks)
                                                 b.peakMemory = std::max(b.peakMemory, r.memoryBytes());
                                             },
                                             nullptr, nullptr));
  return b;
}

/// Sets the roles of a generation program `m` (plan::Generation or
/// plan::Prefill): the positions of `gi`'s inputs among `ins` and of its
/// logits among `outs` (its states left out of both). \returns an internal
/// error when a role the runtime needs vanished in the pipeline.
/// \returns the position of the entry named `n` in `v`, -1 when none is (or `n` is empty).
int ioIndex(const google::protobuf::RepeatedPtrField<plan::IoDesc>& v, const std::string& n) {
  for (int i = 0; i < v.size(); ++i)
    if (!n.empty() && v[i].name() == n) return i;
  return -1;
}

template <typename M>
Status setRoles(const GenerationInterface& gi, const google::protobuf::RepeatedPtrField<plan::IoDesc>& ins,
                const google::protobuf::RepeatedPtrField<plan::IoDesc>& outs, M& m, const char* what) {
  m.set_input_ids(ioIndex(ins, gi.inputIds));
  m.set_attention_mask(ioIndex(ins, gi.attentionMask));
  m.set_position_ids(ioIndex(ins, gi.positionIds));
  m.set_cache_position(ioIndex(ins, kCachePositionInput));
  m.set_logits(ioIndex(outs, gi.logits));
  if (m.input_ids() < 0 || m.attention_mask() < 0 || m.cache_position() < 0 || m.logits() < 0)
    return internalError(what, ": an input or output role vanished in the pipeline");
  return Status::OK();
}

/// Partitions, lowers, fuses and emits the planned graph `p` (opts.gpus
/// resolved), with a generation plan's prefill program, and records `batch`
/// in the plan.
StatusOr<Compilation> finishCompile(Planned p, const CompileOptions& opts, const ClusterSpec& cluster,
                                    const CostModel& cost, const plan::BatchReport& batch, const Stopwatch& total,
                                    std::ostream* log, PrecisionCache& pc) {
  auto say = [&](const std::string& s) {
    if (log && !opts.quiet) *log << "pcc: " << s << "\n";
  };
  Compilation c;
  c.reference = std::move(p.reference);
  c.partitioned = std::move(p.partitioned);
  c.search = std::move(p.search);
  say(strCat("optimized: ", c.partitioned->numNodes(), " nodes"));
  bool halfValues = false;
  for (const Node* n : c.partitioned->nodes())
    for (const Value* v : n->outputs()) halfValues |= v->type().dtype == DType::kF16 || v->type().dtype == DType::kBF16;
  std::optional<plan::PrecisionReport> precisionReport;
  const PrecisionOptions* prefillPrecision =
      p.precision && opts.precision != DType::kUndefined ? &p.precisionOptions : nullptr;
  const QuantizeOptions* prefillQuantize = p.quantizeOptions ? &*p.quantizeOptions : nullptr;
  if (p.precision) {
    precisionReport.emplace();
    RETURN_IF_ERROR(measurePrecision(p, *c.partitioned, opts, pc, *precisionReport, log));
    p.unconverted.reset();
  }

  PartitionOptions po = partitionOptions(opts, cost, p.states);
  if (!p.states.empty() && opts.microbatches > 1)
    return invalidInput(opts.modelPath, ": --microbatches ", opts.microbatches,
                        ": a generation plan's KV cache is per sequence; it runs one micro-batch");
  const PlanEstimate& best = c.search.candidates.front();
  const bool forced = opts.dp > 0 || opts.tp > 0 || opts.pp > 0;  // --microbatches alone leaves the mesh free
  if (!best.infeasible.empty() && !forced) {
    // Name the plan that needs the least memory per device: what it would take.
    const PlanEstimate* smallest = &best;
    auto peak = [](const PlanEstimate& e) {
      int64_t m = 0;
      for (const RankEstimate& r : e.ranks) m = std::max(m, r.memoryBytes());
      return m;
    };
    for (const PlanEstimate& e : c.search.candidates)
      if (e.error.empty() && peak(e) < peak(*smallest)) smallest = &e;
    return invalidInput(opts.modelPath, ": no mesh of at most ", opts.gpus, " ", cluster.name,
                        " devices fits in memory; the one needing the least, ", smallest->mesh.str(), ": ",
                        smallest->infeasible, " (more --gpus, a larger --gpu, or --strategy to compile it anyway)");
  }
  if (!forced) {
    po.gpus = best.mesh.size();
    po.dp = best.mesh.dp;
    po.tp = best.mesh.tp;
    po.pp = best.mesh.pp;
    po.minimizeWeights = best.minimizeWeights;
  }
  po.microbatches = p.states.empty() ? best.microbatches : 1;  // forced, or the search's choice for the mesh
  say(searchSummary(c.search, cluster, opts.gpus));
  ASSIGN_OR_RETURN(c.partition, partitionGraph(*c.partitioned, po));
  if (!best.infeasible.empty()) c.partition.notes.push_back("does not fit: " + best.infeasible);
  if (halfValues)
    c.partition.notes.push_back(
        "float16/bfloat16 values: CPU ranks compute them in float32 and round each op's result (a generated "
        "kernel's at its stores) to the 16-bit type");
  if (!forced && best.mesh.size() < opts.gpus)
    c.partition.notes.insert(c.partition.notes.begin(), fewerDevicesNote(c.search, opts.gpus));
  RETURN_IF_ERROR(verifyGraph(*c.partitioned).withContext("after partitioning"));
  for (const std::string& n : c.partition.notes) say("note: " + n);
  std::map<std::string, int64_t> stats = p.stats;  // counts of the passes before partitioning
  int64_t kernelsAfter = 0;
  ASSIGN_OR_RETURN(c.ranks, lowerAndOptimize(*c.partitioned, c.partition, opts, log, nullptr, &stats, &kernelsAfter));
  int64_t opsBefore = countKernels(*c.reference);
  say(strCat("fusion: ", opsBefore, " kernels before, ", kernelsAfter, " after", opts.fuse ? "" : " (--no-fuse)"));
  for (const std::string& n : c.partition.notes)
    if (n.rfind("overlap scheduling", 0) == 0) say(n);

  std::optional<PrefillBuild> prefill;
  std::vector<PrefillBuild> shorter;  // for fewer prompt tokens, ascending
  if (p.generation && p.prefill && p.prefill->maxPrompt > 0) {
    Stopwatch pt;
    StatusOr<PrefillBuild> built = buildPrefill(*p.prefill, p.states, *c.partitioned, c.partition, po, opts, cost, prefillPrecision, prefillQuantize);
    if (built.ok()) {
      prefill = std::move(built).value();
      // The same program for half the tokens, and half again: a short prompt
      // then computes fewer padded positions. Each is built like the first,
      // on the same weights and cache pieces; one that cannot be is left out.
      PrefillSetup less = *p.prefill;
      for (int k = 1; k < opts.prefillPrograms && less.maxPrompt / 2 >= kMinPrefillTokens; ++k) {
        less.maxPrompt /= 2;
        StatusOr<PrefillBuild> half = buildPrefill(less, p.states, *c.partitioned, c.partition, po, opts, cost, prefillPrecision, prefillQuantize);
        if (!half.ok()) {
          c.partition.notes.push_back(strCat("no prefill program for ", less.maxPrompt, " prompt tokens: ",
                                             half.status().message()));
          break;
        }
        shorter.insert(shorter.begin(), std::move(half).value());
      }
      std::string lengths;
      for (const PrefillBuild& b : shorter)
        lengths += strCat(b.maxPrompt, " (", sig3(b.seconds * 1e3), " ms), ");
      say(strCat("generation: prefill program", shorter.empty() ? "" : "s", " for ", lengths, prefill->maxPrompt,
                 " prompt tokens per sequence in one run: estimated ", sig3(prefill->seconds * 1e3),
                 " ms (time to first token", shorter.empty() ? "" : " at the longest", "), ",
                 bytesText(prefill->peakMemory), " per device at most (", sig3(pt.seconds()), " s)"));
      if (prefill->peakMemory > cost.memoryCapacity())
        c.partition.notes.push_back(strCat("the prefill program needs ", bytesText(prefill->peakMemory),
                                           " on a device, more than its ", bytesText(cost.memoryCapacity()),
                                           ": a smaller --max-prompt needs less"));
    } else {
      std::string note = strCat("no prefill program: ", built.status().message(),
                                "; prompts go through the decode step, one token per run");
      say("note: " + note);
      c.partition.notes.push_back(note);
    }
  }

  const plan::Generation* generation = p.generation ? &*p.generation : nullptr;
  // The plan, and the prefill program into it (the same weight files and kernel table).
  auto emitAll = [&](KernelTable* kt) -> StatusOr<EmittedPlan> {
    ASSIGN_OR_RETURN(EmittedPlan e, emitPlan(*c.reference, *c.partitioned, c.partition, c.ranks, opts.modelPath, kt,
                                             generation));
    if (!generation) return e;
    plan::Generation& g = *e.plan.mutable_generation();
    RETURN_IF_ERROR(setRoles(*p.interface, e.plan.inputs(), e.plan.outputs(), g, "generation plan"));
    if (!prefill) return e;
    auto emitOne = [&](const PrefillBuild& b, plan::Prefill& pre) -> Status {
      RETURN_IF_ERROR(emitPrefill(*b.graph, b.partition, b.ranks, kt, e, pre));
      RETURN_IF_ERROR(setRoles(*p.interface, pre.inputs(), pre.outputs(), pre, "prefill program"));
      pre.set_max_prompt(b.maxPrompt);
      pre.set_mask_offset(b.placeholderPast ? 1 : 0);
      pre.set_mask_whole_window(!b.placeholderPast);
      pre.set_estimate_ms(b.seconds * 1e3);
      if (b.logitsLastOnly) {
        const int at = ioIndex(pre.inputs(), kLastPositionInput);
        if (at < 0) return internalError("prefill program: its input '", kLastPositionInput, "' vanished");
        pre.set_logits_last_only(true);
        pre.set_last_position(at);
      }
      return Status::OK();
    };
    RETURN_IF_ERROR(emitOne(*prefill, *g.mutable_prefill()));
    for (const PrefillBuild& b : shorter) RETURN_IF_ERROR(emitOne(b, *g.add_shorter_prefills()));
    return e;
  };
  KernelTable kernels;
  ASSIGN_OR_RETURN(c.plan, emitAll(opts.generateKernels ? &kernels : nullptr));
  if (opts.generateKernels) {
    // Generated kernels (docs/kernels.md): one shared object per plan, and CUDA images for --target cuda.
    Stopwatch kt;
    KernelOptions ko;
    ko.target = opts.target;
    ko.arches = opts.arches;
    Status built = buildKernels(kernels, ko, c.plan.plan, &c.plan.files);
    if (built.code() == StatusCode::kEnvironment) {
      // No C++ compiler on this machine: the plan runs every fused group op by op, and says why.
      std::string note = strCat("kernels not generated: ", built.message());
      say(note);
      ASSIGN_OR_RETURN(c.plan, emitAll(nullptr));
      c.plan.plan.add_notes(note);
    } else {
      RETURN_IF_ERROR(built);
      say(strCat("kernels: ", kernels.specs().size(), " generated for ", opts.target, ", ",
                 kernels.fallbacks().size(), " fused group(s) not generated whole, in ", kt.seconds(), " s"));
    }
  }
  recordSearch(c.search, cluster, *c.plan.plan.mutable_search());
  *c.plan.plan.mutable_batch() = batch;
  if (precisionReport) *c.plan.plan.mutable_precision() = std::move(*precisionReport);
  recordPlannedMemory(&c.plan.plan);  // the chosen mesh's memory, from its planned arenas
  if (c.plan.plan.has_generation()) {
    recordGenerationEstimate(c.search, cluster, c.plan.plan);
    const plan::GenerationEstimate& e = c.plan.plan.generation().estimate();
    say(strCat("generation: estimated ", sig3(e.step_ms()), " ms per decode step (", sig3(e.tokens_per_second()),
               " tokens/s); memory-bound floor ", sig3(e.roofline_ms()), " ms (", bytesText(e.bytes_per_step()),
               " of weights and cache read per step by the busiest rank at ", sig3(e.memory_bandwidth() / 1e9),
               " GB/s)"));
  }
  RETURN_IF_ERROR(recordInstructionEstimates(c.ranks, c.partition.mesh, cost, c.plan.plan));
  plan::Fusion* fusion = c.plan.plan.mutable_fusion();
  fusion->set_ops_before(opsBefore);
  fusion->set_kernels_after(kernelsAfter);
  for (const char* name : kFusionPatterns) (*fusion->mutable_patterns())[name] = stats.count(name) ? stats[name] : 0;
  say(strCat("compiled in ", total.seconds(), " s"));
  return c;
}

/// \returns `opts` with --gpus resolved (deviceCount).
StatusOr<CompileOptions> resolved(const CompileOptions& opts) {
  for (const std::string& op : opts.keepFp32Ops)
    if (!opFromName(op)) return invalidInput("--keep-fp32: no op named '", op, "' (op names as in ONNX: Add, MatMul)");
  const bool precisionFlags = !opts.keepFp32Ops.empty() || !opts.keepFp32Nodes.empty() || !opts.precisionRules ||
                              !opts.calibrationInputs.empty() || opts.maxError >= 0 ||
                              opts.kvCacheDtype != DType::kUndefined;
  if (precisionFlags && opts.precision == DType::kUndefined && opts.quantizeBits == 0)
    return invalidInput("--keep-fp32, --keep-fp32-node, --no-precision-rules, --calibration-inputs, --max-error and "
                        "--kv-cache-dtype apply to a conversion: give --precision fp16, bf16 or fp32, or --quantize");
  if (opts.quantizeGroup >= 0 && opts.quantizeBits == 0)
    return invalidInput("--quantize-group applies to --quantize int8 or int4");
  CompileOptions o = opts;
  ASSIGN_OR_RETURN(o.gpus, deviceCount(opts));
  return o;
}

}  // namespace

StatusOr<Compilation> compileModel(const CompileOptions& options, std::ostream* log) {
  auto say = [&](const std::string& s) {
    if (log && !options.quiet) *log << "pcc: " << s << "\n";
  };
  Stopwatch total;
  ASSIGN_OR_RETURN(CompileOptions opts, resolved(options));
  ImportOptions io;
  io.batch = opts.batch;
  io.shapes = opts.shapes;
  for (const auto& [name, file] : opts.frozenInputs) {
    auto t = readTensorFile(file);
    if (!t.ok()) return t.status().withContext(strCat("--freeze ", name));
    io.inputValues[name] = std::move(t).value();
  }
  const std::string& path = opts.modelPath;
  ASSIGN_OR_RETURN(onnx::ModelProto model, readOnnxModel(path));
  PrecisionCache pc;
  const std::string baseDir = std::filesystem::path(path).parent_path().string();
  std::optional<GenerationInterface> gen;
  if (opts.generation) {
    ASSIGN_OR_RETURN(gen, findGenerationInterface(model, path));
  }
  if (gen) {
    // A decoder with a KV cache: its decode step, the cache as state (docs/generation.md).
    GenerationSetup setup;
    setup.interface = &*gen;
    setup.batch = opts.batch.value_or(1);
    setup.maxContext = opts.maxContext > 0 ? opts.maxContext : gen->maxPositions > 0 ? gen->maxPositions : 2048;
    if (setup.maxContext < 2)
      return invalidInput(path, ": --max-context ", setup.maxContext, " leaves no room for a token after the prompt");
    const bool sweeping = !opts.batch && objectiveOf(opts) == Objective::kThroughput;
    say(strCat("generation: ", gen->pairs.size(), " KV cache tensors; decode step for ",
               sweeping ? std::string("the number of sequences --objective throughput chooses")
                        : strCat(setup.batch, " sequence(s)"),
               " of up to ", setup.maxContext, " positions (",
               opts.maxContext > 0           ? std::string("--max-context")
               : gen->maxPositions > 0 ? gen->maxPositionsSource
                                             : std::string("the default; --max-context N sets it"),
               ")"));
    const int64_t maxPrompt =
        opts.maxPrompt >= 0 ? opts.maxPrompt : std::min<int64_t>(256, setup.maxContext / 2);
    if (maxPrompt >= setup.maxContext)
      return invalidInput(path, ": --max-prompt ", maxPrompt, " leaves no room in --max-context ", setup.maxContext,
                          " for a new token (at most ", setup.maxContext - 1, ")");
    // One copy of the weights for the decode step and the prefill program.
    io.initializers = std::make_shared<std::map<std::string, Tensor>>();
    ASSIGN_OR_RETURN(ClusterSpec gcluster, clusterSpecFor(opts));
    CostModel gcost(gcluster);
    // The decode step for `batch` sequences, imported and planned.
    auto planAt = [&](int64_t batch, bool print) -> StatusOr<Planned> {
      ImportOptions bio = io;
      bindDecodeShapes(*gen, batch, setup.maxContext, bio);
      bio.batch = batch;
      ASSIGN_OR_RETURN(InputDimsInfo gdims, inspectInputDims(model, path, bio));
      (void)gdims;
      ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, importOnnxModel(model, baseDir, path, bio));
      if (print)
        say(strCat("imported ", path, ": ", g->numNodes(), " nodes, ", g->constants().size(), " constants (",
                   total.seconds(), " s)"));
      GenerationSetup at = setup;
      at.batch = batch;
      ASSIGN_OR_RETURN(Planned p, planImported(std::move(g), opts, gcost, print, log, pc, &at));
      p.prefill = PrefillSetup{&model, baseDir, bio, &*gen, batch, setup.maxContext, maxPrompt};
      return p;
    };
    plan::BatchReport report;
    std::optional<Planned> kept;
    if (!sweeping) {
      ASSIGN_OR_RETURN(Planned p, planAt(setup.batch, true));
      kept = std::move(p);
      recordBatch(nullptr, setup.batch,
                  opts.batch ? "--batch: sequences per decode step"
                             : "1 sequence per decode step (--objective latency; --batch N for more, --objective "
                               "throughput chooses)",
                  opts, 0, report);
    } else {
      // --objective throughput: the sequences per step of the most tokens/s
      // whose weights, cache and activations fit (batch_search.h's sweep; a
      // sample is a sequence's token).
      Stopwatch choosing;
      BatchSweep sweep(sweepOptions(opts));
      Status firstError = Status::OK();
      kept = runSweep(sweep, [&](int64_t b) { return planAt(b, false); }, firstError);
      if (!kept) return firstError;
      const BatchPoint& pick = sweep.curve()[sweep.chosen().value_or(0)];
      std::string how =
          !sweep.chosen()
              ? strCat("no number of sequences fits (", pick.why, ")")
              : strCat(pick.batch, " sequences per decode step: the most estimated tokens/s within memory (",
                       static_cast<int64_t>(std::round(pick.samplesPerSecond)), " on ", pick.mesh.str(), "; ",
                       sweep.curve().size(), " batch sizes costed in ", std::round(choosing.seconds() * 100) / 100,
                       " s; ", sweep.stopReason(), "); --batch N fixes it, pcc-report shows the curve");
      say(strCat("generation: ", how));
      recordBatch(&sweep, pick.batch, how, opts, choosing.seconds(), report);
      if (!opts.printAfter.empty()) {  // print the chosen batch's pipeline
        ASSIGN_OR_RETURN(Planned p, planAt(pick.batch, true));
        kept = std::move(p);
      }
    }
    Planned p = std::move(*kept);
    say(strCat("generation: KV cache ", p.generation->state_bytes(), " bytes in all (", p.states.size(),
               " tensors of ", p.states.front().type.str(), ")"));
    return finishCompile(std::move(p), opts, gcluster, gcost, report, total, log, pc);
  }
  ASSIGN_OR_RETURN(InputDimsInfo dims, inspectInputDims(model, path, io));
  if (!dims.fromModel.empty()) {
    std::vector<std::string> sized;
    for (const ModelDim& d : dims.fromModel)
      sized.push_back(strCat(d.symbol.empty() ? strCat("input '", d.input, "' dim ", d.dim) : "'" + d.symbol + "'",
                             " = ", d.value, " (", d.source, ")"));
    say(strCat("symbolic dims sized by the model: ", joined(sized), "; --shape NAME=AxB overrides them"));
  }
  ASSIGN_OR_RETURN(ClusterSpec cluster, clusterSpecFor(opts));
  CostModel cost(cluster);
  auto imported = [&](const StatusOr<std::unique_ptr<Graph>>& g) {
    if (g.ok())
      say(strCat("imported ", path, ": ", (*g)->numNodes(), " nodes, ", (*g)->constants().size(), " constants (",
                 total.seconds(), " s)"));
  };

  if (dims.batchInputs.empty()) {
    auto g = importOnnxModel(model, baseDir, path, io);
    imported(g);
    if (!g.ok()) return g.status();
    int64_t batch = leadingDim(**g);
    std::string how = opts.batch ? "--batch" : "given by the model or --shape";
    if (opts.batchAuto) {
      how = "--batch auto: nothing to choose, no input has a symbolic leading dim left";
      say(how);
    }
    ASSIGN_OR_RETURN(Planned p, planImported(std::move(g).value(), opts, cost, true, log, pc));
    plan::BatchReport report;
    recordBatch(nullptr, batch, how, opts, 0, report);
    return finishCompile(std::move(p), opts, cluster, cost, report, total, log, pc);
  }

  // The batch is the compiler's to choose (batch_search.h): each candidate is
  // imported at that batch and planned as the chosen one will be.
  Stopwatch choosing;
  const bool latency = objectiveOf(opts) == Objective::kLatency;
  BatchSweep sweep(sweepOptions(opts));
  Status firstError = Status::OK();
  std::optional<Planned> kept = runSweep(
      sweep,
      [&](int64_t b) -> StatusOr<Planned> {
        io.batch = b;
        ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, importOnnxModel(model, baseDir, path, io));
        return planImported(std::move(g), opts, cost, latency, log, pc);
      },
      firstError);
  if (!kept)  // batch 1 failed: the model's own error, and the batch it was tried at
    return Status(firstError.code(), strCat(firstError.message(), " (at batch 1, chosen by pcc for ",
                                            joined(dims.batchInputs), "; --batch N to try another)"));
  const int64_t batch = sweep.curve()[sweep.chosen().value_or(0)].batch;
  std::string how = batchLine(sweep, dims, opts, choosing.seconds());
  say(how);
  if (!latency && !opts.printAfter.empty()) {  // print the chosen batch's pipeline
    io.batch = batch;
    ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, importOnnxModel(model, baseDir, path, io));
    ASSIGN_OR_RETURN(kept, planImported(std::move(g), opts, cost, true, log, pc));
  }
  say(strCat("imported ", path, " at batch ", batch, ": ", kept->reference->numNodes(), " nodes, ",
             kept->reference->constants().size(), " constants (", total.seconds(), " s)"));
  plan::BatchReport report;
  recordBatch(&sweep, batch, how, opts, choosing.seconds(), report);
  return finishCompile(std::move(*kept), opts, cluster, cost, report, total, log, pc);
}

StatusOr<Compilation> compileImported(std::unique_ptr<Graph> reference, const CompileOptions& options,
                                      std::ostream* log) {
  Stopwatch total;
  ASSIGN_OR_RETURN(CompileOptions opts, resolved(options));
  ASSIGN_OR_RETURN(ClusterSpec cluster, clusterSpecFor(opts));
  CostModel cost(cluster);
  const int64_t batch = leadingDim(*reference);
  PrecisionCache pc;
  ASSIGN_OR_RETURN(Planned p, planImported(std::move(reference), opts, cost, true, log, pc));
  plan::BatchReport report;
  recordBatch(nullptr, batch, "given by the caller", opts, 0, report);
  return finishCompile(std::move(p), opts, cluster, cost, report, total, log, pc);
}

std::vector<std::string> pipelinePasses() {
  std::vector<std::string> names(std::begin(kPipeline), std::end(kPipeline));
  names.insert(names.end(), std::begin(kRankPipeline), std::end(kRankPipeline));
  return names;
}

std::string emitIr(const Compilation& c) {
  std::string s = "// global graph, mesh " + c.partition.mesh.str() + "\n" + printGraph(*c.partitioned);
  for (const RankGraph& rg : c.ranks)
    s += strCat("\n// rank ", rg.rank, " program\n") +
         printGraph(rg.graph ? *rg.graph : *replicaProgram(programOf(c.ranks, rg), rg.rank - rg.replicaOf));
  return s;
}

}  // namespace pcc
