// vt::store::LogPager: a run's log records a step at a time (run:records{} in Lua).
#include "store/log_pager.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "store/checkpoint_digest.h"
#include "store/error.h"
#include "tests/store/kat_run.h"
#include "tests/store/test_util.h"

namespace vt::store {
namespace {

using testing::TempDir;

// Each page as "step/boundary/call" strings.
std::vector<std::vector<std::string>> Pages(LogPager& pager) {
  std::vector<std::vector<std::string>> pages;
  for (;;) {
    std::vector<LogRecord> page = pager.NextStep();
    if (page.empty()) break;
    std::vector<std::string> p;
    for (const LogRecord& r : page)
      p.push_back(std::to_string(r.step) + "/" + r.boundary + "/" + std::to_string(r.call));
    pages.push_back(p);
  }
  CHECK(pager.NextStep().empty());  // and stays done
  return pages;
}

TEST_CASE("log pager: one page per step with records, by boundary and step range", "[store]") {
  TempDir dir;
  std::shared_ptr<Store> s = Store::Open(dir.Sub("db"));
  testing::WriteKatRun(*s, "kat");

  LogPager all(s, "kat", LogQuery{});
  CHECK(Pages(all) == std::vector<std::vector<std::string>>{{"1/a:fwd/0", "1/b:bwd/0"},
                                                            {"2/a:fwd/0", "2/a:fwd/1", "2/b:bwd/0"},
                                                            {"3/a:fwd/0", "3/b:bwd/0"}});

  LogQuery b_from_2;
  b_from_2.boundary = "b:bwd";
  b_from_2.first_step = 2;
  LogPager b(s, "kat", b_from_2);
  CHECK(Pages(b) == std::vector<std::vector<std::string>>{{"2/b:bwd/0"}, {"3/b:bwd/0"}});

  LogQuery to_1;
  to_1.last_step = 1;
  LogPager first(s, "kat", to_1);
  CHECK(Pages(first) == std::vector<std::vector<std::string>>{{"1/a:fwd/0", "1/b:bwd/0"}});

  LogQuery none;
  none.boundary = "c:fwd";
  LogPager nothing(s, "kat", none);
  CHECK(Pages(nothing).empty());
}

TEST_CASE("log pager: steps without records are skipped, values come back whole", "[store]") {
  TempDir dir;
  std::shared_ptr<Store> s = Store::Open(dir.Sub("db"));
  s->CreateRun("r", RunConfig{"spec", 3, 3, ""});
  s->PutCheckpoint("r", 0, testing::KatCheckpoint(0));
  s->WriteStep("r", 1, {{"a:fwd", 0, "one"}});
  s->WriteStep("r", 2, {});
  s->WriteStep("r", 3, {{"a:fwd", 2, "three"}});
  LogPager pager(s, "r", LogQuery{});
  std::vector<LogRecord> p1 = pager.NextStep();
  REQUIRE(p1.size() == 1);
  CHECK(p1[0].step == 1);
  CHECK(p1[0].value == "one");
  std::vector<LogRecord> p3 = pager.NextStep();
  REQUIRE(p3.size() == 1);
  CHECK(p3[0].step == 3);
  CHECK(p3[0].call == 2);
  CHECK(p3[0].value == "three");
  CHECK(pager.NextStep().empty());
}

TEST_CASE("log pager: refuses bad run ids, bad boundaries and closed stores", "[store]") {
  TempDir dir;
  std::shared_ptr<Store> s = Store::Open(dir.Sub("db"));
  CHECK_THROWS_WITH(LogPager(s, "bad id", LogQuery{}), Catch::Contains("invalid run id 'bad id'"));
  LogQuery empty_boundary;
  empty_boundary.boundary = "";
  CHECK_THROWS_WITH(LogPager(s, "r", empty_boundary), Catch::Contains("invalid boundary name ''"));
  LogPager missing(s, "r", LogQuery{});  // a run without records has no pages
  CHECK(missing.NextStep().empty());
  s->Close();
  CHECK_THROWS_AS(LogPager(s, "r", LogQuery{}), Error);
  CHECK_THROWS_WITH(LogPager(s, "r", LogQuery{}), Catch::Contains("is closed"));
}

}  // namespace
}  // namespace vt::store
