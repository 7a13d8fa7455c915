// The plan report as one self-contained HTML page: summary, the graph
// (report/plan_dot.h drawn as inline SVG), per-rank time and memory bars, the
// collectives, the meshes the search considered, the notes.
#pragma once

#include <string>

#include "runtime/plan.pb.h"
#include "runtime/support/status.h"

namespace pcc {

/// \returns the HTML page of `p`.
/// \param dotSource the graph of `p` in dot (planGraphDot).
/// \param svg that graph drawn by Graphviz, or why it could not be: then the
///   page says so and shows `dotSource` instead.
/// Every string from the plan is escaped; the page loads nothing from
/// elsewhere (no scripts, style sheets, fonts or images outside it).
std::string planReportHtml(const plan::Plan& p, const std::string& dotSource, const StatusOr<std::string>& svg);

}  // namespace pcc
