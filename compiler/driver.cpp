#include "compiler/driver.h"

#include <chrono>
#include <ostream>

#include "compiler/ir/text.h"
#include "compiler/ir/verifier.h"
#include "compiler/onnx/importer.h"
#include "passes/pass_manager.h"
#include "passes/registry.h"
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

}  // namespace

StatusOr<Compilation> compileModel(const CompileOptions& opts, std::ostream* log) {
  auto say = [&](const std::string& s) {
    if (log && !opts.quiet) *log << "pcc: " << s << "\n";
  };
  Compilation c;
  Stopwatch total;
  ImportOptions io;
  io.batch = opts.batch;
  io.shapes = opts.shapes;
  for (const auto& [name, file] : opts.frozenInputs) {
    auto t = readTensorFile(file);
    if (!t.ok()) return t.status().withContext(strCat("--freeze ", name));
    io.inputValues[name] = std::move(t).value();
  }
  ASSIGN_OR_RETURN(c.reference, importOnnxModel(opts.modelPath, io));
  say(strCat("imported ", opts.modelPath, ": ", c.reference->numNodes(), " nodes, ",
             c.reference->constants().size(), " constants (", total.seconds(), " s)"));

  c.partitioned = c.reference->clone();
  PassManager pm;
  for (const char* name : kPipeline)
    if (pipelineRuns(name, opts)) pm.add(createPass(name));
  PassContext ctx;
  ctx.verifyEach = opts.verifyEach;
  ctx.printAfter = opts.printAfter;
  ctx.log = log;
  ASSIGN_OR_RETURN(bool changed, pm.run(*c.partitioned, ctx));
  (void)changed;
  say(strCat("optimized: ", c.partitioned->numNodes(), " nodes"));

  PartitionOptions po;
  po.gpus = opts.gpus;
  po.dp = opts.dp;
  po.tp = opts.tp;
  po.pp = opts.pp;
  ASSIGN_OR_RETURN(c.partition, partitionGraph(*c.partitioned, po));
  RETURN_IF_ERROR(verifyGraph(*c.partitioned).withContext("after partitioning"));
  for (const std::string& n : c.partition.notes) say("note: " + n);
  ASSIGN_OR_RETURN(c.ranks, lowerToRanks(*c.partitioned, c.partition));
  for (const RankGraph& rg : c.ranks)
    RETURN_IF_ERROR(verifyGraph(*rg.graph).withContext(strCat("rank ", rg.rank, " program")));
  say(strCat("partitioned: mesh ", c.partition.mesh.str(), ", ", c.ranks.size(), " rank programs"));

  ASSIGN_OR_RETURN(c.plan, emitPlan(*c.reference, *c.partitioned, c.partition, c.ranks, opts.modelPath));
  say(strCat("compiled in ", total.seconds(), " s"));
  return c;
}

std::vector<std::string> pipelinePasses() { return {std::begin(kPipeline), std::end(kPipeline)}; }

std::string emitIr(const Compilation& c) {
  std::string s = "// global graph, mesh " + c.partition.mesh.str() + "\n" + printGraph(*c.partitioned);
  for (const RankGraph& rg : c.ranks) s += strCat("\n// rank ", rg.rank, " program\n") + printGraph(*rg.graph);
  return s;
}

}  // namespace pcc
