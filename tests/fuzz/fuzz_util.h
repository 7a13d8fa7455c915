// Shared by the libFuzzer targets: a private scratch folder per process, and
// writing the fuzzer's bytes to a file there (the readers under test take paths).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace pcc::fuzz {

/// \returns a folder private to this process, made on first use.
inline const std::string& scratchDir() {
  static const std::string dir = [] {
    std::string d = (std::filesystem::temp_directory_path() / ("pcc-fuzz-" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

/// Writes `size` bytes to `path`, replacing what was there.
inline void writeFile(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace pcc::fuzz
