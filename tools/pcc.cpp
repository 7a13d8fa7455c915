// pcc: compile an ONNX model into a plan bundle for N devices.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include "codegen/plan_report.h"
#include "compiler/driver.h"

using namespace pcc;

namespace {

const char kUsage[] = R"(usage: pcc MODEL.onnx [options]

Compiles an ONNX model into a plan bundle: one static program per rank, which
pcc-run executes on CPU ranks (gloo) and checks against the reference evaluator.

options:
  --gpus N              devices to spread the model over (default 1)
  --strategy S          auto | tp=T | dp=D,tp=T,pp=P   (default auto: data
                        parallelism over the batch; tp = Megatron-style tensor
                        parallelism of MatMul/Gemm chains)
  --batch N             bind the leading symbolic dimension of every input
  --shape NAME=AxB      bind the full shape of input NAME (repeatable)
  --freeze NAME=FILE.pb fix input NAME to the tensor in FILE.pb (it becomes a
                        constant, e.g. a shape the model takes as an input)
  --emit ir|report|json print the partitioned IR, the text report or the JSON
                        report instead of writing a plan (unless -o is given)
  -o PLAN.pcc           plan bundle directory (default: MODEL.pcc next to the cwd)
  --print-after PASS    print the IR after pass PASS to stderr
  --verify-each         run the IR verifier after every pass
  --quiet               no progress messages
  --help, --version

exit codes: 0 ok, 2 bad input or usage, 3 internal error
)";

// Options of the design that are not implemented yet: refused, not ignored.
const char* const kNotYet[] = {"--gpus-per-node", "--gpu", "--cluster", "--target", "--objective",
                               "--microbatches", "--precision", "--no-fuse"};

int fail(const Status& s) {
  std::cerr << "pcc: error: " << s.message() << "\n";
  return s.exitCode();
}

int usageError(const std::string& msg) { return fail(invalidInput(msg, " (see pcc --help)")); }

}  // namespace

int main(int argc, char** argv) {
  CompileOptions opts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--version") {
      std::cout << "pcc 0.1.0\n";
      return 0;
    } else if (a == "--gpus") {
      if (!value(v)) return usageError("--gpus needs a value");
      auto d = parseDims(v);
      if (!d.ok() || d->size() != 1 || (*d)[0] < 1 || (*d)[0] > 65536) return usageError("--gpus expects a positive count, got '" + v + "'");
      opts.gpus = static_cast<int>((*d)[0]);
    } else if (a == "--strategy") {
      if (!value(v)) return usageError("--strategy needs a value");
      if (Status s = parseStrategy(v, opts); !s.ok()) return fail(s);
    } else if (a == "--batch") {
      if (!value(v)) return usageError("--batch needs a value");
      auto d = parseDims(v);
      if (!d.ok() || d->size() != 1 || (*d)[0] < 1)
        return usageError("--batch expects a positive size, got '" + v + "'");
      opts.batch = (*d)[0];
    } else if (a == "--shape") {
      if (!value(v)) return usageError("--shape needs NAME=AxB");
      auto eq = v.rfind('=');
      if (eq == std::string::npos || eq == 0) return usageError("--shape expects NAME=AxB, got '" + v + "'");
      auto d = parseDims(v.substr(eq + 1));
      if (!d.ok()) return fail(d.status());
      opts.shapes[v.substr(0, eq)] = *d;
    } else if (a == "--freeze") {
      if (!value(v)) return usageError("--freeze needs NAME=FILE.pb");
      auto eq = v.rfind('=');
      if (eq == std::string::npos || eq == 0) return usageError("--freeze expects NAME=FILE.pb, got '" + v + "'");
      opts.frozenInputs[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--emit") {
      if (!value(v) || (v != "ir" && v != "report" && v != "json"))
        return usageError("--emit expects ir, report or json");
      opts.emit = v;
    } else if (a == "-o" || a == "--output") {
      if (!value(opts.outputPath)) return usageError("-o needs a path");
    } else if (a == "--print-after") {
      if (!value(opts.printAfter)) return usageError("--print-after needs a pass name");
    } else if (a == "--verify-each") {
      opts.verifyEach = true;
    } else if (a == "--quiet" || a == "-q") {
      opts.quiet = true;
    } else if (std::find_if(std::begin(kNotYet), std::end(kNotYet), [&](const char* s) { return a == s; }) !=
               std::end(kNotYet)) {
      return fail(unsupported(a, " is not implemented yet"));
    } else if (!a.empty() && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else if (opts.modelPath.empty()) {
      opts.modelPath = a;
    } else {
      return usageError("more than one model given ('" + opts.modelPath + "', '" + a + "')");
    }
  }
  if (opts.modelPath.empty()) return usageError("no model given");

  // Progress goes live to a terminal; otherwise it is held back and shown
  // only on success, so a failure prints exactly one line.
  bool tty = isatty(STDERR_FILENO);
  std::ostringstream held;
  auto c = compileModel(opts, tty ? static_cast<std::ostream*>(&std::cerr) : &held);
  if (!c.ok()) return fail(c.status());
  std::cerr << held.str();

  if (opts.emit == "ir") std::cout << emitIr(*c);
  if (opts.emit == "report") std::cout << planReportText(c->plan.plan);
  if (opts.emit == "json") std::cout << planReportJson(c->plan.plan);
  if (!opts.emit.empty() && opts.outputPath.empty()) return 0;

  std::string out = opts.outputPath;
  if (out.empty()) out = std::filesystem::path(opts.modelPath).stem().string() + ".pcc";
  if (Status s = writeEmittedPlan(out, c->plan); !s.ok()) return fail(s);
  if (!opts.quiet) std::cerr << "pcc: wrote " << out << " (" << c->ranks.size() << " ranks)\n";
  return 0;
}
