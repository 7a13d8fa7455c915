// pcc-run: runs a plan bundle on CPU ranks (one thread per rank, gloo between
// them), prints per-rank times, and checks the outputs against the plan's
// reference program (--check) and/or expected tensor files (--expect).
//
// Exit codes: 0 ok, 1 outputs differ, 2 bad input or usage, 3 internal error.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <iostream>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/backend.h"
#include "runtime/cpu/fast_kernels.h"
#include "runtime/launcher.h"
#include "runtime/onnx_tensor.h"
#include "runtime/plan_convert.h"
#include "runtime/plan_io.h"
#include "tools/cli.h"

namespace {

using namespace pcc;

constexpr const char* kAbout =
    "Runs a plan bundle on CPU ranks (one thread per rank, gloo between them), prints\n"
    "per-rank times, and checks the outputs against the plan's reference program\n"
    "(--check) and/or expected tensor files (--expect).";
constexpr const char* kFooter = "exit codes: 0 ok, 1 outputs differ, 2 bad input or usage, 3 internal error, 4 out of memory or a peer rank failed";

struct Args {
  std::string plan, inputs, expect, outputs, profileJson;
  bool check = false;
  double rtol = 1e-4, atol = 1e-5;
  uint64_t seed = 0;
  RunOptions run;
  std::string rendezvous;
};

/// This process's place in a multi-process run, from the launcher's environment.
struct ProcessRank {
  int rank = 0, worldSize = 1;
  std::string dir;
};


int fail(const Status& s) {
  std::fprintf(stderr, "pcc-run: error: %s\n", s.message().c_str());
  return s.exitCode();
}

StatusOr<int64_t> integer(const std::string& flag, const std::string& v, int64_t min) {
  auto n = cli::parseInteger(v, min, std::numeric_limits<int64_t>::max());
  if (!n) return invalidInput(flag, " expects an integer >= ", min, ", got '", v, "'");
  return *n;
}

/// \returns the parsed arguments, or the exit code to return (after --help or a usage error).
std::variant<Args, int> parse(int argc, char** argv) {
  Args a;
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  CLI::App app(kAbout, "pcc-run");
  cli::setDefaults(app, kFooter);
  app.add_option("PLAN.pcc", a.plan, "the plan bundle written by pcc")->type_name("");
  app.add_option("--inputs", a.inputs,
                 "read inputs from DIR/input_K.pb (K = position in the\n"
                 "plan's inputs); default: seeded random inputs")
      ->type_name("DIR");
  app.add_option("--expect", a.expect, "compare outputs with DIR/output_K.pb")->type_name("DIR");
  app.add_option("--outputs", a.outputs, "write outputs to DIR/output_K.pb")->type_name("DIR");
  app.add_flag("--check", a.check, "compare outputs with the plan's reference program");
  cli::addNumber(app, "--rtol", 0, a.rtol, "relative tolerance (default 1e-4)", "R");
  cli::addNumber(app, "--atol", 0, a.atol, "absolute tolerance (default 1e-5)", "A");
  cli::addInteger(app, "--iters", 1, kIntMax, [&](int64_t n) { a.run.iters = static_cast<int>(n); },
                  "timed runs (default 1)");
  cli::addInteger(app, "--warmup", 0, kIntMax, [&](int64_t n) { a.run.warmup = static_cast<int>(n); },
                  "untimed runs first (default 0)");
  cli::addInteger(app, "--seed", 0, std::numeric_limits<int64_t>::max(),
                  [&](int64_t n) { a.seed = static_cast<uint64_t>(n); }, "seed of the random inputs (default 0)", "S");
  cli::addInteger(app, "--threads", 1, 4096, [&](int64_t n) { a.run.threadsPerRank = static_cast<int>(n); },
                  "OpenMP threads of each rank's oneDNN kernels\n"
                  "(default: the processors this process may use / the\n"
                  "ranks on this machine)");
  app.add_option("--backend", a.run.backend,
                 "the backend every rank runs on (default cpu; unknown\n"
                 "names are refused with the list of registered ones)")
      ->type_name("NAME");
  app.add_flag("--reference-kernels", a.run.referenceKernels, "run the ranks on the reference kernels, not oneDNN's");
  app.add_flag("--poison-memory", a.run.poisonMemory,
               "fill the ranks' memory with 0xFF bytes (NaN) before use: a\n"
               "check that every kernel writes all of its outputs");
  app.add_flag("--profile", a.run.profile,
               "print rank 0's time per op and kernel provider (all runs,\n"
               "warmup included) and each rank's peak memory");
  app.add_option("--profile-json", a.profileJson,
                 "write every instruction of every rank with its mean time\n"
                 "over the timed runs (--iters, after --warmup), op, node\n"
                 "and kernel provider to FILE (implies --profile)")
      ->type_name("FILE");
  app.add_flag_callback("--no-verify-weights", [&] { a.run.verifyChecksums = false; }, "skip the weight checksums");
  cli::addInteger(app, "--timeout", 1, kIntMax, [&](int64_t n) { a.run.timeoutSeconds = static_cast<int>(n); },
                  "seconds a collective, or a run holding a Loop, may take\nbefore it is an error (default 300)", "S");
  app.add_option("--rendezvous", a.rendezvous,
                 "run as one process per rank: this process is the rank\n"
                 "given by RANK/WORLD_SIZE or Open MPI's\n"
                 "OMPI_COMM_WORLD_RANK/SIZE; ranks meet in DIR/<run id>\n"
                 "(run id: PCC_RUN_ID, else PMIX_NAMESPACE under\n"
                 "mpirun); rank 0 prints and checks (also\n"
                 "$PCC_RENDEZVOUS)")
      ->type_name("DIR");
  auto extras = [&](const std::vector<std::string>& rest) { return cli::describeExtras(rest, "plan", a.plan); };
  if (auto code = cli::parse(app, argc, argv, "pcc-run: error: ", extras)) return *code;
  std::vector<std::string> backends = backendNames();
  if (std::find(backends.begin(), backends.end(), a.run.backend) == backends.end()) {
    std::string known;
    for (const std::string& n : backends) known += (known.empty() ? "" : ", ") + n;
    std::fprintf(stderr, "pcc-run: error: --backend: unknown backend '%s' (registered: %s)\n", a.run.backend.c_str(),
                 known.c_str());
    return cli::kExitUsage;
  }
  if (!a.profileJson.empty()) a.run.profile = true;
  a.run.measureMemory = a.run.profile;
  if (a.plan.empty()) {
    std::fprintf(stderr, "pcc-run: error: no plan given (usage: pcc-run PLAN.pcc [options]; see pcc-run --help)\n");
    return cli::kExitUsage;
  }
  return a;
}

/// \returns `bytes` in MiB with three decimals ("1.234 MiB").
std::string mib(int64_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string tensorFile(const std::string& dir, const char* kind, int k) {
  return (std::filesystem::path(dir) / (std::string(kind) + "_" + std::to_string(k) + ".pb")).string();
}

/// Compares every output with `want`; prints one line per output.
/// \returns false when any differs.
bool report(const LoadedPlan& p, const std::vector<Tensor>& got, const std::vector<Tensor>& want,
            const char* against, const Args& a) {
  bool allOk = true;
  for (size_t k = 0; k < got.size(); ++k) {
    Diff d = compareTensors(got[k], want[k], a.rtol, a.atol);
    std::printf("output %zu '%s' %s vs %s: max abs %.3g, max rel %.3g: %s%s%s\n", k,
                p.plan.outputs(static_cast<int>(k)).name().c_str(), got[k].type().str().c_str(),
                against, d.maxAbs, d.maxRel, d.ok ? "ok" : "MISMATCH",
                d.where.empty() ? "" : ": ", d.where.c_str());
    allOk &= d.ok;
  }
  return allOk;
}

/// Reads DIR/input_K.pb. Files whose tensor names are plan inputs are matched
/// by name (a compiled model may have fewer inputs than the files carry, e.g.
/// with pcc --freeze, only if the others are named too); files without names,
/// or whose names are none of the plan's inputs, are matched by position K.
/// Refused: two files for one input, a mix of matching and unknown names, a
/// plan input no file gives, and files beyond the plan's inputs by position.
StatusOr<std::vector<Tensor>> readInputs(const std::string& dir, const plan::Plan& plan) {
  struct File {
    std::string path, name;
    Tensor t;
  };
  std::vector<File> files;
  for (int k = 0; std::filesystem::exists(tensorFile(dir, "input", k)); ++k) {
    File f{tensorFile(dir, "input", k), "", Tensor()};
    ASSIGN_OR_RETURN(f.t, readTensorFile(f.path, &f.name));
    files.push_back(std::move(f));
  }
  std::map<std::string, int> planIndex;
  for (int k = 0; k < plan.inputs_size(); ++k) planIndex[plan.inputs(k).name()] = k;
  std::map<std::string, const File*> byName;
  const File* unknown = nullptr;
  for (const File& f : files) {
    if (f.name.empty()) continue;
    if (!planIndex.count(f.name)) {
      if (!unknown) unknown = &f;
      continue;
    }
    auto [it, fresh] = byName.emplace(f.name, &f);
    if (!fresh) return invalidInput(it->second->path, " and ", f.path, " both hold input '", f.name, "'");
  }
  std::vector<Tensor> inputs;
  if (!byName.empty()) {
    if (unknown)
      return invalidInput(unknown->path, ": tensor '", unknown->name, "' is none of the plan's inputs (",
                          [&] {
                            std::string names;
                            for (const auto& in : plan.inputs()) names += (names.empty() ? "'" : ", '") + in.name() + "'";
                            return names;
                          }(),
                          ")");
    for (const plan::IoDesc& in : plan.inputs()) {
      auto it = byName.find(in.name());
      if (it == byName.end())
        return invalidInput(dir, ": no input_K.pb holds input '", in.name(), "' (the files are matched by name)");
      inputs.push_back(it->second->t);
    }
    return inputs;
  }
  for (int k = 0; k < plan.inputs_size(); ++k) {
    if (static_cast<size_t>(k) >= files.size())
      return invalidInput(tensorFile(dir, "input", k), ": missing (the plan has ", plan.inputs_size(),
                          " inputs; input ", k, " is '", plan.inputs(k).name(), "')");
    inputs.push_back(files[k].t);
  }
  if (files.size() > static_cast<size_t>(plan.inputs_size()))
    return invalidInput(files[plan.inputs_size()].path, ": the plan has only ", plan.inputs_size(),
                        " inputs (matched by position: no file names a plan input)");
  return inputs;
}

/// With pipeline stages: per stage, the mean run time of its ranks, the part
/// spent computing (busy) and waiting on transfers, and the measured bubble
/// (1 - the stages' busy time over pp times the slowest stage's run time)
/// beside the cost model's prediction.
void printPipelineProfile(const plan::Plan& plan, const RunResult& res) {
  if (plan.mesh().pp() <= 1 || res.rankWaitSeconds.size() != static_cast<size_t>(plan.ranks_size())) return;
  const int pp = plan.mesh().pp();
  std::vector<double> run(pp, 0), wait(pp, 0);
  std::vector<int> count(pp, 0);
  for (const plan::RankProgram& r : plan.ranks()) {
    int s = r.stage();
    if (s < 0 || s >= pp || r.rank() < 0 || r.rank() >= plan.ranks_size()) continue;
    run[s] += res.rankSeconds[r.rank()];
    wait[s] += res.rankWaitSeconds[r.rank()];
    ++count[s];
  }
  const int mb = std::max(1, plan.ranks(0).microbatches());
  double predicted = -1;
  if (plan.has_search() && plan.search().candidates_size() > 0) predicted = plan.search().candidates(0).bubble();
  // The bubble as the model defines it: the share of the p stages' time over
  // the batch (the slowest stage's run) that they spend not computing.
  double slowest = 0, busy = 0;
  for (int s = 0; s < pp; ++s) {
    if (count[s] == 0) continue;
    std::printf("pipeline stage %d: %.3f ms per batch, busy %.3f ms, waiting %.3f ms (%d micro-batches)\n", s,
                run[s] / count[s] * 1e3, (run[s] - wait[s]) / count[s] * 1e3, wait[s] / count[s] * 1e3, mb);
    slowest = std::max(slowest, run[s] / count[s]);
    busy += (run[s] - wait[s]) / count[s];
  }
  const double measured = slowest > 0 ? 100 * (1 - busy / (pp * slowest)) : 0.0;
  if (predicted >= 0)
    std::printf("pipeline bubble: measured %.1f%%, predicted %.1f%%\n", measured, 100 * predicted);
  else
    std::printf("pipeline bubble: measured %.1f%%\n", measured);
}

/// Writes --profile-json: per rank, every instruction with its mean seconds
/// over the timed runs (docs/cli.md#pcc-run). `firstRank`: the rank of
/// res.instructions[0] (this process's rank in a multi-process run);
/// `ranksHere`: the rank threads of this process (0 in a multi-process run).
Status writeProfileJson(const std::string& path, const Args& a, const plan::Plan& plan, const RunResult& res,
                        int firstRank, int ranksHere) {
  using Json = nlohmann::ordered_json;
  Json doc;
  doc["plan"] = a.plan;
  doc["warmup"] = a.run.warmup;
  doc["iters"] = a.run.iters;
  // 0: each process's default (its processors / the ranks on its host).
  doc["threads_per_rank"] = a.run.threadsPerRank > 0 ? a.run.threadsPerRank
                            : ranksHere > 0         ? cpu::threadsPerRank(ranksHere)
                                                    : 0;
  doc["kernels"] = a.run.referenceKernels ? "reference" : "fast";
  Json ranks = Json::array();
  for (size_t k = 0; k < res.instructions.size(); ++k) {
    const int r = firstRank + static_cast<int>(k);
    const plan::RankProgram& prog = plan.ranks(r);
    const auto& times = res.instructions[k];
    Json rank;
    rank["rank"] = r;
    rank["seconds"] = r < static_cast<int>(res.rankSeconds.size()) ? res.rankSeconds[r] : 0.0;
    if (r < static_cast<int>(res.memory.size())) {
      const RunResult::RankMemory& m = res.memory[r];
      rank["peak_memory_bytes"] = m.peakBytes;
      rank["weight_bytes"] = m.weightBytes;
      rank["arena_bytes"] = m.arenaBytes;
      if (m.processPeakRss >= 0) rank["process_peak_rss_bytes"] = m.processPeakRss;
    }
    Json list = Json::array();
    for (int i = 0; i < prog.instructions_size(); ++i) {
      const plan::Instruction& ins = prog.instructions(i);
      const RunResult::InstructionTime t = i < static_cast<int>(times.size()) ? times[i] : RunResult::InstructionTime{};
      Json e;
      e["index"] = i;
      e["kind"] = instructionKindName(ins.kind());
      e["op"] = ins.op();
      e["node"] = ins.node();
      e["provider"] = t.provider;
      e["calls"] = t.calls;
      e["seconds"] = t.calls > 0 ? t.seconds / static_cast<double>(t.calls) : 0.0;
      e["min_seconds"] = t.minSeconds;
      list.push_back(std::move(e));
    }
    rank["instructions"] = std::move(list);
    ranks.push_back(std::move(rank));
  }
  doc["ranks"] = std::move(ranks);
  std::ofstream f(path);
  f << doc.dump(1) << "\n";
  f.close();
  if (!f) return invalidInput(path, ": cannot write");
  return Status::OK();
}

/// \returns the process rank when the environment names one, nullopt for a
/// single-process (threads) run, or an error for an incomplete set-up.
StatusOr<std::optional<ProcessRank>> processRank(const Args& a) {
  auto env = [](const char* n) -> std::string {
    const char* v = std::getenv(n);
    return v ? v : "";
  };
  std::string rank = env("OMPI_COMM_WORLD_RANK"), size = env("OMPI_COMM_WORLD_SIZE");
  if (rank.empty()) {
    rank = env("RANK");
    size = env("WORLD_SIZE");
  }
  if (rank.empty() && size.empty()) return std::optional<ProcessRank>();
  ProcessRank pr;
  ASSIGN_OR_RETURN(int64_t r, integer("RANK", rank, 0));
  ASSIGN_OR_RETURN(int64_t n, integer("WORLD_SIZE", size, 1));
  pr.rank = static_cast<int>(r);
  pr.worldSize = static_cast<int>(n);
  std::string base = a.rendezvous.empty() ? env("PCC_RENDEZVOUS") : a.rendezvous;
  std::string id = env("PCC_RUN_ID").empty() ? env("PMIX_NAMESPACE") : env("PCC_RUN_ID");
  if (base.empty() || id.empty())
    return invalidInput("rank ", r, " of ", n, " from the environment: a multi-process run needs --rendezvous DIR "
                        "(or PCC_RENDEZVOUS) and a run id shared by every rank (PCC_RUN_ID; set by mpirun)");
  pr.dir = (std::filesystem::path(base) / id).string();
  return std::optional<ProcessRank>(pr);
}

int run(const Args& a) {
  auto lp = loadPlanBundle(a.plan);
  if (!lp.ok()) return fail(lp.status());
  const plan::Plan& plan = lp->plan;

  std::vector<Tensor> inputs;
  if (a.inputs.empty()) {
    inputs = randomInputsFor(plan, a.seed);
  } else {
    auto read = readInputs(a.inputs, plan);
    if (!read.ok()) return fail(read.status());
    inputs = std::move(read).value();
  }

  auto proc = processRank(a);
  if (!proc.ok()) return fail(proc.status());
  if (*proc && (*proc)->worldSize != plan.ranks_size())
    return fail(invalidInput("the environment starts ", (*proc)->worldSize, " processes but the plan has ",
                             plan.ranks_size(), " ranks"));
  RunOptions ro = a.run;
  // A rank blocked on a live peer after another died: say why and end now,
  // rather than at the timeout (docs/runtime.md).
  ro.onStuckAfterPeerLost = [](const Status& why) {
    fail(why);
    std::cerr.flush();
    std::_Exit(why.exitCode());
  };
  auto res = *proc ? runPlanRank(*lp, inputs, ro, (*proc)->rank, (*proc)->dir) : runPlan(*lp, inputs, a.run);
  if (!res.ok()) return fail(res.status());
  if (*proc && (*proc)->rank != 0) return 0;  // rank 0 reports for everyone
  for (size_t r = 0; r < res->rankSeconds.size(); ++r)
    std::printf("rank %zu: %.3f ms\n", r, res->rankSeconds[r] * 1e3);
  if (!a.profileJson.empty()) {
    Status st = writeProfileJson(a.profileJson, a, plan, *res, *proc ? (*proc)->rank : 0, *proc ? 0 : plan.ranks_size());
    if (!st.ok()) return fail(st);
  }
  for (size_t r = 0; r < res->memory.size(); ++r) {
    const RunResult::RankMemory& m = res->memory[r];
    std::printf("memory rank %zu: peak %s (weights %s, arena %s, other %s)", r, mib(m.peakBytes).c_str(),
                mib(m.weightBytes).c_str(), mib(m.arenaBytes).c_str(),
                mib(m.peakBytes - m.weightBytes - m.arenaBytes).c_str());
    if (m.processPeakRss >= 0) std::printf("; process peak RSS %s", mib(m.processPeakRss).c_str());
    std::printf("\n");
  }
  if (a.run.profile) {
    std::vector<std::pair<std::string, RunResult::OpTime>> ops(res->profile.begin(), res->profile.end());
    std::sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) { return x.second.seconds > y.second.seconds; });
    double total = 0;
    for (const auto& [op, t] : ops) total += t.seconds;
    for (const auto& [op, t] : ops)
      std::printf("profile rank 0: %-32s %10.3f ms %6.1f%% %6lld calls\n", op.c_str(), t.seconds * 1e3,
                  total > 0 ? 100.0 * t.seconds / total : 0.0, static_cast<long long>(t.calls));
    printPipelineProfile(plan, *res);
  }

  bool ok = true;
  if (a.check) {
    auto ref = runReference(*lp, inputs, a.run.timeoutSeconds);
    if (!ref.ok()) return fail(ref.status());
    ok &= report(*lp, res->outputs, *ref, "reference", a);
  }
  if (!a.expect.empty()) {
    std::vector<Tensor> want;
    for (int k = 0; k < plan.outputs_size(); ++k) {
      auto t = readTensorFile(tensorFile(a.expect, "output", k));
      if (!t.ok()) return fail(t.status());
      want.push_back(std::move(t).value());
    }
    ok &= report(*lp, res->outputs, want, "expected", a);
  }
  if (!a.outputs.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(a.outputs, ec);
    if (ec) return fail(invalidInput(a.outputs, ": cannot create directory: ", ec.message()));
    for (int k = 0; k < plan.outputs_size(); ++k) {
      Status st = writeTensorFile(tensorFile(a.outputs, "output", k), res->outputs[k],
                                  plan.outputs(k).name());
      if (!st.ok()) return fail(st);
    }
  }
  if (!ok) {
    std::fprintf(stderr, "pcc-run: outputs differ (rtol %g, atol %g)\n", a.rtol, a.atol);
    return 1;
  }
  return 0;
}

}  // namespace

int toolMain(int argc, char** argv) {
  auto args = parse(argc, argv);
  if (const int* code = std::get_if<int>(&args)) return *code;
  return run(std::get<Args>(args));
}

int main(int argc, char** argv) {
  pcc::cpu::preferSleepingOpenMpThreads(argv);  // may execute pcc-run again, with OMP_WAIT_POLICY set
  return pcc::cli::finishStdout("pcc-run", pcc::cli::guardedMain("pcc-run", [&] { return toolMain(argc, argv); }));
}
