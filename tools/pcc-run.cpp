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
#include <tuple>
#include <variant>
#include <vector>

#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/backend.h"
#include "runtime/cpu/fast_kernels.h"
#include "runtime/generate.h"
#include "runtime/npy_files.h"
#include "runtime/input_pipeline.h"
#include "runtime/launch_env.h"
#include "runtime/launcher.h"
#include "runtime/onnx_tensor.h"
#include "runtime/plan_convert.h"
#include "runtime/plan_io.h"
#include "runtime/tcp_store.h"
#include "tools/atomic_write.h"
#include "tools/cli.h"
#ifdef PCC_HAVE_CUDA_RUNTIME
#include "runtime/cuda/cuda_backend.h"
#endif

namespace {

using namespace pcc;

constexpr const char* kAbout =
    "Runs a plan bundle on CPU ranks (one thread per rank, gloo between them), prints\n"
    "per-rank times, and checks the outputs against the plan's reference program\n"
    "(--check) and/or expected tensor files (--expect).";
constexpr const char* kFooter = "exit codes: 0 ok, 1 outputs differ, 2 bad input or usage, 3 internal error, 4 out of memory or a peer rank failed";

struct Args {
  /// Generation plans (docs/generation.md): --generate N and its options.
  int generate = 0;
  std::vector<std::string> promptIds;
  std::string promptFile;
  double temperature = 0, topP = 1.0;
  int topK = 0;
  bool ignoreEos = false;
  bool noPrefill = false;
  std::string plan, inputs, expect, outputs, profileJson;
  bool check = false;
  double rtol = 1e-4, atol = 1e-5;
  /// --rtol or --atol given: every output is compared at them (else the
  /// float outputs of a plan with float16 or bfloat16 values at
  /// planHalfTolerance).
  bool toleranceGiven = false;
  uint64_t seed = 0;
  RunOptions run;
  std::string rendezvous;
  /// A streamed run (--batches K; 0: not one): its batches, the reader's
  /// depth, and the testing aid --read-delay-ms.
  int batches = 0;
  int prefetch = 2;
  bool noPrefetch = false;
  int readDelayMs = 0;
};

/// This process's place in a multi-process run, from the launcher's environment.
struct ProcessRank {
  int rank = 0, worldSize = 1;
  /// LOCAL_RANK or OMPI_COMM_WORLD_LOCAL_RANK; -1 when neither is set.
  int localRank = -1;
  Rendezvous rendezvous;
};


int fail(const Status& s) {
  std::fflush(stderr);  // the ranks' lines printed through stdio come first
  return cli::printError("pcc-run: error: ", s.message(), s.exitCode());
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
                 "plan's inputs), from DIR/NAME.npy files or from one\n"
                 "FILE.npz keyed by input name; default: seeded random inputs")
      ->type_name("DIR");
  app.add_option("--expect", a.expect, "compare outputs with DIR/output_K.pb, DIR/NAME.npy\nor FILE.npz (by output name)")->type_name("DIR");
  app.add_option("--outputs", a.outputs, "write outputs to DIR/output_K.pb, or to FILE.npz\n(keyed by output name)")->type_name("DIR");
  app.add_flag("--check", a.check, "compare outputs with the plan's reference program\n"
                                   "(generation: every step's logits and tokens with\n"
                                   "the export's own decode step)");
  cli::addInteger(app, "--generate", 1, 1 << 20, [&](int64_t n) { a.generate = static_cast<int>(n); },
                  "generation plans: generate up to N new tokens per\n"
                  "prompt (default 16) and print them", "N");
  app.add_option("--prompt-ids", a.promptIds,
                 "a prompt's token ids, comma-separated (repeat for a\n"
                 "batch of prompts; default: one prompt '1,2,3')")
      ->type_name("IDS");
  app.add_option("--prompt-file", a.promptFile, "prompts, one per line, ids separated by commas or\nspaces")
      ->type_name("FILE");
  cli::addNumber(app, "--temperature", 0, a.temperature, "sample at this temperature (default 0: greedy)", "T");
  cli::addInteger(app, "--top-k", 0, 1 << 30, [&](int64_t n) { a.topK = static_cast<int>(n); },
                  "sample among the K most likely tokens (0: all)", "K");
  cli::addNumber(app, "--top-p", 0, a.topP, "sample within the smallest set of tokens whose\nprobability reaches P (default 1: all)", "P");
  app.add_flag("--ignore-eos", a.ignoreEos, "do not stop a sequence at the end-of-sequence token");
  app.add_flag("--no-prefill", a.noPrefill,
               "feed the prompts through the decode step one token\nper run, not through the plan's prefill program");
  CLI::Option* rtol = cli::addNumber(app, "--rtol", 0, a.rtol,
                                     "relative tolerance (default 1e-4; the float outputs of\n"
                                     "a plan with float16 / bfloat16 values: 7.8e-3 / 6.3e-2)", "R");
  CLI::Option* atol = cli::addNumber(app, "--atol", 0, a.atol,
                                     "absolute tolerance (default 1e-5; the float outputs of\n"
                                     "a plan with float16 / bfloat16 values: 7.8e-3 / 6.3e-2)", "A");
  CLI::Option* iters = cli::addInteger(app, "--iters", 1, kIntMax, [&](int64_t n) { a.run.iters = static_cast<int>(n); },
                                       "timed runs (default 1)");
  CLI::Option* warmup = cli::addInteger(app, "--warmup", 0, kIntMax, [&](int64_t n) { a.run.warmup = static_cast<int>(n); },
                                        "untimed runs first (default 0)");
  cli::addInteger(app, "--batches", 1, kIntMax, [&](int64_t n) { a.batches = static_cast<int>(n); },
                  "stream K batches, each run once: with --inputs,\n"
                  "DIR/batch_k/input_*.pb (k = 0..K-1; DIR/input_*.pb for\n"
                  "every batch when there is no batch_0 folder), else K\n"
                  "seeded random batches (seed + k); a reader thread\n"
                  "prepares the next batches while the ranks compute;\n"
                  "--outputs and --expect use DIR/batch_k/output_*.pb", "K");
  CLI::Option* prefetch = cli::addInteger(app, "--prefetch", 1, 1024, [&](int64_t n) { a.prefetch = static_cast<int>(n); },
                                          "batches read ahead of the one computing (default 2;\nwith --batches)");
  CLI::Option* noPrefetch = app.add_flag("--no-prefetch", a.noPrefetch,
                                         "read each batch only once the one before has run (no\n"
                                         "overlap, for comparison; with --batches)");
  // A testing aid, left out of --help: the reader sleeps this long per batch.
  CLI::Option* readDelay = cli::addInteger(app, "--read-delay-ms", 0, 600000,
                                           [&](int64_t n) { a.readDelayMs = static_cast<int>(n); }, "", "MS");
  readDelay->group("");
  cli::addInteger(app, "--seed", 0, std::numeric_limits<int64_t>::max(),
                  [&](int64_t n) { a.seed = static_cast<uint64_t>(n); }, "seed of the random inputs (default 0)", "S");
  cli::addInteger(app, "--threads", 1, 4096, [&](int64_t n) { a.run.threadsPerRank = static_cast<int>(n); },
                  "OpenMP threads of each rank's oneDNN kernels\n"
                  "(default: the processors this process may use / the\n"
                  "ranks on this machine)");
  app.add_option("--backend", a.run.backend,
                 "the backend every rank runs on: cpu (default), cuda\n"
                 "(one NVIDIA GPU per rank; exit 2 when none is usable),\n"
                 "or auto (cuda when a GPU is usable, else cpu, saying so)")
      ->type_name("NAME");
  app.add_flag("--reference-kernels", a.run.referenceKernels, "run the ranks on the reference kernels, not oneDNN's");
  app.add_flag("--no-overlap{false}", a.run.overlapComm,
               "wait for every collective and receive right after starting\n"
               "it, and post no receive ahead (for comparison)");
  app.add_flag("--no-fold{false}", a.run.foldEpilogues,
               "run every GEMM and convolution apart from the elementwise\n"
               "kernels after it, instead of as one library call with them\n"
               "as its epilogue (for comparison)");
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
                 "mpirun), or, with tcp:HOST:PORT, through the store\n"
                 "rank 0 serves on HOST:PORT (several machines; an IPv6\n"
                 "HOST in brackets: tcp:[::1]:29500; every rank presents\n"
                 "the run's secret, $PCC_RDZV_SECRET); rank 0 prints and\n"
                 "checks (also $PCC_RENDEZVOUS)")
      ->type_name("DIR|tcp:HOST:PORT");
  app.add_option("--gloo-host", a.run.glooHost,
                 "with --rendezvous: the address of this machine that gloo\n"
                 "listens on and peers connect to: a name, an IPv4 or an\n"
                 "IPv6 address (::1 or [::1]) (default 127.0.0.1: one\n"
                 "machine only; also $PCC_GLOO_HOST)")
      ->type_name("ADDR");
  app.add_option("--gloo-iface", a.run.glooIface,
                 "with --rendezvous: the network interface whose address\n"
                 "gloo listens on, instead of --gloo-host (also\n"
                 "$PCC_GLOO_IFACE)")
      ->type_name("NAME");
  auto extras = [&](const std::vector<std::string>& rest) { return cli::describeExtras(rest, "plan", a.plan); };
  if (auto code = cli::parse(app, argc, argv, "pcc-run: error: ", extras)) return *code;
  // auto | cuda | cpu (or another registered name): one line and exit 2 when
  // the backend asked for cannot run here; auto says when it falls back to CPU.
  std::string note;
  auto resolved = resolveBackend(a.run.backend, &note);
  if (!resolved.ok()) {
    return cli::printError("pcc-run: error: ", resolved.status().message(), cli::kExitUsage);
  }
  if (!note.empty()) std::fprintf(stderr, "pcc-run: %s\n", note.c_str());
  a.run.backend = *resolved;
  for (auto [flag, env, value] : {std::tuple{"--gloo-host", "PCC_GLOO_HOST", &a.run.glooHost},
                                  std::tuple{"--gloo-iface", "PCC_GLOO_IFACE", &a.run.glooIface}}) {
    const char* v = std::getenv(env);
    if (value->empty() && v) *value = v;
    if (value->find_first_of(" \t\n") != std::string::npos) {
      return cli::printError("pcc-run: error: ",
                             strCat(flag, " (or $", env, "): '", *value, "' is not an address or interface name"),
                             cli::kExitUsage);
    }
  }
  if (!a.run.glooHost.empty()) {
    auto host = parseHost(a.run.glooHost);
    if (!host.ok()) {
      return cli::printError("pcc-run: error: --gloo-host (or $PCC_GLOO_HOST): ", host.status().message(),
                             cli::kExitUsage);
    }
  }
  if (a.batches == 0) {
    for (CLI::Option* o : {prefetch, noPrefetch, readDelay})
      if (o->count()) {
        std::fprintf(stderr, "pcc-run: error: %s needs --batches\n", o->get_name().c_str());
        return cli::kExitUsage;
      }
  } else {
    for (CLI::Option* o : {iters, warmup})
      if (o->count()) {
        std::fprintf(stderr, "pcc-run: error: %s does not go with --batches (each batch runs once)\n",
                     o->get_name().c_str());
        return cli::kExitUsage;
      }
    if (prefetch->count() && a.noPrefetch) {
      std::fprintf(stderr, "pcc-run: error: --prefetch and --no-prefetch exclude each other\n");
      return cli::kExitUsage;
    }
  }
  a.toleranceGiven = rtol->count() + atol->count() > 0;
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

/// \returns the default tolerance (relative and absolute) of values
/// computed in `t`, 0 for all but float16 and bfloat16. A value rounded to
/// float16 (11 significant bits) is off by up to u = 2^-11, to bfloat16 (8
/// bits) by u = 2^-8; a plan and its reference program round at different
/// points (a generated kernel once per group, the reference kernels after
/// every op, oneDNN per its own accumulation), and the differences add up
/// through a model: 16 u, 7.8e-3 and 6.3e-2.
double halfTolerance(DType t) {
  if (t == DType::kF16) return 16 * 0x1p-11;
  if (t == DType::kBF16) return 16 * 0x1p-8;
  return 0;
}

/// \returns the default tolerance of the float outputs of `plan`: that of the
/// coarsest float type among its outputs and its ranks' buffers (a float32
/// output cast from float16 values carries float16's precision), 0 when it
/// holds no float16 or bfloat16 value.
double planHalfTolerance(const plan::Plan& plan) {
  double tol = 0;
  for (const plan::IoDesc& o : plan.outputs()) tol = std::max(tol, halfTolerance(static_cast<DType>(o.desc().dtype())));
  // A converted plan's 16-bit values may all lie inside generated kernels.
  if (plan.has_precision()) {
    const std::string& t = plan.precision().target();
    tol = std::max(tol, halfTolerance(t == "fp16" ? DType::kF16 : t == "bf16" ? DType::kBF16 : DType::kF32));
    // Weight-only quantization: 4 times the relative error the compile
    // measured (max abs over the largest |value|, the worst output, on its
    // calibration inputs: a generation's later steps exceed it as the cache
    // carries the rounding on), at most 0.45, past which a tolerance would
    // take zeros for the answer (docs/precision.md, "pcc-run --check on a converted plan").
    if (!plan.precision().quantize().empty()) {
      double rel = 0;
      for (const plan::PrecisionReport::OutputError& o : plan.precision().outputs()) rel = std::max(rel, o.max_rel());
      tol = std::max(tol, std::min(0.45, 4 * rel));
    }
  }
  for (const plan::RankProgram& r : plan.ranks())
    for (const plan::Buffer& b : r.buffers()) tol = std::max(tol, halfTolerance(static_cast<DType>(b.desc().dtype())));
  return tol;
}

/// Compares every output with `want`; prints one line per output.
/// \returns false when any differs.
bool report(const LoadedPlan& p, const std::vector<Tensor>& got, const std::vector<Tensor>& want,
            const char* against, const Args& a, const std::string& prefix = "") {
  bool allOk = true;
  for (size_t k = 0; k < got.size(); ++k) {
    const double half = a.toleranceGiven || !isFloat(got[k].dtype()) ? 0 : planHalfTolerance(p.plan);
    double rtol = std::max(a.rtol, half), atol = std::max(a.atol, half);
    std::string why;
    if (half > 0 && p.plan.has_precision()) {
      // A converted plan (--precision) against the float32 reference: its
      // rounding errors scale with the largest values it computes, so the
      // absolute tolerance is the precision's share of the output's largest
      // magnitude (docs/precision.md, "pcc-run --check on a converted plan").
      const double m = maxFiniteMagnitude(want[k]);
      atol = half * m;
      const plan::PrecisionReport& pr = p.plan.precision();
      why = strCat(" (a ", pr.target(), pr.target().empty() || pr.quantize().empty() ? "" : ", ", pr.quantize(),
                   " plan: ", half, " of the largest |value| ", m, ")");
    }
    Diff d = compareTensors(got[k], want[k], rtol, atol);
    // The tolerance actually applied: compareTensors scales a blind atol down.
    std::printf("%soutput %zu '%s' %s vs %s at %s%s: max abs %.3g, max rel %.3g: %s%s%s\n", prefix.c_str(), k,
                p.plan.outputs(static_cast<int>(k)).name().c_str(), got[k].type().str().c_str(),
                against, toleranceUsed(d, rtol, atol).c_str(), why.c_str(), d.maxAbs, d.maxRel,
                d.ok ? "ok" : "MISMATCH", d.where.empty() ? "" : ": ", d.where.c_str());
    allOk &= d.ok;
  }
  return allOk;
}

/// Whether `path` names NumPy files (runtime/npy_files.h): an .npz archive, or
/// a folder holding NAME.npy files.
bool isNumpyPath(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return holdsNpyFiles(path);
  return std::filesystem::path(path).extension() == ".npz";
}

/// The plan's inputs or outputs as (name, type), in order.
std::vector<std::pair<std::string, TensorType>> ioTypes(const google::protobuf::RepeatedPtrField<plan::IoDesc>& io) {
  std::vector<std::pair<std::string, TensorType>> out;
  for (const plan::IoDesc& d : io) out.emplace_back(d.name(), fromDesc(d.desc()));
  return out;
}

/// Reads tensors by name from an .npz archive or a folder of NAME.npy files
/// and matches them to `io` (every name, dtype and shape; exit 2 naming the
/// file and what was expected otherwise).
StatusOr<std::vector<Tensor>> readNumpyTensors(const std::string& path,
                                               const google::protobuf::RepeatedPtrField<plan::IoDesc>& io,
                                               const std::string& kind) {
  std::map<std::string, std::string> sources;
  ASSIGN_OR_RETURN(NamedTensors got, readNamedTensors(path, &sources));
  return matchNamedTensors(got, ioTypes(io), kind, path, sources);
}

/// Reads DIR/input_K.pb. Files whose tensor names are plan inputs are matched
/// by name (a compiled model may have fewer inputs than the files carry, e.g.
/// with pcc --freeze, only if the others are named too); files without names,
/// or whose names are none of the plan's inputs, are matched by position K.
/// Refused: two files for one input, a mix of matching and unknown names, a
/// plan input no file gives, and files beyond the plan's inputs by position.
/// `sources` (a streamed run): receives each input's file, and read errors name the input.
StatusOr<std::vector<Tensor>> readInputs(const std::string& dir, const plan::Plan& plan,
                                         std::vector<std::string>* sources = nullptr) {
  struct File {
    std::string path, name;
    Tensor t;
  };
  std::vector<File> files;
  for (int k = 0; std::filesystem::exists(tensorFile(dir, "input", k)); ++k) {
    File f{tensorFile(dir, "input", k), "", Tensor()};
    auto t = readTensorFile(f.path, &f.name);
    if (!t.ok()) return sources ? t.status().withContext(strCat("input ", k)) : t.status();
    f.t = std::move(t).value();
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
      if (sources) sources->push_back(it->second->path);
    }
    return inputs;
  }
  for (int k = 0; k < plan.inputs_size(); ++k) {
    if (static_cast<size_t>(k) >= files.size())
      return invalidInput(tensorFile(dir, "input", k), ": missing (the plan has ", plan.inputs_size(),
                          " inputs; input ", k, " is '", plan.inputs(k).name(), "')");
    inputs.push_back(files[k].t);
    if (sources) sources->push_back(files[k].path);
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

/// With --profile: per rank, the collectives and receives of a run, and how
/// much of their time the rank computed through (measured: each operation
/// from its start to its completion, less the time the rank waited for it).
void printCommProfile(const RunResult& res) {
  auto line = [](size_t r, const char* what, const RunResult::CommOverlap& c) {
    if (c.operations <= 0) return;
    std::printf("comm rank %zu: %.0f %s per run: %.3f ms in flight, %.3f ms hidden behind compute (%.1f%%), "
                "%.3f ms waited", r, c.operations, what, c.busySeconds * 1e3, c.hiddenSeconds * 1e3,
                c.busySeconds > 0 ? 100.0 * c.hiddenSeconds / c.busySeconds : 0.0, c.blockedSeconds * 1e3);
    if (c.postedAhead > 0) std::printf(" (%.0f posted a micro-batch ahead)", c.postedAhead);
    std::printf("\n");
  };
  for (size_t r = 0; r < res.rankCollectives.size(); ++r) line(r, "collectives", res.rankCollectives[r]);
  for (size_t r = 0; r < res.rankReceives.size(); ++r) line(r, "receives", res.rankReceives[r]);
}

/// With --profile: a line per op and kernel provider, the slowest first:
/// `label: OP  time  share of the total  calls`.
void printOpProfile(const char* label, const std::map<std::string, RunResult::OpTime>& profile) {
  std::vector<std::pair<std::string, RunResult::OpTime>> ops(profile.begin(), profile.end());
  std::sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) { return x.second.seconds > y.second.seconds; });
  double total = 0;
  for (const auto& [op, t] : ops) total += t.seconds;
  for (const auto& [op, t] : ops)
    std::printf("%s: %-32s %10.3f ms %6.1f%% %6lld calls\n", label, op.c_str(), t.seconds * 1e3,
                total > 0 ? 100.0 * t.seconds / total : 0.0, static_cast<long long>(t.calls));
}

/// With --profile: every rank's memory, rank 0's time per op and provider,
/// the communication's overlap and the pipeline stages.
void printProfile(const Args& a, const plan::Plan& plan, const RunResult& res) {
  for (size_t r = 0; r < res.memory.size(); ++r) {
    const RunResult::RankMemory& m = res.memory[r];
    std::printf("memory rank %zu: peak %s (weights %s, arena %s, other %s)", r, mib(m.peakBytes).c_str(),
                mib(m.weightBytes).c_str(), mib(m.arenaBytes).c_str(),
                mib(m.peakBytes - m.weightBytes - m.arenaBytes).c_str());
    if (m.processPeakRss >= 0) std::printf("; process peak RSS %s", mib(m.processPeakRss).c_str());
    std::printf("\n");
  }
  if (!a.run.profile) return;
  printOpProfile("profile rank 0", res.profile);
  printCommProfile(res);
  printPipelineProfile(plan, res);
}

/// Writes --profile-json: per rank, every instruction with its mean seconds
/// over the timed runs (docs/cli.md#pcc-run). `firstRank`: the rank of
/// res.instructions[0] (this process's rank in a multi-process run);
/// `ranksHere`: the rank threads of this process (0 in a multi-process run).
/// `stream`: a streamed run's figures (\"stream\"), or null.
Status writeProfileJson(const std::string& path, const Args& a, const plan::Plan& plan, const RunResult& res,
                        int firstRank, int ranksHere, const nlohmann::ordered_json& stream = nullptr) {
  using Json = nlohmann::ordered_json;
  Json doc;
  doc["plan"] = a.plan;
  doc["warmup"] = a.batches ? 0 : a.run.warmup;
  doc["iters"] = a.batches ? a.batches : a.run.iters;
  if (!stream.is_null()) doc["stream"] = stream;
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
    auto comm = [](const RunResult::CommOverlap& c) {
      Json j;
      j["operations"] = c.operations;
      j["busy_seconds"] = c.busySeconds;
      j["hidden_seconds"] = c.hiddenSeconds;
      j["blocked_seconds"] = c.blockedSeconds;
      j["posted_ahead"] = c.postedAhead;
      return j;
    };
    if (r < static_cast<int>(res.rankCollectives.size())) rank["collectives"] = comm(res.rankCollectives[r]);
    if (r < static_cast<int>(res.rankReceives.size())) rank["receives"] = comm(res.rankReceives[r]);
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
  return cli::writeFileAtomically(path, doc.dump(1) + "\n");
}

/// Writes `t` as the ONNX tensor file `path` (named `name`), whole or not at
/// all (tools/atomic_write.h).
Status writeOutputTensor(const std::string& path, const Tensor& t, const std::string& name) {
  onnx::TensorProto p;
  tensorToProto(t, name, &p);
  std::string bytes;
  if (!p.SerializeToString(&bytes)) return invalidInput(path, ": cannot serialize the tensor");
  return cli::writeFileAtomically(path, bytes);
}

/// The shortest rendezvous secret pcc-run takes: one that cannot be guessed.
constexpr size_t kMinSecretBytes = 16;

/// \returns the process rank when the environment names one, nullopt for a
/// single-process (threads) run, or an error for an incomplete set-up.
StatusOr<std::optional<ProcessRank>> processRank(const Args& a) {
  // torchrun, mpirun, srun or RANK/WORLD_SIZE by hand (runtime/launch_env.h).
  ASSIGN_OR_RETURN(std::optional<LaunchEnv> le, readLaunchEnv(processEnvironment(), a.rendezvous));
  if (!le) {
    // A --rendezvous given for a run that names no rank would run every rank
    // as a thread and ignore it: say so instead.
    if (!a.rendezvous.empty())
      return invalidInput("--rendezvous ", a.rendezvous, ": one process per rank needs RANK and WORLD_SIZE (or "
                          "Open MPI's OMPI_COMM_WORLD_RANK/SIZE, or Slurm's SLURM_PROCID/SLURM_NTASKS); leave "
                          "--rendezvous out to run the ranks as threads");
    return std::optional<ProcessRank>();
  }
  ProcessRank pr;
  pr.rank = le->rank;
  pr.worldSize = le->worldSize;
  pr.localRank = le->localRank;
  pr.rendezvous = le->rendezvous;
  return std::optional<ProcessRank>(pr);
}

int runStream(const Args& a, const LoadedPlan& lp, const std::optional<ProcessRank>& proc);

/// \returns the token ids of one prompt written "1,2,3" or "1 2 3".
StatusOr<std::vector<int64_t>> promptOf(const std::string& text, const std::string& where) {
  std::vector<int64_t> ids;
  std::string cur;
  auto flush = [&]() -> Status {
    if (cur.empty()) return Status::OK();
    auto n = cli::parseInteger(cur, 0, std::numeric_limits<int64_t>::max());
    if (!n) return invalidInput(where, ": '", cur, "' is not a token id (a non-negative integer)");
    ids.push_back(*n);
    cur.clear();
    return Status::OK();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\r') {
      RETURN_IF_ERROR(flush());
    } else {
      cur += c;
    }
  }
  RETURN_IF_ERROR(flush());
  if (ids.empty()) return invalidInput(where, ": no token ids");
  return ids;
}

/// --generate: writes the prompts with the plan's prefill program, then runs
/// its decode step token by token (--warmup N: N untimed generations of two
/// tokens first).
int runGenerate(const Args& a, const LoadedPlan& lp, const std::optional<ProcessRank>& proc) {
  GenerateOptions g;
  for (size_t i = 0; i < a.promptIds.size(); ++i) {
    auto ids = promptOf(a.promptIds[i], strCat("--prompt-ids ", i));
    if (!ids.ok()) return fail(ids.status());
    g.prompts.push_back(std::move(ids).value());
  }
  if (!a.promptFile.empty()) {
    std::ifstream in(a.promptFile);
    if (!in) return fail(invalidInput(a.promptFile, ": cannot read"));
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto ids = promptOf(line, strCat(a.promptFile, ":", n));
      if (!ids.ok()) return fail(ids.status());
      g.prompts.push_back(std::move(ids).value());
    }
  }
  if (g.prompts.empty()) {
    g.prompts.push_back({1, 2, 3});
    std::fprintf(stderr, "pcc-run: no prompt given (--prompt-ids): generating from token ids 1,2,3\n");
  }
  g.maxNewTokens = a.generate > 0 ? a.generate : 16;
  g.temperature = a.temperature;
  g.topK = a.topK;
  g.topP = a.topP;
  g.seed = a.seed;
  g.stopAtEos = !a.ignoreEos;
  g.prefill = !a.noPrefill;
  g.check = a.check;
  if (a.toleranceGiven) {
    g.rtol = a.rtol;
    g.atol = a.atol;
  } else if (lp.plan.has_precision()) {
    // A --precision plan against the export's float32 step: the precision's
    // tolerance, its absolute part a share of the largest logit; a greedy
    // token may then differ at a near tie, which is counted, not failed.
    const double half = planHalfTolerance(lp.plan);
    g.rtol = std::max(g.rtol, half);
    g.atol = 0;
    g.atolOfMax = half;
    g.tokensMustAgree = half == 0;
  }
  if (a.topP <= 0 || a.topP > 1) return fail(invalidInput("--top-p expects a number in (0, 1], got ", a.topP));
  RunOptions ro = a.run;
  if (proc) {
    ro.localRank = proc->localRank;
    ro.onStuckAfterPeerLost = [](const Status& why) {
      fail(why);
      std::cerr.flush();
      std::_Exit(why.exitCode());
    };
  }
  auto res = proc ? generateTokensRank(lp, g, ro, proc->rank, proc->rendezvous) : generateTokens(lp, g, ro);
  if (!res.ok()) return fail(res.status());
  if (proc && proc->rank != 0) return 0;  // rank 0 reports for everyone
  for (size_t b = 0; b < res->tokens.size(); ++b) {
    std::printf("tokens[%zu]:", b);
    for (int64_t t : res->tokens[b]) std::printf(" %lld", static_cast<long long>(t));
    std::printf("\n");
  }
  size_t longest = 0;
  for (const auto& pr : g.prompts) longest = std::max(longest, pr.size());
  if (res->prefillRuns > 0)
    std::printf("time to first token: %.3f ms (the prefill program for %lld tokens wrote %lld prompt tokens in %d "
                "run%s)\n",
                res->firstTokenSeconds * 1e3, static_cast<long long>(res->prefillLength),
                static_cast<long long>(res->prefillTokens), res->prefillRuns, res->prefillRuns == 1 ? "" : "s");
  else
    std::printf("time to first token: %.3f ms (the prompts fed one token per step: %zu steps)\n",
                res->firstTokenSeconds * 1e3, longest);
  if (res->decodeTokens > 0 && res->decodeSeconds > 0)
    std::printf("decode: %.1f tokens/s (%lld tokens in %.3f ms)\n", res->decodeTokens / res->decodeSeconds,
                static_cast<long long>(res->decodeTokens), res->decodeSeconds * 1e3);
  if (res->steps > 0)
    std::printf("communication: %lld bytes per decode step on all ranks%s (the plan's collectives and transfers: "
                "%lld)\n",
                static_cast<long long>(res->commBytesMax),
                res->commBytesMin == res->commBytesMax
                    ? ""
                    : strCat(", ", res->commBytesMin, " at the fewest").c_str(),
                static_cast<long long>(res->planCommBytes));
  if (a.run.profile) {
    printOpProfile("profile prefill rank 0", res->prefillProfile);
    printOpProfile("profile decode rank 0", res->decodeProfile);
  }
  std::fflush(stdout);
  if (!res->overflow.empty()) return fail(invalidInput(res->overflow));
  if (a.check) {
    if (!res->mismatch.empty()) {
      std::fprintf(stderr, "pcc-run: generation check failed at %s\n", res->mismatch.c_str());
      return 1;
    }
    std::printf("check: %d steps match the export's own decode step (max logit difference %.3g at rtol %g, atol %s)\n",
                res->checkedSteps, res->maxLogitDiff, g.rtol,
                g.atolOfMax > 0 ? strCat(g.atolOfMax, " of the largest |logit|").c_str() : strCat(g.atol).c_str());
    if (!g.tokensMustAgree)
      std::printf("check: %d of %d greedy tokens as the float32 step chose (a %s%s%s plan may break near ties)\n",
                  res->comparedTokens - res->differentTokens, res->comparedTokens,
                  lp.plan.precision().target().c_str(),
                  lp.plan.precision().target().empty() || lp.plan.precision().quantize().empty() ? "" : ", ",
                  lp.plan.precision().quantize().c_str());
  }
  return 0;
}

int run(const Args& a) {
  auto lp = loadPlanBundle(a.plan);
  if (!lp.ok()) return fail(lp.status());
  const plan::Plan& plan = lp->plan;
  if (plan.has_generation()) {
    auto proc = processRank(a);
    if (!proc.ok()) return fail(proc.status());
    if (*proc && (*proc)->worldSize != plan.ranks_size())
      return fail(invalidInput("the environment starts ", (*proc)->worldSize, " processes but the plan has ",
                               plan.ranks_size(), " ranks"));
    if (a.batches > 0 || !a.inputs.empty() || !a.expect.empty() || !a.outputs.empty())
      return fail(invalidInput(a.plan, ": a generation plan takes --generate N with --prompt-ids (not --inputs, "
                               "--expect, --outputs or --batches)"));
    return runGenerate(a, *lp, *proc);
  }
  if (a.generate > 0)
    return fail(invalidInput(a.plan, ": --generate needs a generation plan (a decoder export with past_key_values "
                             "inputs and present outputs); this plan computes one stateless pass"));
  if (a.batches > 0) {
    auto proc = processRank(a);
    if (!proc.ok()) return fail(proc.status());
    if (*proc && (*proc)->worldSize != plan.ranks_size())
      return fail(invalidInput("the environment starts ", (*proc)->worldSize, " processes but the plan has ",
                               plan.ranks_size(), " ranks"));
    return runStream(a, *lp, *proc);
  }

  std::vector<Tensor> inputs;
  if (a.inputs.empty()) {
    inputs = randomInputsFor(plan, a.seed);
  } else {
    auto read = isNumpyPath(a.inputs) ? readNumpyTensors(a.inputs, plan.inputs(), "input") : readInputs(a.inputs, plan);
    if (!read.ok()) return fail(read.status());
    inputs = std::move(read).value();
  }

  auto proc = processRank(a);
  if (!proc.ok()) return fail(proc.status());
  if (*proc && (*proc)->worldSize != plan.ranks_size())
    return fail(invalidInput("the environment starts ", (*proc)->worldSize, " processes but the plan has ",
                             plan.ranks_size(), " ranks"));
  RunOptions ro = a.run;
  if (*proc) ro.localRank = (*proc)->localRank;
  // A rank blocked on a live peer after another died: say why and end now,
  // rather than at the timeout (docs/runtime.md).
  ro.onStuckAfterPeerLost = [](const Status& why) {
    fail(why);
    std::cerr.flush();
    std::_Exit(why.exitCode());
  };
  auto res = *proc ? runPlanRank(*lp, inputs, ro, (*proc)->rank, (*proc)->rendezvous) : runPlan(*lp, inputs, a.run);
  if (!res.ok()) return fail(res.status());
  if (*proc && (*proc)->rank != 0) return 0;  // rank 0 reports for everyone
  for (size_t r = 0; r < res->rankSeconds.size(); ++r) {
    std::printf("rank %zu: %.3f ms", r, res->rankSeconds[r] * 1e3);
    // Processes: where each rank ran on its machine (LOCAL_RANK).
    if (a.run.profile && r < res->localRanks.size()) {
      if (res->localRanks[r] >= 0) std::printf(" (local rank %d)", res->localRanks[r]);
      else std::printf(" (local rank unknown)");
    }
    std::printf("\n");
  }
  if (!a.profileJson.empty()) {
    Status st = writeProfileJson(a.profileJson, a, plan, *res, *proc ? (*proc)->rank : 0, *proc ? 0 : plan.ranks_size());
    if (!st.ok()) return fail(st);
  }
  printProfile(a, plan, *res);

  bool ok = true;
  if (a.check) {
    auto ref = runReference(*lp, inputs, a.run.timeoutSeconds);
    if (!ref.ok()) return fail(ref.status());
    ok &= report(*lp, res->outputs, *ref, "reference", a);
  }
  if (!a.expect.empty()) {
    std::vector<Tensor> want;
    if (isNumpyPath(a.expect)) {
      auto read = readNumpyTensors(a.expect, plan.outputs(), "output");
      if (!read.ok()) return fail(read.status());
      want = std::move(read).value();
    }
    for (int k = static_cast<int>(want.size()); k < plan.outputs_size(); ++k) {
      auto t = readTensorFile(tensorFile(a.expect, "output", k));
      if (!t.ok()) return fail(t.status());
      want.push_back(std::move(t).value());
    }
    ok &= report(*lp, res->outputs, want, "expected", a);
  }
  if (!a.outputs.empty() && std::filesystem::path(a.outputs).extension() == ".npz") {
    NamedTensors named;
    for (int k = 0; k < plan.outputs_size(); ++k) named[plan.outputs(k).name()] = res->outputs[k];
    Status st = writeNpz(a.outputs, named);
    if (!st.ok()) return fail(st);
  } else if (!a.outputs.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(a.outputs, ec);
    if (ec) return fail(invalidInput(a.outputs, ": cannot create directory: ", ec.message()));
    for (int k = 0; k < plan.outputs_size(); ++k) {
      Status st = writeOutputTensor(tensorFile(a.outputs, "output", k), res->outputs[k],
                                    plan.outputs(k).name());
      if (!st.ok()) return fail(st);
    }
  }
  if (!ok) {
    std::fprintf(stderr, "pcc-run: outputs differ (asked rtol %g, atol %g; each output's line says the tolerance used)\n",
                 a.rtol, a.atol);
    return 1;
  }
  return 0;
}

/// The folder of batch `k` of a streamed run: DIR/batch_k.
std::string batchDir(const std::string& dir, int k) {
  return (std::filesystem::path(dir) / ("batch_" + std::to_string(k))).string();
}

/// \returns the samples of one batch: the plan's batch, else the leading dim
/// of its first input, else 1.
int64_t samplesPerBatch(const plan::Plan& plan) {
  if (plan.has_batch() && plan.batch().batch() > 0) return plan.batch().batch();
  if (plan.inputs_size() > 0) {
    TensorType t = fromDesc(plan.inputs(0).desc());
    if (t.rank() > 0 && t.shape[0] > 0) return t.shape[0];
  }
  return 1;
}

/// The figures of a streamed run (docs/runtime.md#input-pipeline).
struct StreamFigures {
  std::vector<double> batchSeconds;  // per batch: the slowest rank's wait + run
  std::vector<double> waitSeconds;   // per batch: the mean wait of the ranks this process's reader feeds
  std::vector<double> readSeconds;   // per batch: the reader's busy time
  double mean = 0, min = 0, max = 0, wall = 0, throughput = 0, read = 0, wait = 0, hidden = 0;
  int64_t samples = 1;
};

/// \returns the figures of `res`; `readerRanks`: how many of its ranks (the
/// first ones) the reader of this process fed.
StreamFigures streamFigures(const plan::Plan& plan, const RunResult& res, const std::vector<double>& read,
                            size_t readerRanks) {
  StreamFigures f;
  const RunResult::Stream& st = res.stream;
  const size_t n = st.runSeconds.size(), batches = n ? st.runSeconds[0].size() : 0;
  for (size_t k = 0; k < batches; ++k) {
    double slowest = 0, wait = 0;
    for (size_t r = 0; r < n; ++r) slowest = std::max(slowest, st.waitSeconds[r][k] + st.runSeconds[r][k]);
    for (size_t r = 0; r < readerRanks && r < n; ++r) wait += st.waitSeconds[r][k];
    f.batchSeconds.push_back(slowest);
    f.waitSeconds.push_back(wait / static_cast<double>(std::max<size_t>(1, std::min(readerRanks, n))));
  }
  f.readSeconds = read;
  if (!f.batchSeconds.empty()) {
    f.min = *std::min_element(f.batchSeconds.begin(), f.batchSeconds.end());
    f.max = *std::max_element(f.batchSeconds.begin(), f.batchSeconds.end());
    for (double x : f.batchSeconds) f.mean += x / static_cast<double>(f.batchSeconds.size());
  }
  for (double x : st.totalSeconds) f.wall = std::max(f.wall, x);
  f.samples = samplesPerBatch(plan);
  f.throughput = f.wall > 0 ? static_cast<double>(f.samples * static_cast<int64_t>(batches)) / f.wall : 0.0;
  for (double x : f.readSeconds) f.read += x;
  for (double x : f.waitSeconds) f.wait += x;
  // The share of the reader's busy time the ranks did not spend waiting.
  f.hidden = f.read > 0 ? std::clamp(1.0 - f.wait / f.read, 0.0, 1.0) : 1.0;
  return f;
}

nlohmann::ordered_json streamJson(const StreamFigures& f, const Args& a, int prefetch, int64_t stagingBytes) {
  nlohmann::ordered_json j;
  j["batches"] = a.batches;
  j["prefetch"] = prefetch;
  j["samples_per_batch"] = f.samples;
  j["batch_seconds"] = f.batchSeconds;
  j["read_seconds"] = f.readSeconds;
  j["wait_seconds"] = f.waitSeconds;
  j["mean_batch_seconds"] = f.mean;
  j["min_batch_seconds"] = f.min;
  j["max_batch_seconds"] = f.max;
  j["total_seconds"] = f.wall;
  j["samples_per_second"] = f.throughput;
  j["read_seconds_total"] = f.read;
  j["wait_seconds_total"] = f.wait;
  j["hidden_fraction"] = f.hidden;
  j["staging_bytes"] = stagingBytes;
  return j;
}

/// `pcc-run --batches K`: streams K batches through an InputPipeline.
/// Process ranks: every process reads the batch files itself and prepares
/// only its own rank's slices (no traffic between ranks for inputs; see
/// docs/runtime.md#input-pipeline); rank 0 reports and checks.
int runStream(const Args& a, const LoadedPlan& lp, const std::optional<ProcessRank>& proc) {
  const plan::Plan& plan = lp.plan;
  const bool perBatch = !a.inputs.empty() && std::filesystem::is_directory(batchDir(a.inputs, 0));
  BatchReader read = [&a, &plan, perBatch](int k) -> StatusOr<BatchInputs> {
    BatchInputs in;
    if (a.inputs.empty()) {
      in.tensors = randomInputsFor(plan, a.seed + static_cast<uint64_t>(k));
      for (int i = 0; i < plan.inputs_size(); ++i)
        in.sources.push_back(strCat("random input ", i, " (seed ", a.seed + static_cast<uint64_t>(k), ")"));
      return in;
    }
    std::string dir = perBatch ? batchDir(a.inputs, k) : a.inputs;
    if (!std::filesystem::is_directory(dir))
      return perBatch ? invalidInput(dir, ": missing (", a.batches, " batches asked, ", a.inputs, "/batch_0 exists)")
                      : invalidInput(dir, ": no such folder");
    ASSIGN_OR_RETURN(in.tensors, readInputs(dir, plan, &in.sources));
    return in;
  };
  std::vector<const plan::RankProgram*> progs;
  for (const plan::RankProgram& r : plan.ranks())
    if (!proc || r.rank() == proc->rank) progs.push_back(&r);
  // The staging buffers come from the backend the ranks run on (a device
  // backend pins them).
  auto backend = makeBackend(a.run.backend, BackendOptions{});
  if (!backend.ok()) return fail(backend.status());
  std::shared_ptr<Backend> staging(std::move(backend).value());
  StagingAllocator allocate = [staging](const TensorType& t) { return staging->allocateStaging(t); };
  PipelineOptions po;
  po.batches = a.batches;
  po.prefetch = a.noPrefetch ? 0 : a.prefetch;
  po.readDelayMs = a.readDelayMs;
  auto pipe = InputPipeline::start(plan, progs, read, allocate, po);
  if (!pipe.ok()) return fail(pipe.status());
  RunOptions ro = a.run;
  ro.pipeline = pipe->get();
  if (proc) ro.localRank = proc->localRank;
  ro.onStuckAfterPeerLost = [](const Status& why) {
    fail(why);
    std::cerr.flush();
    std::_Exit(why.exitCode());
  };
  auto res = proc ? runPlanRank(lp, {}, ro, proc->rank, proc->rendezvous) : runPlan(lp, {}, ro);
  (*pipe)->stop();
  if (!res.ok()) return fail(res.status());
  if (proc && proc->rank != 0) return 0;  // rank 0 reports for everyone

  const size_t readerRanks = proc ? 1 : static_cast<size_t>(plan.ranks_size());
  StreamFigures f = streamFigures(plan, *res, (*pipe)->readSeconds(), readerRanks);
  for (size_t r = 0; r < res->rankSeconds.size(); ++r)
    std::printf("rank %zu: %.3f ms per batch\n", r, res->rankSeconds[r] * 1e3);
  std::printf("stream: %d batches of %lld samples, prefetch %d: time per batch mean %.3f ms, min %.3f ms, "
              "max %.3f ms; throughput %.1f samples/s (%.3f ms in all)\n",
              a.batches, static_cast<long long>(f.samples), po.prefetch, f.mean * 1e3, f.min * 1e3, f.max * 1e3,
              f.throughput, f.wall * 1e3);
  std::printf("stream input: reader busy %.3f ms per batch, ranks waited %.3f ms per batch%s; hidden %.1f%% "
              "(1 - wait / read)\n",
              f.read / a.batches * 1e3, f.wait / a.batches * 1e3, proc ? " (rank 0)" : "", 100 * f.hidden);
  if (!a.profileJson.empty()) {
    Status st = writeProfileJson(a.profileJson, a, plan, *res, proc ? proc->rank : 0, proc ? 0 : plan.ranks_size(),
                                 streamJson(f, a, po.prefetch, (*pipe)->stagingBytes()));
    if (!st.ok()) return fail(st);
  }
  printProfile(a, plan, *res);

  bool ok = true;
  for (int k = 0; k < a.batches; ++k) {
    const std::vector<Tensor>& got = res->stream.outputs[k];
    const std::string prefix = strCat("batch ", k, " ");
    if (a.check) {
      // The batch again, read the same way, through the reference program.
      auto in = read(k);
      if (!in.ok()) return fail(in.status().withContext(strCat("batch ", k)));
      auto ref = runReference(lp, in->tensors, a.run.timeoutSeconds);
      if (!ref.ok()) return fail(ref.status().withContext(strCat("batch ", k)));
      ok &= report(lp, got, *ref, "reference", a, prefix);
    }
    if (!a.expect.empty()) {
      std::vector<Tensor> want;
      for (int i = 0; i < plan.outputs_size(); ++i) {
        auto t = readTensorFile(tensorFile(batchDir(a.expect, k), "output", i));
        if (!t.ok()) return fail(t.status());
        want.push_back(std::move(t).value());
      }
      ok &= report(lp, got, want, "expected", a, prefix);
    }
    if (!a.outputs.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(batchDir(a.outputs, k), ec);
      if (ec) return fail(invalidInput(batchDir(a.outputs, k), ": cannot create directory: ", ec.message()));
      for (int i = 0; i < plan.outputs_size(); ++i) {
        Status st = writeOutputTensor(tensorFile(batchDir(a.outputs, k), "output", i), got[i], plan.outputs(i).name());
        if (!st.ok()) return fail(st);
      }
    }
  }
  if (!ok) {
    std::fprintf(stderr, "pcc-run: outputs differ (asked rtol %g, atol %g; each output's line says the tolerance used)\n",
                 a.rtol, a.atol);
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
  pcc::cpu::chooseOpenMpWaitPolicy(argv);  // may execute pcc-run again, with OMP_WAIT_POLICY or GOMP_SPINCOUNT set
#ifdef PCC_HAVE_CUDA_RUNTIME
  pcc::cuda::registerCudaBackend();  // loads nothing until a rank asks for it
#endif
  return pcc::cli::finishStdout("pcc-run", pcc::cli::guardedMain("pcc-run", [&] { return toolMain(argc, argv); }));
}
