// Step digests, log digests, leaves and the leaf schedule: known answers (store/FORMAT.md)
// and properties.
#include "store/log_digest.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "store/error.h"
#include "store/sha256.h"

namespace vt::store {
namespace {

Digest D(const char* hex) { return *DigestFromHex(hex); }

TEST_CASE("store: step and log digest known answers", "[store][log]") {
  std::vector<LogRecordView> step1 = {
      {"fc1:fwd", 0, std::string_view("\x01\x02\x03", 3)},
      {"fc1:bwd", 0, ""},
      {"fc1:fwd", 1, "xyz"},
  };
  Digest d1 = StepDigest(1, step1);
  CHECK(ToHex(d1) == "839967b1c6fc468cacad25fea6b543b3f259a23376bc623fdbc25df343904c9a");
  Digest d2 = StepDigest(2, {});
  CHECK(ToHex(d2) == "cd04a4754498e06db5a13c5f371f1f04ff6d2470f24aa9bd886540e5dce77f70");
  CHECK(d2 == Sha256Of(std::string("\0\0\0\0\0\0\0\x02", 8)));
  LogDigestChain chain;
  CHECK(chain.value() == Digest{});
  chain.AddStep(d1);
  CHECK(ToHex(chain.value()) == "be8ca85f617e6981552e58cd52813222d371fe49d652bdede85ca33784d57764");
  chain.AddStep(d2);
  CHECK(ToHex(chain.value()) == "d6daf55caadaa0438e1f3aa24be2abd685286d0940ec40886ab9fc8a041d3ca3");
  Digest spec_hash = Sha256Of("{\"model\":\"mlp\"}");
  CHECK(ToHex(spec_hash) == "df1104714da65e0b47b22e7fbbaee9aa049d2057ab24b3de4b901d3f1ddaacf4");
  Digest state = D("d9462ebc57c0d2e8a9f40bdf31b80d23184fc9c17172050ffec6ff9bd9d1ad16");
  CHECK(ToHex(ComputeLeaf(spec_hash, 1, state, chain.value())) ==
        "20a42f476110f69627d65e6762aa5ed422ed9f772886cd8f8070292b092746c9");
}

TEST_CASE("store: step digest is order-independent and binds every field", "[store][log]") {
  std::vector<LogRecordView> a = {{"b", 0, "1"}, {"a", 2, "2"}, {"a", 10, "3"}, {"a.x", 0, ""}};
  std::vector<LogRecordView> b = {a[2], a[0], a[3], a[1]};
  Digest d = StepDigest(5, a);
  CHECK(StepDigest(5, b) == d);
  CHECK(StepDigest(6, a) != d);
  std::vector<LogRecordView> c = a;
  c[0].value = "2";
  CHECK(StepDigest(5, c) != d);
  c = a;
  c[1].call = 3;
  CHECK(StepDigest(5, c) != d);
  c = a;
  c[0].boundary = "c";
  CHECK(StepDigest(5, c) != d);
  // Moving a byte between boundary name and value is not a collision (length prefixes).
  CHECK(StepDigest(1, {{"ab", 0, "c"}}) != StepDigest(1, {{"a", 0, "bc"}}));
  // Key order: boundary bytes, then call numerically.
  std::vector<LogRecordView> sorted = a;
  SortAndCheckRecords(&sorted);
  CHECK(sorted[0].boundary == "a");
  CHECK(sorted[0].call == 2);
  CHECK(sorted[1].call == 10);
  CHECK(sorted[2].boundary == "a.x");
  CHECK(sorted[3].boundary == "b");
}

TEST_CASE("store: invalid log records are rejected", "[store][log]") {
  CHECK_THROWS_WITH(StepDigest(1, {{"a", 0, "x"}, {"a", 0, "y"}}),
                    Catch::Contains("appears twice"));
  CHECK_THROWS_WITH(StepDigest(1, {{"", 0, "x"}}), Catch::Contains("invalid boundary name"));
  CHECK_THROWS_WITH(StepDigest(1, {{"a\nb", 0, "x"}}), Catch::Contains("printable ASCII"));
  CHECK_THROWS_WITH(StepDigest(1, {{std::string(256, 'a'), 0, "x"}}),
                    Catch::Contains("1 to 255 bytes"));
}

TEST_CASE("store: leaf schedule", "[store][log]") {
  // n = 10, k = 5: leaves at steps 0, 5, 10.
  CHECK(NumLeaves(10, 5) == 3);
  CHECK(LeafStep(0, 10, 5) == 0);
  CHECK(LeafStep(1, 10, 5) == 5);
  CHECK(LeafStep(2, 10, 5) == 10);
  CHECK_THROWS_WITH(LeafStep(3, 10, 5), Catch::Contains("leaves 0..2"));
  // n = 11, k = 5: the last leaf is step 11.
  CHECK(NumLeaves(11, 5) == 4);
  CHECK(LeafStep(3, 11, 5) == 11);
  CHECK(NumLeaves(3, 5) == 2);
  CHECK(LeafStep(1, 3, 5) == 3);
  CHECK(NumLeaves(0, 5) == 1);
  CHECK(NumLeaves(1, 1) == 2);
  CHECK(LeafOfStep(1, 5) == 1);
  CHECK(LeafOfStep(5, 5) == 1);
  CHECK(LeafOfStep(6, 5) == 2);
  CHECK(LeafOfStep(11, 5) == 3);
  CHECK_THROWS_AS(NumLeaves(10, 0), Error);
  // Every step lies in (LeafStep(i-1), LeafStep(i)] of its leaf.
  for (uint64_t n : {1, 7, 10, 23}) {
    for (uint64_t k : {1, 3, 5, 10, 30}) {
      for (uint64_t s = 1; s <= n; ++s) {
        uint64_t i = LeafOfStep(s, k);
        REQUIRE(i < NumLeaves(n, k));
        REQUIRE(LeafStep(i - 1, n, k) < s);
        REQUIRE(s <= LeafStep(i, n, k));
      }
    }
  }
}

}  // namespace
}  // namespace vt::store
