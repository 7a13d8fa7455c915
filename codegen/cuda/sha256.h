// SHA-256 through OpenSSL's EVP interface: the kernel cache's keys and entry
// checksums.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace pcc::cuda {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  /// Adds `s` preceded by its length, so ("ab","c") and ("a","bc") differ.
  void updateField(std::string_view s);
  /// \returns the digest; the object must not be used afterwards.
  std::array<uint8_t, 32> finish();
  /// \returns the digest as 64 lowercase hex digits.
  std::string finishHex();

 private:
  evp_md_ctx_st* ctx_;
};

/// \returns the SHA-256 of `s` as lowercase hex.
std::string sha256Hex(std::string_view s);

}  // namespace pcc::cuda
