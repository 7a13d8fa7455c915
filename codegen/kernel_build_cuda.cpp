// compileCudaKernels: every kernel of a KernelTable through NVRTC.
//
// Algorithm:
//  1. Print each kernel as CUDA (emitCudaKernel).
//  2. Run up to one job per core; each takes the next kernel and compiles it
//     for every arch through the shared on-disk KernelCache (codegen/cuda),
//     which returns cached PTX and cubin when the source was compiled before.
//  3. A kernel that does not compile fails the build with its fused group,
//     NVRTC's message and the offending source lines.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "codegen/kernel_build.h"
#include "codegen/kernel_emit.h"

#ifdef PCC_HAVE_CUDA
#include "codegen/cuda/kernel_cache.h"
#include "codegen/cuda/nvrtc_compiler.h"
#endif

namespace pcc {

#ifdef PCC_HAVE_CUDA

bool haveCudaCodegen() { return true; }

StatusOr<std::vector<CudaImageBytes>> compileCudaKernels(const KernelTable& table, const KernelOptions& opts) {
  for (const std::string& a : opts.arches)
    if (!cuda::isValidArch(a)) return invalidInput("--arch ", a, ": expected sm_XX (e.g. sm_80)");
  cuda::CudaCompileOptions copts;
  copts.arches = opts.arches;
  cuda::KernelCache cache(cuda::KernelCache::defaultDir());
  const size_t n = table.specs().size();
  // Step 1.
  std::vector<std::string> sources(n);
  for (size_t i = 0; i < n; ++i) sources[i] = emitCudaKernel(table.name(static_cast<int>(i)), table.specs()[i]);
  // Step 2.
  std::vector<std::vector<cuda::CompiledKernel>> built(n);
  std::vector<Status> errors(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) {
      auto r = cache.getOrCompile(sources[i], table.name(static_cast<int>(i)), copts);
      if (r.ok()) {
        built[i] = std::move(r).value();
      } else {
        errors[i] = r.status();
      }
    }
  };
  unsigned jobs = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), static_cast<unsigned>(n)));
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < jobs; ++j) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  // Step 3.
  std::vector<CudaImageBytes> out;
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i].ok()) {
      const std::string& m = errors[i].message();
      // NVRTC names the line as "NAME.cu(LINE): error".
      int line = 0;
      size_t at = m.find(".cu(");
      if (at != std::string::npos) line = std::atoi(m.c_str() + at + 4);
      return internalError("generated CUDA kernel for fused group '", table.specs()[i].group, "': ", m, "\n",
                           sourceExcerpt(sources[i], line));
    }
    for (const cuda::CompiledKernel& k : built[i])
      out.push_back(CudaImageBytes{static_cast<int>(i), k.arch, k.ptx, std::string(k.cubin.begin(), k.cubin.end())});
  }
  return out;
}

#else

bool haveCudaCodegen() { return false; }

StatusOr<std::vector<CudaImageBytes>> compileCudaKernels(const KernelTable&, const KernelOptions&) {
  return unsupported("--target cuda: this pcc was built without the CUDA toolkit (NVRTC); see docs/cuda.md");
}

#endif

}  // namespace pcc
