// Helpers of the type inference of runtime/schema/linalg.cpp that the reference
// kernels of runtime/ops/linalg.cpp use too (the functions are defined in
// runtime/schema/linalg.cpp).
#pragma once

#include "runtime/schema/infer_util.h"

namespace pcc::ops::linalg_schema {

/// Shapes of a MatMul after promoting 1-D operands to matrices.
struct MatMulShape {
  Dims batch, batchA, batchB;
  int64_t m = 0, k = 0, n = 0;
  Dims out;
};

StatusOr<MatMulShape> matmulShape(const TensorType& a, const TensorType& b);

struct GemmShape {
  int64_t m, k, n;
};

StatusOr<GemmShape> gemmShape(const TensorType& a, const TensorType& b, const AttrMap& attrs);

}  // namespace pcc::ops::linalg_schema
