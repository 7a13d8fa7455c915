// pcc-report: explain a plan bundle: mesh, per-rank operators, FLOPs, weight
// and activation bytes, communication by collective.
#include <fstream>
#include <iostream>

#include "codegen/plan_report.h"
#include "runtime/plan_io.h"

using namespace pcc;

namespace {
const char kUsage[] = R"(usage: pcc-report PLAN.pcc [--format text|json] [-o FILE]

Prints the partition report of a plan bundle written by pcc.
exit codes: 0 ok, 2 bad input or usage, 3 internal error
)";

int fail(const Status& s) {
  std::cerr << "pcc-report: error: " << s.message() << "\n";
  return s.exitCode();
}
}  // namespace

int main(int argc, char** argv) {
  std::string planDir, format = "text", outPath;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--format" && i + 1 < argc) {
      format = argv[++i];
      if (format != "text" && format != "json")
        return fail(invalidInput("--format expects text or json (html and dot are not implemented yet)"));
    } else if (a == "-o" && i + 1 < argc) {
      outPath = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      return fail(invalidInput("unknown option '", a, "' (see pcc-report --help)"));
    } else if (planDir.empty()) {
      planDir = a;
    } else {
      return fail(invalidInput("more than one plan given"));
    }
  }
  if (planDir.empty()) return fail(invalidInput("no plan given (see pcc-report --help)"));
  auto p = loadPlanBundle(planDir);
  if (!p.ok()) return fail(p.status());
  std::string text = format == "json" ? planReportJson(p->plan) : planReportText(p->plan);
  if (outPath.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream f(outPath);
  if (!(f << text)) return fail(invalidInput(outPath, ": cannot write"));
  return 0;
}
