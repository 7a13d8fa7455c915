// On-disk cache of compiled kernels, so that recompiling a model (or another
// model with the same fused groups) does not pay NVRTC again.
//
// One file per (source, kernel name, arch, NVRTC options, NVRTC version),
// named by the SHA-256 of those. Files are written to a temporary name and
// renamed into place, so a reader never sees half a file; each file ends with
// the SHA-256 of its contents, so a damaged one is detected, ignored and
// replaced by a fresh compile.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cuda/nvrtc_compiler.h"

namespace pcc::cuda {

class KernelCache {
 public:
  /// Uses (and creates when needed) the directory `dir`.
  explicit KernelCache(std::string dir);

  /// \returns $PCC_CACHE_DIR when set, else $HOME/.cache/pcc/kernels, else
  /// a pcc-kernels folder in the system's temporary directory.
  static std::string defaultDir();

  /// \returns the kernels for every arch of `opts`, from the cache where
  /// present and valid, compiled (and then stored) otherwise; errors as
  /// compileCuda. A failure to write the cache does not fail the call; it is
  /// counted in writeFailures() and described by lastWriteError().
  StatusOr<std::vector<CompiledKernel>> getOrCompile(const std::string& source, const std::string& name,
                                                     const CudaCompileOptions& opts);

  /// \returns the key (64 hex characters) of one cache entry.
  StatusOr<std::string> key(const std::string& source, const std::string& name, const std::string& arch,
                            const CudaCompileOptions& opts) const;
  /// \returns the file an entry with key `key` lives in.
  std::string pathFor(const std::string& key) const;

  const std::string& dir() const { return dir_; }
  /// Calls whose every arch came from the disk.
  int hits() const { return hits_; }
  /// Calls that had to compile at least one arch.
  int misses() const { return misses_; }
  /// Entries found on disk but rejected (bad checksum, truncated, foreign).
  int corruptEntries() const { return corrupt_; }
  int writeFailures() const { return writeFailures_; }
  std::string lastWriteError() const;

 private:
  /// \returns true and fills `out` when the entry at `path` is intact and
  /// holds `key`, `name` and `arch`.
  bool load(const std::string& path, const std::string& key, const std::string& name, const std::string& arch,
            CompiledKernel& out);
  Status store(const std::string& path, const std::string& key, const CompiledKernel& k) const;

  std::string dir_;
  std::atomic<int> hits_{0}, misses_{0}, corrupt_{0}, writeFailures_{0};
  mutable std::atomic<int> tmpCounter_{0};
  mutable std::mutex mu_;
  std::string lastWriteError_;  // guarded by mu_
};

}  // namespace pcc::cuda
