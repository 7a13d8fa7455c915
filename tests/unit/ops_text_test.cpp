// TfIdfVectorizer; hand-computed counts.
#include "ops_test_util.h"

namespace pcc::testing {
namespace {

/// Pool: unigrams {2, 3, 5}, bigrams {(2,3), (5,2)}; output columns 0..4.
AttrMap tfidf(const std::string& mode, int64_t minGram, int64_t maxGram, int64_t maxSkip,
              std::vector<float> weights = {}) {
  AttrMap a = attrs({{"mode", mode},
                     {"min_gram_length", I(minGram)},
                     {"max_gram_length", I(maxGram)},
                     {"max_skip_count", I(maxSkip)},
                     {"pool_int64s", std::vector<int64_t>{2, 3, 5, 2, 3, 5, 2}},
                     {"ngram_counts", std::vector<int64_t>{0, 3}},
                     {"ngram_indexes", std::vector<int64_t>{0, 1, 2, 3, 4}}});
  if (!weights.empty()) a.set("weights", weights);
  return a;
}

TEST(OpsText, TfIdfCountsUnigramsAndBigramsWithSkips) {
  // Row 0: 2 3 5 2 7 3 -> unigrams 2:2, 3:2, 5:1; bigrams (2,3) once, (5,2) once.
  // Row 1: 2 7 3 5 9 2 -> with skip 1 also (2,3) over 7 and (5,2) over 9.
  Tensor x = i64({2, 6}, {2, 3, 5, 2, 7, 3, 2, 7, 3, 5, 9, 2});
  expectTensor(run1("TfIdfVectorizer", {&x}, tfidf("TF", 1, 2, 0)), DType::kF32, {2, 5},
               {2, 2, 1, 1, 1, 2, 1, 1, 0, 0});
  // Skips up to 1: row 0 gains (2,3) from 2 7 3; row 1 gains (2,3) from 2 7 3 and (5,2) from 5 9 2.
  expectTensor(run1("TfIdfVectorizer", {&x}, tfidf("TF", 1, 2, 1)), DType::kF32, {2, 5},
               {2, 2, 1, 2, 1, 2, 1, 1, 1, 1});
  // Bigrams only.
  expectTensor(run1("TfIdfVectorizer", {&x}, tfidf("TF", 2, 2, 0)), DType::kF32, {2, 5},
               {0, 0, 0, 1, 1, 0, 0, 0, 0, 0});
  // IDF: the weight where the count is non-zero; TFIDF: weight times count.
  std::vector<float> w = {0.5f, 1, 2, 4, 8};
  expectTensor(run1("TfIdfVectorizer", {&x}, tfidf("IDF", 1, 2, 0, w)), DType::kF32, {2, 5},
               {0.5, 1, 2, 4, 8, 0.5, 1, 2, 0, 0});
  expectTensor(run1("TfIdfVectorizer", {&x}, tfidf("TFIDF", 1, 2, 0, w)), DType::kF32, {2, 5},
               {1, 2, 2, 4, 8, 1, 1, 2, 0, 0});
  // A 1-D input gives a 1-D output.
  Tensor v = i32({3}, {5, 2, 5});
  expectTensor(run1("TfIdfVectorizer", {&v}, tfidf("TF", 1, 2, 0)), DType::kF32, {5}, {1, 0, 2, 0, 1});
}

TEST(OpsText, TfIdfRejectsBadAttributes) {
  EXPECT_FALSE(infer("TfIdfVectorizer", {{DType::kI64, {2, 6}}}, {}, tfidf("BM25", 1, 2, 0)).ok());
  EXPECT_FALSE(infer("TfIdfVectorizer", {{DType::kI64, {2, 6}}}, {}, tfidf("TF", 3, 2, 0)).ok());
  EXPECT_FALSE(infer("TfIdfVectorizer", {{DType::kF32, {2, 6}}}, {}, tfidf("TF", 1, 2, 0)).ok());
  EXPECT_FALSE(infer("TfIdfVectorizer", {{DType::kI64, {1, 2, 6}}}, {}, tfidf("TF", 1, 2, 0)).ok());
  AttrMap odd = tfidf("TF", 1, 2, 0);
  odd.set("ngram_counts", std::vector<int64_t>{0, 2});  // 5 ids left for bigrams: not a whole number
  EXPECT_FALSE(infer("TfIdfVectorizer", {{DType::kI64, {2, 6}}}, {}, odd).ok());
  AttrMap strings = tfidf("TF", 1, 2, 0);
  strings.set("pool_strings", std::vector<std::string>{"a"});
  auto r = infer("TfIdfVectorizer", {{DType::kI64, {2, 6}}}, {}, strings);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace pcc::testing
