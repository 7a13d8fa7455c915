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

/// The shape of a MatMulNBits weight: B [N, blocks, blobBytes], scales
/// [N, blocks], zero points [N, zeroBytes].
struct NBitsShape {
  int64_t k = 0, n = 0, blocks = 0, blobBytes = 0, zeroBytes = 0;
  int bits = 4;
  int64_t blockSize = 0;
};

/// \returns the shape of a weight of K rows and N columns, or an error for
/// bits other than 4 and 8, or a block size outside [2, 2^31] (odd, for 4 bits).
StatusOr<NBitsShape> nbitsShape(int64_t k, int64_t n, int bits, int64_t blockSize);


}  // namespace pcc::ops::linalg_schema
