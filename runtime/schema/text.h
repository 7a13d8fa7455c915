// Helpers of the type inference of runtime/schema/text.cpp that the reference
// kernels of runtime/ops/text.cpp use too (the functions are defined in
// runtime/schema/text.cpp).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::text_schema {

enum class TfIdfMode { kTF, kIDF, kTFIDF };

struct TfIdfConfig {
  TfIdfMode mode = TfIdfMode::kTF;
  int64_t minGram = 0, maxGram = 0, maxSkip = 0, outputSize = 0;
  std::vector<float> weights;
  std::map<std::vector<int64_t>, int64_t> grams;  ///< n-gram -> output column
};

/// \returns the configuration described by the attributes, or an error naming
/// the attribute at fault.
StatusOr<TfIdfConfig> tfIdfConfig(const AttrMap& a);

}  // namespace pcc::ops::text_schema
