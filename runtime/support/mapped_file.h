// MappedFile: a read-only memory mapping of a whole file. Weights in external
// data files and plan bundles are used in place through Tensor views that hold
// a shared_ptr to the mapping, so they are never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/support/status.h"

namespace pcc {

class MappedFile {
 public:
  /// Maps `path` read-only. An empty file is valid (data() is nullptr, size() 0).
  /// \returns the mapping, or an invalid-input error naming the file when it
  /// cannot be opened or mapped.
  static StatusOr<std::shared_ptr<MappedFile>> open(const std::string& path);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  /// Unmaps the file.
  ~MappedFile();

  /// \returns the first byte of the file (nullptr for an empty file).
  const uint8_t* data() const { return data_; }
  /// \returns the file size in bytes.
  size_t size() const { return size_; }
  /// \returns the path the file was opened with.
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

/// Drops this process's mapping of the whole pages inside [data, data + n)
/// (madvise MADV_DONTNEED), so that streaming a large mapped file does not keep
/// every page read in the process's resident memory; a later read maps them
/// again from the page cache or the file. Only for ranges of a MappedFile
/// (read-only, private, never written: Tensor::isMapped), where this loses
/// nothing; best effort (errors are ignored).
void releaseMappedPages(const void* data, size_t n);

/// A test hook: when the environment sets PCC_FORBID_WEIGHT_READS=BYTES,
/// \returns BYTES (else 0). The importer then makes the whole pages inside
/// every external-data tensor of at least BYTES bytes unreadable
/// (forbidMappedReads), so that a compile which reads a weight's bytes while
/// planning dies on the spot; tests/e2e/test_compile_scale.py uses it to show
/// that planning reads no weight.
size_t forbiddenReadBytes();

/// Makes the whole pages inside [data, data + n) of a MappedFile unreadable
/// (mprotect PROT_NONE); best effort. Only for forbiddenReadBytes().
void forbidMappedReads(const void* data, size_t n);

}  // namespace pcc
