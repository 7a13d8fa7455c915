// Type inference (the op schemas) of Einsum. Their reference kernels, and what
// the kernels compute, are runtime/ops/reduce_norm_einsum.cpp.
#include <algorithm>
#include <array>
#include <string>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/reduce_norm_einsum.h"

namespace pcc {

namespace ops::reduce_norm_einsum_schema {

int letterLabel(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
  return -1;
}

StatusOr<std::vector<int>> parseTerm(const std::string& term, int64_t rank, int64_t maxEllipsis, bool isOutput,
                                     int64_t* ellipsisRank) {
  std::vector<int> labels;
  int64_t letters = 0;
  bool hasEllipsis = false;
  for (size_t i = 0; i < term.size(); ++i)
    if (term[i] != '.') ++letters;
  if (term.find("...") != std::string::npos) hasEllipsis = true;
  int64_t ell = hasEllipsis ? (isOutput ? maxEllipsis : rank - letters) : 0;
  if (ell < 0 || (!isOutput && !hasEllipsis && letters != rank))
    return invalidInput("term '", term, "' does not match an operand of rank ", rank);
  if (ellipsisRank) *ellipsisRank = ell;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '.') {
      if (term.compare(i, 3, "...") != 0) return invalidInput("stray '.' in term '", term, "'");
      for (int64_t k = 0; k < ell; ++k) labels.push_back(kLetters + static_cast<int>(maxEllipsis - ell + k));
      i += 2;
      continue;
    }
    int l = letterLabel(term[i]);
    if (l < 0) return invalidInput("bad character '", term[i], "' in term '", term, "'");
    labels.push_back(l);
  }
  return labels;
}

StatusOr<EinsumPlan> planEinsum(const std::string& equation, const std::vector<Dims>& shapes) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != shapes.size())
    return invalidInput("equation '", equation, "' has ", terms.size(), " operands, the node ", shapes.size());
  EinsumPlan p;
  int64_t maxEll = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t letters = static_cast<int64_t>(std::count_if(terms[i].begin(), terms[i].end(), [](char ch) { return ch != '.'; }));
    if (terms[i].find("...") != std::string::npos)
      maxEll = std::max(maxEll, static_cast<int64_t>(shapes[i].size()) - letters);
  }
  p.numLabels = kLetters + static_cast<int>(maxEll);
  p.sizes.assign(p.numLabels, 0);
  std::vector<int> uses(p.numLabels, 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t rank = static_cast<int64_t>(shapes[i].size());
    // Ellipsis labels are right-aligned: an operand's own ellipsis takes the last ones.
    int64_t ell = 0;
    ASSIGN_OR_RETURN(std::vector<int> labels, parseTerm(terms[i], rank, maxEll, false, &ell));
    (void)ell;
    for (size_t d = 0; d < labels.size(); ++d) {
      int l = labels[d];
      ++uses[l];
      int64_t s = shapes[i][d];
      int64_t& known = p.sizes[l];
      if (known == 0 || known == 1) known = std::max(known, s);
      else if (s != known && s != 1)
        return invalidInput("label of operand ", i, " dim ", d, " has size ", s, ", elsewhere ", known);
      if (s == 0) known = 0;  // an empty dim stays empty
    }
    p.operands.push_back(std::move(labels));
  }
  if (arrow != std::string::npos) {
    std::string rhs = eq.substr(arrow + 2);
    ASSIGN_OR_RETURN(p.output, parseTerm(rhs, 0, maxEll, true, nullptr));
    std::vector<bool> seen(p.numLabels, false);
    for (int l : p.output) {
      if (seen[l]) return invalidInput("output label repeated in '", equation, "'");
      if (!uses[l]) return invalidInput("output label not among the inputs of '", equation, "'");
      seen[l] = true;
    }
  } else {
    for (int l = kLetters; l < p.numLabels; ++l) p.output.push_back(l);
    for (int l = 0; l < kLetters; ++l) {
      // Alphabetical order puts upper case before lower case, as in numpy.
      int label = l < 26 ? 26 + l : l - 26;
      if (uses[label] == 1) p.output.push_back(label);
    }
  }
  return p;
}

}  // namespace ops::reduce_norm_einsum_schema

namespace {
using namespace ops;
using namespace ops::reduce_norm_einsum_schema;

StatusOr<std::vector<TensorType>> inferEinsum(const InferArgs& args) {
  if (args.inputs.empty()) return invalidInput("expects at least 1 input");
  RETURN_IF_ERROR(checkArity(args, args.inputs.size(), args.inputs.size()));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kNumericTypes, "input 0"));
  std::vector<Dims> shapes;
  for (const TensorType& t : args.inputs) {
    if (t.dtype != x.dtype) return invalidInput("inputs differ in type: ", typesToString(args.inputs));
    shapes.push_back(t.shape);
  }
  std::string eq = attrsOf(args).getString("equation", "");
  if (eq.empty()) return invalidInput("attribute 'equation' is required");
  ASSIGN_OR_RETURN(EinsumPlan p, planEinsum(eq, shapes));
  Dims out;
  for (int l : p.output) out.push_back(p.sizes[l]);
  return std::vector<TensorType>{{x.dtype, out}};
}

}  // namespace

void registerEinsumSchemas(SchemaRegistry& r) {
  r.add(OpKind::Einsum, &inferEinsum);
}

}  // namespace pcc
