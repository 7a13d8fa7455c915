// buildKernels: the plan's KernelTable -> kernel table, CPU shared object and
// (for --target cuda) PTX and cubin.
//
// Algorithm:
//  1. Record the fused groups left on the reference kernels in the plan.
//  2. Print every kernel of the table into one C++ source (emitCppLibrary).
//  3. Look the source up in the object cache by the SHA-256 of the source
//     and the compile command; an entry holds the object and the SHA-256 of
//     key and object, checked on every read (a truncated, replaced or foreign
//     entry is rebuilt, with a warning). On a miss, compile it with one call
//     of the system C++ compiler (-O3 -fPIC -shared -fopenmp) in a fresh
//     directory, as its working directory, with a cleaned environment (no
//     variable that adds include or library paths or compiler programs) and
//     a time limit (PCC_CXX_TIMEOUT, 300 s by default; the compiler's whole
//     process group is killed at the limit), and rename the entry into the
//     cache (atomic: concurrent builds of the same source do not clash). A
//     compile error names the first failing kernel's fused group and shows
//     the offending source lines.
//  4. Put the object and its source under kernels/ with the object's size and
//     crc32, and one plan::Kernel per table entry with its parameter types.
//  5. --target cuda: compile every kernel through NVRTC (compileCudaKernels)
//     and add each arch's PTX and cubin files with their crc32s.
#include "codegen/kernel_build.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "codegen/cuda/sha256.h"
#include "codegen/epilogue.h"
#include "codegen/kernel_emit.h"
#include "runtime/plan_convert.h"
#include "runtime/kernel_library.h"
#include "runtime/plan_io.h"

namespace pcc {

namespace fs = std::filesystem;

namespace {

const char* const kCxxFlags[] = {"-O3",    "-fno-math-errno", "-ffp-contract=off", "-fPIC",
                                 "-shared", "-fopenmp",        "-w"};

std::string defaultCacheDir() {
  if (const char* d = std::getenv("PCC_CACHE_DIR"); d && *d) return (fs::path(d) / "cpu").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "pcc" / "cpu-kernels").string();
  std::error_code ec;
  return (fs::temp_directory_path(ec) / "pcc-cpu-kernels").string();
}

StatusOr<std::string> readFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return environmentError(p.string(), ": cannot read");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

Status writeFile(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return environmentError(p.string(), ": cannot write");
  return Status::OK();
}

/// Seconds the C++ compiler may run for one plan's kernels unless
/// PCC_CXX_TIMEOUT says otherwise.
constexpr double kDefaultCxxTimeout = 300;

/// \returns the compile time limit in seconds: $PCC_CXX_TIMEOUT, else
/// kDefaultCxxTimeout; an invalid-input error for a value that is not a
/// number of seconds above 0.
StatusOr<double> cxxTimeLimit() {
  const char* e = std::getenv("PCC_CXX_TIMEOUT");
  if (!e || !*e) return kDefaultCxxTimeout;
  char* end = nullptr;
  double v = std::strtod(e, &end);
  if (*end != '\0' || !(v > 0) || v > 1e7)
    return invalidInput("PCC_CXX_TIMEOUT=", e, ": expected a number of seconds above 0");
  return v;
}

/// \returns the environment the C++ compiler runs with: only the variables
/// it needs to find its programs and temporary files and to print messages.
/// Every other variable is dropped, among them those that add include or
/// library paths or programs to a compile (CPATH, C_INCLUDE_PATH,
/// CPLUS_INCLUDE_PATH, OBJC_INCLUDE_PATH, GCC_EXEC_PREFIX, COMPILER_PATH,
/// LIBRARY_PATH) or make it write elsewhere (DEPENDENCIES_OUTPUT,
/// SUNPRO_DEPENDENCIES, GCC_COMPARE_DEBUG).
std::vector<std::string> compilerEnvironment() {
  static const char* const kKept[] = {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES"};
  std::vector<std::string> env;
  for (const char* name : kKept)
    if (const char* v = std::getenv(name)) env.push_back(strCat(name, "=", v));
  return env;
}

/// Runs `argv` in directory `workDir`, in a process group of its own, with
/// compilerEnvironment() and stderr and stdout into `log`; kills the whole
/// group once it has run `limitSeconds`. \returns its exit status, or an
/// error if it could not start or ran past the limit.
StatusOr<int> runTool(const std::vector<std::string>& argv, const fs::path& log, const fs::path& workDir,
                      double limitSeconds) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addchdir_np(&fa, workDir.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: the limit stops it and everything it started
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> envStrings = compilerEnvironment();
  std::vector<char*> env;
  for (std::string& e : envStrings) env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return environmentError("cannot run the C++ compiler '", argv[0], "': ", std::strerror(rc));
  // Poll for its end, at most every 50 ms, until the limit.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limitSeconds);
  int status = 0;
  for (int waitMs = 1;; waitMs = std::min(waitMs * 2, 50)) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return environmentError("waiting for '", argv[0], "': ", std::strerror(errno));
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return invalidInput("the C++ compiler '", argv[0], "' did not finish the generated kernels within ",
                          limitSeconds, " s (the limit PCC_CXX_TIMEOUT sets; 300 s by default): stopped");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(waitMs));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// \returns the fused group whose code holds source line `line` (the last
/// "// GROUP" comment before it, decoded from sourceSafeText).
std::string groupAtLine(const std::string& source, int line) {
  std::istringstream in(source);
  std::string l, group = "?";
  for (int i = 1; std::getline(in, l) && i <= line; ++i)
    if (l.rfind("// ", 0) == 0 && i > 2) group = fromSourceSafeText(l.substr(3));
  return group;
}

/// The largest kernel library the cache keeps or reads (generated libraries
/// are kilobytes to a few megabytes).
constexpr uintmax_t kMaxCacheEntryBytes = uintmax_t{1} << 30;

// --- the object cache. An entry <key>.pcco is kCacheMagic, the object, and
// the SHA-256 of the key and the object (32 bytes).
constexpr char kCacheMagic[8] = {'P', 'C', 'C', 'C', 'P', 'U', 'O', '1'};
constexpr size_t kDigestBytes = 32;
// Bumped whenever the entry layout or the key's fields change.
constexpr const char* kCacheKeyVersion = "pcc-cpu-kernel-cache-v2";

/// \returns the cache key of compiling `source` with `command`: a SHA-256 in hex.
std::string cacheKey(const std::string& command, const std::string& source) {
  cuda::Sha256 h;
  h.updateField(kCacheKeyVersion);
  h.updateField(command);
  h.updateField(source);
  return h.finishHex();
}

/// \returns the SHA-256 that ends the entry of `object` under `key`.
std::string entryDigest(const std::string& key, std::string_view object) {
  cuda::Sha256 h;
  h.updateField(key);
  h.updateField(object);
  auto d = h.finish();
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

/// \returns the object of cache entry `bytes` stored under `key`, or an
/// empty string with `why` set when the entry is not whole.
std::string objectOfEntry(const std::string& bytes, const std::string& key, std::string* why) {
  if (bytes.size() <= sizeof(kCacheMagic) + kDigestBytes ||
      std::memcmp(bytes.data(), kCacheMagic, sizeof(kCacheMagic)) != 0) {
    *why = strCat("not a cache entry (", bytes.size(), " bytes)");
    return "";
  }
  std::string_view object(bytes.data() + sizeof(kCacheMagic), bytes.size() - sizeof(kCacheMagic) - kDigestBytes);
  if (entryDigest(key, object) != bytes.substr(bytes.size() - kDigestBytes)) {
    *why = "its SHA-256 does not match (truncated, edited or another entry's)";
    return "";
  }
  return std::string(object);
}

/// Step 3. \returns the shared object's bytes.
StatusOr<std::string> compileCpu(const std::string& source, const KernelOptions& opts) {
  std::string cxx = opts.cxx;
  if (cxx.empty()) {
    const char* e = std::getenv("PCC_CXX");
    cxx = e && *e ? e : "c++";
  }
  // It runs in the build directory: a relative path to it is made absolute here.
  if (cxx.find('/') != std::string::npos && fs::path(cxx).is_relative()) cxx = fs::absolute(cxx).string();
  std::vector<std::string> argv = {cxx};
  for (const char* f : kCxxFlags) argv.push_back(f);
  std::string command;
  for (const std::string& a : argv) command += a + " ";
  ASSIGN_OR_RETURN(double limit, cxxTimeLimit());
  fs::path dir = opts.cacheDir.empty() ? defaultCacheDir() : opts.cacheDir;
  const std::string key = cacheKey(command, source);
  fs::path cached = dir / (key + ".pcco");
  std::error_code ec;
  if (fs::is_regular_file(cached, ec)) {
    // An entry far larger than any object is damaged without reading it.
    const uintmax_t size = fs::file_size(cached, ec);
    const bool tooLarge = !ec && size > kMaxCacheEntryBytes;
    auto bytes = tooLarge ? StatusOr<std::string>(invalidInput("larger than any kernel library (", size, " bytes)"))
                          : readFile(cached);
    std::string why = bytes.ok() ? "" : bytes.status().message();
    std::string object = bytes.ok() ? objectOfEntry(*bytes, key, &why) : "";
    if (!object.empty()) {
      Status elf = checkSharedObject(object, "the cached object");
      if (elf.ok()) return object;
      why = elf.message();
    }
    std::cerr << "pcc: warning: kernel cache entry " << cached.string() << " is damaged: " << why
              << "; compiling the kernels again\n";
  }
  fs::create_directories(dir, ec);
  std::string tmpl = (dir / "build-XXXXXX").string();
  if (ec || !::mkdtemp(tmpl.data())) {
    // No cache directory: build in the temporary directory.
    tmpl = (fs::temp_directory_path(ec) / "pcc-build-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) return environmentError("cannot create a directory to build kernels in");
  }
  fs::path work = tmpl;
  auto cleanup = [&] { fs::remove_all(work, ec); };
  Status st = writeFile(work / "kernels.cc", source);
  if (!st.ok()) {
    cleanup();
    return st;
  }
  // Paths relative to the build directory, its working directory: the object
  // names no temporary folder and the same source gives the same bytes.
  argv.push_back("-o");
  argv.push_back("kernels.so");
  argv.push_back("kernels.cc");
  auto rc = runTool(argv, work / "log.txt", work, limit);
  if (!rc.ok()) {
    cleanup();
    return rc.status();
  }
  if (*rc != 0) {
    auto logOr = readFile(work / "log.txt");
    std::string log = logOr.ok() ? *logOr : std::string();
    cleanup();
    // "kernels.cc:LINE:COL: error: ..." (after a "kernels.cc: In function ..." line without a number)
    int line = 0;
    size_t at = log.find("kernels.cc:");
    while (at != std::string::npos && !std::isdigit(static_cast<unsigned char>(log[at + 11])))
      at = log.find("kernels.cc:", at + 11);
    if (at != std::string::npos) line = std::atoi(log.c_str() + at + 11);
    std::string first = log.substr(at == std::string::npos ? 0 : at);
    first = first.substr(0, first.find('\n'));
    return internalError("generated CPU kernel for fused group '", groupAtLine(source, line),
                         "' does not compile (", command, "): ", first, "\n", sourceExcerpt(source, line));
  }
  auto built = readFile(work / "kernels.so");
  if (!built.ok()) {
    cleanup();
    return built.status();
  }
  std::string so = std::move(*built);
  // What the compiler wrote goes into every bundle built from it: it must be
  // a whole shared object (a wrapper that exits 0 after writing anything else
  // would ship a library no runtime can load).
  if (Status elf = checkSharedObject(so, strCat("the C++ compiler's output (", command, ")")); !elf.ok()) {
    cleanup();
    return environmentError(elf.message());
  }
  if (so.size() > kMaxCacheEntryBytes) {
    cleanup();
    return environmentError("the C++ compiler's output is ", so.size(), " bytes, more than a kernel library may be");
  }
  std::string entry(kCacheMagic, sizeof(kCacheMagic));
  entry += so;
  entry += entryDigest(key, so);
  // A failed store costs a compile next time, nothing else.
  if (writeFile(work / "entry.pcco", entry).ok()) fs::rename(work / "entry.pcco", cached, ec);
  cleanup();
  return so;
}

}  // namespace

int KernelTable::add(KernelSpec spec) {
  std::string key = specKey(spec);
  auto it = byKey_.find(key);
  if (it != byKey_.end()) return it->second;
  int i = static_cast<int>(specs_.size());
  specs_.push_back(std::move(spec));
  names_.push_back("pcc_k_" + hashHex(key));
  byKey_.emplace(key, i);
  return i;
}

void KernelTable::fallback(const std::string& node, const std::string& reason) {
  // Ranks of a data- or tensor-parallel plan share node names: report each once.
  if (std::find(fallbacks_.begin(), fallbacks_.end(), std::make_pair(node, reason)) == fallbacks_.end())
    fallbacks_.emplace_back(node, reason);
}

std::string sourceExcerpt(const std::string& source, int line) {
  std::istringstream in(source);
  std::string l, out;
  for (int i = 1; std::getline(in, l); ++i)
    if (line > 0 && i >= line - 2 && i <= line + 2) out += strCat(i == line ? ">" : " ", i, " | ", l, "\n");
  return out;
}

Status buildKernels(const KernelTable& table, const KernelOptions& opts, plan::Plan& plan,
                    std::map<std::string, std::string>* files) {
  if (opts.target != "cpu" && opts.target != "cuda")
    return invalidInput("--target ", opts.target, ": expected cpu or cuda");
  // Step 1.
  plan.set_kernel_target(opts.target);
  for (const auto& [node, reason] : table.fallbacks()) {
    plan::KernelFallback* f = plan.add_kernel_fallbacks();
    f->set_node(node);
    f->set_reason(reason);
  }
  if (table.specs().empty()) return Status::OK();
  // Step 2.
  std::vector<std::pair<std::string, const KernelSpec*>> kernels;
  for (size_t i = 0; i < table.specs().size(); ++i)
    kernels.emplace_back(table.name(static_cast<int>(i)), &table.specs()[i]);
  std::string source = emitCppLibrary(kernels);
  // Step 3.
  ASSIGN_OR_RETURN(std::string so, compileCpu(source, opts));
  // Step 4.
  (*files)["kernels/cpu.so"] = so;
  (*files)["kernels/cpu.cc"] = source;
  plan::KernelLibrary* lib = plan.mutable_cpu_library();
  lib->set_file("kernels/cpu.so");
  lib->set_nbytes(so.size());
  lib->set_crc32(crc32Of(so.data(), so.size()));
  lib->set_source_file("kernels/cpu.cc");
  for (size_t i = 0; i < table.specs().size(); ++i) {
    const KernelSpec& s = table.specs()[i];
    plan::Kernel* k = plan.add_kernels();
    k->set_name(table.name(static_cast<int>(i)));
    k->set_group(s.group);
    for (const KernelInput& in : s.inputs) *k->add_inputs() = toDesc(in.type);
    for (const KernelOutput& out : s.outputs) *k->add_outputs() = toDesc(out.type);
    describeEpilogue(s, k);
  }
  // Step 5.
  if (opts.target != "cuda") return Status::OK();
  ASSIGN_OR_RETURN(std::vector<CudaImageBytes> images, compileCudaKernels(table, opts));
  for (const CudaImageBytes& im : images) {
    plan::Kernel* k = plan.mutable_kernels(im.kernel);
    std::string base = strCat("kernels/", k->name(), ".", im.arch);
    plan::CudaImage* c = k->add_cuda();
    c->set_arch(im.arch);
    c->set_ptx_file(base + ".ptx");
    c->set_ptx_crc32(crc32Of(im.ptx.data(), im.ptx.size()));
    c->set_cubin_file(base + ".cubin");
    c->set_cubin_crc32(crc32Of(im.cubin.data(), im.cubin.size()));
    (*files)[base + ".ptx"] = im.ptx;
    (*files)[base + ".cubin"] = im.cubin;
  }
  for (int i = 0; i < plan.kernels_size(); ++i) {
    plan.mutable_kernels(i)->set_cuda_block(cudaBlockFor(table.specs()[i]));
    plan.mutable_kernels(i)->set_cuda_grid(cudaGridFor(table.specs()[i]));
  }
  return Status::OK();
}

}  // namespace pcc
