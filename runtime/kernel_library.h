// The generated kernels of a plan bundle on CPU ranks: the shared object
// kernels/cpu.so that the compiler built (codegen/kernel_build.h), checked
// against the plan's crc32 and loaded with dlopen (docs/kernels.md).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/plan.pb.h"
#include "runtime/support/status.h"

namespace pcc {

/// A generated kernel's CPU entry: in[k] points at input k's elements,
/// out[k] at output k's, each of the type in the plan's kernel table.
using CpuKernelEntry = void (*)(const void* const* in, void* const* out);

class KernelLibrary {
 public:
  /// Reads `plan`'s CPU library from bundle `dir` (confined to it) and checks
  /// its size and crc32; nothing is loaded yet.
  /// \returns the library, or an invalid-input error naming the file when it
  /// is missing, lies outside `dir`, or does not match the plan.
  static StatusOr<std::shared_ptr<KernelLibrary>> read(const std::string& dir, const plan::Plan& plan);
  ~KernelLibrary();

  /// Loads the checked bytes on first use (from an anonymous in-memory file,
  /// so what runs is what was checked, whatever happens to the bundle later).
  /// \returns the entry of kernel `index` of the plan's table, or an
  /// invalid-input error when it cannot be loaded or lacks the symbol.
  StatusOr<CpuKernelEntry> cpuEntry(int index);

 private:
  KernelLibrary() = default;
  std::string path_;  // for messages
  std::string bytes_;
  std::vector<std::string> names_;
  std::mutex mu_;
  void* handle_ = nullptr;
  int fd_ = -1;
  Status loaded_;
  bool tried_ = false;
};

/// \returns OK when `bytes` is a whole ELF64 shared object for this machine
/// (header, program and section headers and every loaded segment within the
/// bytes), else an invalid-input error naming `shown` and the flaw. The
/// loader checks a plan's library with it; the compiler checks what its C++
/// compiler wrote before putting it into a bundle.
Status checkSharedObject(const std::string& bytes, const std::string& shown);

}  // namespace pcc
