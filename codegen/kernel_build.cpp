// buildKernels: the plan's KernelTable -> kernel table, CPU shared object and
// (for --target cuda) PTX and cubin.
//
// Algorithm:
//  1. Record the fused groups left on the reference kernels in the plan.
//  2. Print every kernel of the table into one C++ source (emitCppLibrary).
//  3. Look the source up in the object cache by the hash of the source and
//     the compile command; on a miss, compile it with one call of the system
//     C++ compiler (-O3 -fPIC -shared -fopenmp) into a fresh directory and
//     rename the object into the cache (atomic: concurrent builds of the
//     same source do not clash). A compile error names the first failing
//     kernel's fused group and shows the offending source lines.
//  4. Put the object and its source under kernels/ with the object's size and
//     crc32, and one plan::Kernel per table entry with its parameter types.
//  5. --target cuda: compile every kernel through NVRTC (compileCudaKernels)
//     and add each arch's PTX and cubin files with their crc32s.
#include "codegen/kernel_build.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/epilogue.h"
#include "codegen/kernel_emit.h"
#include "runtime/plan_convert.h"
#include "runtime/plan_io.h"

extern char** environ;

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

/// Runs `argv` with stderr and stdout into `log`. \returns its exit status, or an error if it could not start.
StatusOr<int> runTool(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return environmentError("cannot run the C++ compiler '", argv[0], "': ", std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return environmentError("waiting for '", argv[0], "': ", std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// \returns the fused group whose code holds source line `line` (the last
/// "// GROUP" comment before it).
std::string groupAtLine(const std::string& source, int line) {
  std::istringstream in(source);
  std::string l, group = "?";
  for (int i = 1; std::getline(in, l) && i <= line; ++i)
    if (l.rfind("// ", 0) == 0 && i > 2) group = l.substr(3);
  return group;
}

/// Step 3. \returns the shared object's bytes.
StatusOr<std::string> compileCpu(const std::string& source, const KernelOptions& opts) {
  std::string cxx = opts.cxx;
  if (cxx.empty()) {
    const char* e = std::getenv("PCC_CXX");
    cxx = e && *e ? e : "c++";
  }
  std::vector<std::string> argv = {cxx};
  for (const char* f : kCxxFlags) argv.push_back(f);
  std::string command;
  for (const std::string& a : argv) command += a + " ";
  fs::path dir = opts.cacheDir.empty() ? defaultCacheDir() : opts.cacheDir;
  fs::path cached = dir / (hashHex(command + "\n" + source) + ".so");
  std::error_code ec;
  if (fs::is_regular_file(cached, ec) && fs::file_size(cached, ec) > 0) return readFile(cached);
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
  argv.push_back("-o");
  argv.push_back((work / "kernels.so").string());
  argv.push_back((work / "kernels.cc").string());
  auto rc = runTool(argv, work / "log.txt");
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
  ASSIGN_OR_RETURN(std::string so, readFile(work / "kernels.so"));
  fs::rename(work / "kernels.so", cached, ec);  // a failed store costs a compile next time, nothing else
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
