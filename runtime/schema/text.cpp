// Type inference (the op schemas) of TfIdfVectorizer. Their reference kernels,
// and what the kernels compute, are runtime/ops/text.cpp.
#include <map>
#include <string>
#include <vector>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/text.h"

namespace pcc {

namespace ops::text_schema {

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

}  // namespace ops::text_schema

namespace {
using namespace ops;
using namespace ops::text_schema;

StatusOr<std::vector<TensorType>> inferTfIdf(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, {DType::kI32, DType::kI64}, "input X"));
  ASSIGN_OR_RETURN(TfIdfConfig c, tfIdfConfig(attrsOf(args)));
  if (x.rank() == 1) return std::vector<TensorType>{{DType::kF32, {c.outputSize}}};
  if (x.rank() == 2) return std::vector<TensorType>{{DType::kF32, {x.shape[0], c.outputSize}}};
  return invalidInput("input X must be [C] or [N, C], got ", x.str());
}

}  // namespace

void registerTextSchemas(SchemaRegistry& r) {
  r.add(OpKind::TfIdfVectorizer, &inferTfIdf);
}

}  // namespace pcc
