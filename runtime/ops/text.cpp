// Text featurization: TfIdfVectorizer over integer token ids (string pools are
// out of scope: pcc has no string tensors).
//
// The pool holds n-grams grouped by length: ngram_counts[k] is where the
// (k+1)-grams start. N-gram j of the pool (in pool order) counts into output
// column ngram_indexes[j]. For each row, for each skip distance d in
// 1..max_skip_count+1, for each start s, the tokens s, s+d, ..., s+(n-1)d form
// an n-gram for n in [min_gram_length, max_gram_length]; each one found in the
// pool is counted. Unigrams do not depend on d and are counted once.
#include <map>
#include <string>
#include <vector>

#include "runtime/ops/op_util.h"

namespace pcc {
namespace {
using namespace ops;

enum class TfIdfMode { kTF, kIDF, kTFIDF };

struct TfIdfConfig {
  TfIdfMode mode = TfIdfMode::kTF;
  int64_t minGram = 0, maxGram = 0, maxSkip = 0, outputSize = 0;
  std::vector<float> weights;
  std::map<std::vector<int64_t>, int64_t> grams;  ///< n-gram -> output column
};

/// \returns the configuration described by the attributes, or an error naming
/// the attribute at fault.
StatusOr<TfIdfConfig> tfIdfConfig(const AttrMap& a) {
  TfIdfConfig c;
  std::string mode = a.getString("mode", "");
  if (mode == "TF") c.mode = TfIdfMode::kTF;
  else if (mode == "IDF") c.mode = TfIdfMode::kIDF;
  else if (mode == "TFIDF") c.mode = TfIdfMode::kTFIDF;
  else return invalidInput("mode must be TF, IDF or TFIDF, got '", mode, "'");
  if (a.has("pool_strings")) return unsupported("pool_strings (pcc has no string tensors)");
  c.minGram = a.getInt("min_gram_length", 0);
  c.maxGram = a.getInt("max_gram_length", 0);
  c.maxSkip = a.getInt("max_skip_count", 0);
  if (c.minGram < 1 || c.maxGram < c.minGram)
    return invalidInput("need 1 <= min_gram_length <= max_gram_length, got ", c.minGram, " and ",
                        c.maxGram);
  if (c.maxSkip < 0) return invalidInput("max_skip_count must be >= 0, got ", c.maxSkip);
  std::vector<int64_t> pool = a.getInts("pool_int64s"), counts = a.getInts("ngram_counts"),
                       indexes = a.getInts("ngram_indexes");
  c.weights = a.getFloats("weights");
  if (indexes.empty()) return invalidInput("ngram_indexes must not be empty");
  for (int64_t i : indexes) {
    if (i < 0) return invalidInput("ngram_indexes must be >= 0, got ", i);
    c.outputSize = std::max(c.outputSize, i + 1);
  }
  if (!c.weights.empty() && static_cast<int64_t>(c.weights.size()) < c.outputSize)
    return invalidInput("weights has ", c.weights.size(), " values for ", c.outputSize, " output columns");
  size_t ngram = 0;  // ordinal of the next n-gram of the pool
  for (size_t k = 0; k < counts.size(); ++k) {
    int64_t begin = counts[k], end = k + 1 < counts.size() ? counts[k + 1] : static_cast<int64_t>(pool.size());
    int64_t n = static_cast<int64_t>(k) + 1;
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % n != 0)
      return invalidInput("ngram_counts ", dimsToString(counts), " does not split the pool of ",
                          pool.size(), " ids into groups of 1-grams, 2-grams, ...");
    for (int64_t s = begin; s < end; s += n, ++ngram) {
      if (ngram >= indexes.size())
        return invalidInput("ngram_indexes has ", indexes.size(), " entries, the pool holds more n-grams");
      if (n >= c.minGram && n <= c.maxGram)
        c.grams.emplace(std::vector<int64_t>(pool.begin() + s, pool.begin() + s + n), indexes[ngram]);
    }
  }
  if (ngram != indexes.size())
    return invalidInput("ngram_indexes has ", indexes.size(), " entries for ", ngram, " n-grams in the pool");
  return c;
}

StatusOr<std::vector<TensorType>> inferTfIdf(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, {DType::kI32, DType::kI64}, "input X"));
  ASSIGN_OR_RETURN(TfIdfConfig c, tfIdfConfig(attrsOf(args)));
  if (x.rank() == 1) return std::vector<TensorType>{{DType::kF32, {c.outputSize}}};
  if (x.rank() == 2) return std::vector<TensorType>{{DType::kF32, {x.shape[0], c.outputSize}}};
  return invalidInput("input X must be [C] or [N, C], got ", x.str());
}

Status computeTfIdf(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(TfIdfConfig c, tfIdfConfig(attrs));
  const Tensor& x = *in[0];
  int64_t rows = x.rank() == 2 ? x.shape()[0] : 1, width = x.shape().back();
  std::vector<int64_t> counts(static_cast<size_t>(rows * c.outputSize), 0);
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t* rowCounts = counts.data() + r * c.outputSize;
    int64_t firstN = c.minGram;
    for (int64_t d = 1; d <= c.maxSkip + 1 && firstN <= c.maxGram; ++d) {
      for (int64_t s = 0; s < width; ++s) {
        gram.clear();
        for (int64_t n = 1; n <= c.maxGram && s + (n - 1) * d < width; ++n) {
          gram.push_back(x.getInt(r * width + s + (n - 1) * d));
          if (n < firstN) continue;
          auto it = c.grams.find(gram);
          if (it != c.grams.end()) ++rowCounts[it->second];
        }
      }
      if (firstN == 1) firstN = 2;  // unigrams are the same at every skip distance
    }
  }
  Dims shape = x.rank() == 2 ? Dims{rows, c.outputSize} : Dims{c.outputSize};
  Tensor y = Tensor::zeros(DType::kF32, shape);
  float* o = y.mutableData<float>();
  for (size_t i = 0; i < counts.size(); ++i) {
    float w = c.weights.empty() ? 1.0f : c.weights[i % static_cast<size_t>(c.outputSize)];
    double f = static_cast<double>(counts[i]);
    switch (c.mode) {
      case TfIdfMode::kTF: o[i] = static_cast<float>(f); break;
      case TfIdfMode::kIDF: o[i] = f > 0 ? w : 0.0f; break;
      case TfIdfMode::kTFIDF: o[i] = static_cast<float>(w * f); break;
    }
  }
  out.push_back(std::move(y));
  return Status::OK();
}

}  // namespace

void registerTextOps(OpRegistry& r) { r.add({"TfIdfVectorizer", &inferTfIdf, &computeTfIdf}); }

}  // namespace pcc
