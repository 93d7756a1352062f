// Key encodings (store/FORMAT.md, "Keys"): known bytes, numeric sort order, decoding,
// descriptions, and id / boundary validation.
#include "store/keys.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "store/error.h"
#include "store/sha256.h"

namespace vt::store {
namespace {

TEST_CASE("store: key bytes known answers", "[store][keys]") {
  CHECK(ToHex(LogKey("run-1", 1, "fc1:fwd", 0)) ==
        "72756e2d310000000000000000016663313a6677640000000000");
  CHECK(ToHex(NodeKey("run-1", 2, 5)) == "72756e2d3100020000000000000005");
  CHECK(ToHex(CheckpointKey("run-1", 3, 0)) == "72756e2d3100000000000000000300000000");
  CHECK(ToHex(RunKey("run-1", RunField::kProgress)) == "72756e2d310050");
  CHECK(StepKey("r", 7) == LeafKey("r", 7));
  CHECK(TranscriptKey("g", 1) == std::string("g\0\0\0\0\0\0\0\0\x01", 10));
}

TEST_CASE("store: keys sort numerically and by name", "[store][keys]") {
  std::vector<std::string> keys = {
      LogKey("r", 10, "a", 0),  LogKey("r", 2, "b", 0),   LogKey("r", 2, "a", 10),
      LogKey("r", 2, "a", 2),   LogKey("r", 2, "a.b", 0), LogKey("r", 256, "a", 0),
      LogKey("r-2", 1, "a", 0), LogKey("q", 99, "z", 9),
  };
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> expected = {
      LogKey("q", 99, "z", 9),  LogKey("r", 2, "a", 2),   LogKey("r", 2, "a", 10),
      LogKey("r", 2, "a.b", 0), LogKey("r", 2, "b", 0),   LogKey("r", 10, "a", 0),
      LogKey("r", 256, "a", 0), LogKey("r-2", 1, "a", 0),
  };
  CHECK(sorted == expected);
  // A run's keys all fall in [IdPrefix(run), PrefixSuccessor(IdPrefix(run))).
  std::string lo = IdPrefix("r");
  std::string hi = PrefixSuccessor(lo);
  CHECK(LogKey("r", UINT64_MAX, std::string(255, '~'), UINT32_MAX) < hi);
  CHECK_FALSE(LogKey("r-2", 0, "a", 0) < hi);
  CHECK(NodeKey("r", 0, 1000) < NodeKey("r", 1, 0));
  CHECK(CheckpointKey("r", 1, 9) < CheckpointKey("r", 2, 0));
  CHECK(PrefixSuccessor(std::string("a\xff\xff", 3)) == "b");
  CHECK(PrefixSuccessor(std::string("\xff", 1)).empty());
}

TEST_CASE("store: keys decode and describe", "[store][keys]") {
  auto d = DecodeKey(Family::kLogs, LogKey("run-1", 12, "fc1:fwd", 3));
  REQUIRE(d);
  CHECK(d->id == "run-1");
  CHECK(d->number == 12);
  CHECK(d->boundary == "fc1:fwd");
  CHECK(d->sub == 3);
  CHECK(DescribeKey(Family::kLogs, LogKey("run-1", 12, "fc1:fwd", 3)) ==
        "run 'run-1' step 12 boundary 'fc1:fwd' call 3");
  CHECK(DescribeKey(Family::kCheckpoints, CheckpointKey("r", 4, 1)) == "run 'r' leaf 4 chunk 1");
  CHECK(DescribeKey(Family::kMerkle, NodeKey("r", 3, 9)) == "run 'r' level 3 index 9");
  CHECK(DescribeKey(Family::kRuns, RunKey("r", RunField::kConfig)) == "run 'r' config");
  CHECK(DescribeKey(Family::kTranscripts, TranscriptKey("g1", 2)) == "game 'g1' entry 2");
  CHECK(DescribeKey(Family::kSteps, StepKey("r", 5)) == "run 'r' step 5");
  CHECK(DescribeKey(Family::kLeaves, LeafKey("r", 5)) == "run 'r' leaf 5");
  // Malformed keys decode to nothing and print as hex.
  CHECK_FALSE(DecodeKey(Family::kLogs, "garbage"));
  CHECK_FALSE(DecodeKey(Family::kLogs, StepKey("r", 1)));
  CHECK_FALSE(DecodeKey(Family::kSteps, StepKey("r", 1) + "x"));
  CHECK_FALSE(DecodeKey(Family::kRuns, IdPrefix("r") + "Q"));
  CHECK_FALSE(
      DecodeKey(Family::kMerkle, IdPrefix("r") + std::string(1, '\x40') + std::string(8, '\0')));
  CHECK_FALSE(DecodeKey(Family::kMeta, "other"));
  CHECK(DescribeKey(Family::kSteps, "zz") == "key 0x7a7a");
}

TEST_CASE("store: run ids and boundary names are validated", "[store][keys]") {
  for (const char* ok : {"r", "run-1", "A.b_c-9", "x.y"}) CHECK_NOTHROW(ValidateId(ok, "run id"));
  CHECK_THROWS_WITH(ValidateId("", "run id"),
                    Catch::Contains("invalid run id '': must be 1 to 128 characters"));
  CHECK_THROWS_WITH(ValidateId(std::string(129, 'a'), "run id"), Catch::Contains("got 129"));
  CHECK_THROWS_WITH(ValidateId("a b", "run id"),
                    Catch::Contains("allowed characters are A-Z a-z 0-9 . _ -"));
  CHECK_THROWS_WITH(ValidateId("a/b", "game id"), Catch::Contains("invalid game id"));
  CHECK_THROWS_WITH(ValidateId(std::string("a\0b", 3), "run id"), Catch::Contains("\\x00"));
  CHECK_THROWS_WITH(ValidateId(".hidden", "run id"), Catch::Contains("must not start with '.'"));
  CHECK_NOTHROW(ValidateBoundary("layer2.0.conv1.weight:grad"));
  CHECK_NOTHROW(ValidateBoundary("with space"));
  CHECK_THROWS_AS(ValidateBoundary(""), Error);
  CHECK_THROWS_AS(ValidateBoundary("tab\there"), Error);
  CHECK_THROWS_AS(ValidateBoundary("\x80"), Error);
}

}  // namespace
}  // namespace vt::store
