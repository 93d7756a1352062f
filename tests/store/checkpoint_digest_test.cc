// The canonical checkpoint encoding and digest: known answers (store/FORMAT.md), in-place
// hashing equals hashing the encoding, and the parser rejects every malformed input.
#include "store/checkpoint_digest.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "store/error.h"
#include "store/sha256.h"
#include "tests/store/test_util.h"

namespace vt::store {
namespace {

std::string F32(std::initializer_list<float> values) {
  std::string s(values.size() * 4, '\0');
  size_t i = 0;
  for (float v : values) std::memcpy(&s[4 * i++], &v, 4);  // little-endian host
  return s;
}

// FORMAT.md's example: fc.weight [2, 2] f32, fc.bias [2] f32, step [] i64, given unsorted.
struct Example {
  std::string weight = F32({1.0f, -2.0f, 0.5f, 3.25f});
  std::string bias = F32({0.25f, -0.0f});
  std::string step = std::string("\x07\0\0\0\0\0\0\0", 8);
  std::vector<StateEntry> entries() const {
    return {
        {"fc.weight", 1, {2, 2}, weight.data(), weight.size()},
        {"fc.bias", 1, {2}, bias.data(), bias.size()},
        {"step", 3, {}, step.data(), step.size()},
    };
  }
};

const char kExampleHex[] =
    "5654434b505400010000000000000003000766632e626961730101000000000000000200000000000000080000803e"
    "00000080000966632e77656967687401020000000000000002000000000000000200000000000000100000803f0000"
    "00c00000003f00005040000473746570030000000000000000080700000000000000";
const char kExampleDigest[] = "d9462ebc57c0d2e8a9f40bdf31b80d23184fc9c17172050ffec6ff9bd9d1ad16";

TEST_CASE("store: checkpoint encoding known answers", "[store][checkpoint]") {
  Example ex;
  std::string bytes = SerializeCheckpoint(ex.entries());
  CHECK(bytes.size() == 128);
  CHECK(ToHex(bytes) == kExampleHex);
  CHECK(CheckpointEncodedSize(ex.entries()) == 128);
  CHECK(ToHex(CheckpointDigest(ex.entries())) == kExampleDigest);
  CHECK(ToHex(Sha256Of(bytes)) == kExampleDigest);
  std::string empty = SerializeCheckpoint({});
  CHECK(ToHex(empty) == "5654434b505400010000000000000000");
  CHECK(ToHex(CheckpointDigest({})) ==
        "c421dc7f68340f80c139bc86848a2b0bfd40baf40625a6ca56e36e1217ebad9c");
}

TEST_CASE("store: checkpoint parse round trip", "[store][checkpoint]") {
  Example ex;
  std::string bytes = SerializeCheckpoint(ex.entries());
  std::vector<StateEntry> parsed = ParseCheckpoint(bytes);
  REQUIRE(parsed.size() == 3);
  CHECK(parsed[0].name == "fc.bias");
  CHECK(parsed[1].name == "fc.weight");
  CHECK(parsed[2].name == "step");
  CHECK(parsed[1].shape == std::vector<int64_t>{2, 2});
  CHECK(parsed[2].shape.empty());
  CHECK(parsed[2].dtype == 3);
  CHECK(std::string(static_cast<const char*>(parsed[1].data), parsed[1].bytes) == ex.weight);
  CHECK(SerializeCheckpoint(parsed) == bytes);
  CHECK(CheckpointDigest(parsed) == Sha256Of(bytes));
}

TEST_CASE("store: checkpoint digest hashes in place, order-independent, equal to the encoding",
          "[store][checkpoint]") {
  uint64_t seed = testing::TestSeed("checkpoint digest");
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::string> data;
    std::vector<StateEntry> entries;
    int n = static_cast<int>(rng() % 8);
    data.reserve(n);
    for (int i = 0; i < n; ++i) {
      StateEntry e;
      e.name = "layer" + std::to_string(rng() % 1000) + "." + std::to_string(i);
      e.dtype = static_cast<uint8_t>(1 + rng() % 5);
      int dims = static_cast<int>(rng() % 4);
      size_t count = 1;
      for (int d = 0; d < dims; ++d) {
        int64_t size = static_cast<int64_t>(rng() % 50);
        e.shape.push_back(size);
        count *= static_cast<size_t>(size);
      }
      data.emplace_back(count * DTypeSize(e.dtype), '\0');
      for (char& c : data.back()) c = static_cast<char>(rng());
      e.data = data.back().data();
      e.bytes = data.back().size();
      entries.push_back(e);
    }
    std::string bytes = SerializeCheckpoint(entries);
    Digest d = CheckpointDigest(entries);
    REQUIRE(d == Sha256Of(bytes));
    std::shuffle(entries.begin(), entries.end(), rng);
    REQUIRE(CheckpointDigest(entries) == d);
    REQUIRE(SerializeCheckpoint(entries) == bytes);
    REQUIRE(CheckpointEncodedSize(entries) == bytes.size());
    // One flipped data bit changes the digest.
    if (!data.empty() && !data[0].empty()) {
      data[0][0] = static_cast<char>(data[0][0] ^ 1);
      REQUIRE(CheckpointDigest(entries) != d);
    }
  }
  // A large entry (16 MiB) hashes in place to the same digest as its encoding.
  std::string big(16 << 20, '\0');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i >> 12);
  std::vector<StateEntry> one = {{"w", 1, {4, 1 << 20}, big.data(), big.size()}};
  CHECK(CheckpointDigest(one) == Sha256Of(SerializeCheckpoint(one)));
}

TEST_CASE("store: checkpoint entries are validated", "[store][checkpoint]") {
  std::string four(4, '\0');
  auto entry = [&](std::string name, uint8_t dtype, std::vector<int64_t> shape, size_t bytes) {
    return StateEntry{std::move(name), dtype, std::move(shape), four.data(), bytes};
  };
  CHECK_THROWS_WITH(CheckpointDigest({entry("", 1, {1}, 4)}),
                    Catch::Contains("name must be 1 to 1024 bytes"));
  CHECK_THROWS_WITH(CheckpointDigest({entry(std::string("a\0b", 3), 1, {1}, 4)}),
                    Catch::Contains("0x00"));
  CHECK_THROWS_WITH(CheckpointDigest({entry("w", 9, {1}, 4)}),
                    Catch::Contains("unknown dtype tag 9"));
  CHECK_THROWS_WITH(CheckpointDigest({entry("w", 1, {2}, 4)}),
                    Catch::Contains("needs 8 bytes, got 4"));
  CHECK_THROWS_WITH(CheckpointDigest({entry("w", 1, {-1}, 4)}),
                    Catch::Contains("negative dimension"));
  CHECK_THROWS_WITH(CheckpointDigest({entry("w", 1, std::vector<int64_t>(17, 1), 4)}),
                    Catch::Contains("at most 16 allowed"));
  CHECK_THROWS_WITH(CheckpointDigest({entry("w", 1, {1}, 4), entry("w", 5, {4}, 4)}),
                    Catch::Contains("appears twice"));
  CHECK_THROWS_WITH(SerializeCheckpoint({StateEntry{"w", 1, {1}, nullptr, 4}}),
                    Catch::Contains("data is null"));
  CHECK(DTypeFromName("float32") == 1);
  CHECK(DTypeFromName("bfloat16") == 0);
}

TEST_CASE("store: malformed checkpoint encodings are rejected", "[store][checkpoint]") {
  Example ex;
  const std::string good = SerializeCheckpoint(ex.entries());
  REQUIRE_NOTHROW(ParseCheckpoint(good));
  // Every strict prefix is truncated.
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_THROWS_AS(ParseCheckpoint(std::string_view(good).substr(0, n)), Error);
  }
  CHECK_THROWS_WITH(ParseCheckpoint(good + "x"), Catch::Contains("1 trailing bytes"));
  std::string bad = good;
  bad[0] = 'X';
  CHECK_THROWS_WITH(ParseCheckpoint(bad), Catch::Contains("magic"));
  bad = good;
  bad[7] = 2;
  CHECK_THROWS_WITH(ParseCheckpoint(bad), Catch::Contains("version 2"));
  bad = good;
  bad[15] = 4;  // four entries declared, three present
  CHECK_THROWS_AS(ParseCheckpoint(bad), Error);
  bad = good;
  bad[8] = 0x7f;  // absurd entry count
  CHECK_THROWS_WITH(ParseCheckpoint(bad), Catch::Contains("cannot fit"));
  // Swap the first two entries: names out of order.
  {
    std::vector<StateEntry> e = ex.entries();
    std::string bias = SerializeCheckpoint({e[1]}).substr(16);
    std::string weight = SerializeCheckpoint({e[0]}).substr(16);
    std::string step = SerializeCheckpoint({e[2]}).substr(16);
    std::string swapped = good.substr(0, 16) + weight + bias + step;
    CHECK_THROWS_WITH(ParseCheckpoint(swapped), Catch::Contains("ascending"));
    std::string dup = good.substr(0, 15) + std::string(1, '\x03') + bias + bias + step;
    CHECK_THROWS_WITH(ParseCheckpoint(dup), Catch::Contains("ascending"));
  }
  bad = good;
  bad[16 + 2 + 7] = 9;  // fc.bias dtype
  CHECK_THROWS_WITH(ParseCheckpoint(bad), Catch::Contains("unknown dtype tag 9"));
  bad = good;
  bad[16 + 2 + 7 + 1] = 17;  // fc.bias ndim
  CHECK_THROWS_WITH(ParseCheckpoint(bad), Catch::Contains("17 dimensions"));
  bad = good;
  bad[16 + 2 + 7 + 2 + 7] = 3;  // fc.bias shape [3] but 8 data bytes
  CHECK_THROWS_WITH(ParseCheckpoint(bad), Catch::Contains("needs 12 bytes, got 8"));
  bad = good;
  bad[16] = 0;
  bad[17] = 0;  // name length 0
  CHECK_THROWS_WITH(ParseCheckpoint(bad), Catch::Contains("name length 0"));
}

}  // namespace
}  // namespace vt::store
