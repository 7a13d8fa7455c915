// CompileOptions: every option of the compiler, in one documented struct.
// The command line (tools/pcc.cpp) fills it; nothing else reads flags.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "runtime/support/dtype.h"
#include "runtime/support/status.h"

namespace pcc {

/// The most devices a plan may be made for (--gpus and each --strategy factor).
inline constexpr int kMaxDevices = 65536;

struct CompileOptions {
  /// The ONNX model to compile.
  std::string modelPath;
  /// Plan bundle directory to write (-o). Empty: <model stem>.pcc, unless an
  /// --emit form was asked for, which prints instead of writing a plan.
  std::string outputPath;
  /// Number of devices to spread the model over (--gpus); 0: not given, the
  /// product of a forced --strategy (1 without one): deviceCount().
  int gpus = 0;
  /// Mesh extents from --strategy (0 = derived: dp takes what tp and pp leave).
  /// "auto" leaves all three 0: the mesh search (passes/partition/search.h)
  /// chooses dp and tp by the cost model.
  int dp = 0, tp = 0, pp = 0;
  /// Micro-batches per data-parallel replica (--microbatches); 0: the mesh
  /// search chooses (1 without pipeline stages).
  int microbatches = 0;
  /// The device the cost model plans for: a shipped spec's name (--gpu; the
  /// list is builtinClusterSpecNames()), unless clusterFile is given.
  std::string gpu = "h100";
  /// A cluster spec file (--cluster FILE.json) replacing --gpu's.
  std::string clusterFile;
  /// Devices per node (--gpus-per-node); 0: the spec's.
  int gpusPerNode = 0;
  /// What the mesh search minimizes (--objective): "latency" (time per batch)
  /// or "throughput" (samples per second over every device).
  std::string objective = "latency";
  /// Binds the leading symbolic dimension of every input (--batch N).
  std::optional<int64_t> batch;
  /// --batch auto: the compiler chooses the batch (compiler/batch_search.h).
  /// A symbolic leading dimension with no --batch is chosen the same way.
  bool batchAuto = false;
  /// The largest batch the choice considers (a power of two: candidates are
  /// 1, 2, 4, ... up to it). No flag sets it.
  int64_t maxAutoBatch = 1024;
  /// The choice stops doubling the batch once a doubling raises the estimated
  /// samples per second by less than this fraction. No flag sets it.
  double autoBatchMinGain = 0.05;
  /// Full shapes of named inputs (--shape NAME=2x128).
  std::map<std::string, Dims> shapes;
  /// Inputs fixed to the value in a TensorProto file (--freeze NAME=FILE.pb):
  /// they become constants, e.g. a shape fed as an input.
  std::map<std::string, std::string> frozenInputs;
  /// What to print instead of (or besides, with -o) writing a plan: "", "ir", "report", "json".
  std::string emit;
  /// Print the IR after this pass to stderr (--print-after).
  std::string printAfter;
  /// Run the verifier after every pass (--verify-each; always on in tests).
  bool verifyEach = false;
  /// Suppress progress messages on stderr (--quiet).
  bool quiet = false;
  /// Run the recognize pass and the fuse pass (passes/fuse.cpp, on each rank
  /// program); --no-fuse turns them off.
  bool fuse = true;
  /// The mesh search skips the repeats of a repeated block once its search
  /// reaches a steady state (docs/cost-model.md#repeated-blocks);
  /// --no-fold-repeats searches every one.
  bool foldRepeats = true;
  /// Reorder each rank program so that collectives overlap with independent
  /// nodes (passes/schedule.h); --no-schedule-overlap keeps the order.
  bool scheduleOverlap = true;
  /// A rank's piece of a constant with at most this many elements is copied
  /// while lowering; a larger one is streamed from the model when the plan is
  /// written (LowerOptions::eagerSliceElements). Tests set 0 to stream every
  /// piece; no flag sets it.
  int64_t eagerSliceElements = 65536;
  /// Compile a decoder export with a KV cache as a generation plan
  /// (docs/generation.md); false: as the stateless graph it is (--no-generation).
  bool generation = true;
  /// Positions the KV cache holds per sequence (--max-context); 0: the
  /// model's own (a config next to it), else 2048.
  int64_t maxContext = 0;
  /// Tokens per sequence the prefill program writes in one run
  /// (--max-prompt); -1: min(256, max_context / 2); 0: no prefill program.
  int64_t maxPrompt = -1;
  /// Prefill programs (--prefill-programs): one for maxPrompt tokens, and
  /// each further one for half the tokens of the one before (at least
  /// kMinPrefillTokens), so that a short prompt runs a short program.
  int prefillPrograms = 3;
  /// Generate a kernel for each fused group of elementwise ops (docs/kernels.md);
  /// --no-kernels keeps every group on the reference kernels.
  bool generateKernels = true;
  /// --target: "cpu" (the CPU shared object) or "cuda" (also PTX and cubin
  /// for `arches`, --arch); plans of either run on CPU ranks.
  std::string target = "cpu";
  std::vector<std::string> arches = {"sm_80", "sm_90"};

  // Precision (docs/precision.md).
  /// The type activations and weights are converted to (--precision fp32,
  /// fp16, bf16); kUndefined: the model's own types.
  DType precision = DType::kUndefined;
  /// Op names (--keep-fp32) and node names (--keep-fp32-node) kept in
  /// float32 besides the rules' (passes/precision.h).
  std::set<std::string> keepFp32Ops, keepFp32Nodes;
  /// The default keep rules; --no-precision-rules turns them off (to show
  /// what they prevent).
  bool precisionRules = true;
  /// A generation plan's KV cache type (--kv-cache-dtype); kUndefined: the
  /// --precision type.
  DType kvCacheDtype = DType::kUndefined;
  /// A folder of input sets (.npz files or folders of NAME.npy) the error is
  /// measured on (--calibration-inputs); empty: kSeededSets seeded sets.
  std::string calibrationInputs;
  /// The lowest cosine similarity a converted output may have
  /// (--max-error COS); below it, or not finite, the compile fails. <0: none.
  double maxError = -1;
  /// Weight-only quantization (--quantize int8|int4): 8 or 4; 0: none.
  int quantizeBits = 0;
  /// Values per quantization block along K (--quantize-group); 0: one block
  /// per output channel; -1: the default (32 for int4, per channel for int8).
  int64_t quantizeGroup = -1;
  /// The largest model (bytes of constants) whose conversion error is
  /// measured at compile time (--measure-limit MB); larger: not measured.
  int64_t measureLimitBytes = int64_t{2} << 30;
};

/// Parses a --strategy value: "auto", "tp=4", "dp=2,tp=2,pp=1".
/// \returns ok, or an invalid-input error naming the bad part.
Status parseStrategy(const std::string& text, CompileOptions& opts);

/// \returns the number of devices to plan for: --gpus, or without it the
/// product of the mesh a forced --strategy gives (1 without one); an
/// invalid-input error naming both flags when they disagree.
StatusOr<int> deviceCount(const CompileOptions& opts);

/// \returns a forced --strategy as written back ("dp=2,tp=4"), the parts
/// given only; "auto" when none is forced.
std::string strategyText(const CompileOptions& opts);

/// Parses "2x128" (also "2,128"); sizes may be 0 (empty tensors). \returns the dims or an invalid-input error.
StatusOr<Dims> parseDims(const std::string& text);

}  // namespace pcc
