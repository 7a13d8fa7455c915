// MatMul / Gemm as column-major cuBLASLt GEMMs (runtime/cuda/gemm_desc.h):
// each description is run here by a small column-major GEMM that reads it
// the way cuBLASLt does, and compared with the row-major ONNX result.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/cuda/gemm_desc.h"

namespace pcc::cuda {
namespace {

std::vector<float> values(int64_t n, float seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7 + static_cast<int64_t>(seed * 13)) % 11) - 5.0f + seed;
  return v;
}

/// D = alpha op(A) op(B) + beta C (+ bias per row of D), column-major, as
/// cuBLASLt reads `d`; checks the stored shapes agree with m, n, k.
std::vector<float> runColumnMajor(const GemmDesc& d, const std::vector<float>& A, const std::vector<float>& B,
                                  const std::vector<float>* C, const std::vector<float>* bias) {
  EXPECT_EQ(d.transA ? d.colsA : d.rowsA, d.m);
  EXPECT_EQ(d.transA ? d.rowsA : d.colsA, d.k);
  EXPECT_EQ(d.transB ? d.colsB : d.rowsB, d.k);
  EXPECT_EQ(d.transB ? d.rowsB : d.colsB, d.n);
  EXPECT_GE(d.lda, d.rowsA);
  EXPECT_GE(d.ldb, d.rowsB);
  EXPECT_GE(d.ldc, d.m);
  std::vector<float> D(static_cast<size_t>(d.batch * (d.strideC ? d.strideC : d.ldc * d.n)));
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t j = 0; j < d.n; ++j)
      for (int64_t i = 0; i < d.m; ++i) {
        double acc = 0;
        for (int64_t p = 0; p < d.k; ++p) {
          float a = d.transA ? A[b * d.strideA + p + i * d.lda] : A[b * d.strideA + i + p * d.lda];
          float x = d.transB ? B[b * d.strideB + j + p * d.ldb] : B[b * d.strideB + p + j * d.ldb];
          acc += double(a) * x;
        }
        double v = d.alpha * acc;
        if (C) v += d.beta * (*C)[b * d.strideC + i + j * d.ldc];
        if (bias) v += (*bias)[i];
        D[b * d.strideC + i + j * d.ldc] = static_cast<float>(v);
      }
  return D;
}

/// Row-major Y[b] = X[b] W[b] (W shared when `wBatch` is false).
std::vector<float> rowMajor(int64_t batch, int64_t M, int64_t K, int64_t N, const std::vector<float>& X,
                            const std::vector<float>& W, bool wBatch) {
  std::vector<float> Y(batch * M * N);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < K; ++p)
          acc += double(X[b * M * K + i * K + p]) * W[(wBatch ? b * K * N : 0) + p * N + j];
        Y[b * M * N + i * N + j] = static_cast<float>(acc);
      }
  return Y;
}

TEST(CudaGemm, MatMul2d) {
  TensorType a{DType::kF32, {3, 4}}, b{DType::kF32, {4, 5}};
  auto d = matmulDesc(a, b);
  ASSERT_TRUE(d.ok()) << d.status().message();
  auto X = values(12, 1), W = values(20, 2);
  EXPECT_EQ(d->onnxA, 1);
  EXPECT_EQ(d->onnxB, 0);
  EXPECT_EQ(runColumnMajor(*d, W, X, nullptr, nullptr), rowMajor(1, 3, 4, 5, X, W, false));
}

TEST(CudaGemm, MatMulFoldsBatchWhenWeightsAreShared) {
  TensorType a{DType::kF32, {2, 3, 4}}, b{DType::kF32, {4, 6}};
  auto d = matmulDesc(a, b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->batch, 1);
  EXPECT_EQ(d->n, 6 / 6 * 6);  // rows of X: 2 * 3
  auto X = values(24, 3), W = values(24, 4);
  EXPECT_EQ(runColumnMajor(*d, W, X, nullptr, nullptr), rowMajor(2, 3, 4, 6, X, W, false));
}

TEST(CudaGemm, MatMulStridedBatch) {
  TensorType a{DType::kF32, {2, 2, 3, 4}}, b{DType::kF32, {2, 2, 4, 5}};
  auto d = matmulDesc(a, b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->batch, 4);
  auto X = values(4 * 12, 5), W = values(4 * 20, 6);
  EXPECT_EQ(runColumnMajor(*d, W, X, nullptr, nullptr), rowMajor(4, 3, 4, 5, X, W, true));
}

TEST(CudaGemm, MatMulRefusals) {
  EXPECT_EQ(matmulDesc({DType::kI64, {2, 2}}, {DType::kI64, {2, 2}}).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(matmulDesc({DType::kF16, {2, 2}}, {DType::kF32, {2, 2}}).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(matmulDesc({DType::kF64, {2, 2}}, {DType::kF64, {2, 2}}).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(matmulDesc({DType::kF32, {4}}, {DType::kF32, {4, 2}}).status().code(), StatusCode::kUnsupported);
  auto bcast = matmulDesc({DType::kF32, {1, 3, 4}}, {DType::kF32, {2, 4, 5}});
  ASSERT_FALSE(bcast.ok());
  EXPECT_NE(bcast.status().message().find("broadcast"), std::string::npos);
  EXPECT_EQ(matmulDesc({DType::kF32, {3, 4}}, {DType::kF32, {5, 2}}).status().code(), StatusCode::kInvalidInput);
}

/// Gemm through its description against Y = alpha opA(A) opB(B) + beta C.
void checkGemm(bool tA, bool tB, float alpha, float beta, Dims cShape) {
  const int64_t M = 3, K = 4, N = 5;
  AttrMap attrs;
  attrs.set("transA", Attribute(int64_t{tA}));
  attrs.set("transB", Attribute(int64_t{tB}));
  attrs.set("alpha", Attribute(alpha));
  attrs.set("beta", Attribute(beta));
  TensorType a{DType::kF32, tA ? Dims{K, M} : Dims{M, K}}, b{DType::kF32, tB ? Dims{N, K} : Dims{K, N}};
  TensorType c = cShape.empty() ? TensorType{} : TensorType{DType::kF32, cShape};
  auto d = gemmDesc(a, b, c, attrs);
  ASSERT_TRUE(d.ok()) << d.status().message();
  auto A = values(M * K, 7), B = values(K * N, 8), C = values(cShape.empty() ? 0 : numElements(cShape), 9);
  // Row-major reference.
  std::vector<float> want(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < K; ++p) acc += double(tA ? A[p * M + i] : A[i * K + p]) * (tB ? B[j * K + p] : B[p * N + j]);
      double v = alpha * acc;
      if (cShape == Dims{M, N}) v += beta * C[i * N + j];
      if (cShape == Dims{N} || cShape == Dims{1, N}) v += beta * C[j];
      want[i * N + j] = static_cast<float>(v);
    }
  const bool matrix = d->addend == GemmDesc::Addend::kMatrix, bias = d->addend == GemmDesc::Addend::kBias;
  auto got = runColumnMajor(*d, B, A, matrix ? &C : nullptr, bias ? &C : nullptr);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST(CudaGemm, GemmTransposesScalesAndAddends) {
  for (bool tA : {false, true})
    for (bool tB : {false, true}) {
      checkGemm(tA, tB, 1.0f, 1.0f, {});
      checkGemm(tA, tB, 0.5f, 2.0f, {3, 5});
      checkGemm(tA, tB, 1.5f, 1.0f, {5});
      checkGemm(tA, tB, 1.0f, 1.0f, {1, 5});
    }
}

TEST(CudaGemm, GemmRefusesOtherAddends) {
  AttrMap attrs;
  attrs.set("beta", Attribute(0.5f));
  auto scaledBias = gemmDesc({DType::kF32, {3, 4}}, {DType::kF32, {4, 5}}, {DType::kF32, {5}}, attrs);
  ASSERT_FALSE(scaledBias.ok());
  EXPECT_EQ(scaledBias.status().code(), StatusCode::kUnsupported);
  auto column = gemmDesc({DType::kF32, {3, 4}}, {DType::kF32, {4, 5}}, {DType::kF32, {3, 1}}, AttrMap());
  EXPECT_FALSE(column.ok());
}

TEST(CudaGemm, HalfTypesKeepTheirElementType) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    auto mm = matmulDesc({t, {2, 3, 4}}, {t, {4, 5}});
    ASSERT_TRUE(mm.ok()) << mm.status().message();
    EXPECT_EQ(mm->dtype, t);
    auto batched = matmulDesc({t, {2, 3, 4}}, {t, {2, 4, 5}});
    ASSERT_TRUE(batched.ok());
    EXPECT_EQ(batched->dtype, t);
    auto g = gemmDesc({t, {3, 4}}, {t, {4, 5}}, {t, {5}}, AttrMap());
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->dtype, t);
    EXPECT_EQ(g->addend, GemmDesc::Addend::kBias);
    EXPECT_FALSE(gemmDesc({t, {3, 4}}, {t, {4, 5}}, {DType::kF32, {5}}, AttrMap()).ok());
  }
  EXPECT_EQ(matmulDesc({DType::kF32, {3, 4}}, {DType::kF32, {4, 5}})->dtype, DType::kF32);
}

float reluOf(float v) { return v > 0 ? v : 0.0f; }
float geluTanh(float v) {
  return static_cast<float>(0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * double(v) * v * v))));
}

TEST(CudaGemm, MatMulAddActivationAsOneEpilogue) {
  // Y = act(X W + bias): the bias epilogue adds bias[i] to row i of
  // column-major D, which is column i of row-major Y.
  const int64_t M = 3, K = 4, N = 5;
  auto d = matmulDesc({DType::kF32, {M, K}}, {DType::kF32, {K, N}});
  ASSERT_TRUE(d.ok());
  for (const Dims& biasShape : {Dims{N}, Dims{1, N}}) {
    auto biased = withBias(*d, {DType::kF32, biasShape});
    ASSERT_TRUE(biased.ok()) << biased.status().message();
    EXPECT_EQ(biased->addend, GemmDesc::Addend::kBias);
    auto X = values(M * K, 1), W = values(K * N, 2), bias = values(N, 3);
    auto got = runColumnMajor(*biased, W, X, nullptr, &bias);
    auto want = rowMajor(1, M, K, N, X, W, false);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) want[i * N + j] += bias[j];
    EXPECT_EQ(got, want);
  }
  auto biased = withBias(*d, {DType::kF32, {N}});
  AttrMap none, tanh, erf;
  tanh.set("approximate", Attribute(std::string("tanh")));
  erf.set("approximate", Attribute(std::string("none")));
  auto relu = withActivation(*biased, "Relu", none);
  ASSERT_TRUE(relu.ok());
  EXPECT_EQ(relu->activation, GemmDesc::Activation::kRelu);
  auto gelu = withActivation(*biased, "Gelu", tanh);
  ASSERT_TRUE(gelu.ok());
  EXPECT_EQ(gelu->activation, GemmDesc::Activation::kGeluTanh);
  EXPECT_EQ(withActivation(*d, "Relu", none)->addend, GemmDesc::Addend::kNone);  // RELU without bias
  // The exact (erf) Gelu is not cuBLASLt's: it stays an op of its own.
  for (const AttrMap* a : {&none, &erf}) {
    auto exact = withActivation(*biased, "Gelu", *a);
    ASSERT_FALSE(exact.ok());
    EXPECT_EQ(exact.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(exact.status().message().find("tanh"), std::string::npos) << exact.status().message();
  }
  EXPECT_FALSE(withActivation(*biased, "Sigmoid", none).ok());
  EXPECT_FALSE(withActivation(*relu, "Relu", none).ok());
  // The tanh form differs from the erf form by more than float32 rounding.
  EXPECT_GT(std::fabs(geluTanh(1.5f) - 0.5f * 1.5f * (1.0f + std::erf(1.5f / std::sqrt(2.0f)))), 1e-5f);
  EXPECT_EQ(reluOf(-1.0f), 0.0f);
}

TEST(CudaGemm, BiasEpilogueRefusals) {
  auto d = matmulDesc({DType::kF32, {3, 4}}, {DType::kF32, {4, 5}});
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(withBias(*d, {DType::kF32, {3, 5}}).ok());   // a matrix, not a row
  EXPECT_FALSE(withBias(*d, {DType::kF32, {3, 1}}).ok());   // a column
  EXPECT_FALSE(withBias(*d, {DType::kF32, {4}}).ok());      // wrong length
  EXPECT_FALSE(withBias(*d, {DType::kF16, {5}}).ok());      // another dtype
  auto batched = matmulDesc({DType::kF32, {2, 3, 4}}, {DType::kF32, {2, 4, 5}});
  ASSERT_TRUE(batched.ok());
  EXPECT_FALSE(withBias(*batched, {DType::kF32, {5}}).ok());
  auto g = gemmDesc({DType::kF32, {3, 4}}, {DType::kF32, {4, 5}}, {DType::kF32, {5}}, AttrMap());
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(withBias(*g, {DType::kF32, {5}}).ok());  // already has its bias
  AttrMap none;
  EXPECT_TRUE(withActivation(*g, "Relu", none).ok());   // Gemm's own bias, then Relu
  auto m = gemmDesc({DType::kF32, {3, 4}}, {DType::kF32, {4, 5}}, {DType::kF32, {3, 5}}, AttrMap());
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(withActivation(*m, "Relu", none).ok());  // after a C matrix
}

}  // namespace
}  // namespace pcc::cuda
