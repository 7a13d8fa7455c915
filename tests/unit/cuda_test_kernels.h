// Small CUDA kernels of the shape the code generator emits, shared by the
// unit_cuda tests, plus temporary-directory helpers.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace pcc::cuda::testing {

/// y = gelu(x * a + b), the exact (erf) form.
inline const char* kGeluErfSource = R"(
extern "C" __global__ void fused_gelu_affine(const float* __restrict__ x, float* __restrict__ y,
                                             float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i] * a + b;
  y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}
)";

/// y = gelu(x * a + b), the tanh approximation, with a division so that
/// --use_fast_math visibly changes the PTX.
inline const char* kGeluTanhSource = R"(
extern "C" __global__ void fused_gelu_tanh(const float* __restrict__ x, float* __restrict__ y,
                                           float a, float b, float scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i] * a + b;
  float u = 0.7978845608f * (v + 0.044715f * v * v * v);
  y[i] = 0.5f * v * (1.0f + tanhf(u)) / scale;
}
)";

/// z = relu(x + y) in half precision, through cuda_fp16.h.
inline const char* kHalfSource = R"(
#include <cuda_fp16.h>
extern "C" __global__ void add_relu_half(const __half* __restrict__ x, const __half* __restrict__ y,
                                         __half* __restrict__ z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half s = __hadd(x[i], y[i]);
  __half zero = __float2half(0.0f);
  z[i] = __hgt(s, zero) ? s : zero;
}
)";

/// A missing semicolon after `int i = 0`.
inline const char* kSyntaxErrorSource = R"(
extern "C" __global__ void broken_kernel(float* y) {
  int i = 0
  y[i] = 1.0f;
}
)";

/// A fresh empty directory, removed with its contents at the end of scope.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::path(::testing::TempDir()) / "pcc-cuda-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr) << "mkdtemp failed for " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace pcc::cuda::testing
