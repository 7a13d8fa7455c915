// Output files written whole or not at all (pcc-run --outputs and
// --profile-json, pcc-report -o): the bytes go into a temporary file in the
// target's own directory (so that the rename stays on one file system),
// are flushed to the disk (fsync), and the temporary is renamed over the
// target. A failed write (a full disk, a size limit) removes the temporary
// and leaves the target as it was: never a truncated or empty file that a
// later step could take for a result.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>

#include "runtime/support/status.h"

namespace pcc::cli {

/// Writes `bytes` to `path` atomically (see above). The file gets the mode
/// an ordinary new file would (0666 less the umask).
/// \returns ok, or an invalid-input error naming `path` and the failure.
/// Writes all of `bytes` to `fd`. \returns 0, or the errno of the failure
/// (ENOSPC for a write that took nothing).
inline int writeAll(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

/// Writes `bytes` to what `path` already is when that is not a regular file
/// (a device such as /dev/null or /dev/stdout, a FIFO): renaming a new file
/// over it would replace the device itself.
inline Status writeInPlace(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return invalidInput(path, ": cannot write: ", std::strerror(errno));
  if (int err = writeAll(fd, bytes); err != 0) {
    ::close(fd);
    return invalidInput(path, ": cannot write: ", std::strerror(err));
  }
  if (::close(fd) != 0) return invalidInput(path, ": cannot write: ", std::strerror(errno));
  return Status::OK();
}

inline Status writeFileAtomically(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows symbolic links
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    if (fs::is_directory(st)) return invalidInput(path, ": cannot write: it is a directory");
    return writeInPlace(path, bytes);
  }
  // A symbolic link to a file: replace the file it names, keep the link.
  fs::path target(path);
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    fs::path resolved = fs::weakly_canonical(target, ec);
    if (!ec) target = resolved;
  }
  const std::string leaf = target.filename().string();
  if (leaf.empty() || leaf == "." || leaf == "..") return invalidInput(path, ": not a file name");
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // A fresh name beside the target, created with O_EXCL and mode 0666 so that
  // the umask applies as to any new file (no umask change: ranks are threads).
  std::string temp;
  int fd = -1;
  for (unsigned attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    temp = (dir / ("." + leaf + ".tmp-" + std::to_string(::getpid()) + "-" +
                   std::to_string(std::random_device{}()) + "-" + std::to_string(attempt)))
               .string();
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return invalidInput(path, ": cannot write: ", std::strerror(errno));
  auto fail = [&](const char* what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    return invalidInput(path, ": ", what, ": ", std::strerror(err));
  };
  if (int err = writeAll(fd, bytes); err != 0) return fail("cannot write", err);
  if (::fsync(fd) != 0) return fail("cannot write", errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return fail("cannot write", errno);
  if (::rename(temp.c_str(), target.c_str()) != 0) return fail("cannot write (moving the written file into place)", errno);
  return Status::OK();
}

}  // namespace pcc::cli
