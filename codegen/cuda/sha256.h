// SHA-256, used to key and to checksum kernel-cache entries. A 64-bit hash
// would do for corruption checks, but the key must not collide across the
// many (source, arch, options) combinations a long-lived cache sees.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pcc::cuda {

/// Incremental SHA-256 (FIPS 180-4).
class Sha256 {
 public:
  Sha256();
  /// Feeds `n` bytes at `data`.
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  /// Feeds `s` prefixed by its length, so that ("ab", "c") and ("a", "bc")
  /// hash differently when several fields are fed in a row.
  void updateField(std::string_view s);
  /// \returns the 32-byte digest; the hasher must not be used afterwards.
  std::array<uint8_t, 32> finish();
  /// \returns the digest as 64 lower-case hex characters.
  std::string finishHex();

 private:
  void block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t bufLen_ = 0;
  uint64_t totalBytes_ = 0;
};

/// \returns the SHA-256 of `s` as 64 hex characters.
std::string sha256Hex(std::string_view s);

}  // namespace pcc::cuda
