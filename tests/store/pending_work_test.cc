// store::PendingWork: a process that exits while counted work runs on another thread waits
// for it (the child, tests/store/pending_work_child.cc, exits at once; its thread finishes a
// file 300 ms later).
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "tests/store/test_util.h"
#include "tests/support/subprocess.h"

namespace {

TEST_CASE("store: the process's exit waits for pending work, and only for it", "[store]") {
  vt::store::testing::TempDir dir;
  const std::string counted = dir.Sub("counted"), uncounted = dir.Sub("uncounted");
  auto r = vt::testing::RunProcess({VT_PENDING_WORK_CHILD, counted});
  CHECK(r.exit_code == 7);
  CHECK(std::ifstream(counted).good());  // the exit waited for the thread
  r = vt::testing::RunProcess({VT_PENDING_WORK_CHILD, uncounted, "uncounted"});
  CHECK(r.exit_code == 7);
  CHECK_FALSE(std::ifstream(uncounted).good());  // the control: it did not wait
}

}  // namespace
