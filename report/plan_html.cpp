// The HTML report.
//
// 1. Summary: model, mesh, device, objective, estimates, from the plan and its
//    search report.
// 2. The graph: Graphviz's SVG with the XML prologue cut off, or a notice and
//    the dot source when there is no SVG.
// 3. Per-rank bars: estimated time (compute, communication) from the chosen
//    mesh's estimates, scaled to the slowest rank; memory (weights, the
//    planned activation arena) from the rank programs, scaled to the device's
//    capacity when the plan records it and the largest rank holds at least 1%
//    of it, else to the largest rank.
// 4. Tables: the ranks, the collectives of each rank (report.json's
//    "collectives"), the meshes the search considered; a converted plan's
//    precision and error; then the notes and the
//    tensor-parallel choices.
#include "report/plan_html.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "report/plan_dot.h"
#include "report/plan_report.h"
#include "report/text_escape.h"

namespace pcc {

namespace {

const char kStyle[] = R"css(
body { font-family: Helvetica, Arial, sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ccc; padding-bottom: 3px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.bars td { white-space: nowrap; }
table.summary th { width: 160px; }
.graph { border: 1px solid #ccc; overflow: auto; max-height: 900px; background: #fff; }
.graph svg { display: block; }
.warning { background: #fff3cd; border: 1px solid #e0c36a; padding: 8px; margin: 8px 0; }
pre.dot { font-size: 11px; background: #f7f7f7; padding: 8px; overflow: auto; max-height: 600px; }
.bars td { border: none; padding: 2px 6px; }
.track { position: relative; width: 520px; height: 16px; background: #f4f4f4; border: 1px solid #ddd; }
.seg { position: absolute; top: 0; height: 100%; }
.compute { background: #4f81bd; }
.comm { background: #fc9272; }
.weights { background: #7f7f7f; }
.acts { background: #9ecae1; }
.cap { position: absolute; top: -3px; height: 22px; border-left: 2px solid #cb181d; }
.key { display: inline-block; width: 12px; height: 12px; vertical-align: middle; margin: 0 4px 0 12px; }
.chosen { background: #e5f5e0; }
.infeasible { color: #a50f15; }
ul.notes li { margin-bottom: 3px; }
)css";

// Three significant digits, without an exponent below 10^6.
std::string num(double v, const char* format = nullptr) {
  char buf[64];
  if (format) std::snprintf(buf, sizeof buf, format, v);
  else if (v >= 1000 && v < 1e6) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string meshText(const plan::Mesh& m) { return strCat("dp=", m.dp(), " tp=", m.tp(), " pp=", m.pp()); }

std::string pct(double part, double whole) { return whole > 0 ? num(100.0 * part / whole, "%.3g") + "%" : "0%"; }

// A bar segment from `start` to `start + width`, both fractions of the track.
std::string segment(const char* cls, double start, double width) {
  return strCat("<div class=\"seg ", cls, "\" style=\"left:", num(100 * start, "%.3f"), "%;width:",
                num(100 * width, "%.3f"), "%\"></div>");
}

void summary(const plan::Plan& p, std::ostringstream& o) {
  o << "<table class=\"summary\">\n";
  auto row = [&](const std::string& k, const std::string& escapedValue) {
    o << "<tr><th>" << k << "</th><td>" << escapedValue << "</td></tr>\n";
  };
  row("model", htmlEscaped(p.model()));
  row("producer", htmlEscaped(p.producer()));
  row("mesh", htmlEscaped(strCat(meshText(p.mesh()), " (", p.ranks_size(), " rank", p.ranks_size() == 1 ? "" : "s",
                                 ")")));
  if (!p.has_search() || p.search().candidates_size() == 0) {
    row("estimates", "none: this plan was made before the cost model recorded its search");
  } else {
    const plan::SearchReport& r = p.search();
    const plan::MeshEstimate& best = r.candidates(0);
    std::string device = strCat(r.device(), " (", r.device_description(), "), ", r.gpus_per_node(), " per node");
    if (r.device_memory_bytes() > 0) device += strCat(", ", humanBytes(r.device_memory_bytes()), " usable per device");
    row("device", htmlEscaped(device));
    row("objective", htmlEscaped(r.objective()));
    row("estimated time", htmlEscaped(strCat(num(best.estimated_time_ms()), " ms per batch (",
                                             num(best.samples_per_second()), " samples/s)")));
    row("search", htmlEscaped(strCat(r.candidates_size(), " mesh", r.candidates_size() == 1 ? "" : "es",
                                     " costed in ", num(r.search_time_ms()), " ms")));
    if (best.mesh().pp() > 1) {
      std::string stages;
      for (int i = 0; i < best.stage_ms_size(); ++i)
        stages += strCat(i ? ", " : "", "stage ", i, " ", num(best.stage_ms(i)), " ms");
      row("pipeline", htmlEscaped(strCat(best.mesh().pp(), " stages, ", std::max(1, best.microbatches()),
                                         " micro-batches, fill-drain; per micro-batch ", stages,
                                         "; predicted bubble ", num(best.bubble() * 100), "%")));
    }
  }
  o << "</table>\n";
}

void graph(const std::string& dotSource, const StatusOr<std::string>& svg, std::ostringstream& o) {
  o << "<h2 id=\"graph\">Graph</h2>\n";
  if (svg.ok()) {
    const std::string& s = *svg;
    size_t start = s.find("<svg");
    o << "<div class=\"graph\">\n" << s.substr(start == std::string::npos ? 0 : start) << "</div>\n";
    return;
  }
  o << "<div class=\"warning\">The graph could not be drawn: " << htmlEscaped(svg.status().message())
    << ". Its Graphviz source follows; <code>dot -Tsvg</code> draws it.</div>\n";
  o << "<pre class=\"dot\">" << htmlEscaped(dotSource) << "</pre>\n";
}

void timeBars(const plan::Plan& p, std::ostringstream& o) {
  o << "<h2 id=\"time\">Estimated time per rank</h2>\n";
  if (!p.has_search() || p.search().candidates_size() == 0) {
    o << "<p>This plan holds no estimates.</p>\n";
    return;
  }
  const plan::MeshEstimate& best = p.search().candidates(0);
  double slowest = 0;
  for (const plan::RankEstimate& r : best.ranks()) slowest = std::max(slowest, r.compute_ms() + r.comm_ms());
  const char* unit = best.microbatches() > 1 ? "one micro-batch (one run of the rank's program)" : "one batch";
  o << "<p><span class=\"key compute\"></span>compute<span class=\"key comm\"></span>communication "
       "&nbsp; (the cost model's estimate for "
    << unit << "; the longest bar is the slowest rank)</p>\n";
  o << "<table class=\"bars\">\n";
  for (const plan::RankEstimate& r : best.ranks()) {
    double total = r.compute_ms() + r.comm_ms();
    double scale = slowest > 0 ? slowest : 1;
    o << "<tr><td>rank " << r.rank() << "</td><td><div class=\"track\">" << segment("compute", 0, r.compute_ms() / scale)
      << segment("comm", r.compute_ms() / scale, r.comm_ms() / scale) << "</div></td><td>" << num(total)
      << " ms (compute " << num(r.compute_ms()) << ", communication " << num(r.comm_ms()) << ")</td></tr>\n";
  }
  o << "</table>\n";
}

void memoryBars(const plan::Plan& p, const PlanStats& s, std::ostringstream& o) {
  o << "<h2 id=\"memory\">Memory per rank</h2>\n";
  auto activations = [](const RankStats& r) { return r.arenaBytes > 0 ? r.arenaBytes : r.peakActivationBytes; };
  int64_t largest = 0;
  for (const RankStats& r : s.ranks) largest = std::max(largest, r.weightBytes + activations(r));
  int64_t capacity = p.has_search() ? p.search().device_memory_bytes() : 0;
  double scale = static_cast<double>(std::max<int64_t>(largest, 1));
  bool toCapacity = capacity > 0 && largest * 100 >= capacity;
  if (toCapacity) scale = static_cast<double>(std::max(largest, capacity));
  o << "<p><span class=\"key weights\"></span>weights<span class=\"key acts\"></span>activations (the planned "
       "arena)";
  if (toCapacity) o << "<span class=\"key\" style=\"border-left:2px solid #cb181d\"></span>device capacity ("
                    << humanBytes(capacity) << " usable)";
  o << "</p>\n";
  if (capacity > 0 && !toCapacity)
    o << "<p>Scaled to the largest rank: it holds " << humanBytes(largest) << ", " << pct(double(largest), double(capacity))
      << " of the " << humanBytes(capacity) << " a device may use.</p>\n";
  if (capacity <= 0) o << "<p>The plan does not record the device's capacity.</p>\n";
  o << "<table class=\"bars\">\n";
  for (const RankStats& r : s.ranks) {
    int64_t total = r.weightBytes + activations(r);
    o << "<tr><td>rank " << r.rank << "</td><td><div class=\"track\">" << segment("weights", 0, r.weightBytes / scale)
      << segment("acts", r.weightBytes / scale, activations(r) / scale);
    if (toCapacity) o << "<div class=\"cap\" style=\"left:" << num(100.0 * capacity / scale, "%.3f") << "%\"></div>";
    o << "</div></td><td>" << humanBytes(total) << " (weights " << humanBytes(r.weightBytes) << ", activations "
      << humanBytes(activations(r)) << ")";
    if (capacity > 0) o << ", " << pct(double(total), double(capacity)) << " of capacity";
    o << "</td></tr>\n";
  }
  o << "</table>\n";
}

void rankTable(const PlanStats& s, std::ostringstream& o) {
  o << "<h2 id=\"ranks\">Ranks</h2>\n<table>\n<tr><th>rank</th><th>(pp,dp,tp)</th><th>stage</th><th>kernels</th><th>GFLOP</th><th>weights</th>"
       "<th>peak activations</th><th>arena</th><th>operators</th></tr>\n";
  for (const RankStats& r : s.ranks) {
    int kernels = 0;
    std::string ops;
    for (const auto& entry : r.opCounts) {
      kernels += entry.second;
      ops += strCat(ops.empty() ? "" : ", ", entry.first, " x", entry.second);
    }
    std::string coord;
    for (int c : r.meshCoord) coord += strCat(coord.empty() ? "" : ",", c);
    o << "<tr><td class=\"num\">" << r.rank << "</td><td>(" << coord << ")</td><td class=\"num\">" << r.stage
      << "</td><td class=\"num\">" << kernels
      << "</td><td class=\"num\">" << num(r.flops / 1e9, "%.4f") << "</td><td class=\"num\">" << humanBytes(r.weightBytes)
      << "</td><td class=\"num\">" << humanBytes(r.peakActivationBytes) << "</td><td class=\"num\">"
      << humanBytes(r.arenaBytes) << "</td><td>" << htmlEscaped(ops) << "</td></tr>\n";
  }
  o << "</table>\n";
}

void collectivesTable(const PlanStats& s, std::ostringstream& o) {
  o << "<h2 id=\"collectives\">Collectives</h2>\n";
  size_t n = 0;
  for (const RankStats& r : s.ranks) n += r.collectives.size();
  if (n == 0) {
    o << "<p>No rank runs a collective.</p>\n";
    return;
  }
  o << "<table class=\"collectives\">\n<tr><th>rank</th><th>kind</th><th>axis</th><th>group size</th><th>bytes</th>"
       "<th>count</th></tr>\n";
  for (const RankStats& r : s.ranks)
    for (const RankStats::Collective& c : r.collectives)
      o << "<tr><td class=\"num\">" << r.rank << "</td><td>" << htmlEscaped(c.kind) << "</td><td>" << htmlEscaped(c.axis)
        << "</td><td class=\"num\">" << c.groupSize << "</td><td class=\"num\">" << humanBytes(c.bytes)
        << "</td><td class=\"num\">" << c.count << "</td></tr>\n";
  o << "</table>\n";
}

void alternativesTable(const plan::Plan& p, std::ostringstream& o) {
  o << "<h2 id=\"alternatives\">Meshes the search considered</h2>\n";
  if (!p.has_search() || p.search().candidates_size() == 0) {
    o << "<p>This plan holds no search.</p>\n";
    return;
  }
  o << "<table class=\"alternatives\">\n<tr><th>mesh</th><th>estimated time</th><th>samples/s</th>"
       "<th>peak memory per rank</th><th>outcome</th></tr>\n";
  const plan::SearchReport& r = p.search();
  for (int i = 0; i < r.candidates_size(); ++i) {
    const plan::MeshEstimate& e = r.candidates(i);
    o << "<tr" << (i == 0 ? " class=\"chosen\"" : "") << "><td>" << htmlEscaped(meshText(e.mesh())) << "</td>";
    if (!e.error().empty()) {
      o << "<td></td><td></td><td></td><td class=\"infeasible\">cannot be partitioned: " << htmlEscaped(e.error())
        << "</td></tr>\n";
      continue;
    }
    int64_t peak = 0;
    for (const plan::RankEstimate& rk : e.ranks()) peak = std::max(peak, estimatedMemory(rk));
    std::string outcome = i == 0 ? "chosen" : "fits, ranked lower";
    if (!e.infeasible().empty()) outcome = "does not fit: " + e.infeasible();
    o << "<td class=\"num\">" << num(e.estimated_time_ms()) << " ms</td><td class=\"num\">"
      << num(e.samples_per_second()) << "</td><td class=\"num\">" << humanBytes(peak) << "</td><td"
      << (e.infeasible().empty() ? "" : " class=\"infeasible\"") << ">" << htmlEscaped(outcome) << "</td></tr>\n";
  }
  o << "</table>\n";
}

// The batches costed when pcc chose the batch; only plans where it did.
void batchCurveTable(const plan::Plan& p, std::ostringstream& o) {
  if (!p.has_batch() || !p.batch().automatic()) return;
  const plan::BatchReport& b = p.batch();
  o << "<h2 id=\"batch\">Batches considered</h2>\n<p>" << htmlEscaped(b.how()) << "</p>\n";
  o << "<table class=\"alternatives\">\n<tr><th>batch</th><th>mesh</th><th>estimated time</th><th>samples/s</th>"
       "<th>peak memory per rank</th><th>outcome</th></tr>\n";
  for (const plan::BatchPoint& q : b.curve()) {
    bool chosen = q.feasible() && q.batch() == b.batch();
    std::string outcome = chosen ? "chosen" : q.feasible() ? "fits" : "does not fit: " + q.why();
    o << "<tr" << (chosen ? " class=\"chosen\"" : "") << "><td class=\"num\">" << q.batch() << "</td><td>"
      << htmlEscaped(meshText(q.mesh())) << "</td><td class=\"num\">" << num(q.estimated_time_ms())
      << " ms</td><td class=\"num\">" << num(q.samples_per_second()) << "</td><td class=\"num\">"
      << humanBytes(q.memory_bytes()) << "</td><td" << (q.feasible() ? "" : " class=\"infeasible\"") << ">"
      << htmlEscaped(outcome) << "</td></tr>\n";
  }
  o << "</table>\n";
}

// What --precision and --quantize did and the error measured; only
// converted plans.
void precisionSection(const plan::Plan& p, std::ostringstream& o) {
  if (!p.has_precision()) return;
  const plan::PrecisionReport& r = p.precision();
  o << "<h2 id=\"precision\">Precision</h2>\n<p>" << htmlEscaped(precisionLine(r)) << "</p>\n";
  if (r.outputs_size() > 0) {
    o << "<table class=\"alternatives\">\n<tr><th>output</th><th>cosine to float32</th><th>max abs</th>"
         "<th>max rel</th><th>top-1 agreement</th><th>finite</th></tr>\n";
    for (const plan::PrecisionReport::OutputError& e : r.outputs()) {
      char cos[32];
      std::snprintf(cos, sizeof cos, "%.6f", e.cosine());
      o << "<tr><td>" << htmlEscaped(e.name()) << "</td><td class=\"num\">" << cos << "</td><td class=\"num\">"
        << num(e.max_abs()) << "</td><td class=\"num\">" << num(e.max_rel()) << "</td><td class=\"num\">"
        << (e.top1() >= 0 ? num(100 * e.top1()) + "%" : std::string("-")) << "</td><td"
        << (e.finite() ? ">yes" : " class=\"infeasible\">no") << "</td></tr>\n";
    }
    o << "</table>\n";
  }
  if (r.kept_size() > 0) {
    constexpr int kShown = 40;
    o << "<table class=\"alternatives\">\n<tr><th>node kept in float32</th><th>op</th><th>why</th></tr>\n";
    for (int i = 0; i < r.kept_size() && i < kShown; ++i)
      o << "<tr><td>" << htmlEscaped(r.kept(i).node()) << "</td><td>" << htmlEscaped(r.kept(i).op()) << "</td><td>"
        << htmlEscaped(r.kept(i).reason()) << "</td></tr>\n";
    o << "</table>\n";
    if (r.kept_size() > kShown)
      o << "<p>... and " << r.kept_size() - kShown << " more (report.json lists every one).</p>\n";
  }
}

void notes(const plan::Plan& p, std::ostringstream& o) {
  o << "<h2 id=\"notes\">Notes</h2>\n";
  if (p.notes_size() == 0 && p.tensor_parallel_size() == 0) {
    o << "<p>None.</p>\n";
    return;
  }
  o << "<ul class=\"notes\">\n";
  for (const std::string& n : p.notes()) o << "<li>" << htmlEscaped(n) << "</li>\n";
  for (const std::string& t : p.tensor_parallel()) o << "<li>tensor-parallel: " << htmlEscaped(t) << "</li>\n";
  o << "</ul>\n";
}

}  // namespace

std::string planReportHtml(const plan::Plan& p, const std::string& dotSource, const StatusOr<std::string>& svg) {
  PlanStats s = computePlanStats(p);
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>pcc plan: "
    << htmlEscaped(p.model()) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  o << "<h1>pcc plan: " << htmlEscaped(p.model()) << "</h1>\n";
  summary(p, o);
  graph(dotSource, svg, o);
  timeBars(p, o);
  memoryBars(p, s, o);
  rankTable(s, o);
  collectivesTable(s, o);
  alternativesTable(p, o);
  batchCurveTable(p, o);
  precisionSection(p, o);
  notes(p, o);
  o << "</body>\n</html>\n";
  return o.str();
}

}  // namespace pcc
