// The kernels of a plan: the table the plan emitter fills with one
// KernelSpec per distinct fused group (codegen/kernel_desc.h), and the build
// that turns it into the plan's kernel table and the bundle's kernels/ files
// (docs/kernels.md, docs/plan-format.md#generated-kernels).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/kernel_desc.h"
#include "runtime/plan.pb.h"

namespace pcc {

/// How kernels are built (pcc --target, --arch).
struct KernelOptions {
  /// "cpu": the CPU shared object only; "cuda": also PTX and cubin per arch
  /// (plans stay runnable on CPU ranks).
  std::string target = "cpu";
  /// GPU architectures for --target cuda.
  std::vector<std::string> arches = {"sm_80", "sm_90"};
  /// The C++ compiler: $PCC_CXX, else "c++".
  std::string cxx;
  /// Cache of compiled objects: $PCC_CACHE_DIR/cpu, else
  /// ~/.cache/pcc/cpu-kernels, else <tmp>/pcc-cpu-kernels. Empty: that default.
  std::string cacheDir;
};

/// The distinct kernels of a plan and the fused groups left out.
class KernelTable {
 public:
  /// \returns the index of `spec` in the table: a spec equal to one added
  /// before (specKey) gets that one's index.
  int add(KernelSpec spec);
  /// Records that fused node `node` stays on the reference kernels because of `reason`.
  void fallback(const std::string& node, const std::string& reason);

  const std::vector<KernelSpec>& specs() const { return specs_; }
  /// \returns the entry symbol of kernel `i`: "pcc_k_" and the hash of its key.
  const std::string& name(int i) const { return names_.at(i); }
  const std::vector<std::pair<std::string, std::string>>& fallbacks() const { return fallbacks_; }

 private:
  std::vector<KernelSpec> specs_;
  std::vector<std::string> names_;
  std::map<std::string, int> byKey_;
  std::vector<std::pair<std::string, std::string>> fallbacks_;
};

/// Builds `table` for `opts.target`: the C++ source of every kernel, compiled
/// by the system C++ compiler into one shared object (cached by source hash),
/// and for "cuda" each kernel through NVRTC (codegen/cuda, in parallel,
/// cached). Fills `plan`'s kernels, cpu_library, kernel_target and
/// kernel_fallbacks, and adds the files to `files` (name relative to the
/// bundle -> bytes). An empty table adds nothing but the fallbacks.
/// \returns ok; an environment error when the C++ compiler cannot be run; an
/// unsupported error for --target cuda in a build without the CUDA toolkit; an internal
/// error naming the fused group and the offending source line when generated
/// code does not compile.
Status buildKernels(const KernelTable& table, const KernelOptions& opts, plan::Plan& plan,
                    std::map<std::string, std::string>* files);

/// \returns the CUDA images of every kernel of `table`, compiled in parallel
/// (one job per core) for `opts.arches` through the NVRTC kernel cache, each
/// as (kernel index, arch, PTX, cubin); an unsupported error in a build
/// without the CUDA toolkit. Defined in kernel_build_cuda.cpp.
struct CudaImageBytes {
  int kernel = 0;
  std::string arch, ptx, cubin;
};
StatusOr<std::vector<CudaImageBytes>> compileCudaKernels(const KernelTable& table, const KernelOptions& opts);

/// \returns whether this build can compile CUDA (it has the NVRTC driver).
bool haveCudaCodegen();

/// \returns `source` with line `line` (1-based) and two lines either side,
/// numbered, for compile errors.
std::string sourceExcerpt(const std::string& source, int line);

}  // namespace pcc
