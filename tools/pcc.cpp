// pcc: compile an ONNX model into a plan bundle for N devices.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include "compiler/driver.h"
#include "report/plan_report.h"
#include "runtime/plan_io.h"
#include "tools/cli.h"
#include "tools/compile_flags.h"

using namespace pcc;

namespace {

const char kAbout[] = R"(Compiles an ONNX model into a plan bundle: one static program per rank, which
pcc-run executes on CPU ranks (gloo) and checks against the reference evaluator.)";

const char kFooter[] = "exit codes: 0 ok, 2 bad input or usage, 3 internal error, 4 out of memory";

int fail(const Status& s) {
  return cli::printError("pcc: error: ", s.message(), s.exitCode());
}

/// \returns the message for arguments nothing took: an unknown option or a
/// second model.
std::string extrasMessage(const std::vector<std::string>& extras, const CompileOptions& opts) {
  return cli::describeExtras(extras, "model", opts.modelPath);
}

std::string gibText(uint64_t bytes) {
  std::ostringstream s;
  s.precision(3);
  s << bytes / double(uint64_t{1} << 30) << " GiB";
  return s.str();
}

// Progress of a long plan write on stderr, once it has taken more than a
// second: a live percentage on a terminal, a line per weight file with
// --progress otherwise, nothing else (stderr is then kept to the one error
// line of a failure).
class WeightWriteProgress {
 public:
  WeightWriteProgress(bool live, bool lines) : live_(live), lines_(lines && !live) {}

  WriteProgress callback() {
    if (!live_ && !lines_) return {};
    return [this](uint64_t done, uint64_t total, const std::string& file) { show(done, total, file); };
  }

  /// Ends the live line, if one was shown.
  void end() {
    if (shown_ && live_) std::cerr << "\n";
  }

 private:
  void show(uint64_t done, uint64_t total, const std::string& file) {
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (seconds < 1.0 || total == 0) return;
    int percent = static_cast<int>(done * 100 / total);
    if (live_ && (percent != percent_ || file != file_)) {
      std::cerr << "\rpcc: writing weights " << percent << "% of " << gibText(total) << " (" << file << ")   "
                << std::flush;
      shown_ = true;
    } else if (lines_ && file != file_) {
      std::cerr << "pcc: writing " << file << " (" << percent << "% of " << gibText(total) << " written, "
                << static_cast<int>(seconds) << " s)\n";
      shown_ = true;
    }
    percent_ = percent;
    file_ = file;
  }

  bool live_, lines_, shown_ = false;
  int percent_ = -1;
  std::string file_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

int toolMain(int argc, char** argv) {
  CompileOptions opts;
  CLI::App app(kAbout, "pcc");
  cli::setDefaults(app, kFooter);
  app.set_version_flag("--version", "pcc 0.1.0");
  app.add_option("MODEL.onnx", opts.modelPath, "the ONNX model (external-data files next to it are\nread in place)")
      ->type_name("");
  addCompileFlags(app, opts);
  cli::addChoice(app, "--emit", opts.emit, {"ir", "report", "json"},
                 "print the partitioned IR, the text report or the JSON\n"
                 "report instead of writing a plan (unless -o is given)");
  CLI::Option* outputOpt = app.add_option("-o,--output", opts.outputPath, "plan bundle directory (default: MODEL.pcc in the\nworking directory)")
      ->type_name("PLAN.pcc");
  bool progressLines = false;
  app.add_flag("--progress", progressLines,
               "show the progress of writing the weight files even when\n"
               "stderr is not a terminal (a line per file; a terminal\n"
               "gets a live percentage); shown once writing takes\n"
               "more than a second");
  if (auto code = cli::parse(app, argc, argv, "pcc: error: ",
                             [&](const std::vector<std::string>& extras) { return extrasMessage(extras, opts); }))
    return *code;
  if (opts.modelPath.empty()) return fail(invalidInput("no model given (see pcc --help)"));
  if (auto gpus = deviceCount(opts); !gpus.ok()) return fail(gpus.status());
  if (outputOpt->count() > 0 && opts.outputPath.empty())
    return fail(invalidInput("-o: the plan bundle path is empty"));
  std::string out = opts.outputPath;
  if (out.empty()) out = std::filesystem::path(opts.modelPath).stem().string() + ".pcc";
  // A bad -o fails before the compile (checked again when the plan is written).
  if (Status s = checkBundleTarget(out); !s.ok() && (opts.emit.empty() || !opts.outputPath.empty())) return fail(s);

  // Progress goes live to a terminal; otherwise it is held back and shown
  // only on success, so a failure prints exactly one line.
  bool tty = isatty(STDERR_FILENO);
  std::ostringstream held;
  auto c = compileModel(opts, tty ? static_cast<std::ostream*>(&std::cerr) : &held);
  if (!c.ok()) return fail(c.status());

  // The process ends once the plan is out: the compilation is kept, not freed
  // piece by piece (freeing a 64-rank plan's graphs and programs took a tenth
  // of its compile). Held by a static pointer, it is not a leak.
  static Compilation* kept = nullptr;
  kept = new Compilation(std::move(c).value());
  const Compilation* cp = kept;
  if (opts.emit == "ir") std::cout << emitIr(*cp);
  if (opts.emit == "report") std::cout << planReportText(cp->plan.plan);
  if (opts.emit == "json") std::cout << planReportJson(cp->plan.plan);
  if (!opts.emit.empty() && opts.outputPath.empty()) {
    std::cerr << held.str();
    return 0;
  }

  WeightWriteProgress progress(tty && !opts.quiet, progressLines);
  if (Status s = writeEmittedPlan(out, cp->plan, progress.callback()); !s.ok()) return fail(s);  // one line: progress held back
  progress.end();
  std::cerr << held.str();
  if (!opts.quiet) std::cerr << "pcc: wrote " << out << " (" << cp->ranks.size() << " ranks)\n";
  return 0;
}

int main(int argc, char** argv) {
  return pcc::cli::finishStdout("pcc", pcc::cli::guardedMain("pcc", [&] { return toolMain(argc, argv); }));
}
