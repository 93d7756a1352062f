// Crash safety: a writer subprocess (vtrun tests/store/crash_writer.lua) is killed with
// SIGKILL at random moments, at least 20 times. After every kill the store must reopen as a
// consistent prefix of the run (every leaf has its checkpoint and Merkle nodes, every step
// is complete or absent, the root recomputes, Verify() finds nothing) equal to the same
// prefix of an uninterrupted run; the writer then resumes from the last checkpoint. The
// final root must equal the uninterrupted run's root.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/log_digest.h"
#include "store/sha256.h"
#include "store/store.h"
#include "tests/store/test_util.h"

namespace vt::store {
namespace {

using testing::TempDir;

// Checks that `dir` holds a consistent prefix of the run in `ref`; returns its leaf count.
uint64_t CheckPrefix(const std::string& dir, Store& ref) {
  auto s = Store::Open(dir);  // as the next writer would: recovery from the WAL happens here
  VerifyReport report = s->Verify();
  for (const Problem& p : report.problems)
    UNSCOPED_INFO(p.family << " " << p.key << ": " << p.message);
  REQUIRE(report.ok());
  std::optional<RunInfo> info = s->GetRun("crash");
  if (!info) return 0;  // killed before the run was created: an empty prefix
  std::optional<RunInfo> full = ref.GetRun("crash");
  REQUIRE(info->spec == full->spec);
  const uint64_t n = info->steps;
  const uint64_t k = info->checkpoint_every;
  const uint64_t leaves = info->leaves;
  const uint64_t steps = info->steps_written;
  INFO("prefix: " << leaves << " leaves, " << steps << " steps");
  if (leaves == 0) {
    REQUIRE(steps == 0);
  } else {
    REQUIRE(steps >= LeafStep(leaves - 1, n, k));
    REQUIRE(steps <= (leaves < info->total_leaves() ? LeafStep(leaves, n, k) : n));
  }
  for (uint64_t i = 0; i < leaves; ++i) {
    REQUIRE(s->GetLeaf("crash", i)->leaf == ref.GetLeaf("crash", i)->leaf);
    REQUIRE(s->GetCheckpoint("crash", i) == ref.GetCheckpoint("crash", i));
  }
  REQUIRE_FALSE(s->GetLeaf("crash", leaves));
  for (uint64_t step = 1; step <= steps; ++step) {
    std::optional<std::vector<LogRecord>> got = s->GetStepRecords("crash", step);
    std::optional<std::vector<LogRecord>> want = ref.GetStepRecords("crash", step);
    REQUIRE(got);
    REQUIRE(got->size() == want->size());
    for (size_t j = 0; j < got->size(); ++j) {
      REQUIRE((*got)[j].boundary == (*want)[j].boundary);
      REQUIRE((*got)[j].call == (*want)[j].call);
      REQUIRE((*got)[j].value == (*want)[j].value);
    }
  }
  REQUIRE_FALSE(s->GetStep("crash", steps + 1));
  REQUIRE(s->Root("crash") == ref.RootAt("crash", leaves));
  return leaves;
}

// Kills the writer (crash_writer.lua, with `extra` arguments after DIR SEED) at random
// moments; every kill must leave a consistent prefix, and the resumed run the same root.
void CheckCrashSafety(const char* name, const std::vector<std::string>& extra) {
  const uint64_t seed = testing::TestSeed(name);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  TempDir dir;
  const std::string script = testing::SourceDir() + "/tests/store/crash_writer.lua";
  const std::string data_seed = std::to_string(seed % 1000000);
  const std::string ref_dir = dir.Sub("reference");
  const std::string crash_dir = dir.Sub("crashed");
  auto writer_command = [&](const std::string& path) {
    std::vector<std::string> command = {testing::Vtrun(), script, path, data_seed};
    command.insert(command.end(), extra.begin(), extra.end());
    return command;
  };

  auto [code, out] = testing::RunCommand(writer_command(ref_dir));
  INFO(out);
  REQUIRE(code == 0);
  StoreOptions ro;
  ro.read_only = true;
  auto ref = Store::Open(ref_dir, ro);
  REQUIRE(ref->GetRun("crash")->complete());

  int kills = 0;
  int completed = 0;
  uint64_t max_leaves = 0;
  for (int attempt = 0; kills < 22 && attempt < 100; ++attempt) {
    testing::Child writer(writer_command(crash_dir));
    REQUIRE(writer.WaitForLine("ready", 60000));
    int delay_ms = static_cast<int>(rng() % 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    int status = writer.Kill();
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
      ++kills;
    } else {
      // The writer finished before the kill: check it, then start over for more kills.
      INFO(writer.output());
      REQUIRE(WIFEXITED(status));
      REQUIRE(WEXITSTATUS(status) == 0);
      ++completed;
    }
    uint64_t leaves = CheckPrefix(crash_dir, *ref);
    max_leaves = std::max(max_leaves, leaves);
    std::printf("attempt %d, kill %d after %d ms: %llu leaves\n", attempt, kills, delay_ms,
                static_cast<unsigned long long>(leaves));
    // A finished run leaves nothing to interrupt: start a fresh one so every kill lands
    // while the writer is writing.
    if (leaves == ref->GetRun("crash")->total_leaves()) std::filesystem::remove_all(crash_dir);
  }
  REQUIRE(kills >= 20);
  std::printf("%d kills, %d runs completed between kills, up to %llu leaves\n", kills, completed,
              static_cast<unsigned long long>(max_leaves));

  // Resume to the end without interruption: the root equals the uninterrupted run's.
  auto [final_code, final_out] = testing::RunCommand(writer_command(crash_dir));
  INFO(final_out);
  REQUIRE(final_code == 0);
  auto s = Store::Open(crash_dir, ro);
  REQUIRE(s->GetRun("crash")->complete());
  CHECK(s->Root("crash") == ref->Root("crash"));
  CHECK(final_out.find("done " + ToHex(ref->Root("crash"))) != std::string::npos);
  CHECK(s->Verify().ok());
}

TEST_CASE("store: crash safety under SIGKILL at random moments", "[store][crash]") {
  CheckCrashSafety("store crash safety", {});
}

// Every step skips the write-ahead log (unlogged_step_bytes = 0): a kill loses the steps since
// the last flush, but what is left must still be a prefix, never a leaf without its steps
// (the flush before each leaf) nor a step's records without its marker (the atomic flush).
TEST_CASE("store: crash safety with steps written without the write-ahead log", "[store][crash]") {
  CheckCrashSafety("store crash safety unlogged", {"240", "7", "0", "-1", "0"});
}

}  // namespace
}  // namespace vt::store
