// Helpers of the type inference of runtime/schema/reduce_norm_einsum.cpp that the reference
// kernels of runtime/ops/reduce_norm_einsum.cpp use too (the functions are defined in
// runtime/schema/reduce_norm_einsum.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <string>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::reduce_norm_einsum_schema {

constexpr int kLetters = 52;

  // a-z, A-Z; ellipsis dims follow

struct EinsumPlan {
  std::vector<std::vector<int>> operands;  // labels of each operand's dims
  std::vector<int> output;                 // labels of the output dims
  std::vector<int64_t> sizes;              // size of each label (0: unused)
  int numLabels = 0;
};

/// \returns the label of letter `ch`, or -1 when it is not a letter.
int letterLabel(char ch);

/// Parses one term: letters and at most one "...", which expands to `ellipsisRank`
/// labels (the last ellipsis dims right-aligned to the widest ellipsis).
StatusOr<std::vector<int>> parseTerm(const std::string& term, int64_t rank, int64_t maxEllipsis, bool isOutput,
                                     int64_t* ellipsisRank);

StatusOr<EinsumPlan> planEinsum(const std::string& equation, const std::vector<Dims>& shapes);

}  // namespace pcc::ops::reduce_norm_einsum_schema
