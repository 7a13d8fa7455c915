// Emitters of generated kernels (codegen/kernel_desc.h): the same KernelSpec
// printed as C++ for CPU ranks (emit_cpp.cpp) and as CUDA for NVRTC
// (emit_cuda.cpp). Both share the scalar prelude and the expression printer
// of emit_common.cpp, so a kernel's arithmetic is the same text on both
// targets and the CPU build tests the semantics of the CUDA one.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "codegen/kernel_desc.h"

namespace pcc {

/// \returns the C type the emitted code stores `t` in ("float", "long long",
/// "int", "bool"); the same on both targets.
std::string cTypeOf(DType t);

/// \returns the scalar helpers pk_* every kernel calls, each declared with
/// `qualifier` ("static inline" for C++, "__device__ __forceinline__" for CUDA).
std::string scalarPrelude(const std::string& qualifier);

/// \returns the statements that compute every Expr `roots` need, except the
/// Exprs marked in `have` (already in scope as `vN`; not walked into), one
/// `const T vN = ...;` per line prefixed by `indent`; `load(k)` gives the C
/// expression of input k's element at the current index.
std::string exprLines(const KernelSpec& spec, const std::vector<int>& roots, const std::vector<bool>& have,
                      const std::string& indent, const std::function<std::string(int)>& load);

/// \returns the statements that compute every Expr an output needs, one
/// `const T vN = ...;` per line, each line prefixed by `indent`; `load(k)`
/// gives the C expression of input k's element at the current index. Then one
/// `out<k>[<store>] = vN;` per output.
std::string exprStatements(const KernelSpec& spec, const std::string& indent,
                           const std::function<std::string(int)>& load, const std::string& store);

/// \returns C++ source defining `extern "C" void NAME(const void* const* in,
/// void* const* out)` for each (name, spec), with OpenMP across rows and
/// `omp simd` loops along the last index dimension, after the prelude; a
/// reduction kernel makes one pass over the row per reduction (a compensated
/// `omp simd` sum, or a max) and a last pass that stores.
std::string emitCppLibrary(const std::vector<std::pair<std::string, const KernelSpec*>>& kernels);

/// Threads per block the CUDA kernels are launched with.
constexpr int kCudaBlock = 256;

/// Rows of at most this many points are reduced by one warp each (8 rows per
/// block), longer ones by one block of kCudaBlock threads each.
constexpr int64_t kCudaWarpRowMax = 1024;

/// \returns CUDA source for one kernel `extern "C" __global__ void NAME(const
/// T0* in0, ..., U0* out0, ...)`: a grid-stride loop over the index space, or
/// for a reduction kernel a grid-stride loop over rows, each row reduced by
/// one warp (warp shuffles) or one block (warp shuffles, then shared memory).
std::string emitCudaKernel(const std::string& name, const KernelSpec& spec);

/// \returns the grid the CUDA kernel of `spec` is launched with (blocks of
/// kCudaBlock threads, one per kCudaBlock points, one per 8 rows of a warp
/// reduction, one per row of a block reduction, one per query tile of an
/// attention kernel; at most 65535 * 4: the loop strides over the rest).
int64_t cudaGridFor(const KernelSpec& spec);

/// \returns the threads per block the CUDA kernel of `spec` is launched
/// with: kCudaBlock, or kAttentionCudaBlock for an attention kernel.
int cudaBlockFor(const KernelSpec& spec);

}  // namespace pcc
