// The plan's graph as Graphviz dot: the reference program's kernels coloured
// by how the plan lays them out (report/plan_layout.h), the collectives the
// partitioner inserted, one cluster per pipeline stage, and a legend.
#pragma once

#include <string>
#include <vector>

#include "runtime/plan.pb.h"

namespace pcc {

/// How the graph draws one layout class (KernelLayout::layoutClass).
struct LayoutStyle {
  std::string layoutClass;  ///< "replicated", "dp", "tp", "dp+tp", "split", "absent"
  std::string fill;         ///< fill colour, "#rrggbb"
  std::string meaning;      ///< for the legend
};

/// \returns the styles of the graph's layout classes, in legend order; any
/// class with an unknown axis ("?", "tp+?", ...) is drawn as "split".
const std::vector<LayoutStyle>& layoutStyles();

/// \returns the style `layoutClass` is drawn with.
const LayoutStyle& styleOf(const std::string& layoutClass);

/// The fill colour of a collective's node.
inline constexpr const char* kCollectiveFill = "#fc9272";

/// \returns the graph of `p` in dot. Kernel i of the reference program is node
/// `k<i>`, collective j is `c<j>`, model input and output i are `in<i>` and
/// `out<i>`; each node's `class` attribute names its layout ("layout-tp",
/// "collective", ...). Every string from the plan is escaped; the same plan
/// gives the same bytes.
std::string planGraphDot(const plan::Plan& p);

}  // namespace pcc
