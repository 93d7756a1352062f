// The log record byte format (runtime/precision/codec.h, LOG_FORMAT.md): known-answer
// vectors, round trips for every encoding, the automatic choice, every validation error,
// and a bounded random-bytes / mutation test (the libFuzzer target does the long version).
#include "runtime/precision/codec.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/precision/log_record.h"
#include "tests/precision/helpers.h"
#include "tests/precision/oracle.h"

namespace {

using vt::precision::DecodeLimits;
using vt::precision::DecodeLog;
using vt::precision::EncodedLogSize;
using vt::precision::EncodeLog;
using vt::precision::ExactEntry;
using vt::precision::KernelIsa;
using vt::precision::LogEncoding;
using vt::precision::LogRecord;
namespace oracle = vt::precision::oracle;

std::string Bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

std::string Hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (!out.empty()) out += ' ';
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// Known-answer vectors; the same bytes are listed in runtime/precision/LOG_FORMAT.md.
LogRecord Vector1() {
  // states: none, down, up, exact (1.5f), none, up, down
  return LogRecord::FromStates({0, 1, 2, 3, 0, 2, 1}, {ExactEntry{3, 0x3fc00000u}});
}
const std::string kVector1Dense = Bytes({0x56, 0x54, 0x4c, 0x47, 0x01, 0x00, 0x07, 0x02, 0x02, 0x01,
                                         0x7f, 0x77, 0x03, 0x00, 0x00, 0xc0, 0x3f});
const std::string kVector1Sparse =
    Bytes({0x56, 0x54, 0x4c, 0x47, 0x01, 0x01, 0x07, 0x02, 0x02, 0x01,
           0x01, 0x00, 0x02, 0x00, 0x06, 0x03, 0x00, 0x00, 0xc0, 0x3f});

LogRecord Vector2() {
  std::vector<uint8_t> states(300, 0);
  states[0] = 2;    // UP
  states[299] = 1;  // DOWN
  return LogRecord::FromStates(states, {});
}
const std::string kVector2Sparse = Bytes(
    {0x56, 0x54, 0x4c, 0x47, 0x01, 0x01, 0xac, 0x02, 0x01, 0x01, 0x00, 0x00, 0xaa, 0x02, 0x01});
std::string Vector2Dense() {
  std::string s = Bytes({0x56, 0x54, 0x4c, 0x47, 0x01, 0x00, 0xac, 0x02, 0x01, 0x01, 0x00, 0x7a});
  s += std::string(58, static_cast<char>(0x79));
  s += static_cast<char>(0x28);
  return s;
}

LogRecord Vector3() { return LogRecord(); }
const std::string kVector3Dense =
    Bytes({0x56, 0x54, 0x4c, 0x47, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00});
const std::string kVector3Sparse =
    Bytes({0x56, 0x54, 0x4c, 0x47, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00});

LogRecord Vector4() {
  std::vector<uint8_t> states(200, 0);
  states[150] = 3;
  return LogRecord::FromStates(states, {ExactEntry{150, 0x80000000u}});  // -0.0f
}
const std::string kVector4Sparse = Bytes({0x56, 0x54, 0x4c, 0x47, 0x01, 0x01, 0xc8, 0x01, 0x00,
                                          0x00, 0x01, 0x96, 0x01, 0x00, 0x00, 0x00, 0x80});

// A random record: n elements with random state frequencies and finite EXACT values.
LogRecord RandomRecord(std::mt19937_64& rng, int64_t max_n) {
  const int64_t n = static_cast<int64_t>(rng() % static_cast<uint64_t>(max_n + 1));
  const uint64_t p_logged = rng() % 1001;  // per mille
  const uint64_t p_exact = rng() % 4 == 0 ? rng() % 200 : 0;
  std::vector<uint8_t> states(static_cast<size_t>(n));
  std::vector<ExactEntry> exact;
  for (int64_t i = 0; i < n; ++i) {
    uint8_t s = 0;
    if (rng() % 1000 < p_logged)
      s = (rng() % 1000 < p_exact) ? 3 : static_cast<uint8_t>(1 + rng() % 2);
    states[static_cast<size_t>(i)] = s;
    if (s == 3) {
      uint32_t bits = static_cast<uint32_t>(rng());
      if ((bits & 0x7f800000u) == 0x7f800000u) bits &= 0xbfffffffu;  // make it finite
      exact.push_back(ExactEntry{i, bits});
    }
  }
  return LogRecord::FromStates(states, exact);
}

void CheckRoundTrip(const LogRecord& record) {
  for (LogEncoding enc : {LogEncoding::kDense, LogEncoding::kSparse, LogEncoding::kAuto}) {
    const std::string bytes = EncodeLog(record, enc);
    INFO(record.Summary() << " " << vt::precision::LogEncodingName(enc));
    REQUIRE(static_cast<int64_t>(bytes.size()) == EncodedLogSize(record, enc));
    const LogRecord decoded = DecodeLog(bytes);
    REQUIRE(decoded == record);
    const LogEncoding actual = vt::precision::DecodeLogHeader(bytes).encoding;
    REQUIRE(EncodeLog(decoded, actual) == bytes);
  }
  // auto is the smaller of the two, dense on a tie.
  const int64_t dense = EncodedLogSize(record, LogEncoding::kDense);
  const int64_t sparse = EncodedLogSize(record, LogEncoding::kSparse);
  REQUIRE(EncodedLogSize(record, LogEncoding::kAuto) == std::min(dense, sparse));
  REQUIRE(vt::precision::ChooseLogEncoding(record) ==
          (sparse < dense ? LogEncoding::kSparse : LogEncoding::kDense));
}

void CheckInvalid(const std::string& bytes, const std::string& message,
                  const DecodeLimits& limits = {}) {
  INFO("bytes: " << Hex(bytes));
  CHECK_THROWS_WITH(DecodeLog(bytes, limits),
                    Catch::Contains("invalid log record: ") && Catch::Contains(message));
}

}  // namespace

TEST_CASE("codec: known-answer vectors") {
  CHECK(Hex(EncodeLog(Vector1(), LogEncoding::kDense)) == Hex(kVector1Dense));
  CHECK(Hex(EncodeLog(Vector1(), LogEncoding::kSparse)) == Hex(kVector1Sparse));
  CHECK(EncodeLog(Vector1(), LogEncoding::kAuto) == kVector1Dense);
  CHECK(Hex(EncodeLog(Vector2(), LogEncoding::kSparse)) == Hex(kVector2Sparse));
  CHECK(Hex(EncodeLog(Vector2(), LogEncoding::kDense)) == Hex(Vector2Dense()));
  CHECK(EncodeLog(Vector2(), LogEncoding::kAuto) == kVector2Sparse);
  CHECK(Hex(EncodeLog(Vector3(), LogEncoding::kDense)) == Hex(kVector3Dense));
  CHECK(Hex(EncodeLog(Vector3(), LogEncoding::kSparse)) == Hex(kVector3Sparse));
  CHECK(EncodeLog(Vector3(), LogEncoding::kAuto) == kVector3Dense);
  CHECK(Hex(EncodeLog(Vector4(), LogEncoding::kAuto)) == Hex(kVector4Sparse));
  CHECK(DecodeLog(kVector1Dense) == Vector1());
  CHECK(DecodeLog(kVector1Sparse) == Vector1());
  CHECK(DecodeLog(kVector2Sparse) == Vector2());
  CHECK(DecodeLog(Vector2Dense()) == Vector2());
  CHECK(DecodeLog(kVector3Dense) == Vector3());
  CHECK(DecodeLog(kVector3Sparse) == Vector3());
  const LogRecord v4 = DecodeLog(kVector4Sparse);
  CHECK(v4 == Vector4());
  CHECK(v4.exact()[0].value() == 0.0);
  CHECK(std::signbit(v4.exact()[0].value()));
  const auto header = vt::precision::DecodeLogHeader(kVector1Sparse);
  CHECK(header.version == 1);
  CHECK(header.encoding == LogEncoding::kSparse);
  CHECK(header.elements == 7);
  CHECK(header.counts.none == 2);
  CHECK(header.counts.exact == 1);
  CHECK(header.header_bytes == 10);
  // Bits per element of the whole record.
  CHECK(vt::precision::BitsPerElement(Vector2(), LogEncoding::kSparse) == Approx(8.0 * 15 / 300));
  CHECK(vt::precision::BitsPerElement(Vector2(), LogEncoding::kDense) == Approx(8.0 * 71 / 300));
  CHECK(vt::precision::BitsPerElement(Vector3()) == 0.0);
}

TEST_CASE("codec: round trips for every encoding on random records") {
  const uint64_t seed = oracle::TestSeed("codec: round trips");
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 3000; ++i) CheckRoundTrip(RandomRecord(rng, i < 2000 ? 40 : 5000));
  // Sizes around the dense packing of 5 per byte and the direction bits of 8 per byte.
  for (int n = 0; n <= 41; ++n) {
    for (uint8_t fill : {0, 1, 2, 3}) {
      std::vector<uint8_t> states(static_cast<size_t>(n), fill);
      std::vector<ExactEntry> exact;
      for (int j = 0; j < n && fill == 3; ++j)
        exact.push_back(ExactEntry{j, 0x3f800000u + static_cast<uint32_t>(j)});
      CheckRoundTrip(LogRecord::FromStates(states, exact));
    }
  }
  // Large gaps need multi-byte varints.
  std::vector<uint8_t> states(1 << 20, 0);
  states[0] = 1;
  states[(1 << 20) - 1] = 2;
  states[12345] = 3;
  CheckRoundTrip(LogRecord::FromStates(states, {ExactEntry{12345, 0x00000001u}}));
}

TEST_CASE("codec: every kernel variant writes and reads the same dense bytes") {
  // The AVX-512 codec takes groups of 8 bytes (40 states) while 46 states of room remain and
  // hands the rest to the portable loops: lengths around those edges, dense records of every
  // mix, and a byte >= 243 at each position of a group, which must be reported as the
  // portable decoder reports it.
  const uint64_t seed = oracle::TestSeed("codec: dense variants");
  std::mt19937_64 rng(seed);
  vt::precision::testing::IsaGuard guard;
  const auto isas = vt::precision::SupportedKernelIsas();
  for (int i = 0; i < 600; ++i) {
    const int64_t n = i < 400 ? i : static_cast<int64_t>(rng() % 5000);
    std::vector<uint8_t> states(static_cast<size_t>(n));
    std::vector<ExactEntry> exact;
    const int mix = static_cast<int>(rng() % 3);  // all four, DOWN/UP only, mostly NONE
    for (int64_t j = 0; j < n; ++j) {
      const uint64_t r = rng();
      const auto s = static_cast<uint8_t>(mix == 0   ? r % 4
                                          : mix == 1 ? 1 + r % 2
                                                     : (r % 8 == 0 ? 2 : 0));
      states[static_cast<size_t>(j)] = s;
      if (s == 3) exact.push_back(ExactEntry{j, 0x3f800000u});
    }
    const LogRecord record = LogRecord::FromStates(states, exact);
    std::string want;
    for (KernelIsa isa : isas) {
      vt::precision::SetKernelIsa(isa);
      INFO("n=" << n << " variant " << vt::precision::KernelIsaName(isa));
      const std::string bytes = EncodeLog(record, LogEncoding::kDense);
      if (want.empty()) want = bytes;
      CHECK(bytes == want);
      const LogRecord back = DecodeLog(want);
      CHECK(back.size() == n);
      CHECK(std::equal(states.begin(), states.end(), back.states()));
      CHECK(back.counts().down == record.counts().down);
      CHECK(back.counts().up == record.counts().up);
    }
    if (n >= 5 && i % 7 == 0) {
      // A byte >= 243 in the payload: same error on every variant.
      int64_t exact_bytes = 0;  // per entry: the gap's varint and 4 value bytes
      for (int64_t k = 0, prev = -1; k < static_cast<int64_t>(exact.size()); ++k) {
        for (uint64_t gap = static_cast<uint64_t>(exact[k].position - prev - 1); gap >= 0x80;
             gap >>= 7) {
          ++exact_bytes;
        }
        exact_bytes += 5;
        prev = exact[k].position;
      }
      const int64_t header = static_cast<int64_t>(want.size()) - (n + 4) / 5 - exact_bytes;
      std::string bad = want;
      const int64_t at = header + static_cast<int64_t>(rng() % static_cast<uint64_t>(n / 5));
      bad[static_cast<size_t>(at)] = static_cast<char>(243 + rng() % 13);
      std::string message;
      for (KernelIsa isa : isas) {
        vt::precision::SetKernelIsa(isa);
        INFO("n=" << n << " bad byte at " << at << " variant "
                  << vt::precision::KernelIsaName(isa));
        try {
          DecodeLog(bad);
          FAIL("decoded a dense byte >= 243");
        } catch (const vt::Error& e) {
          if (message.empty()) message = e.what();
          CHECK(std::string(e.what()) == message);
          CHECK_THAT(e.what(), Catch::Contains("must be < 243"));
        }
      }
    }
  }
}

TEST_CASE("codec: the encodings parse their names") {
  CHECK(vt::precision::ParseLogEncoding("dense") == LogEncoding::kDense);
  CHECK(vt::precision::ParseLogEncoding("sparse") == LogEncoding::kSparse);
  CHECK(vt::precision::ParseLogEncoding("auto") == LogEncoding::kAuto);
  CHECK_THROWS_WITH(vt::precision::ParseLogEncoding("zip"),
                    Catch::Equals("unknown log encoding 'zip' (valid: auto, dense, sparse)"));
}

TEST_CASE("codec: decoding names what is wrong") {
  const std::string d = kVector1Dense;
  const std::string s = kVector1Sparse;
  auto with = [](std::string bytes, size_t at, int value) {
    bytes[at] = static_cast<char>(value);
    return bytes;
  };
  CheckInvalid("", "truncated: 0 bytes");
  CheckInvalid(d.substr(0, 5), "truncated: 5 bytes");
  CheckInvalid(with(d, 0, 'X'), "bad magic");
  CheckInvalid(with(d, 4, 2), "unsupported format version 2");
  CheckInvalid(with(d, 5, 7), "unknown encoding 7");
  CheckInvalid(d.substr(0, 6), "truncated: varint for the element count at byte 6");
  CheckInvalid(d.substr(0, 9), "truncated: varint for the EXACT count at byte 9");
  // Non-minimal, too long and overflowing varints.
  CheckInvalid(Bytes({0x56, 0x54, 0x4c, 0x47, 1, 0, 0x87, 0x00, 2, 2, 1}), "is not minimal");
  CheckInvalid(
      Bytes({0x56, 0x54, 0x4c, 0x47, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
             0x80, 0x01}),
      "varint for the element count at byte 6 is longer than 10 bytes or overflows 64 bits");
  CheckInvalid(
      Bytes({0x56, 0x54, 0x4c, 0x47, 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
             0x02}),
      "varint for the element count at byte 6 is longer than 10 bytes or overflows 64 bits");
  // Counts and limits.
  CheckInvalid(with(d, 7, 5), "exceed the element count 7");
  CheckInvalid(Bytes({0x56, 0x54, 0x4c, 0x47, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x20, 0, 0, 0}),
               "element count 8589934592 exceeds the limit 134217728");
  // 14 bytes declaring 2^32 elements and no entry: refused by the default limit before the
  // decoder allocates 4 GiB of states (issue 19).
  CheckInvalid(Bytes({0x56, 0x54, 0x4c, 0x47, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0}),
               "element count 4294967296 exceeds the limit 134217728");
  DecodeLimits huge;
  huge.max_elements = int64_t{1} << 40;  // clamped to kMaxLogElements
  CheckInvalid(Bytes({0x56, 0x54, 0x4c, 0x47, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x20, 0, 0, 0}),
               "element count 8589934592 exceeds the limit 4294967296", huge);
  DecodeLimits small;
  small.max_elements = 6;
  CheckInvalid(d, "element count 7 exceeds the limit 6", small);
  // Payloads.
  CheckInvalid(d.substr(0, 11),
               "truncated: the dense payload and EXACT list need at least 7 bytes");
  CheckInvalid(kVector4Sparse.substr(0, 16),
               "truncated: the FP32 value of EXACT entry 0 at byte 13 needs 4 bytes, 3 remain");
  CheckInvalid(with(d, 10, 243), "dense byte 0 (at byte 10) is 243, must be < 243");
  CheckInvalid(with(d, 11, 0x6e), "dense padding after the last element is not the NONE symbol");
  CheckInvalid(with(d, 10, 0x7f - 9),
               "the header says DOWN 2, UP 2 but the dense payload holds DOWN 2, UP 1");
  CheckInvalid(
      Bytes({0x56, 0x54, 0x4c, 0x47, 1, 1, 7, 2, 2, 0, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81}),
      "truncated: sparse gaps end after 0 of 4 entries");
  CheckInvalid(with(s, 12, 0x09), "sparse entry 2 lies beyond the element count 7");
  CheckInvalid(with(s, 14, 0x16),
               "the padding bits after the last sparse direction bit are not zero");
  CheckInvalid(with(s, 14, 0x07), "but the sparse direction bits hold UP 3, DOWN 1");
  CheckInvalid(with(s, 10, 0x81), "varint for the gap of sparse entry 0 at byte 10 is not minimal");
  // EXACT entries.
  CheckInvalid(with(d, 12, 0x07),
               "EXACT entry 0 lies beyond the element count 7 (gap 7 after position -1)");
  CheckInvalid(with(d, 12, 0x01), "EXACT entry 0 (position 1) is also a DOWN entry in the payload");
  CheckInvalid(with(s, 15, 0x02), "EXACT entry 0 (position 2) is also an UP entry in the payload");
  CheckInvalid(with(with(d, 16, 0x7f), 15, 0x80),
               "EXACT entry 0 (position 3) holds a non-finite FP32 value");
  // Trailing bytes.
  CheckInvalid(d + std::string(2, '\0'), "2 trailing bytes after the record (at byte 17)");
}

TEST_CASE("codec: the decoder survives random and mutated bytes") {
  const uint64_t seed = oracle::TestSeed("codec: random bytes");
  std::mt19937_64 rng(seed);
  std::vector<std::string> pool = {kVector1Dense,  kVector1Sparse, kVector2Sparse,
                                   Vector2Dense(), kVector3Dense,  kVector4Sparse};
  for (int i = 0; i < 200; ++i) {
    const LogRecord r = RandomRecord(rng, 120);
    pool.push_back(EncodeLog(r, rng() % 2 ? LogEncoding::kDense : LogEncoding::kSparse));
  }
  DecodeLimits limits;
  limits.max_elements = 1 << 16;
  int64_t valid = 0, invalid = 0;
  for (int iter = 0; iter < 200000; ++iter) {
    std::string bytes = pool[rng() % pool.size()];
    const int mutations = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < mutations; ++m) {
      const size_t len = bytes.size();
      switch (rng() % 7) {
        case 0:  // flip a bit
          if (len > 0) bytes[rng() % len] ^= static_cast<char>(1 << (rng() % 8));
          break;
        case 1:  // set a byte
          if (len > 0) bytes[rng() % len] = static_cast<char>(rng());
          break;
        case 2:  // truncate
          bytes.resize(len > 0 ? rng() % len : 0);
          break;
        case 3:  // append
          for (int k = static_cast<int>(rng() % 4); k >= 0; --k)
            bytes.push_back(static_cast<char>(rng()));
          break;
        case 4:  // insert
          bytes.insert(bytes.begin() + static_cast<long>(len > 0 ? rng() % len : 0),
                       static_cast<char>(rng()));
          break;
        case 5:  // delete
          if (len > 0) bytes.erase(bytes.begin() + static_cast<long>(rng() % len));
          break;
        default: {  // random bytes, keeping the magic and version half of the time
          std::string r(static_cast<size_t>(rng() % 40), '\0');
          for (char& c : r) c = static_cast<char>(rng());
          bytes = (rng() % 2 ? std::string("VTLG\x01", 5) : std::string()) + r;
          break;
        }
      }
    }
    try {
      const LogRecord decoded = DecodeLog(bytes, limits);
      // Valid bytes are canonical: re-encoding gives them back.
      const auto enc = vt::precision::DecodeLogHeader(bytes).encoding;
      REQUIRE(EncodeLog(decoded, enc) == bytes);
      ++valid;
    } catch (const vt::Error& e) {
      REQUIRE(std::string(e.what()).rfind("invalid log record: ", 0) == 0);
      ++invalid;
    }
  }
  CHECK(valid > 0);
  CHECK(invalid > 0);
}

TEST_CASE("codec: decoding into a reused record leaves only the new record's entries") {
  // The sparse decoder keeps the states a reused record knows to be NONE; entries of the
  // record decoded before (sparse, dense, EXACT) must not survive into the next one.
  const LogRecord sparse_a = LogRecord::FromStates({0, 1, 0, 0, 2, 0, 0, 0, 0, 0}, {});
  const LogRecord sparse_b = LogRecord::FromStates({0, 0, 0, 2, 0, 0, 0, 0, 0, 1}, {});
  const LogRecord none = LogRecord::FromStates(std::vector<uint8_t>(10, 0), {});
  const LogRecord dense =
      LogRecord::FromStates({1, 2, 1, 2, 1, 2, 3, 1, 2, 1}, {ExactEntry{6, 0x3f800000u}});
  const LogRecord exact =
      LogRecord::FromStates({0, 0, 3, 0, 0, 0, 0, 0, 0, 0}, {ExactEntry{2, 0x40000000u}});
  LogRecord r;
  const std::vector<const LogRecord*> order = {&sparse_a, &none, &sparse_b, &dense,   &none,
                                               &exact,    &none, &none,     &sparse_a};
  for (const LogRecord* next : order) {
    const LogEncoding enc = next == &dense ? LogEncoding::kDense : LogEncoding::kSparse;
    vt::precision::DecodeLogInto(EncodeLog(*next, enc), &r);
    CHECK(r == *next);
    CHECK(r.counts() == next->counts());
  }
  // A record that fails to decode half-way leaves no knowledge behind.
  std::string bad = EncodeLog(sparse_b, LogEncoding::kSparse);
  bad.pop_back();
  CHECK_THROWS_AS(vt::precision::DecodeLogInto(bad, &r), vt::Error);
  vt::precision::DecodeLogInto(EncodeLog(none, LogEncoding::kSparse), &r);
  CHECK(r == none);
}
