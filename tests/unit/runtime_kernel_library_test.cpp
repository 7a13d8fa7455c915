// KernelLibrary (runtime/kernel_library.cpp), what a plan's kernel table may
// name and what is loaded (docs/security.md): only generated kernel symbols,
// only ones the library itself defines (not its dependencies'), only from a
// regular file that is a whole ELF shared object.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/kernel_library.h"
#include "runtime/plan_io.h"

namespace pcc {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOwn = "pcc_k_00000000000000bb";
constexpr const char* kDeps = "pcc_k_00000000000000aa";

/// A bundle folder with kernels/ under the temporary directory.
fs::path freshBundle(const std::string& name) {
  fs::path d = fs::temp_directory_path() / name;
  fs::remove_all(d);
  fs::create_directories(d / "kernels");
  return d;
}

std::string readAll(const fs::path& p) {
  std::stringstream s;
  s << std::ifstream(p, std::ios::binary).rdbuf();
  return s.str();
}

/// \returns a plan whose CPU library is kernels/cpu.so of `bytes`, with kernels `names`.
plan::Plan planFor(const std::string& bytes, const std::vector<std::string>& names) {
  plan::Plan p;
  p.mutable_cpu_library()->set_file("kernels/cpu.so");
  p.mutable_cpu_library()->set_nbytes(bytes.size());
  p.mutable_cpu_library()->set_crc32(crc32Of(bytes.data(), bytes.size()));
  for (const std::string& n : names) p.add_kernels()->set_name(n);
  return p;
}

/// Compiles `source` into shared object `out` with the system C++ compiler and `extra` arguments.
bool compile(const fs::path& dir, const std::string& source, const fs::path& out, const std::string& extra = "") {
  fs::path src = out.string() + ".cc";
  std::ofstream(src) << source;
  std::string cmd = "c++ -shared -fPIC -o '" + out.string() + "' '" + src.string() + "' " + extra + " 2>&1";
  return std::system(cmd.c_str()) == 0;
}

std::string entry(const char* name) {
  return std::string("extern \"C\" void ") + name + "(const void* const*, void* const*) {}\n";
}

TEST(KernelLibrary, NamesOtherThanKernelSymbolsAreRefused) {
  fs::path dir = freshBundle("pcc_kernel_library_names");
  ASSERT_TRUE(compile(dir, entry(kOwn), dir / "kernels" / "cpu.so"));
  std::string bytes = readAll(dir / "kernels" / "cpu.so");
  for (std::string bad : {"abort", "system", "fork", "pcc_k_", "pcc_k_00000000000000BB", "pcc_k_00000000000000bb0",
                          "pcc_k_0000000000000g00"}) {
    auto lib = KernelLibrary::read(dir.string(), planFor(bytes, {kOwn, bad}));
    ASSERT_FALSE(lib.ok()) << bad;
    EXPECT_EQ(lib.status().code(), StatusCode::kInvalidInput) << bad;
    EXPECT_NE(lib.status().message().find("kernel 1 '" + bad + "' is not a generated kernel's symbol"),
              std::string::npos)
        << lib.status().message();
  }
  auto lib = KernelLibrary::read(dir.string(), planFor(bytes, {kOwn}));
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  EXPECT_TRUE((*lib)->cpuEntry(0).ok());
  fs::remove_all(dir);
}

TEST(KernelLibrary, ASymbolOfADependencyIsNotAKernel) {
  // cpu.so defines kOwn and needs a library that defines kDeps: dlsym would
  // find both through cpu.so's handle.
  fs::path dir = freshBundle("pcc_kernel_library_deps");
  fs::path dep = dir / "libdep.so";
  ASSERT_TRUE(compile(dir, entry(kDeps), dep));
  ASSERT_TRUE(compile(dir, entry(kOwn), dir / "kernels" / "cpu.so", "-Wl,--no-as-needed '" + dep.string() + "'"));
  std::string bytes = readAll(dir / "kernels" / "cpu.so");
  auto lib = KernelLibrary::read(dir.string(), planFor(bytes, {kOwn, kDeps}));
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  auto own = (*lib)->cpuEntry(0);
  EXPECT_TRUE(own.ok()) << own.status().message();
  auto foreign = (*lib)->cpuEntry(1);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(foreign.status().message().find("is not defined in the library"), std::string::npos)
      << foreign.status().message();
  fs::remove_all(dir);
}

TEST(KernelLibrary, OnlyAWholeElfInARegularFileIsRead) {
  fs::path dir = freshBundle("pcc_kernel_library_elf");
  fs::path so = dir / "kernels" / "cpu.so";
  ASSERT_TRUE(compile(dir, entry(kOwn), so));
  std::string bytes = readAll(so);
  ASSERT_GT(bytes.size(), 4096u);
  // Cut short, with the plan re-made for the cut bytes (size and crc32 match).
  for (size_t keep : {bytes.size() / 2, bytes.size() - 64, size_t{40}}) {
    std::string cut = bytes.substr(0, keep);
    std::ofstream(so, std::ios::binary | std::ios::trunc) << cut;
    auto lib = KernelLibrary::read(dir.string(), planFor(cut, {kOwn}));
    ASSERT_FALSE(lib.ok()) << keep;
    EXPECT_NE(lib.status().message().find("not a whole shared object"), std::string::npos)
        << lib.status().message();
  }
  std::string text = "#!/bin/sh\necho not a library\n";
  std::ofstream(so, std::ios::binary | std::ios::trunc) << text;
  EXPECT_FALSE(KernelLibrary::read(dir.string(), planFor(text, {kOwn})).ok());
  // A FIFO: refused at once, never waited on for a writer.
  fs::remove(so);
  ASSERT_EQ(::mkfifo(so.c_str(), 0600), 0);
  auto lib = KernelLibrary::read(dir.string(), planFor(bytes, {kOwn}));
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("not a regular file"), std::string::npos) << lib.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pcc
