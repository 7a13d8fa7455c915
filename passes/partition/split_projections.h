// Splitting fused projections: a weight-matrix product whose only reader is
// a Split of its output features (the fused Q/K/V projection of GPT-2 and
// BERT-style exports) becomes one product per piece, so that each piece's
// features, and the heads inside them, can split over tp on their own.
#pragma once

#include "compiler/ir/ir.h"

namespace pcc {

/// Rewrites every fused projection of `g` (see above) into one MatMul/Gemm
/// per Split output, each reading its own columns of the weight (and of the
/// bias), through the Reshape that may sit between the product and the Split.
/// Exact: every output element is computed from the same products.
/// \returns the number of projections split.
StatusOr<int> splitFusedProjections(Graph& g);

}  // namespace pcc
