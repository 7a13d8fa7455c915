// Emitters of generated kernels (codegen/kernel_desc.h): the same KernelSpec
// printed as C++ for CPU ranks (emit_cpp.cpp) and as CUDA for NVRTC
// (emit_cuda.cpp). Both share the scalar prelude and the expression printer
// of emit_common.cpp, so a kernel's arithmetic is the same text on both
// targets and the CPU build tests the semantics of the CUDA one.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_desc.h"

namespace pcc {

/// \returns `text` (a model's node or value name) in a form that may stand in
/// a comment or string literal of generated source without ending it:
/// letters, digits, space and " _-.,:;/()[]{}<>+=#@!&|^~$" are kept, every
/// other byte (line breaks, backslash, quotes, '*', '?', '%', non-ASCII)
/// becomes %XX (two upper-case hex digits). Model text reaches generated
/// source through this function only (docs/security.md).
std::string sourceSafeText(std::string_view text);

/// \returns the original text of sourceSafeText's result (for messages that
/// read a comment of the source back).
std::string fromSourceSafeText(std::string_view text);

/// \returns the C type the emitted code computes on for `t` ("float" for the
/// three float types, "long long", "int", "bool"); the same on both targets.
std::string cTypeOf(DType t);

/// \returns the C type the emitted code keeps `t` in memory as: cTypeOf(t),
/// except float16 and bfloat16 ("unsigned short" in C++; "__half" and
/// "__nv_bfloat16" in CUDA when `cuda`).
std::string storageTypeOf(DType t, bool cuda);

/// \returns `element` (an lvalue of storage type `t`) as the float or other
/// value the expression computes on: pk_from_f16 / pk_from_bf16 for float16
/// and bfloat16, else `element` itself.
std::string loadAs(DType t, const std::string& element);

/// \returns `value` converted to storage type `t` for a store: pk_to_f16 /
/// pk_to_bf16 (round to nearest even) for float16 and bfloat16, else `value`.
std::string storeAs(DType t, const std::string& value);

/// \returns the C expression output k of `spec` stores: its Expr's `vN`,
/// converted to the output's storage type (storeAs).
std::string outputValue(const KernelSpec& spec, size_t k);

/// \returns whether any input, output or Expr of `spec` is float16 or bfloat16.
bool usesHalfTypes(const KernelSpec& spec);

/// \returns the C++ definitions of pk_from_f16, pk_to_f16, pk_from_bf16,
/// pk_to_bf16, pk_round_f16 and pk_round_bf16 (portable C++ on unsigned short
/// and memcpy, bit-exact with runtime/support's conversions; needs <string.h>).
std::string halfConversionsCpp();

/// \returns the same functions for CUDA, on cuda_fp16.h and cuda_bf16.h.
std::string halfConversionsCuda();

/// \returns the scalar helpers pk_* every kernel calls, each declared with
/// `qualifier` ("static inline" for C++, "__device__ __forceinline__" for CUDA).
/// `vectorMath`: pk_exp, pk_tanh, pk_sigmoid, pk_gelu_tanh, pk_erf and
/// pk_gelu_erf from vectorMathPrelude instead of the C library's expf, tanhf
/// and erff, which a C++ compiler does not vectorize without -ffast-math.
std::string scalarPrelude(const std::string& qualifier, bool vectorMath = false);

/// \returns pk_exp, pk_tanh, pk_sigmoid, pk_gelu_tanh, pk_erf and
/// pk_gelu_erf written in float arithmetic and bit operations only, selecting
/// through bit masks instead of branches, so that an `omp simd` loop that
/// calls them vectorizes under the kernels' flags; each within about 3e-7
/// relative error of the exact function (e^x flushes results below FLT_MIN
/// to 0; erfc above 1, the tail of gelu_erf at x below -1.41, within 4.2e-6).
std::string vectorMathPrelude(const std::string& qualifier);

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

/// \returns the elements each thread handles per step on the CUDA vector
/// path of `spec` (16 bytes of its smallest element type: 4 float32, 8
/// float16 or bfloat16), or 0 when it has none: a reduction, more than one
/// merged dimension, an input neither contiguous nor a scalar, a contiguous
/// input or an output that is not a float type, or fewer elements than that.
int cudaVectorWidth(const KernelSpec& spec);

/// \returns the grid the CUDA kernel of `spec` is launched with (blocks of
/// kCudaBlock threads, one per kCudaBlock points (kCudaBlock vector steps
/// with a vector path, cudaVectorWidth), one per 8 rows of a warp
/// reduction, one per row of a block reduction, one per query tile of an
/// attention kernel; at most 65535 * 4: the loop
/// strides over the rest).
int64_t cudaGridFor(const KernelSpec& spec);

/// \returns the threads per block the CUDA kernel of `spec` is launched
/// with: kCudaBlock, or kAttentionCudaBlock for an attention kernel.
int cudaBlockFor(const KernelSpec& spec);

}  // namespace pcc
