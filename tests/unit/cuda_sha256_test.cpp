#include "codegen/cuda/sha256.h"

#include <gtest/gtest.h>

namespace pcc::cuda {
namespace {

// FIPS 180-4 example vectors.
TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalEqualsOneShot) {
  std::string msg;
  for (int i = 0; i < 1000; ++i) msg.push_back(char(i * 7 + 3));
  // Split at sizes around the 64-byte block and the 56-byte padding limit.
  for (size_t cut : {0, 1, 55, 56, 63, 64, 65, 127, 128, 999, 1000}) {
    Sha256 h;
    h.update(msg.data(), cut);
    h.update(msg.data() + cut, msg.size() - cut);
    EXPECT_EQ(h.finishHex(), sha256Hex(msg)) << "cut at " << cut;
  }
}

TEST(Sha256Test, FieldsAreLengthPrefixed) {
  Sha256 a, b;
  a.updateField("ab");
  a.updateField("c");
  b.updateField("a");
  b.updateField("bc");
  EXPECT_NE(a.finishHex(), b.finishHex());
}

}  // namespace
}  // namespace pcc::cuda
