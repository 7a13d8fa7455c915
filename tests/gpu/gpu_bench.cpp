// Measurements for tests/gpu/run.sh on a machine with an NVIDIA GPU (built
// there by the script; links libcuda and cuBLASLt directly, unlike pcc).
//
//   gpu_bench copy MIB        device-to-device copy: prints "copy_gbs G"
//                             (bytes read + written per second, 1e9)
//   gpu_bench gemm M N K      cuBLASLt GEMM, f32 and TF32 compute: prints
//                             "gemm_f32_tflops T" and "gemm_tf32_tflops T"
//
// Algorithm: allocate, run the operation 3 times untimed, then 20 times
// between two events; the figure is from the mean.
#include <cuda.h>
#include <cublasLt.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* s = nullptr;
  cuGetErrorString(r, &s);
  std::fprintf(stderr, "gpu_bench: %s failed: %s\n", what, s ? s : "?");
  std::exit(1);
}

void checkBlas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "gpu_bench: %s failed: cuBLAS status %d\n", what, static_cast<int>(s));
  std::exit(1);
}

template <typename F>
double timeMs(CUstream s, int iters, F&& f) {
  CUevent a, b;
  check(cuEventCreate(&a, 0), "cuEventCreate");
  check(cuEventCreate(&b, 0), "cuEventCreate");
  for (int i = 0; i < 3; ++i) f();
  check(cuEventRecord(a, s), "cuEventRecord");
  for (int i = 0; i < iters; ++i) f();
  check(cuEventRecord(b, s), "cuEventRecord");
  check(cuEventSynchronize(b), "cuEventSynchronize");
  float ms = 0;
  check(cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime");
  return ms / iters;
}

double gemm(cublasLtHandle_t h, CUstream s, int64_t M, int64_t N, int64_t K, cublasComputeType_t compute) {
  CUdeviceptr A, B, C, ws;
  const size_t wsBytes = 64u << 20;
  check(cuMemAlloc(&A, M * K * 4), "cuMemAlloc");
  check(cuMemAlloc(&B, K * N * 4), "cuMemAlloc");
  check(cuMemAlloc(&C, M * N * 4), "cuMemAlloc");
  check(cuMemAlloc(&ws, wsBytes), "cuMemAlloc");
  check(cuMemsetD8(A, 0, M * K * 4), "cuMemsetD8");
  check(cuMemsetD8(B, 0, K * N * 4), "cuMemsetD8");
  cublasLtMatmulDesc_t op;
  checkBlas(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  cublasLtMatrixLayout_t la, lb, lc;
  checkBlas(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, M, K, M), "layout");
  checkBlas(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, N, K), "layout");
  checkBlas(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, M, N, M), "layout");
  cublasLtMatmulPreference_t pref;
  checkBlas(cublasLtMatmulPreferenceCreate(&pref), "preference");
  uint64_t w = wsBytes;
  checkBlas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &w, sizeof w), "pref");
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  checkBlas(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &res, &found), "heuristic");
  if (found < 1) {
    std::fprintf(stderr, "gpu_bench: no cuBLASLt algorithm\n");
    std::exit(1);
  }
  float alpha = 1, beta = 0;
  double ms = timeMs(s, 20, [&] {
    checkBlas(cublasLtMatmul(h, op, &alpha, reinterpret_cast<void*>(A), la, reinterpret_cast<void*>(B), lb, &beta,
                             reinterpret_cast<void*>(C), lc, reinterpret_cast<void*>(C), lc, &res.algo,
                             reinterpret_cast<void*>(ws), wsBytes, s),
              "cublasLtMatmul");
  });
  for (CUdeviceptr p : {A, B, C, ws}) cuMemFree(p);
  return 2.0 * M * N * K / (ms * 1e-3) / 1e12;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gpu_bench copy MIB | gemm M N K\n");
    return 2;
  }
  check(cuInit(0), "cuInit");
  CUdevice dev;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUstream s;
  check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  const std::string mode = argv[1];
  if (mode == "copy" && argc == 3) {
    const size_t bytes = std::strtoull(argv[2], nullptr, 10) << 20;
    CUdeviceptr a, b;
    check(cuMemAlloc(&a, bytes), "cuMemAlloc");
    check(cuMemAlloc(&b, bytes), "cuMemAlloc");
    double ms = timeMs(s, 20, [&] { check(cuMemcpyDtoDAsync(b, a, bytes, s), "cuMemcpyDtoDAsync"); });
    std::printf("copy_gbs %.1f\n", 2.0 * bytes / (ms * 1e-3) / 1e9);
    return 0;
  }
  if (mode == "gemm" && argc == 5) {
    const int64_t M = std::atoll(argv[2]), N = std::atoll(argv[3]), K = std::atoll(argv[4]);
    cublasLtHandle_t h;
    checkBlas(cublasLtCreate(&h), "cublasLtCreate");
    std::printf("gemm_f32_tflops %.1f\n", gemm(h, s, M, N, K, CUBLAS_COMPUTE_32F));
    std::printf("gemm_tf32_tflops %.1f\n", gemm(h, s, M, N, K, CUBLAS_COMPUTE_32F_FAST_TF32));
    return 0;
  }
  std::fprintf(stderr, "usage: gpu_bench copy MIB | gemm M N K\n");
  return 2;
}
