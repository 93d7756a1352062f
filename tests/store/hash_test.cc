// SHA-256 (EVP), hex, CRC-32C and the record envelope: known-answer vectors and properties.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "store/crc32c.h"
#include "store/envelope.h"
#include "store/keys.h"
#include "store/sha256.h"
#include "tests/store/test_util.h"

namespace vt::store {
namespace {

// Bit-at-a-time CRC-32C, straight from the definition (reflected polynomial 0x82F63B78).
uint32_t ReferenceCrc32c(const std::string& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : data) {
    crc ^= b;
    for (int i = 0; i < 8; ++i) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return crc ^ 0xFFFFFFFFu;
}

TEST_CASE("store: SHA-256 known answers (FIPS 180-2)", "[store]") {
  CHECK(ToHex(Sha256Of("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(ToHex(Sha256Of("abc")) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(ToHex(Sha256Of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  CHECK(ToHex(Sha256Of(million)) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("store: SHA-256 incremental equals one-shot, and Final resets", "[store]") {
  std::string msg;
  for (int i = 0; i < 1000; ++i) msg.push_back(static_cast<char>(i * 7));
  Sha256 h;
  for (size_t i = 0; i < msg.size(); i += 37) h.Update(std::string_view(msg).substr(i, 37));
  CHECK(h.Final() == Sha256Of(msg));
  h.Update("abc");
  CHECK(h.Final() == Sha256Of("abc"));
  Sha256 ints;
  ints.UpdateU16(0x0102).UpdateU32(0x03040506).UpdateU64(0x0708090a0b0c0d0eULL).UpdateU8(0x0f);
  CHECK(ints.Final() ==
        Sha256Of(std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f", 15)));
}

TEST_CASE("store: hex encoding and decoding", "[store]") {
  CHECK(ToHex(std::string("\x00\xff\x10", 3)) == "00ff10");
  CHECK(FromHex("00FF10") == std::string("\x00\xff\x10", 3));
  CHECK(FromHex("") == std::string());
  CHECK_FALSE(FromHex("abc").has_value());
  CHECK_FALSE(FromHex("zz").has_value());
  Digest d = Sha256Of("x");
  CHECK(DigestFromHex(ToHex(d)) == d);
  CHECK_FALSE(DigestFromHex(ToHex(d).substr(2)).has_value());
  CHECK_FALSE(DigestFromBytes("short").has_value());
}

TEST_CASE("store: CRC-32C known answers (RFC 3720 B.4) and hardware = portable", "[store]") {
  CHECK(Crc32c("123456789") == 0xE3069283u);
  CHECK(Crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(Crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  std::string inc;
  for (int i = 0; i < 32; ++i) inc.push_back(static_cast<char>(i));
  CHECK(Crc32c(inc) == 0x46DD794Eu);
  CHECK(Crc32c("") == 0u);

  uint64_t seed = testing::TestSeed("crc32c");
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    std::string data(rng() % 300, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    uint32_t ref = ReferenceCrc32c(data);
    CHECK(Crc32c(data) == ref);
    CHECK(Crc32cExtendPortable(0, data.data(), data.size()) == ref);
    size_t split = data.empty() ? 0 : rng() % data.size();
    // Unaligned starts and chaining.
    uint32_t part = Crc32cExtend(0, data.data(), split);
    CHECK(Crc32cExtend(part, data.data() + split, data.size() - split) == ref);
  }
  // Long inputs take the three-stream path (blocks of 3 x 256 and 3 x 8192 bytes): around
  // every block boundary, at unaligned starts, and chained.
  std::string big(3 * 8192 * 3 + 3 * 256 * 2 + 77, '\0');
  for (char& c : big) c = static_cast<char>(rng());
  for (size_t len : {size_t{767}, size_t{768}, size_t{769}, size_t{3 * 8192 - 1}, size_t{3 * 8192},
                     size_t{3 * 8192 + 8}, size_t{2 * 3 * 8192 + 3 * 256 + 5}, big.size() - 3}) {
    for (size_t offset : {size_t{0}, size_t{1}, size_t{3}}) {
      INFO("length " << len << " offset " << offset);
      std::string slice = big.substr(offset, len);
      uint32_t ref = ReferenceCrc32c(slice);
      CHECK(Crc32cExtend(0, slice.data(), slice.size()) == ref);
      CHECK(Crc32cExtendPortable(0, slice.data(), slice.size()) == ref);
      uint32_t part = Crc32cExtend(0, slice.data(), len / 3);
      CHECK(Crc32cExtend(part, slice.data() + len / 3, len - len / 3) == ref);
    }
  }
}

TEST_CASE("store: envelope known answer and every single-byte flip detected", "[store]") {
  // FORMAT.md, "Record envelope": logs record "abc" under LogKey("run-1", 1, "fc1:fwd", 0).
  std::string key = LogKey("run-1", 1, "fc1:fwd", 0);
  CHECK(ToHex(key) == "72756e2d310000000000000000016663313a6677640000000000");
  std::string sealed = Seal(Family::kLogs, key, "abc");
  CHECK(ToHex(sealed) == "6162633a45859e");
  REQUIRE(Unseal(Family::kLogs, key, sealed) == std::string_view("abc"));
  // The same bytes under another key or family do not pass.
  CHECK_FALSE(Unseal(Family::kLogs, LogKey("run-1", 1, "fc1:fwd", 1), sealed).has_value());
  CHECK_FALSE(Unseal(Family::kTranscripts, key, sealed).has_value());
  CHECK_FALSE(Unseal(Family::kLogs, key, "abc").has_value());
  CHECK_FALSE(Unseal(Family::kLogs, key, "").has_value());
  for (size_t i = 0; i < sealed.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = sealed;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      CHECK_FALSE(Unseal(Family::kLogs, key, bad).has_value());
    }
    std::string truncated = sealed.substr(0, i);
    CHECK_FALSE(Unseal(Family::kLogs, key, truncated).has_value());
  }
  CHECK(EnvelopeTrailer(Family::kLogs, key, "abc") == sealed.substr(3));
}

}  // namespace
}  // namespace vt::store

TEST_CASE("store: CRC-32C of blocks joined in order equals the CRC of the whole", "[store]") {
  std::vector<uint8_t> data(3 * vt::store::kCrc32cBlock + 12345);
  uint32_t x = 12345;
  for (auto& b : data) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 24);
  }
  for (size_t blocks : {size_t{1}, size_t{2}, size_t{3}}) {
    const size_t tail = blocks == 3 ? 12345 : 0;
    const size_t n = blocks * vt::store::kCrc32cBlock + tail;
    uint32_t joined = vt::store::Crc32cExtend(0, data.data(), vt::store::kCrc32cBlock);
    for (size_t b = 1; b < blocks; ++b) {
      joined = vt::store::Crc32cAppendBlock(
          joined, vt::store::Crc32cExtend(0, data.data() + b * vt::store::kCrc32cBlock,
                                          vt::store::kCrc32cBlock));
    }
    joined = vt::store::Crc32cExtend(joined, data.data() + blocks * vt::store::kCrc32cBlock, tail);
    CHECK(joined == vt::store::Crc32cExtend(0, data.data(), n));
  }
}
