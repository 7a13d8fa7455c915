// Which constant GEMM weights the CPU backend keeps packed in oneDNN's layout
// (runtime/cpu/dnnl_matmul.cpp), one rule for the kernel and the compiler's
// memory estimate (codegen/memory_estimate.cpp), so that the estimate counts
// exactly the copies the kernels keep.
#pragma once

#include <cstdint>

namespace pcc {

/// \returns whether a float32 constant B of K x N (MatMul's 2-D B, Gemm's B)
/// is kept packed: large enough for packing to pay (2^16 elements), and of a
/// shape oneDNN's AVX-512 blocked layout (16 x 64 blocks) holds without
/// padding, so the copy has B's own size.
inline bool packsConstantWeight(int64_t k, int64_t n) {
  return k > 0 && n > 0 && k % 16 == 0 && n % 64 == 0 && k * n >= (int64_t{1} << 16);
}

}  // namespace pcc
