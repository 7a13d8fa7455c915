// Where the cuda backend runs each instruction (placementOf), and the NCCL
// types and store keys of its communicators.
#include <gtest/gtest.h>

#include "runtime/cuda/comm_nccl.h"
#include "runtime/cuda/cuda_backend.h"

namespace pcc::cuda {
namespace {

KernelDesc kernel(const std::string& op, std::vector<TensorType> inputs, const AttrMap* attrs) {
  KernelDesc k;
  k.op = op;
  k.inputs = std::move(inputs);
  k.attrs = attrs;
  k.where = "rank 0: node 'n' (" + op + ")";
  return k;
}

TEST(CudaPlacement, MatMulAndGemmOnCublasLt) {
  AttrMap none;
  auto mm = placementOf(kernel("MatMul", {{DType::kF32, {8, 16}}, {DType::kF32, {16, 4}}}, &none), false);
  EXPECT_EQ(mm.where, Placement::kCublasLt);
  EXPECT_STREQ(placementName(mm.where), "cublaslt");
  auto gemm = placementOf(kernel("Gemm", {{DType::kF32, {8, 16}}, {DType::kF32, {16, 4}}, {DType::kF32, {4}}}, &none),
                          false);
  EXPECT_EQ(gemm.where, Placement::kCublasLt);
}

TEST(CudaPlacement, ConvOnCudnn) {
  AttrMap pads;
  pads.set("pads", Attribute(Dims{1, 1, 1, 1}));
  auto conv = placementOf(kernel("Conv", {{DType::kF32, {1, 3, 8, 8}}, {DType::kF32, {4, 3, 3, 3}}, {DType::kF32, {4}}},
                                 &pads),
                          false);
  EXPECT_EQ(conv.where, Placement::kCudnn);
  EXPECT_STREQ(placementName(conv.where), "cudnn");
  AttrMap none;
  auto half = placementOf(kernel("Conv", {{DType::kF16, {1, 3, 8}}, {DType::kF16, {4, 3, 3}}}, &none), false);
  EXPECT_EQ(half.where, Placement::kCudnn);
  auto mmHalf = placementOf(kernel("MatMul", {{DType::kBF16, {8, 16}}, {DType::kBF16, {16, 4}}}, &none), false);
  EXPECT_EQ(mmHalf.where, Placement::kCublasLt);
}

TEST(CudaPlacement, WhatCuBlasLtDoesNotTakeFallsBackWithTheReason) {
  AttrMap none;
  auto i64 = placementOf(kernel("MatMul", {{DType::kI64, {8, 16}}, {DType::kI64, {16, 4}}}, &none), false);
  EXPECT_EQ(i64.where, Placement::kCpuFallback);
  EXPECT_NE(i64.reason.find("f32, f16 or bf16"), std::string::npos) << i64.reason;
  AttrMap asym;
  asym.set("pads", Attribute(Dims{0, 0, 1, 1}));
  auto conv = placementOf(kernel("Conv", {{DType::kF32, {1, 3, 8, 8}}, {DType::kF32, {4, 3, 3, 3}}}, &asym), false);
  EXPECT_EQ(conv.where, Placement::kCpuFallback);
  EXPECT_NE(conv.reason.find("symmetrically"), std::string::npos) << conv.reason;
  EXPECT_STREQ(placementName(conv.where), "cpu fallback");
  for (const char* op : {"Softmax", "LayerNormalization", "Gather", "Transpose", "Add", "Reshape"})
    EXPECT_EQ(placementOf(kernel(op, {{DType::kF32, {4}}}, &none), false).where, Placement::kCpuFallback) << op;
}

TEST(CudaPlacement, LaunchRunsItsImageWhenThePlanHasOne) {
  AttrMap none;
  KernelDesc k = kernel("Fused", {{DType::kF32, {4}}}, &none);
  k.kernelIndex = 0;
  EXPECT_EQ(placementOf(k, true).where, Placement::kGenerated);
  auto cpuOnly = placementOf(k, false);  // a plan compiled with --target cpu
  EXPECT_EQ(cpuOnly.where, Placement::kCpuFallback);
  EXPECT_NE(cpuOnly.reason.find("--target cuda"), std::string::npos);
}

TEST(CudaNccl, Types) {
  ncclDataType_t t;
  ASSERT_TRUE(ncclTypeOf(DType::kF32, &t));
  EXPECT_EQ(t, ncclFloat32);
  ASSERT_TRUE(ncclTypeOf(DType::kBF16, &t));
  EXPECT_EQ(t, ncclBfloat16);
  ASSERT_TRUE(ncclTypeOf(DType::kI64, &t));
  EXPECT_EQ(t, ncclInt64);
  ASSERT_TRUE(ncclTypeOf(DType::kBool, &t));
  EXPECT_EQ(t, ncclUint8);
  EXPECT_FALSE(ncclTypeOf(DType::kU16, &t));
  EXPECT_EQ(ncclIdKey("world"), "pcc/nccl/world");
  EXPECT_EQ(ncclIdKey("2"), "pcc/nccl/2");
}

}  // namespace
}  // namespace pcc::cuda
