// pcc-report: explain a plan bundle: mesh, per-rank operators, FLOPs, weight
// and activation bytes, communication by collective; as text, JSON, the graph
// in Graphviz dot, or one HTML page.
#include <iostream>

#include "report/graphviz.h"
#include "report/plan_costs.h"
#include "report/plan_dot.h"
#include "report/plan_html.h"
#include "report/plan_report.h"
#include "runtime/plan_io.h"
#include "tools/atomic_write.h"
#include "tools/cli.h"

using namespace pcc;

namespace {
const char kAbout[] = "Prints the partition report of a plan bundle written by pcc.";
const char kFooter[] = "exit codes: 0 ok, 2 bad input or usage, 3 internal error, 4 out of memory";

int fail(const Status& s) {
  return cli::printError("pcc-report: error: ", s.message(), s.exitCode());
}
}  // namespace

int toolMain(int argc, char** argv) {
  std::string planDir, format = "text", outPath;
  CLI::App app(kAbout, "pcc-report");
  cli::setDefaults(app, kFooter);
  app.add_option("PLAN.pcc", planDir, "the plan bundle written by pcc")->type_name("");
  cli::addChoice(app, "--format", format, {"text", "json", "dot", "html", "costs"},
                 "report format (default text): text, json, dot (the graph in Graphviz dot), html (one page with the "
                 "graph drawn by Graphviz's dot program), costs (JSON: the cost model's estimate of every "
                 "instruction of every rank)");
  app.add_option("-o,--output", outPath, "write the report to FILE instead of stdout")->type_name("FILE");
  auto extras = [&](const std::vector<std::string>& rest) { return cli::describeExtras(rest, "plan", planDir); };
  if (auto code = cli::parse(app, argc, argv, "pcc-report: error: ", extras)) return *code;
  if (planDir.empty()) return fail(invalidInput("no plan given (see pcc-report --help)"));
  auto p = loadPlanBundle(planDir);
  if (!p.ok()) return fail(p.status());
  std::string text;
  if (format == "json") {
    text = planReportJson(p->plan);
  } else if (format == "costs") {
    text = planCostsJson(p->plan);
  } else if (format == "dot") {
    text = planGraphDot(p->plan);
  } else if (format == "html") {
    std::string dot = planGraphDot(p->plan);
    StatusOr<std::string> svg = renderDotToSvg(dot);
    // The page says why and carries the dot source instead: still a report.
    if (!svg.ok()) std::cerr << "pcc-report: warning: no graph drawn: " << svg.status().message() << "\n";
    text = planReportHtml(p->plan, dot, svg);
  } else {
    text = planReportText(p->plan);
  }
  if (outPath.empty()) {
    std::cout << text;
    return 0;
  }
  // Whole or not at all: a full disk leaves no empty or truncated report.
  if (Status st = cli::writeFileAtomically(outPath, text); !st.ok()) return fail(st);
  return 0;
}

int main(int argc, char** argv) {
  return pcc::cli::finishStdout("pcc-report", pcc::cli::guardedMain("pcc-report", [&] { return toolMain(argc, argv); }));
}
