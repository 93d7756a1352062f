// store::PendingWork: a process that exits while counted work runs on another thread waits
// for it (the child below exits at once; its thread finishes a file 300 ms later).
#include "store/pending_work.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "tests/store/test_util.h"

namespace vt::store {
namespace {

// In a child process: starts a thread that writes `path` after 300 ms, counted or not, and
// exits at once. Returns the child's exit status.
int ExitDuringWork(const std::string& path, bool counted) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    PendingWork pending;
    if (!counted) pending.Release();
    std::thread([path, pending = std::move(pending)]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::ofstream(path) << "done";
      pending.Release();
    }).detach();
    std::exit(7);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("store: the process's exit waits for pending work, and only for it", "[store]") {
  testing::TempDir dir;
  const std::string counted = dir.Sub("counted"), not_counted = dir.Sub("not-counted");
  CHECK(ExitDuringWork(counted, true) == 7);
  CHECK(std::ifstream(counted).good());  // the exit waited for the thread
  CHECK(ExitDuringWork(not_counted, false) == 7);
  CHECK_FALSE(std::ifstream(not_counted).good());  // the control: it did not wait
}

}  // namespace
}  // namespace vt::store
