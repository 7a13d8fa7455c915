// Text featurization: TfIdfVectorizer over integer token ids (string pools are
// out of scope: pcc has no string tensors).
//
// The pool holds n-grams grouped by length: ngram_counts[k] is where the
// (k+1)-grams start. N-gram j of the pool (in pool order) counts into output
// column ngram_indexes[j]. For each row, for each skip distance d in
// 1..max_skip_count+1, for each start s, the tokens s, s+d, ..., s+(n-1)d form
// an n-gram for n in [min_gram_length, max_gram_length]; each one found in the
// pool is counted. Unigrams do not depend on d and are counted once.
// Their type inference is runtime/schema/text.cpp.
#include <map>
#include <string>
#include <vector>

#include "runtime/ops/op_util.h"
#include "runtime/schema/text.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::text_schema;

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

void registerTextOps(OpRegistry& r) {
  r.add(OpKind::TfIdfVectorizer, &computeTfIdf);
}

}  // namespace pcc
