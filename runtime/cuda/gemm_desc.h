// MatMul and Gemm as one cuBLASLt call: the row-major ONNX operation restated
// as a column-major (strided batched) GEMM. Pure arithmetic, no device: the
// unit test runs the description on a small column-major GEMM of its own
// against a row-major MatMul.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/support/attribute.h"
#include "runtime/support/dtype.h"

namespace pcc::cuda {

/// D = alpha * op(A) * op(B) + beta * C (+ bias), every matrix column-major:
/// op(A) is m x k, op(B) k x n, C and D m x n. `A` is the ONNX operation's
/// second operand and `B` its first: row-major Y[M,N] = X[M,K] W[K,N] is
/// column-major Y^T[N,M] = W^T[N,K] X^T[K,M], and a row-major matrix is its
/// transpose read column-major, so no data moves.
struct GemmDesc {
  bool transA = false, transB = false;  ///< op(A) = A^T, op(B) = B^T
  int64_t m = 0, n = 0, k = 0;
  /// Stored shapes (rows x cols, column-major) and leading dimensions.
  int64_t rowsA = 0, colsA = 0, lda = 0;
  int64_t rowsB = 0, colsB = 0, ldb = 0;
  int64_t ldc = 0;                       ///< C and D (rows m, cols n)
  int64_t batch = 1;
  /// Element strides between batch entries (0: the same matrix for every entry).
  int64_t strideA = 0, strideB = 0, strideC = 0;
  float alpha = 1, beta = 0;
  /// Where C comes from: none (beta 0), a full [M,N] matrix (ONNX input 2,
  /// read with beta), or a bias of N values added to every row of Y
  /// (cuBLASLt's bias epilogue: one value per row of column-major D).
  enum class Addend { kNone, kMatrix, kBias } addend = Addend::kNone;
  /// Operand index in the ONNX node of cuBLASLt's A and B.
  int onnxA = 1, onnxB = 0;
  /// Element type of A, B, C, D and the bias: f32, f16 or bf16. Compute and
  /// scale type are float32 in every case (CUBLAS_COMPUTE_32F, CUDA_R_32F).
  DType dtype = DType::kF32;
  /// The activation cuBLASLt's epilogue applies after the bias:
  /// CUBLASLT_EPILOGUE_RELU(_BIAS) or CUBLASLT_EPILOGUE_GELU(_BIAS).
  enum class Activation { kNone, kRelu, kGeluTanh } activation = Activation::kNone;
};

/// \returns whether cuBLASLt takes `t` as a GEMM element type with float32
/// compute (f32, f16, bf16).
bool gemmElementType(DType t);

/// \returns the GEMM for MatMul on `a` [..., M, K] and `b` [..., K, N] (f32,
/// f16 or bf16, both the same), or an unsupported error with the reason
/// (then the op runs on the CPU fallback): ranks below 2, batch dims that
/// broadcast other than "b has none" or "both equal", other dtypes. A `b`
/// without batch dims folds a's batch into M (one GEMM).
StatusOr<GemmDesc> matmulDesc(const TensorType& a, const TensorType& b);

/// \returns the GEMM for ONNX Gemm (attributes transA, transB, alpha, beta)
/// on `a`, `b` and the optional `c` (dtype kUndefined: absent), or an
/// unsupported error: c other than absent, [M,N], or [N]/[1,N] with beta 1;
/// dtypes as for matmulDesc.
StatusOr<GemmDesc> gemmDesc(const TensorType& a, const TensorType& b, const TensorType& c, const AttrMap& attrs);

/// \returns `d` (a MatMul or Gemm without addend) followed by `Add` of
/// `bias`, a row of N values ([N], or [1,...,1,N]) of d's dtype, as the bias
/// epilogue; an unsupported error otherwise (a strided batch, another
/// addend, another shape), then the Add stays an op of its own.
StatusOr<GemmDesc> withBias(GemmDesc d, const TensorType& bias);

/// \returns `d` (without addend, or with the bias epilogue) followed by the
/// activation `op` with `attrs` as cuBLASLt's epilogue: Relu, and Gelu with
/// approximate="tanh" (cuBLASLt's GELU epilogue is the tanh approximation
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))); an unsupported error
/// for Gelu's exact (erf) form, other ops, or a C matrix.
StatusOr<GemmDesc> withActivation(GemmDesc d, const std::string& op, const AttrMap& attrs);

}  // namespace pcc::cuda
