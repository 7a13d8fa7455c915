// Row-major MatMul / Gemm -> column-major cuBLASLt GEMM (gemm_desc.h).
//
// Algorithm:
//  1. Check dtypes and ranks; read M, K, N (with Gemm's transposes).
//  2. Batch: none on b folds a's batch into M; equal batch dims give a
//     strided batch; anything else is left to the CPU fallback.
//  3. Swap the operands: cuBLASLt's A is the ONNX W (stored N x K
//     column-major when W is row-major K x N, so no transpose; transposed W
//     needs op T), its B is the ONNX X (likewise), D is Y^T, N x M, ld N.
//  4. Gemm's C: a full [M,N] matrix is cuBLASLt's C (beta); a row [N] with
//     beta 1 is the bias epilogue; anything else is unsupported.
//  5. Epilogues of a fused group (withBias, withActivation): a following
//     Add of a row of N values is the bias epilogue, a following Relu or
//     tanh-form Gelu the activation epilogue; cuBLASLt's bias is one value
//     per row of column-major D, which is one per column N of row-major Y.
#include "runtime/cuda/gemm_desc.h"

namespace pcc::cuda {

namespace {

/// Steps 3: fills the swapped operands for Y[M,N] = opX(X)[M,K] opW(W)[K,N].
GemmDesc swapped(int64_t M, int64_t N, int64_t K, bool transX, bool transW) {
  GemmDesc d;
  d.m = N;
  d.n = M;
  d.k = K;
  // cuBLASLt A := W. Row-major K x N (no transW) read column-major is N x K.
  d.transA = transW;
  d.rowsA = transW ? K : N;
  d.colsA = transW ? N : K;
  d.lda = d.rowsA;
  // cuBLASLt B := X. Row-major M x K read column-major is K x M.
  d.transB = transX;
  d.rowsB = transX ? M : K;
  d.colsB = transX ? K : M;
  d.ldb = d.rowsB;
  d.ldc = N;
  return d;
}

}  // namespace

bool gemmElementType(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

StatusOr<GemmDesc> matmulDesc(const TensorType& a, const TensorType& b) {
  // Step 1.
  if (!gemmElementType(a.dtype) || b.dtype != a.dtype)
    return unsupported("cuBLASLt MatMul takes f32, f16 or bf16 (both the same), got ", a.str(), " x ", b.str());
  if (a.rank() < 2 || b.rank() < 2) return unsupported("cuBLASLt MatMul needs both operands of rank >= 2");
  const int64_t M = a.shape[a.rank() - 2], K = a.shape[a.rank() - 1];
  const int64_t N = b.shape[b.rank() - 1];
  if (b.shape[b.rank() - 2] != K) return invalidInput("MatMul of ", a.str(), " and ", b.str(), ": inner dims differ");
  // Step 2.
  if (b.rank() == 2) {
    int64_t rows = 1;
    for (int64_t i = 0; i + 1 < a.rank(); ++i) rows *= a.shape[i];
    GemmDesc d = swapped(rows, N, K, false, false);
    d.dtype = a.dtype;
    return d;
  }
  if (a.rank() != b.rank()) return unsupported("cuBLASLt MatMul: batch dims of ", a.str(), " and ", b.str(), " broadcast");
  int64_t batch = 1;
  for (int64_t i = 0; i + 2 < a.rank(); ++i) {
    if (a.shape[i] != b.shape[i])
      return unsupported("cuBLASLt MatMul: batch dims of ", a.str(), " and ", b.str(), " broadcast");
    batch *= a.shape[i];
  }
  GemmDesc d = swapped(M, N, K, false, false);
  d.dtype = a.dtype;
  d.batch = batch;
  d.strideA = K * N;  // W
  d.strideB = M * K;  // X
  d.strideC = M * N;
  return d;
}

StatusOr<GemmDesc> gemmDesc(const TensorType& a, const TensorType& b, const TensorType& c, const AttrMap& attrs) {
  // Step 1.
  if (!gemmElementType(a.dtype) || b.dtype != a.dtype || (c.dtype != DType::kUndefined && c.dtype != a.dtype))
    return unsupported("cuBLASLt Gemm takes f32, f16 or bf16 (all the same), got ", a.str(), ", ", b.str(), " and ",
                       c.str());
  if (a.rank() != 2 || b.rank() != 2) return invalidInput("Gemm of ", a.str(), " and ", b.str(), ": rank 2 expected");
  const bool tA = attrs.getInt("transA", 0) != 0, tB = attrs.getInt("transB", 0) != 0;
  const int64_t M = tA ? a.shape[1] : a.shape[0], K = tA ? a.shape[0] : a.shape[1];
  const int64_t N = tB ? b.shape[0] : b.shape[1], Kb = tB ? b.shape[1] : b.shape[0];
  if (K != Kb) return invalidInput("Gemm of ", a.str(), " and ", b.str(), ": inner dims differ");
  GemmDesc d = swapped(M, N, K, tA, tB);
  d.dtype = a.dtype;
  d.alpha = attrs.getFloat("alpha", 1.0f);
  const float beta = attrs.getFloat("beta", 1.0f);
  // Step 4.
  if (c.dtype == DType::kUndefined || beta == 0.0f) return d;
  if (c.shape == Dims{M, N}) {
    d.addend = GemmDesc::Addend::kMatrix;
    d.beta = beta;
    return d;
  }
  if ((c.shape == Dims{N} || c.shape == Dims{1, N}) && beta == 1.0f) {
    d.addend = GemmDesc::Addend::kBias;
    return d;
  }
  return unsupported("cuBLASLt Gemm: C of ", c.str(), " with beta ", beta, " (only [M,N], or [N] with beta 1)");
}

StatusOr<GemmDesc> withBias(GemmDesc d, const TensorType& bias) {
  // Step 5.
  if (d.addend != GemmDesc::Addend::kNone || d.activation != GemmDesc::Activation::kNone)
    return unsupported("cuBLASLt bias epilogue: the GEMM already has an addend");
  if (d.batch != 1) return unsupported("cuBLASLt bias epilogue: not on a strided batch");
  if (bias.dtype != d.dtype) return unsupported("cuBLASLt bias epilogue: bias ", bias.str(), " of another dtype");
  const int64_t N = d.m;  // row-major Y's columns
  bool row = bias.rank() >= 1 && bias.shape.back() == N;
  for (int64_t i = 0; row && i + 1 < bias.rank(); ++i) row = bias.shape[i] == 1;
  if (!row) return unsupported("cuBLASLt bias epilogue: bias ", bias.str(), " is not a row of ", N, " values");
  d.addend = GemmDesc::Addend::kBias;
  return d;
}

StatusOr<GemmDesc> withActivation(GemmDesc d, const std::string& op, const AttrMap& attrs) {
  if (d.addend == GemmDesc::Addend::kMatrix || d.activation != GemmDesc::Activation::kNone)
    return unsupported("cuBLASLt activation epilogue: not after a C matrix or another activation");
  if (op == "Relu") {
    d.activation = GemmDesc::Activation::kRelu;
    return d;
  }
  if (op == "Gelu") {
    const std::string approximate = attrs.getString("approximate", "none");
    if (approximate != "tanh")
      return unsupported("cuBLASLt's GELU epilogue is the tanh approximation; Gelu approximate='", approximate,
                         "' is not");
    d.activation = GemmDesc::Activation::kGeluTanh;
    return d;
  }
  return unsupported("cuBLASLt has no epilogue for ", op);
}

}  // namespace pcc::cuda
