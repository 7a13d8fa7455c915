// The options of the compiler (CompileOptions), defined once for every front
// end: the pcc command line (tools/pcc.cpp) and the Python package's
// pcc.compile keywords (python/src/pcc_module.cpp), which turns each keyword
// into the flag of the same name and parses it here.
#include "tools/compile_flags.h"

#include <algorithm>
#include <limits>

#include "compiler/driver.h"
#include "passes/partition/device_spec.h"
#include "passes/precision.h"
#include "tools/cli.h"

namespace pcc {

namespace {

/// Splits a repeatable NAME=VALUE option; a bad one fails the parse.
std::pair<std::string, std::string> nameValue(const std::string& flag, const std::string& v, const char* form) {
  auto eq = v.rfind('=');
  if (eq == std::string::npos || eq == 0)
    throw CLI::ValidationError(strCat(flag, " expects ", form, ", got '", v, "'"));
  return {v.substr(0, eq), v.substr(eq + 1)};
}

}  // namespace

void addCompileFlags(CLI::App& app, CompileOptions& opts) {
  cli::addInteger(app, "--gpus", 1, kMaxDevices, [&](int64_t n) { opts.gpus = static_cast<int>(n); },
                  "devices to spread the model over (default: the\ndevices a forced --strategy uses, else 1)");
  app.add_option_function<std::string>(
         "--strategy",
         [&](const std::string& v) {
           if (Status s = parseStrategy(v, opts); !s.ok()) throw CLI::ValidationError(s.message());
         },
         "auto | tp=T | dp=D,tp=T,pp=P (default auto: the\n"
         "pp x dp x tp the cost model finds fastest; a forced\n"
         "tp splits the weights first, pp cuts pipeline stages)")
      ->type_name("S");
  cli::addInteger(app, "--microbatches", 1, 1 << 20, [&](int64_t n) { opts.microbatches = static_cast<int>(n); },
                  "micro-batches per data-parallel replica's batch\n"
                  "(default: the cost model's choice with pipeline\n"
                  "stages, else 1); must divide it evenly");
  cli::addInteger(app, "--max-context", 2, int64_t{1} << 24, [&](int64_t n) { opts.maxContext = n; },
                  "generation plans: positions the KV cache holds\n"
                  "per sequence, prompt included (default: the\n"
                  "model's max_position_embeddings from a config\n"
                  "next to it, else 2048)");
  cli::addInteger(app, "--max-prompt", 0, int64_t{1} << 24, [&](int64_t n) { opts.maxPrompt = n; },
                  "generation plans: prompt tokens per sequence the\n"
                  "prefill program writes in one run; longer prompts\n"
                  "go on through the decode step (default: 256, at\n"
                  "most half of --max-context; 0: no prefill program)");
  cli::addInteger(app, "--prefill-programs", 1, 8, [&](int64_t n) { opts.prefillPrograms = static_cast<int>(n); },
                  "generation plans: prefill programs, for --max-prompt\n"
                  "tokens and for half as many as the one before, down\n"
                  "to 8; a run takes the shortest that holds its\n"
                  "longest prompt (default 3; 1: --max-prompt only)");
  app.add_flag_function("--no-generation", [&](int64_t) { opts.generation = false; },
                        "compile a decoder with a KV cache as the plain\n"
                        "graph it is (past and present as inputs and\n"
                        "outputs) instead of a generation plan");
  cli::addChoice(app, "--gpu", opts.gpu, builtinClusterSpecNames(),
                 "the device the cost model plans for (default h100;\ncpu: CPU ranks)");
  app.add_option("--cluster", opts.clusterFile,
                 "a cluster spec (JSON, docs/cost-model.md) in place of\n--gpu's")
      ->type_name("FILE.json");
  cli::addInteger(app, "--gpus-per-node", 1, kMaxDevices, [&](int64_t n) { opts.gpusPerNode = static_cast<int>(n); },
                  "devices per node (default: the spec's)");
  cli::addChoice(app, "--objective", opts.objective, {"latency", "throughput"},
                 "what the mesh search optimizes: time per batch\n(latency, default) or samples per second\n(throughput; tokens per second for a\ngeneration plan, the sequences per step chosen)");
  app.add_option_function<std::string>(
         "--batch",
         [&](const std::string& v) {
           if (v == "auto") {
             opts.batch.reset();
             opts.batchAuto = true;
             return;
           }
           constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
           auto n = cli::parseInteger(v, 1, kMax);
           if (!n) throw CLI::ValidationError(strCat("--batch expects auto or an integer from 1 to ", kMax, ", got '", v, "'"));
           opts.batch = *n;
           opts.batchAuto = false;
         },
         "bind the leading symbolic dimension of every input;\n"
         "auto (the default for a symbolic one): the batch of\n"
         "the most estimated samples/s within memory\n"
         "(--objective throughput), or 1 (latency)")
      ->type_name("N|auto");
  app.add_option_function<std::vector<std::string>>(
         "--shape",
         [&](const std::vector<std::string>& vs) {
           for (const std::string& v : vs) {
             auto [name, dims] = nameValue("--shape", v, "NAME=AxB");
             auto d = parseDims(dims);
             if (!d.ok()) throw CLI::ValidationError(strCat("--shape ", name, ": ", d.status().message()));
             opts.shapes[name] = *d;
           }
         },
         "bind the full shape of input NAME (repeatable)")
      ->type_name("NAME=AxB")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option_function<std::vector<std::string>>(
         "--freeze",
         [&](const std::vector<std::string>& vs) {
           for (const std::string& v : vs) {
             auto [name, file] = nameValue("--freeze", v, "NAME=FILE.pb");
             opts.frozenInputs[name] = file;
           }
         },
         "fix input NAME to the tensor in FILE.pb (it becomes a\n"
         "constant, e.g. a shape the model takes as an input;\n"
         "repeatable)")
      ->type_name("NAME=FILE.pb")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option_function<std::string>(
         "--print-after",
         [&](const std::string& name) {
           std::vector<std::string> names = pipelinePasses();
           if (std::find(names.begin(), names.end(), name) == names.end()) {
             std::string list;
             for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
             throw CLI::ValidationError(strCat("--print-after: unknown pass '", name, "' (passes: ", list, ")"));
           }
           opts.printAfter = name;
         },
         "print the IR after pass PASS to stderr")
      ->type_name("PASS");
  app.add_flag_function("--no-schedule-overlap", [&](int64_t) { opts.scheduleOverlap = false; },
                        "keep each rank program in graph order: no collective is\nmoved ahead of independent nodes to overlap them");
  app.add_flag_function("--no-fuse", [&](int64_t) { opts.fuse = false; }, "turn off the recognize and fuse passes: every op\nstays a kernel");
  app.add_flag_function("--no-fold-repeats", [&](int64_t) { opts.foldRepeats = false; },
                        "search every repeat of a repeated block (a model's\nlayers) instead of taking the steady state's\nchoices (docs/cost-model.md#repeated-blocks)");
  cli::addChoice(app, "--target", opts.target, {"cpu", "cuda"},
                 "kernels to generate: cpu (default: a shared object for\n"
                 "CPU ranks) or cuda (also PTX and cubin per --arch;\n"
                 "the plan still runs on CPU ranks)");
  app.add_option_function<std::string>(
         "--arch",
         [&](const std::string& v) {
           opts.arches.clear();
           std::string rest = v;
           while (!rest.empty()) {
             std::string a = rest.substr(0, rest.find(','));
             rest = rest.size() > a.size() ? rest.substr(a.size() + 1) : "";
             bool ok = a.size() > 3 && a.rfind("sm_", 0) == 0 &&
                       a.find_first_not_of("0123456789", 3) == std::string::npos;
             if (!ok) throw CLI::ValidationError(strCat("--arch: '", a, "' is not of the form sm_XX (e.g. sm_80)"));
             opts.arches.push_back(a);
           }
           if (opts.arches.empty()) throw CLI::ValidationError("--arch: no architecture given");
         },
         "GPU architectures for --target cuda, comma separated\n(default sm_80,sm_90)")
      ->type_name("SM,...");
  app.add_flag_function("--no-kernels", [&](int64_t) { opts.generateKernels = false; },
                        "generate no kernels: fused groups run op by op on the\nreference kernels");
  auto precisionFlag = [&](const char* flag, DType& out, const char* help) {
    app.add_option_function<std::string>(
           flag,
           [&out, flag](const std::string& v) {
             std::optional<DType> t = precisionFromName(v);
             if (!t) throw CLI::ValidationError(strCat(flag, " expects fp32, fp16 or bf16, got '", v, "'"));
             out = *t;
           },
           help)
        ->type_name("fp32|fp16|bf16");
  };
  precisionFlag("--precision", opts.precision,
                "convert activations and weights to this type\n"
                "(default: the model's own); normalizations, Softmax,\n"
                "Exp/Log/Pow, the final outputs and values out of\n"
                "range stay float32 (docs/precision.md)");
  app.add_option_function<std::string>(
         "--quantize",
         [&](const std::string& v) {
           if (v == "int8") opts.quantizeBits = 8;
           else if (v == "int4") opts.quantizeBits = 4;
           else throw CLI::ValidationError(strCat("--quantize expects int8 or int4, got '", v, "'"));
         },
         "weight-only quantization of MatMul/Gemm weights:\n"
         "symmetric, in blocks along K (onnxruntime's\n"
         "MatMulNBits format; docs/precision.md)")
      ->type_name("int8|int4");
  cli::addInteger(app, "--quantize-group", 0, int64_t{1} << 30, [&](int64_t g) { opts.quantizeGroup = g; },
                  "with --quantize: values per block along K (default\n"
                  "32 for int4; 0, the default for int8: one block per\n"
                  "output channel)");
  precisionFlag("--kv-cache-dtype", opts.kvCacheDtype,
                "generation plans: the KV cache's type (default: the\n--precision type)");
  auto nameList = [&](const char* flag, std::set<std::string>& out, const char* help, const char* type) {
    app.add_option_function<std::string>(
           flag,
           [&out, flag](const std::string& v) {
             std::string rest = v;
             while (!rest.empty()) {
               std::string a = rest.substr(0, rest.find(','));
               rest = rest.size() > a.size() ? rest.substr(a.size() + 1) : "";
               if (a.empty()) throw CLI::ValidationError(strCat(flag, ": an empty name in '", v, "'"));
               out.insert(a);
             }
           },
           help)
        ->type_name(type);
  };
  nameList("--keep-fp32", opts.keepFp32Ops, "with --precision: also keep these ops in float32", "OP,...");
  nameList("--keep-fp32-node", opts.keepFp32Nodes, "with --precision: also keep these nodes in float32", "NAME,...");
  app.add_flag_function("--no-precision-rules", [&](int64_t) { opts.precisionRules = false; },
                        "with --precision: no default float32 rules (only\n--keep-fp32 and --keep-fp32-node; to see what the\nrules prevent)");
  app.add_option("--calibration-inputs", opts.calibrationInputs,
                 "with --precision: input sets the ranges and the error\n"
                 "are measured on (each an .npz file or a folder of\n"
                 "NAME.npy files; default: 2 seeded sets)")
      ->type_name("DIR");
  cli::addNumber(app, "--max-error", 0, opts.maxError,
                 "with --precision: fail (exit 2) when an output's cosine\n"
                 "similarity to float32 falls below COS, naming it",
                 "COS");
  cli::addInteger(app, "--measure-limit", 0, int64_t{1} << 30,
                  [&](int64_t mb) { opts.measureLimitBytes = mb << 20; },
                  "with --precision: the largest model (MB of weights)\n"
                  "whose error is measured at compile time (default 2048)",
                  "MB");
  app.add_flag("--verify-each", opts.verifyEach, "run the IR verifier after every pass");
  app.add_flag("-q,--quiet", opts.quiet, "no progress messages");
}

}  // namespace pcc
