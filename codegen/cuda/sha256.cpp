#include "codegen/cuda/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <new>

namespace pcc::cuda {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(const void* data, size_t n) { EVP_DigestUpdate(ctx_, data, n); }

void Sha256::updateField(std::string_view s) {
  uint64_t n = s.size();
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  update(len, sizeof(len));
  update(s);
}

std::array<uint8_t, 32> Sha256::finish() {
  std::array<uint8_t, 32> out{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx_, out.data(), &n);
  return out;
}

std::string Sha256::finishHex() {
  std::array<uint8_t, 32> d = finish();
  std::string hex;
  char b[3];
  for (uint8_t x : d) {
    std::snprintf(b, sizeof b, "%02x", x);
    hex += b;
  }
  return hex;
}

std::string sha256Hex(std::string_view s) {
  Sha256 h;
  h.update(s);
  return h.finishHex();
}

}  // namespace pcc::cuda
