#include "compiler/precision_error.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <unordered_set>

#include "compiler/eval/evaluator.h"
#include "runtime/npy_files.h"
#include "runtime/support/tensor_block.h"

namespace pcc {

namespace {

bool isFloatType(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64; }

void note(std::map<std::string, double>& ranges, const std::string& name, double m) {
  double& r = ranges[name];
  r = std::max(r, m);
}

/// Whether output `v` holds class scores or token logits, whose argmax is
/// the answer: its name says so (logits, scores, probs, class), or Softmax or
/// LogSoftmax computes it.
bool holdsScores(const Value& v) {
  std::string n = v.name();
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* w : {"logit", "score", "prob", "class"})
    if (n.find(w) != std::string::npos) return true;
  const Node* p = v.producer();
  return p && (p->op() == OpKind::Softmax || p->op() == OpKind::LogSoftmax);
}

}  // namespace

StatusOr<std::vector<std::vector<Tensor>>> calibrationSets(const Graph& g, const std::string& dir, int seeded) {
  std::vector<std::vector<Tensor>> sets;
  if (dir.empty()) {
    for (int k = 0; k < seeded; ++k) sets.push_back(randomInputs(g, 1000 + static_cast<uint64_t>(k)));
    return sets;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return invalidInput(dir, ": --calibration-inputs: not a folder");
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string p = e.path().string();
    if ((e.is_regular_file() && e.path().extension() == ".npz") || (e.is_directory() && holdsNpyFiles(p)))
      paths.push_back(p);
  }
  if (ec) return invalidInput(dir, ": --calibration-inputs: ", ec.message());
  std::sort(paths.begin(), paths.end());
  if (paths.empty())
    return invalidInput(dir, ": --calibration-inputs: no input sets (each set is an .npz file or a folder of NAME.npy "
                             "files)");
  for (size_t k = 0; k < paths.size(); ++k) {
    std::map<std::string, std::string> sources;
    ASSIGN_OR_RETURN(NamedTensors named, readNamedTensors(paths[k], &sources));
    std::vector<Tensor> seededSet = randomInputs(g, 1000 + k);
    std::vector<Tensor> set;
    std::unordered_set<std::string> used;
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const Value* in = g.inputs()[i];
      auto it = named.find(in->name());
      if (it == named.end()) {
        set.push_back(seededSet[i]);
        continue;
      }
      if (it->second.type() != in->type())
        return invalidInput(sources.count(in->name()) ? sources[in->name()] : paths[k], ": input '", in->name(),
                            "' is ", it->second.type().str(), ", the model takes ", in->type().str());
      used.insert(in->name());
      set.push_back(it->second);
    }
    for (const auto& e : named)
      if (!used.count(e.first))
        return invalidInput(sources.count(e.first) ? sources[e.first] : paths[k], ": the model has no input '",
                            e.first, "'");
    sets.push_back(std::move(set));
  }
  return sets;
}

StatusOr<std::map<std::string, double>> measureRanges(const Graph& g, const std::vector<std::vector<Tensor>>& sets,
                                                      std::vector<std::vector<Tensor>>* outputs) {
  std::map<std::string, double> ranges;
  for (const Value* c : g.constants())
    if (isFloatType(c->type().dtype)) note(ranges, c->name(), maxFiniteMagnitude(c->constantData()));
  for (const std::vector<Tensor>& set : sets) {
    for (size_t i = 0; i < set.size() && i < g.inputs().size(); ++i)
      if (isFloatType(set[i].dtype())) note(ranges, g.inputs()[i]->name(), maxFiniteMagnitude(set[i]));
    auto r = evaluateGraphObserved(g, set, [&](const Node& n, const std::vector<Tensor>& outs) {
      for (size_t k = 0; k < outs.size() && k < n.outputs().size(); ++k)
        if (isFloatType(outs[k].dtype())) note(ranges, n.output(k)->name(), maxFiniteMagnitude(outs[k]));
    });
    RETURN_IF_ERROR(r.status());
    if (outputs) outputs->push_back(std::move(r).value());
  }
  return ranges;
}

StatusOr<std::vector<OutputError>> measureError(const Graph& original, const Graph& converted,
                                                const std::vector<std::vector<Tensor>>& sets,
                                                const std::vector<std::vector<Tensor>>* want) {
  if (original.outputs().size() != converted.outputs().size())
    return internalError("the converted graph has ", converted.outputs().size(), " outputs, the original ",
                         original.outputs().size());
  std::vector<OutputError> errs(original.outputs().size());
  std::vector<int64_t> rows(errs.size(), 0), agree(errs.size(), 0);
  for (size_t si = 0; si < sets.size(); ++si) {
    const std::vector<Tensor>& set = sets[si];
    std::vector<Tensor> computed;
    if (!want) {
      ASSIGN_OR_RETURN(computed, evaluateGraph(original, set));
    }
    const std::vector<Tensor>& ref = want ? (*want)[si] : computed;
    // Inputs the conversion retyped (a generation plan's cache states) are
    // given rounded to their new type.
    std::vector<Tensor> in = set;
    for (size_t i = 0; i < in.size() && i < converted.inputs().size(); ++i)
      if (in[i].dtype() != converted.inputs()[i]->type().dtype &&
          convertibleFloats(in[i].dtype(), converted.inputs()[i]->type().dtype))
        in[i] = convertFloats(in[i], converted.inputs()[i]->type().dtype);
    ASSIGN_OR_RETURN(std::vector<Tensor> got, evaluateGraph(converted, in));
    for (size_t k = 0; k < ref.size(); ++k) {
      OutputError& e = errs[k];
      e.name = original.outputs()[k]->name();
      const Tensor& a = got[k];
      const Tensor& b = ref[k];
      if (!isFloatType(b.dtype()) || a.numel() != b.numel()) continue;
      double dot = 0, na = 0, nb = 0, maxB = 0, maxAbs = 0;
      bool finite = true;
      const int64_t n = b.numel();
      for (int64_t i = 0; i < n; ++i) {
        const double x = a.getDouble(i), y = b.getDouble(i);
        if (!std::isfinite(x)) finite = false;
        dot += x * y;
        na += x * x;
        nb += y * y;
        maxB = std::max(maxB, std::fabs(y));
        const double d = std::fabs(x - y);
        if (d > maxAbs || std::isnan(d)) maxAbs = std::isnan(d) ? INFINITY : d;
      }
      double cosine = na == 0 && nb == 0 ? 1 : (na == 0 || nb == 0 ? 0 : dot / std::sqrt(na * nb));
      if (!finite) cosine = NAN;
      e.finite &= finite;
      e.maxAbs = std::max(e.maxAbs, maxAbs);
      if (maxB > 0) e.maxRel = std::max(e.maxRel, maxAbs / maxB);
      if (std::isnan(cosine) || std::isnan(e.cosine)) e.cosine = NAN;
      else e.cosine = std::min(e.cosine, cosine);
      const Dims& s = b.shape();
      if (s.size() >= 2 && s.back() >= 2 && holdsScores(*original.outputs()[k])) {
        const int64_t w = s.back(), r = n / w;
        for (int64_t row = 0; row < r; ++row) {
          int64_t ia = 0, ib = 0;
          for (int64_t j = 1; j < w; ++j) {
            if (a.getDouble(row * w + j) > a.getDouble(row * w + ia)) ia = j;
            if (b.getDouble(row * w + j) > b.getDouble(row * w + ib)) ib = j;
          }
          agree[k] += ia == ib;
        }
        rows[k] += r;
      }
    }
  }
  std::vector<OutputError> out;
  for (size_t k = 0; k < errs.size(); ++k) {
    if (!isFloatType(original.outputs()[k]->type().dtype)) continue;
    if (rows[k] > 0) errs[k].top1 = static_cast<double>(agree[k]) / static_cast<double>(rows[k]);
    out.push_back(errs[k]);
  }
  return out;
}

std::string upstreamOps(const Graph& g, const std::string& name, DType target) {
  const Value* out = g.findValue(name);
  std::map<std::string, int> counts;
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack;
  if (out && out->producer()) stack.push_back(out->producer());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    bool inTarget = false;
    for (const Value* o : n->outputs()) inTarget |= o->type().dtype == target;
    if (inTarget && n->op() != OpKind::Cast) ++counts[std::string(n->opName())];
    for (const Value* v : n->inputs())
      if (v && v->producer()) stack.push_back(v->producer());
  }
  std::vector<std::pair<int, std::string>> byCount;
  for (const auto& [op, c] : counts) byCount.emplace_back(-c, op);
  std::sort(byCount.begin(), byCount.end());
  std::string s;
  for (size_t i = 0; i < byCount.size() && i < 6; ++i)
    s += strCat(i ? ", " : "", byCount[i].second, " x", -byCount[i].first);
  if (byCount.size() > 6) s += strCat(" and ", byCount.size() - 6, " more kinds");
  return s.empty() ? "none" : s;
}

}  // namespace pcc
