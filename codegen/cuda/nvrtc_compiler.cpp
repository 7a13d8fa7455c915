#include "codegen/cuda/nvrtc_compiler.h"

#include <nvrtc.h>

#include <cctype>
#include <cstdlib>
#include <future>
#include <sstream>

namespace pcc::cuda {

namespace {

#ifndef PCC_CUDA_INCLUDE_DIR
#define PCC_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

/// The toolkit headers NVRTC needs for cuda_fp16.h and friends; the
/// environment may move them (a toolkit installed elsewhere than at build time).
std::string cudaIncludeDir() {
  if (const char* env = std::getenv("PCC_CUDA_INCLUDE_DIR"); env && *env) return env;
  return PCC_CUDA_INCLUDE_DIR;
}

/// \returns up to `maxLines` lines of an NVRTC log on one line, so that an
/// error message stays one line yet shows the diagnostics themselves: the
/// lines that mention an error, or the first lines when none does (NVRTC
/// follows each diagnostic with the source line and a caret, which would
/// crowd the message).
std::string logSummary(const std::string& log, int maxLines) {
  std::vector<std::string> all, errors;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    size_t e = line.find_last_not_of(" \t\r");
    all.push_back(line.substr(b, e - b + 1));
    if (all.back().find("error") != std::string::npos) errors.push_back(all.back());
  }
  const std::vector<std::string>& pick = errors.empty() ? all : errors;
  std::string out;
  for (size_t i = 0; i < pick.size() && int(i) < maxLines; ++i) out += (i ? " | " : "") + pick[i];
  return out.empty() ? "(empty log)" : out;
}

/// Wraps an NVRTC return code at its call site into a Status naming the call.
Status nvrtcStatus(nvrtcResult r, const char* call, const std::string& kernel, const std::string& arch) {
  if (r == NVRTC_SUCCESS) return Status::OK();
  return internalError(call, " failed for kernel '", kernel, "' (", arch, "): ", nvrtcGetErrorString(r));
}

/// Owns an nvrtcProgram; destroys it on every return path.
class Program {
 public:
  ~Program() {
    if (prog_) nvrtcDestroyProgram(&prog_);
  }
  nvrtcProgram* addr() { return &prog_; }
  nvrtcProgram get() const { return prog_; }

 private:
  nvrtcProgram prog_ = nullptr;
};

/// \returns the program's log (empty when NVRTC has none).
std::string programLog(nvrtcProgram prog) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n <= 1) return "";
  std::string log(n, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(n - 1);  // drop the terminating NUL
  return log;
}

/// Compiles for one real arch. One NVRTC run for sm_XX yields both the PTX
/// (whose `.target` is sm_XX) and the cubin, so no second compute_XX run.
StatusOr<CompiledKernel> compileOne(const std::string& source, const std::string& name, const std::string& arch,
                                    const CudaCompileOptions& opts) {
  Program prog;
  std::string fileName = name + ".cu";
  RETURN_IF_ERROR(nvrtcStatus(nvrtcCreateProgram(prog.addr(), source.c_str(), fileName.c_str(), 0, nullptr, nullptr),
                              "nvrtcCreateProgram", name, arch));

  std::vector<std::string> options = nvrtcOptions(arch, opts);
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  nvrtcResult r = nvrtcCompileProgram(prog.get(), int(argv.size()), argv.data());
  CompiledKernel k;
  k.name = name;
  k.arch = arch;
  k.log = programLog(prog.get());
  if (r == NVRTC_ERROR_COMPILATION)
    return internalError("NVRTC failed to compile generated kernel '", name, "' for ", arch, ": ",
                         logSummary(k.log, 3));
  if (r != NVRTC_SUCCESS)
    return internalError("nvrtcCompileProgram failed for kernel '", name, "' (", arch,
                         "): ", nvrtcGetErrorString(r), ": ", logSummary(k.log, 3));

  size_t n = 0;
  RETURN_IF_ERROR(nvrtcStatus(nvrtcGetPTXSize(prog.get(), &n), "nvrtcGetPTXSize", name, arch));
  k.ptx.assign(n, '\0');
  RETURN_IF_ERROR(nvrtcStatus(nvrtcGetPTX(prog.get(), k.ptx.data()), "nvrtcGetPTX", name, arch));
  while (!k.ptx.empty() && k.ptx.back() == '\0') k.ptx.pop_back();

  RETURN_IF_ERROR(nvrtcStatus(nvrtcGetCUBINSize(prog.get(), &n), "nvrtcGetCUBINSize", name, arch));
  k.cubin.resize(n);
  RETURN_IF_ERROR(nvrtcStatus(nvrtcGetCUBIN(prog.get(), k.cubin.data()), "nvrtcGetCUBIN", name, arch));
  if (k.cubin.empty()) return internalError("NVRTC produced an empty cubin for kernel '", name, "' (", arch, ")");

  // A kernel that is not extern "C" gets a mangled entry name that the
  // runtime's cuModuleGetFunction(name) would not find: catch it here.
  if (k.ptx.find(".entry " + name + "(") == std::string::npos)
    return internalError("kernel '", name, "' (", arch, "): the PTX has no entry named '", name,
                         "'; generated kernels must be extern \"C\" __global__");
  return k;
}

}  // namespace

bool isValidArch(const std::string& s) {
  if (s.rfind("sm_", 0) != 0) return false;
  size_t i = 3, digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (digits < 2 || digits > 3) return false;
  if (i < s.size() && (s[i] == 'a' || s[i] == 'f')) ++i;
  return i == s.size();
}

std::vector<std::string> nvrtcOptions(const std::string& arch, const CudaCompileOptions& opts) {
  std::vector<std::string> o = {"--gpu-architecture=" + arch, "--std=c++17", "-I" + cudaIncludeDir()};
  if (opts.fastMath) o.push_back("--use_fast_math");
  o.insert(o.end(), opts.extraFlags.begin(), opts.extraFlags.end());
  return o;
}

StatusOr<std::string> nvrtcVersionString() {
  int major = 0, minor = 0;
  RETURN_IF_ERROR(nvrtcStatus(nvrtcVersion(&major, &minor), "nvrtcVersion", "-", "-"));
  return strCat(major, ".", minor);
}

StatusOr<std::vector<CompiledKernel>> compileCuda(const std::string& source, const std::string& kernelName,
                                                  const CudaCompileOptions& opts) {
  if (kernelName.empty()) return invalidInput("compileCuda: empty kernel name");
  if (opts.arches.empty()) return invalidInput("compileCuda: no arch given for kernel '", kernelName, "'");
  for (const std::string& a : opts.arches)
    if (!isValidArch(a))
      return invalidInput("CUDA arch '", a, "' for kernel '", kernelName, "' is not of the form sm_XX");

  // Each arch gets its own nvrtcProgram; NVRTC allows concurrent compiles of
  // distinct programs, and each takes 100 ms or more.
  std::vector<StatusOr<CompiledKernel>> results;
  if (opts.arches.size() == 1) {
    results.push_back(compileOne(source, kernelName, opts.arches[0], opts));
  } else {
    std::vector<std::future<StatusOr<CompiledKernel>>> futures;
    // async|deferred: libstdc++ falls back to running the compile at get()
    // when no thread can be started, instead of throwing.
    for (const std::string& a : opts.arches)
      futures.push_back(std::async(std::launch::async | std::launch::deferred, compileOne, std::cref(source), std::cref(kernelName),
                                   std::cref(a), std::cref(opts)));
    for (auto& f : futures) results.push_back(f.get());
  }

  std::vector<CompiledKernel> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(std::move(r).value());
  }
  return out;
}

}  // namespace pcc::cuda
