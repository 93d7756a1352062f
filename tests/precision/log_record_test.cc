// LogRecord (runtime/precision/log_record.h): construction and validation, counts, entropy.
#include "runtime/precision/log_record.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "runtime/common/error.h"

using vt::precision::ExactEntry;
using vt::precision::LogRecord;
using vt::precision::LogState;

TEST_CASE("log record: FromStates counts states and sorts EXACT entries") {
  const LogRecord r = LogRecord::FromStates(
      {0, 3, 1, 2, 3, 0}, {ExactEntry{4, 0x40000000u}, ExactEntry{1, 0xbf800000u}});
  CHECK(r.size() == 6);
  CHECK(r.counts().none == 2);
  CHECK(r.counts().down == 1);
  CHECK(r.counts().up == 1);
  CHECK(r.counts().exact == 2);
  CHECK(r.counts().logged() == 4);
  CHECK(r.counts().total() == 6);
  REQUIRE(r.exact().size() == 2);
  CHECK(r.exact()[0].position == 1);
  CHECK(r.exact()[0].value() == -1.0);
  CHECK(r.exact()[1].value() == 2.0);
  CHECK(r.state(2) == LogState::kDown);
  CHECK(r.Summary() == "LogRecord(n=6, none=2, down=1, up=1, exact=2)");
  CHECK(LogRecord().size() == 0);
  CHECK(LogRecord().Summary() == "LogRecord(n=0, none=0, down=0, up=0, exact=0)");
}

TEST_CASE("log record: FromStates rejects inconsistent input") {
  CHECK_THROWS_WITH(
      LogRecord::FromStates({0, 4}, {}),
      Catch::Equals("log record: state 4 at position 1 is not 0..3 (none, down, up, exact)"));
  CHECK_THROWS_WITH(LogRecord::FromStates({0, 3}, {}),
                    Catch::Equals("log record: 1 EXACT states but 0 EXACT values"));
  CHECK_THROWS_WITH(LogRecord::FromStates({0, 1}, {ExactEntry{1, 0}}),
                    Catch::Equals("log record: EXACT value at position 1 but its state is 1"));
  CHECK_THROWS_WITH(LogRecord::FromStates({3}, {ExactEntry{0, 0}, ExactEntry{0, 0}}),
                    Catch::Equals("log record: two EXACT values for position 0"));
  CHECK_THROWS_WITH(LogRecord::FromStates({3}, {ExactEntry{5, 0}}),
                    Catch::Contains("outside the 1 elements"));
  CHECK_THROWS_WITH(LogRecord::FromStates({3}, {ExactEntry{0, 0x7fc00000u}}),
                    Catch::Contains("not a finite FP32 number"));
}

TEST_CASE("log record: entropy floor in bits per element") {
  CHECK(LogRecord().EntropyBits() == 0.0);
  CHECK(LogRecord::FromStates({0, 0, 0, 0}, {}).EntropyBits() == 0.0);
  CHECK(LogRecord::FromStates({1, 2, 1, 2}, {}).EntropyBits() == Approx(1.0));
  CHECK(LogRecord::FromStates({0, 0, 1, 2}, {}).EntropyBits() == Approx(1.5));
  const LogRecord four = LogRecord::FromStates({0, 1, 2, 3}, {ExactEntry{3, 0}});
  CHECK(four.EntropyBits() == Approx(2.0));
  // Paper mode logs about half: down = up = n/4, none = n/2 -> 1.5 bits.
  std::vector<uint8_t> s;
  for (int i = 0; i < 1000; ++i) s.push_back(i % 4 == 0 ? 1 : i % 4 == 1 ? 2 : 0);
  CHECK(LogRecord::FromStates(s, {}).EntropyBits() == Approx(1.5));
}

TEST_CASE("log record: equality and reuse of buffers") {
  LogRecord a = LogRecord::FromStates({0, 1, 2}, {});
  LogRecord b = LogRecord::FromStates({0, 1, 2}, {});
  CHECK(a == b);
  CHECK(a != LogRecord::FromStates({0, 2, 1}, {}));
  CHECK(a != LogRecord::FromStates({0, 1}, {}));
  uint8_t* p = b.ResetForWrite(2);
  p[0] = 1;
  p[1] = 1;
  vt::precision::StateCounts c;
  c.down = 2;
  b.FinishWrite(c, {});
  CHECK(b == LogRecord::FromStates({1, 1}, {}));
  CHECK_THROWS_AS(b.ResetForWrite(-1), vt::Error);
}

TEST_CASE("log record: a reused record's states are NONE again after ResetToNone") {
  // A record known to be all NONE skips clearing its states; every writer in between must
  // end that knowledge, or an entry of an earlier call would survive into an exact
  // boundary's record (and be encoded, and replayed, as the trainer's decision).
  LogRecord r;
  r.ResetToNone(10);
  CHECK(r == LogRecord::FromStates(std::vector<uint8_t>(10, 0), {}));
  CHECK(r.counts().none == 10);
  uint8_t* p = r.ResetForWrite(10);
  for (int i = 0; i < 10; ++i) p[i] = i % 2 == 0 ? 1 : 2;
  vt::precision::StateCounts c;
  c.down = 5;
  c.up = 5;
  r.FinishWrite(c, {});
  r.ResetToNone(10);
  CHECK(r == LogRecord::FromStates(std::vector<uint8_t>(10, 0), {}));

  // A writer that stops before FinishWrite (a range error thrown mid-pass, a record that
  // fails to decode) leaves what it wrote.
  r.ResetToNone(10);
  r.ResetForWrite(10)[7] = 1;
  r.ResetToNone(10);
  CHECK(r.state(7) == LogState::kNone);

  // Written through mutable_states() after an all-NONE finish.
  r.ResetToNone(6);
  r.mutable_states()[3] = 2;
  r.ResetToNone(6);
  CHECK(r.state(3) == LogState::kNone);

  // Shrunk, then grown past what was known: the new states are cleared too.
  uint8_t* q = r.ResetForWrite(12);
  for (int i = 0; i < 12; ++i) q[i] = 1;
  c = {};
  c.down = 12;
  r.FinishWrite(c, {});
  r.ResetToNone(4);
  r.ResetToNone(12);
  CHECK(r == LogRecord::FromStates(std::vector<uint8_t>(12, 0), {}));

  // A finish without entries: the states are NONE by the invariants, and stay so.
  uint8_t* z = r.ResetForWrite(5);
  for (int i = 0; i < 5; ++i) z[i] = 0;
  c = {};
  c.none = 5;
  r.FinishWrite(c, {});
  uint8_t* w = r.ResetToNoneForWrite(8);
  for (int i = 0; i < 8; ++i) CHECK(w[i] == 0);
}
