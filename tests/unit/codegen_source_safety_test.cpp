// Generated source holds no model text that could leave its comment, and the
// C++ compiler that builds it is contained (docs/security.md):
// - hostile fused-group names (a line break before a constructor, a line
//   splice, a CR before an #include) compiled through buildKernels and the
//   real compiler give the tokens of the same kernels under a plain name;
// - the fuzz target's check (tests/fuzz/codegen_names_check.h) over
//   thousands of random names and attribute strings, C++ and CUDA;
// - a compile error still names the group as the model wrote it;
// - the compiler runs in the build directory with a cleaned environment,
//   and is stopped (with everything it started) at PCC_CXX_TIMEOUT;
// - a damaged object-cache entry is compiled again, with a warning.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "codegen/kernel_build.h"
#include "codegen/kernel_emit.h"
#include "tests/fuzz/codegen_names_check.h"
#include "tests/unit/codegen_kernel_test_util.h"

namespace pcc {
namespace {

namespace fs = std::filesystem;

const char* const kHostileNames[] = {
    "x\n__attribute__((constructor)) static void f(){}",
    "a\\\nb",
    "x\r#include \"/etc/passwd\"",
};

/// \returns the kernel of a bias add and Relu, its fused group named `group`.
KernelSpec biasRelu(const std::string& group) {
  auto g = fused("graph @g(%x: f32[4,8], %b: f32[8]) -> (%r: f32[4,8]) {\n"
                 "  %a = Add(%x, %b) : f32[4,8]\n"
                 "  %r = Relu(%a) : f32[4,8]\n"
                 "  return %r\n}\n");
  EXPECT_TRUE(g && firstFused(*g));
  auto spec = describeFused(*firstFused(*g));
  EXPECT_TRUE(spec.ok());
  KernelSpec s = spec.ok() ? *spec : KernelSpec{};
  s.group = group;
  return s;
}

/// A fresh folder under the temporary directory.
fs::path freshDir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// Writes an executable shell script `body` to `path`.
void writeScript(const fs::path& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  fs::permissions(path, fs::perms::owner_all);
}

/// \returns whether a process of group `pgid` is still alive (zombies, which
/// only wait to be reaped, do not count).
bool groupAlive(int pgid) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::ifstream f(e.path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    size_t close = line.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    char state = 0;
    int ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z') return true;
  }
  return false;
}

/// Builds one kernel of group `group` with `ko`. \returns the status, and the files in `files`.
Status buildOne(const std::string& group, const KernelOptions& ko, std::map<std::string, std::string>* files) {
  KernelTable table;
  table.add(biasRelu(group));
  plan::Plan p;
  return buildKernels(table, ko, p, files);
}

TEST(SourceSafety, TextIsEncodedAndReadsBack) {
  EXPECT_EQ(sourceSafeText("fused_add/relu 1 (x)"), "fused_add/relu 1 (x)");
  EXPECT_EQ(sourceSafeText("a\nb\\c*/d?\?/e%\"'\r"), "a%0Ab%5Cc%2A/d%3F%3F/e%25%22%27%0D");
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  std::string enc = sourceSafeText(all);
  EXPECT_EQ(enc.find_first_of("\n\r\\*?\"'"), std::string::npos) << enc;
  EXPECT_EQ(fromSourceSafeText(enc), all);
  EXPECT_EQ(fromSourceSafeText("100%"), "100%");  // a stray % reads as itself
}

TEST(SourceSafety, HostileGroupNamesCompileToTheSameTokens) {
  KernelOptions ko;
  ko.cacheDir = (fs::temp_directory_path() / "pcc_source_safety_cache").string();
  std::map<std::string, std::string> plain;
  Status st = buildOne("plain", ko, &plain);
  ASSERT_TRUE(st.ok()) << st.message();
  for (const char* name : kHostileNames) {
    std::map<std::string, std::string> files;
    Status built = buildOne(name, ko, &files);
    EXPECT_TRUE(built.ok()) << name << ": " << built.message();
    EXPECT_EQ(fuzz::compareSources(files["kernels/cpu.cc"], plain["kernels/cpu.cc"]), "")
        << name << ":\n" << files["kernels/cpu.cc"];
  }
}

TEST(SourceSafety, RandomNamesAndAttributesStayInTheirComments) {
  fuzz::CodegenNamesCheck check;
  ASSERT_TRUE(check.ready());
  for (const char* name : kHostileNames) EXPECT_EQ(check.check(name, "none"), "") << name;
  std::mt19937 rng(20261206);
  // Mostly the bytes that end comments and strings, and any byte.
  const std::string risky = "\n\r\\/*?\"'%#<> ({;})x_";
  auto text = [&](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i)
      s += rng() % 3 ? risky[rng() % risky.size()] : static_cast<char>(rng() % 256);
    return s;
  };
  int failures = 0;
  for (int i = 0; i < 3000 && failures < 5; ++i) {
    std::string name = text(rng() % 24), attr = i % 4 == 0 ? text(rng() % 6) : (i % 2 ? "tanh" : "none");
    std::string d = check.check(name, attr);
    if (!d.empty()) {
      ++failures;
      ADD_FAILURE() << "name '" << sourceSafeText(name) << "', attribute '" << sourceSafeText(attr) << "': " << d;
    }
  }
}

TEST(SourceSafety, ACompileErrorNamesTheGroupAsTheModelWroteIt) {
  fs::path dir = freshDir("pcc_source_safety_error");
  writeScript(dir / "cxx.sh", "src=\"\"\nfor a; do src=\"$a\"; done\nn=$(wc -l < \"$src\")\n"
                              "echo \"$src:$n:1: error: injected\"\nexit 1\n");
  KernelOptions ko;
  ko.cxx = (dir / "cxx.sh").string();
  ko.cacheDir = (dir / "cache").string();
  std::map<std::string, std::string> files;
  Status st = buildOne("odd*/name%\\", ko, &files);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("fused group 'odd*/name%\\'"), std::string::npos) << st.message();
  fs::remove_all(dir);
}

TEST(SourceSafety, TheCompilerRunsInItsBuildDirectoryWithACleanedEnvironment) {
  fs::path dir = freshDir("pcc_source_safety_env");
  // A "compiler" that records its environment and working directory.
  writeScript(dir / "cxx.sh", "env > \"" + (dir / "env.txt").string() + "\"\npwd > \"" +
                                  (dir / "pwd.txt").string() + "\"\nexit 1\n");
  KernelOptions ko;
  ko.cxx = (dir / "cxx.sh").string();
  ko.cacheDir = (dir / "cache").string();
  const char* vars[] = {"CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH",
                        "LIBRARY_PATH", "DEPENDENCIES_OUTPUT"};
  for (const char* v : vars) setenv(v, (dir / "evil").c_str(), 1);
  std::map<std::string, std::string> files;
  Status st = buildOne("env", ko, &files);
  for (const char* v : vars) unsetenv(v);
  EXPECT_FALSE(st.ok());
  std::stringstream env, pwd;
  env << std::ifstream(dir / "env.txt").rdbuf();
  pwd << std::ifstream(dir / "pwd.txt").rdbuf();
  EXPECT_NE(env.str().find("PATH="), std::string::npos) << env.str();
  for (const char* v : vars) EXPECT_EQ(env.str().find(std::string("\n") + v + "="), std::string::npos) << v;
  EXPECT_NE(env.str().rfind("CPATH=", 0), 0u) << env.str();
  std::string cwd = pwd.str();
  EXPECT_EQ(cwd.rfind((dir / "cache" / "build-").string(), 0), 0u) << cwd;
  fs::remove_all(dir);
}

TEST(SourceSafety, ACompilerPastItsTimeLimitIsStopped) {
  fs::path dir = freshDir("pcc_source_safety_timeout");
  // A "compiler" that starts a child and waits for it: both must be stopped.
  writeScript(dir / "cxx.sh", "echo $$ > \"" + (dir / "pid.txt").string() + "\"\nsleep 60 &\nwait\n");
  KernelOptions ko;
  ko.cxx = (dir / "cxx.sh").string();
  ko.cacheDir = (dir / "cache").string();
  setenv("PCC_CXX_TIMEOUT", "1", 1);
  auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, std::string> files;
  Status st = buildOne("slow", ko, &files);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unsetenv("PCC_CXX_TIMEOUT");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("within 1 s"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("PCC_CXX_TIMEOUT"), std::string::npos) << st.message();
  EXPECT_LT(seconds, 10);
  int pid = 0;
  std::ifstream(dir / "pid.txt") >> pid;
  ASSERT_GT(pid, 0);
  // The script's process group is gone (its sleep too), not left running.
  bool alive = true;
  for (int i = 0; i < 100 && alive; ++i) {
    alive = groupAlive(pid);
    if (alive) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(alive);
  setenv("PCC_CXX_TIMEOUT", "soon", 1);
  st = buildOne("slow", ko, &files);
  unsetenv("PCC_CXX_TIMEOUT");
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("PCC_CXX_TIMEOUT=soon"), std::string::npos) << st.message();
  fs::remove_all(dir);
}

TEST(SourceSafety, ADamagedCacheEntryIsCompiledAgain) {
  fs::path dir = freshDir("pcc_source_safety_cache_entry");
  KernelOptions ko;
  ko.cacheDir = (dir / "cache").string();
  std::map<std::string, std::string> first;
  Status st = buildOne("cached", ko, &first);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir / "cache")) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u);
  const fs::path entry = entries[0];
  const std::string whole = [&] {
    std::stringstream s;
    s << std::ifstream(entry, std::ios::binary).rdbuf();
    return s.str();
  }();
  // A second build reads the entry: no warning.
  testing::internal::CaptureStderr();
  std::map<std::string, std::string> again;
  st = buildOne("cached", ko, &again);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(st.ok() && again["kernels/cpu.so"] == first["kernels/cpu.so"]);
  struct Damage {
    const char* what;
    std::string bytes;
  };
  std::string flipped = whole;
  flipped[flipped.size() / 2] ^= 1;
  const Damage damages[] = {{"truncated", whole.substr(0, whole.size() / 2)},
                            {"one byte flipped", flipped},
                            {"replaced by another library", std::string("\x7f" "ELF", 4) + std::string(4096, 'x')},
                            {"empty", ""}};
  for (const Damage& d : damages) {
    std::ofstream(entry, std::ios::binary | std::ios::trunc) << d.bytes;
    testing::internal::CaptureStderr();
    std::map<std::string, std::string> rebuilt;
    st = buildOne("cached", ko, &rebuilt);
    std::string err = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(st.ok()) << d.what << ": " << st.message();
    EXPECT_NE(err.find("warning: kernel cache entry"), std::string::npos) << d.what << ": " << err;
    EXPECT_TRUE(rebuilt["kernels/cpu.so"] == first["kernels/cpu.so"]) << d.what;
    // The entry is whole again.
    testing::internal::CaptureStderr();
    st = buildOne("cached", ko, &rebuilt);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << d.what;
  }
  // An entry of 8 GiB (sparse: no disk used) is damaged without being read
  // into memory (reading it took gigabytes and minutes).
  fs::resize_file(entry, uintmax_t{8} << 30);
  testing::internal::CaptureStderr();
  std::map<std::string, std::string> rebuilt;
  st = buildOne("cached", ko, &rebuilt);
  std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_NE(err.find("larger than any kernel library"), std::string::npos) << err;
  EXPECT_TRUE(rebuilt["kernels/cpu.so"] == first["kernels/cpu.so"]);
  EXPECT_LT(fs::file_size(entry), uintmax_t{1} << 30);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pcc
