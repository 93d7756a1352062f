// CRC-32C paths (table, crc32 instruction, VPCLMULQDQ folding): every path this
// CPU supports gives the table implementation's value for every length up to 2 KB at every
// start alignment within a cache line, for long inputs, across the internal block sizes, on
// random, all-zero and all-0xFF data, and when chained at random split points.
#include "store/crc32c.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/store/test_util.h"

namespace vt::store {
namespace {

constexpr Crc32cPath kAllPaths[] = {Crc32cPath::kTable, Crc32cPath::kSse42,
                                    Crc32cPath::kVpclmulAvx512};

std::vector<Crc32cPath> SupportedPaths() {
  std::vector<Crc32cPath> paths;
  for (Crc32cPath path : kAllPaths) {
    if (Crc32cPathSupported(path)) paths.push_back(path);
  }
  std::printf("crc32c: active path %s; testing", Crc32cPathName(Crc32cActivePath()));
  for (Crc32cPath path : paths) std::printf(" %s", Crc32cPathName(path));
  std::printf("\n");
  std::fflush(stdout);
  return paths;
}

enum class Fill { kRandom, kZeros, kOnes };

const char* FillName(Fill fill) {
  switch (fill) {
    case Fill::kRandom:
      return "random";
    case Fill::kZeros:
      return "zeros";
    case Fill::kOnes:
      return "0xFF";
  }
  return "?";
}

// A buffer whose data() is 64-byte aligned, so that `data() + k` starts at alignment k.
class AlignedBuffer {
 public:
  AlignedBuffer(size_t bytes, Fill fill, std::mt19937_64& rng) : storage_(bytes + 64) {
    size_t skew = reinterpret_cast<uintptr_t>(storage_.data()) % 64;
    data_ = storage_.data() + (skew == 0 ? 0 : 64 - skew);
    for (size_t i = 0; i < bytes; ++i) {
      data_[i] = fill == Fill::kZeros  ? 0
                 : fill == Fill::kOnes ? 0xFF
                                       : static_cast<uint8_t>(rng());
    }
  }
  uint8_t* data() { return data_; }

 private:
  std::vector<uint8_t> storage_;
  uint8_t* data_;
};

// Counts mismatches and keeps the first few for the failure message, so that the sweeps
// below run millions of comparisons without one Catch assertion each.
struct Mismatches {
  size_t count = 0;
  std::ostringstream first;
  void Add(uint32_t got, uint32_t want, Crc32cPath path, const std::string& what) {
    if (count++ < 10) {
      first << Crc32cPathName(path) << " " << what << ": got " << std::hex << got << " want "
            << want << std::dec << "\n";
    }
  }
};

TEST_CASE("store: CRC-32C known answer and path names on every supported path", "[store]") {
  CHECK(Crc32cPathSupported(Crc32cPath::kTable));
  CHECK(Crc32cPathSupported(Crc32cActivePath()));
  CHECK(std::string(Crc32cPathName(Crc32cPath::kVpclmulAvx512)) == "vpclmulqdq-avx512");
  for (Crc32cPath path : SupportedPaths()) {
    INFO("path " << Crc32cPathName(path));
    CHECK(Crc32cExtendWith(path, 0, "123456789", 9) == 0xE3069283u);
    CHECK(Crc32cExtendWith(path, 0, "", 0) == 0u);
    CHECK(Crc32cExtendWith(path, 0x12345678u, "", 0) == 0x12345678u);
  }
  CHECK(Crc32cExtend(0, "123456789", 9) == 0xE3069283u);
}

TEST_CASE("store: CRC-32C paths agree for every length to 2 KB at every alignment", "[store]") {
  const std::vector<Crc32cPath> paths = SupportedPaths();
  uint64_t seed = testing::TestSeed("crc32c every length");
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr size_t kMaxLength = 2048;
  Mismatches bad;
  for (Fill fill : {Fill::kRandom, Fill::kZeros, Fill::kOnes}) {
    AlignedBuffer buffer(kMaxLength + 64, fill, rng);
    for (size_t align = 0; align < 64; ++align) {
      const uint8_t* p = buffer.data() + align;
      // Half the starts from a zero CRC (the common case), half from an arbitrary one.
      const uint32_t init = align % 2 == 0 ? 0 : static_cast<uint32_t>(rng());
      // The reference for each length extends the one before by a byte.
      uint32_t want = init;
      for (size_t n = 0; n <= kMaxLength; ++n) {
        if (n > 0) want = Crc32cExtendPortable(want, p + n - 1, 1);
        for (Crc32cPath path : paths) {
          const uint32_t got = Crc32cExtendWith(path, init, p, n);
          if (got != want) {
            std::ostringstream what;
            what << FillName(fill) << " length " << n << " alignment " << align;
            bad.Add(got, want, path, what.str());
          }
        }
      }
    }
  }
  INFO(bad.first.str());
  CHECK(bad.count == 0);
}

TEST_CASE("store: CRC-32C paths agree on long inputs and around block sizes", "[store]") {
  const std::vector<Crc32cPath> paths = SupportedPaths();
  uint64_t seed = testing::TestSeed("crc32c long inputs");
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr size_t kMaxLength = size_t{1} << 20;
  // Around the implementation's block sizes: the 256-byte folding minimum and its 64- and
  // 16-byte steps, the three-stream blocks (3 x 256 and 3 x 8192 bytes) and kCrc32cBlock.
  std::vector<size_t> lengths;
  for (size_t base : {size_t{256}, size_t{512}, size_t{768}, size_t{3 * 8192},
                      size_t{3 * 8192 + 3 * 256}, kCrc32cBlock}) {
    for (size_t delta : {0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257}) {
      lengths.push_back(base + delta);
      if (delta <= base) lengths.push_back(base - delta);
    }
  }
  lengths.push_back(kMaxLength);
  // Random lengths, spread evenly over their number of bits.
  for (int i = 0; i < 60; ++i) lengths.push_back(rng() % (size_t{1} << (8 + rng() % 13)));
  Mismatches bad;
  for (Fill fill : {Fill::kRandom, Fill::kZeros, Fill::kOnes}) {
    AlignedBuffer buffer(kMaxLength + 64, fill, rng);
    for (size_t n : lengths) {
      const size_t align = rng() % 64;
      const uint8_t* p = buffer.data() + align;
      const uint32_t init = rng() % 2 == 0 ? 0 : static_cast<uint32_t>(rng());
      const uint32_t want = Crc32cExtendPortable(init, p, n);
      std::ostringstream what;
      what << FillName(fill) << " length " << n << " alignment " << align << " init " << init;
      for (Crc32cPath path : paths) {
        const uint32_t got = Crc32cExtendWith(path, init, p, n);
        if (got != want) bad.Add(got, want, path, what.str());
      }
      const uint32_t got = Crc32cExtend(init, p, n);
      if (got != want) bad.Add(got, want, Crc32cActivePath(), what.str() + " (dispatched)");
    }
  }
  INFO(bad.first.str());
  CHECK(bad.count == 0);
}

TEST_CASE("store: CRC-32C chained at random split points, on mixed paths", "[store]") {
  const std::vector<Crc32cPath> paths = SupportedPaths();
  uint64_t seed = testing::TestSeed("crc32c chained");
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr size_t kMaxLength = size_t{1} << 20;
  Mismatches bad;
  for (Fill fill : {Fill::kRandom, Fill::kZeros, Fill::kOnes}) {
    AlignedBuffer buffer(kMaxLength + 64, fill, rng);
    for (int trial = 0; trial < 40; ++trial) {
      const size_t n = rng() % (size_t{1} << (4 + rng() % 17));
      const uint8_t* p = buffer.data() + rng() % 64;
      const uint32_t want = Crc32cExtendPortable(0, p, n);
      // Split points at random, as many as 1 to 16 pieces; each piece on a random path.
      std::vector<size_t> cuts = {0, n};
      for (size_t k = rng() % 16; k > 0; --k) cuts.push_back(n == 0 ? 0 : rng() % (n + 1));
      std::sort(cuts.begin(), cuts.end());
      for (Crc32cPath path : paths) {
        uint32_t same = 0;
        uint32_t mixed = 0;
        for (size_t i = 0; i + 1 < cuts.size(); ++i) {
          const size_t length = cuts[i + 1] - cuts[i];
          same = Crc32cExtendWith(path, same, p + cuts[i], length);
          mixed = Crc32cExtendWith(paths[rng() % paths.size()], mixed, p + cuts[i], length);
        }
        std::ostringstream what;
        what << FillName(fill) << " length " << n << " in " << cuts.size() - 1 << " pieces";
        if (same != want) bad.Add(same, want, path, what.str());
        if (mixed != want) bad.Add(mixed, want, path, what.str() + " on mixed paths");
      }
    }
  }
  INFO(bad.first.str());
  CHECK(bad.count == 0);
}

}  // namespace
}  // namespace vt::store
