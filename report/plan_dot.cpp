// The plan's graph in Graphviz dot.
//
// 1. Lay the plan out (planLayout): each reference kernel's split dimensions
//    and axes, the collectives and where they sit, the stages.
// 2. Label the graph with the model, the mesh and a legend: one table cell
//    per layout class in its colour.
// 3. Write one cluster per pipeline stage holding the kernels and collectives
//    of that stage; kernels no rank runs go outside every cluster.
// 4. Write the model inputs and outputs, then the edges: data edges between
//    kernels, producer -> collective -> consumers, inputs and outputs.
// Nodes and edges come in program order, so the output depends on the plan
// alone.
#include "report/plan_dot.h"

#include <sstream>

#include "report/plan_layout.h"
#include "report/plan_report.h"
#include "report/text_escape.h"
#include "runtime/plan_convert.h"
#include "runtime/support/status.h"

namespace pcc {

namespace {

std::string attrClass(const std::string& layoutClass) {
  std::string c = "layout-" + layoutClass;
  for (char& ch : c)
    if (ch == '+') ch = '-';
  return c;
}

std::string splitText(const KernelLayout& k) {
  switch (k.kind) {
    case KernelLayout::Kind::kAbsent: return "not run (folded or fused)";
    case KernelLayout::Kind::kReplicated: return "replicated";
    case KernelLayout::Kind::kSplit: break;
  }
  std::string out;
  for (const DimSplit& s : k.splits) {
    out += out.empty() ? "split " : ", ";
    if (s.dim < 0) out += "shape differs";
    else out += strCat("d", s.dim, " ", s.extent, "->", s.rankExtent, " over ", s.axis);
  }
  return out;
}

std::string kernelNode(int i, const KernelLayout& k) {
  const LayoutStyle& st = styleOf(k.layoutClass());
  std::string label = k.op + "\n" + k.node + "\n" + k.type.str() + "\n" + splitText(k);
  if (!k.fusedAs.empty()) label += "\nrun as " + k.fusedAs + " (rewritten)";
  std::string style = k.kind == KernelLayout::Kind::kAbsent ? "rounded,filled,dashed" : "rounded,filled";
  return strCat("k", i, " [label=", dotQuoted(label), ", fillcolor=\"", st.fill, "\", style=\"", style,
                "\", class=\"", attrClass(st.layoutClass), "\"];\n");
}

std::string collectiveNode(int j, const CollectiveSite& c) {
  std::string over = c.axis == "-" ? "point to point" : strCat("over ", c.axis, " (", c.groupSize, " ranks)");
  std::string label = strCat(c.kind, "\n", over, "\n", humanBytes(c.bytes), " on ", c.rankCount, " rank",
                             c.rankCount == 1 ? "" : "s");
  return strCat("c", j, " [label=", dotQuoted(label), ", shape=hexagon, fillcolor=\"", kCollectiveFill,
                "\", class=\"collective\"];\n");
}

// The graph's label: the title, then the legend, one table cell per layout
// class in its colour (a Graphviz HTML-like label).
std::string titleAndLegend(const plan::Plan& p) {
  std::ostringstream o;
  o << "<<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" cellpadding=\"4\">";
  size_t columns = layoutStyles().size() + 1;
  o << "<tr><td colspan=\"" << columns << "\" border=\"0\"><font point-size=\"14\">" << htmlEscaped(p.model())
    << "</font><br/>"
    << htmlEscaped(strCat("mesh dp=", p.mesh().dp(), " tp=", p.mesh().tp(), " pp=", p.mesh().pp(), ", ",
                          p.ranks_size(), " rank", p.ranks_size() == 1 ? "" : "s"))
    << "</td></tr><tr>";
  for (const LayoutStyle& s : layoutStyles())
    o << "<td bgcolor=\"" << s.fill << "\"" << (s.layoutClass == "absent" ? " style=\"dashed\"" : "") << ">"
      << htmlEscaped(s.layoutClass) << "<br/><font point-size=\"8\">" << htmlEscaped(s.meaning) << "</font></td>";
  o << "<td bgcolor=\"" << kCollectiveFill << "\">collective<br/><font point-size=\"8\">inserted by the "
       "partitioner</font></td></tr></table>>";
  return o.str();
}

}  // namespace

const std::vector<LayoutStyle>& layoutStyles() {
  static const std::vector<LayoutStyle> kStyles = {
      {"replicated", "#e5e5e5", "every rank computes all of it"},
      {"dp", "#9ecae1", "split over dp (the batch)"},
      {"tp", "#fdae6b", "split over tp"},
      {"dp+tp", "#c2a5cf", "split over dp and tp"},
      {"split", "#fee391", "split, axis not recovered"},
      {"absent", "#ffffff", "run by no rank (folded or fused)"},
  };
  return kStyles;
}

const LayoutStyle& styleOf(const std::string& layoutClass) {
  for (const LayoutStyle& s : layoutStyles())
    if (s.layoutClass == layoutClass) return s;
  return layoutStyles()[4];  // "split": an axis that was not recovered
}

std::string planGraphDot(const plan::Plan& p) {
  PlanLayout l = planLayout(p);
  std::ostringstream o;
  o << "digraph plan {\n";
  o << "  graph [label=" << titleAndLegend(p) << ", labelloc=t, fontname=\"Helvetica\", fontsize=11, "
       "nodesep=0.25, ranksep=0.4];\n";
  o << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];\n";
  o << "  edge [color=\"#777777\", arrowsize=0.6];\n";
  // Step 3: the stages.
  for (int stage : l.stages) {
    std::vector<int> ranks;
    for (const plan::RankProgram& r : p.ranks())
      if (r.stage() == stage) ranks.push_back(r.rank());
    std::string ranksText;
    for (int r : ranks) ranksText += strCat(ranksText.empty() ? "" : ",", r);
    o << "  subgraph cluster_stage_" << stage << " {\n";
    o << "    label=" << dotQuoted(strCat("stage ", stage, " (ranks ", ranksText, ")")) << ";\n";
    o << "    style=\"rounded\"; color=\"#aaaaaa\"; fontsize=10;\n";
    for (size_t i = 0; i < l.kernels.size(); ++i)
      if (l.kernels[i].stage == stage) o << "    " << kernelNode(static_cast<int>(i), l.kernels[i]);
    for (size_t j = 0; j < l.collectives.size(); ++j)
      if (l.collectives[j].stage == stage) o << "    " << collectiveNode(static_cast<int>(j), l.collectives[j]);
    o << "  }\n";
  }
  for (size_t i = 0; i < l.kernels.size(); ++i)
    if (l.kernels[i].stage < 0) o << "  " << kernelNode(static_cast<int>(i), l.kernels[i]);
  // Step 4.
  for (int i = 0; i < p.inputs_size(); ++i)
    o << "  in" << i << " [label=" << dotQuoted("input\n" + p.inputs(i).name() + "\n" + fromDesc(p.inputs(i).desc()).str())
      << ", shape=ellipse, style=\"filled\", fillcolor=\"#ffffff\", class=\"input\"];\n";
  for (int i = 0; i < p.outputs_size(); ++i)
    o << "  out" << i
      << " [label=" << dotQuoted("output\n" + p.outputs(i).name() + "\n" + fromDesc(p.outputs(i).desc()).str())
      << ", shape=ellipse, style=\"filled\", fillcolor=\"#ffffff\", class=\"output\"];\n";
  for (size_t i = 0; i < l.inputConsumers.size(); ++i)
    for (int k : l.inputConsumers[i]) o << "  in" << i << " -> k" << k << ";\n";
  for (const auto& e : l.edges) o << "  k" << e.first << " -> k" << e.second << ";\n";
  for (size_t j = 0; j < l.collectives.size(); ++j) {
    const CollectiveSite& c = l.collectives[j];
    if (c.producer >= 0) o << "  k" << c.producer << " -> c" << j << " [color=\"#cb181d\"];\n";
    else if (c.input >= 0) o << "  in" << c.input << " -> c" << j << " [color=\"#cb181d\"];\n";
    for (int k : c.consumers) o << "  c" << j << " -> k" << k << " [color=\"#cb181d\"];\n";
    for (int out : c.outputs) o << "  c" << j << " -> out" << out << " [color=\"#cb181d\"];\n";
  }
  for (size_t i = 0; i < l.outputProducers.size(); ++i)
    if (l.outputProducers[i] >= 0) o << "  k" << l.outputProducers[i] << " -> out" << i << ";\n";
  o << "}\n";
  return o.str();
}

}  // namespace pcc
