// Processes: one writer per store (a second writer in another process gets an error naming
// the directory), and readers that open the store read-only while another process writes.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "store/error.h"
#include "store/sha256.h"
#include "store/store.h"
#include "tests/store/kat_run.h"
#include "tests/store/test_util.h"

namespace vt::store {
namespace {

using testing::TempDir;

TEST_CASE("store: a second writer process gets an error naming the directory", "[store][process]") {
  TempDir dir;
  const std::string path = dir.Sub("db");
  auto s = Store::Open(path);
  testing::WriteKatRun(*s, "kat");
  auto [code, out] =
      testing::RunCommand({testing::Vtrun(), "-e", "vt.store.open([==[" + path + "]==])"});
  INFO(out);
  CHECK(code == 1);
  CHECK(out.find("vt.store.open: store '" + path +
                 "' is already open for writing by another process") != std::string::npos);
  // A reader in another process is fine meanwhile, and sees what this process wrote.
  auto [rcode, rout] = testing::RunCommand(
      {testing::Vtrun(), "-e",
       "local s = vt.store.open([==[" + path +
           "]==], {read_only = true}) print(s:run('kat'):root(), s:verify().ok)"});
  INFO(rout);
  CHECK(rcode == 0);
  CHECK(rout.find(std::string(testing::kKatRoot) + "\ttrue") != std::string::npos);
}

TEST_CASE("store: readers follow a writer in another process", "[store][process]") {
  TempDir dir;
  const std::string path = dir.Sub("db");
  const std::string script = testing::SourceDir() + "/tests/store/crash_writer.lua";
  // A slow writer: 120 steps, a checkpoint every 5, 8 ms per step.
  testing::Child writer({testing::Vtrun(), script, path, "7", "120", "5", "8"});
  REQUIRE(writer.WaitForLine("ready", 60000));
  CHECK_THROWS_WITH(
      Store::Open(path),
      Catch::Contains("store '" + path + "' is already open for writing by another process"));
  StoreOptions ro;
  ro.read_only = true;
  auto reader = Store::Open(path, ro);
  uint64_t last_leaves = 0;
  int views = 0;
  int distinct = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    reader->Refresh();
    std::optional<RunInfo> info = reader->GetRun("crash");
    if (info) {
      // Every view is a consistent prefix: verified in full, roots recompute.
      VerifyReport report = reader->Verify();
      for (const Problem& p : report.problems)
        UNSCOPED_INFO(p.family << " " << p.key << ": " << p.message);
      REQUIRE(report.ok());
      REQUIRE(info->leaves >= last_leaves);
      if (info->leaves > last_leaves) ++distinct;
      last_leaves = info->leaves;
      ++views;
      if (info->complete()) break;
    }
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  int status = writer.Finish();
  INFO(writer.output());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::printf("reader saw %d views, %d distinct tree sizes\n", views, distinct);
  CHECK(distinct >= 3);
  CHECK(writer.output().find("done " + ToHex(reader->Root("crash"))) != std::string::npos);
  // Once the writer is gone, the directory can be opened for writing again.
  CHECK_NOTHROW(Store::Open(path));
}

}  // namespace
}  // namespace vt::store
