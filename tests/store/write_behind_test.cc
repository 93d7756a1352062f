// Store::WriteStepBehind and PutCheckpointBehind: a step or checkpoint written on another thread
// is WriteStep's step or PutCheckpoint's leaf, checked when it is handed over, seen by every
// later call (which waits for it), and a failed write is never silent: every later call and
// Close throw it, and the store reopens without it.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/error.h"
#include "store/pending_work.h"
#include "store/store.h"
#include "tests/store/kat_run.h"
#include "tests/store/test_util.h"

namespace vt::store {

struct StoreTestAccess {
  static void FailNextBehind(Store& s, std::string why) {
    s.fail_behind_for_test_ = std::move(why);
  }
  static void HoldNextBehind(Store& s, std::shared_future<void> until) {
    s.hold_behind_for_test_ = std::move(until);
  }
};

namespace {

using testing::KatCheckpoint;
using testing::KatRecords;
using testing::KatStep;
using testing::TempDir;

// Hands step `step` of the KAT run to WriteStepBehind; the records' bytes live in `keep`.
std::shared_ptr<KatStep> WriteKatStepBehind(Store& s, uint64_t step) {
  auto keep = std::make_shared<KatStep>(KatRecords(step));
  s.WriteStepBehind("kat", step, keep->records(), keep);
  return keep;
}

void StartKatRun(Store& s) {
  s.CreateRun("kat", RunConfig{"kat-spec", 2, 3, ""});
  s.PutCheckpoint("kat", 0, KatCheckpoint(0));
}

TEST_CASE("store: steps written behind give the known-answer run, and every call sees them",
          "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  StartKatRun(*s);
  std::weak_ptr<KatStep> released;
  for (uint64_t step = 1; step <= 3; ++step) {
    std::shared_ptr<KatStep> keep = WriteKatStepBehind(*s, step);
    released = keep;
    const KatStep expected = *keep;
    keep.reset();  // the store holds the bytes until they are written
    // Another thread reads the step at once: the read waits for the write.
    std::optional<std::vector<LogRecord>> read;
    std::thread reader([&] { read = s->GetStepRecords("kat", step); });
    reader.join();
    REQUIRE(read.has_value());
    CHECK(read->at(0).value == expected.a);
    CHECK(read->at(read->size() - 1).value == expected.b);
    CHECK(released.expired());  // and let them go
    CHECK(s->GetRun("kat")->steps_written == step);
    if (step == 2) s->PutCheckpoint("kat", 1, KatCheckpoint(1));
  }
  s->PutCheckpoint("kat", 2, KatCheckpoint(2));
  CHECK(ToHex(s->Root("kat")) == testing::kKatRoot);
  CHECK(s->Verify().ok());
}

TEST_CASE("store: a step written behind is checked when it is handed over", "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  s->CreateRun("kat", RunConfig{"kat-spec", 2, 3, ""});
  // Before leaf 0, out of order, a duplicate record: WriteStep's errors, thrown here.
  CHECK_THROWS_WITH(WriteKatStepBehind(*s, 1), Catch::Contains("store leaf 0"));
  s->PutCheckpoint("kat", 0, KatCheckpoint(0));
  CHECK_THROWS_WITH(WriteKatStepBehind(*s, 2), Catch::Contains("expected step 1 next, got step 2"));
  auto twice = std::make_shared<KatStep>(KatRecords(1));
  std::vector<LogRecordView> records = twice->records();
  records.push_back(records[0]);
  CHECK_THROWS_AS(s->WriteStepBehind("kat", 1, records, twice), Error);
  CHECK(s->GetRun("kat")->steps_written == 0);
  WriteKatStepBehind(*s, 1);
  CHECK_THROWS_WITH(WriteKatStepBehind(*s, 1), Catch::Contains("expected step 2 next, got step 1"));
  CHECK(s->GetRun("kat")->steps_written == 1);
  s->Close();
  CHECK_THROWS_WITH(WriteKatStepBehind(*s, 2), Catch::Contains("is closed"));

  StoreOptions ro;
  ro.read_only = true;
  auto reader = Store::Open(dir.Sub("db"), ro);
  CHECK_THROWS_WITH(WriteKatStepBehind(*reader, 2), Catch::Contains("read-only"));
}

TEST_CASE("store: Close and the destructor wait for a step written behind", "[store]") {
  TempDir dir;
  {
    auto s = Store::Open(dir.Sub("db"));
    StartKatRun(*s);
    WriteKatStepBehind(*s, 1);
    s->Close();
  }
  {
    auto s = Store::Open(dir.Sub("db"));
    CHECK(s->GetRun("kat")->steps_written == 1);
    WriteKatStepBehind(*s, 2);
  }  // destroyed with the write in flight
  auto s = Store::Open(dir.Sub("db"));
  CHECK(s->GetRun("kat")->steps_written == 2);
  CHECK(s->GetStep("kat", 2).has_value());
}

TEST_CASE("store: a step written behind while Close begins leaves no exit action behind",
          "[store]") {
  // The step goes in without the write-ahead log, so its write registers the exit's flush of
  // the store. Close cancels that action first, then waits for the step: held until Close is
  // waiting, the write registered it again, and the exit ran it on the freed store (a
  // use-after-free that AddressSanitizer caught after os.exit in tests/host/cli_test.cc).
  TempDir dir;
  StoreOptions options;
  options.unlogged_step_bytes = 0;
  auto s = Store::Open(dir.Sub("db"), options);
  StartKatRun(*s);
  std::promise<void> release;
  StoreTestAccess::HoldNextBehind(*s, release.get_future().share());
  WriteKatStepBehind(*s, 1);
  std::thread closer([&] { s->Close(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Close is waiting for the step
  release.set_value();
  closer.join();
  CHECK_FALSE(HasAtExitAction(s.get()));
  s.reset();
  CHECK(Store::Open(dir.Sub("db"))->GetRun("kat")->steps_written == 1);  // Close flushed it
}

TEST_CASE("store: a failed write behind fails every later call and Close, and loses only it",
          "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  StartKatRun(*s);
  WriteKatStepBehind(*s, 1);
  StoreTestAccess::FailNextBehind(*s, "disk on fire");
  WriteKatStepBehind(*s, 2);  // handed over: the failure comes with the next call
  const std::string why = "step 2 of run 'kat' was not written: disk on fire";
  CHECK_THROWS_WITH(s->GetRun("kat"), Catch::Contains(why));
  CHECK_THROWS_WITH(s->GetStep("kat", 1), Catch::Contains(why));  // every call, not only the first
  CHECK_THROWS_WITH(s->PutCheckpoint("kat", 1, KatCheckpoint(1)), Catch::Contains(why));
  CHECK_THROWS_WITH(s->WaitBehind(), Catch::Contains(why));
  CHECK_THROWS_WITH(s->Close(), Catch::Contains(why));
  CHECK(s->closed());
  s.reset();

  // Reopened: step 1 is there, step 2 is not, and writing goes on from there.
  s = Store::Open(dir.Sub("db"));
  CHECK(s->GetRun("kat")->steps_written == 1);
  CHECK_FALSE(s->GetStep("kat", 2).has_value());
  s->WriteStep("kat", 2, KatRecords(2).records());
  s->PutCheckpoint("kat", 1, KatCheckpoint(1));
  s->WriteStep("kat", 3, KatRecords(3).records());
  s->PutCheckpoint("kat", 2, KatCheckpoint(2));
  CHECK(ToHex(s->Root("kat")) == testing::kKatRoot);
}

void PutKatCheckpointBehind(Store& s, uint64_t leaf) {
  s.PutCheckpointBehind("kat", leaf, std::make_shared<const std::string>(KatCheckpoint(leaf)));
}

TEST_CASE("store: checkpoints written behind give the known-answer run, the last one at once",
          "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  s->CreateRun("kat", RunConfig{"kat-spec", 2, 3, ""});
  PutKatCheckpointBehind(*s, 0);
  for (uint64_t step = 1; step <= 3; ++step) {
    WriteKatStepBehind(*s, step);  // waits for the checkpoint before it
    if (step == 2) PutKatCheckpointBehind(*s, 1);
  }
  PutKatCheckpointBehind(*s, 2);  // the last leaf: written before the call returns
  {
    StoreOptions ro;
    ro.read_only = true;
    auto reader = Store::Open(dir.Sub("db"), ro);  // another instance, which waits for nothing
    REQUIRE(reader->GetRun("kat").has_value());
    CHECK(reader->GetRun("kat")->complete());
    CHECK(ToHex(reader->Root("kat")) == testing::kKatRoot);
  }
  // Another thread reads at once: the read waits for the write.
  std::string root;
  std::thread reader([&] { root = ToHex(s->Root("kat")); });
  reader.join();
  CHECK(root == testing::kKatRoot);
  CHECK(s->GetRun("kat")->complete());
  CHECK(s->GetCheckpoint("kat", 2) == KatCheckpoint(2));
  CHECK(s->Verify().ok());
}

TEST_CASE("store: a checkpoint written behind is checked when it is handed over", "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  s->CreateRun("kat", RunConfig{"kat-spec", 2, 3, ""});
  CHECK_THROWS_WITH(PutKatCheckpointBehind(*s, 1), Catch::Contains("expected leaf 0 next"));
  CHECK_THROWS_WITH(s->PutCheckpointBehind("kat", 0, std::make_shared<const std::string>("junk")),
                    Catch::Contains("malformed checkpoint"));
  CHECK_THROWS_WITH(s->PutCheckpointBehind("kat", 0, nullptr), Catch::Contains("no checkpoint"));
  CHECK(s->GetRun("kat")->leaves == 0);
  PutKatCheckpointBehind(*s, 0);
  WriteKatStepBehind(*s, 1);
  // Leaf 1 follows step 2: too early, and the run's state is unchanged.
  CHECK_THROWS_WITH(PutKatCheckpointBehind(*s, 1), Catch::Contains("written steps up to 1"));
  CHECK(s->GetRun("kat")->leaves == 1);
  s->Close();
  CHECK_THROWS_WITH(PutKatCheckpointBehind(*s, 1), Catch::Contains("is closed"));
}

TEST_CASE("store: a failed checkpoint behind fails every later call, and loses only it",
          "[store]") {
  TempDir dir;
  {
    auto s = Store::Open(dir.Sub("db"));
    StartKatRun(*s);
    WriteKatStepBehind(*s, 1);
    WriteKatStepBehind(*s, 2);
    StoreTestAccess::FailNextBehind(*s, "disk on fire");
    PutKatCheckpointBehind(*s, 1);
    const std::string why = "the checkpoint of leaf 1 of run 'kat' was not written: disk on fire";
    CHECK_THROWS_WITH(s->GetRun("kat"), Catch::Contains(why));
    CHECK_THROWS_WITH(WriteKatStepBehind(*s, 3), Catch::Contains(why));
    CHECK_THROWS_WITH(s->Close(), Catch::Contains(why));
  }
  // Reopened: steps 1 and 2 are there, leaf 1 is not; storing it goes on from there.
  auto s = Store::Open(dir.Sub("db"));
  CHECK(s->GetRun("kat")->steps_written == 2);
  CHECK(s->GetRun("kat")->leaves == 1);
  PutKatCheckpointBehind(*s, 1);
  s->WriteStep("kat", 3, KatRecords(3).records());
  s->PutCheckpoint("kat", 2, KatCheckpoint(2));
  CHECK(ToHex(s->Root("kat")) == testing::kKatRoot);
}

TEST_CASE("store: Close waits for a checkpoint written behind", "[store]") {
  TempDir dir;
  {
    auto s = Store::Open(dir.Sub("db"));
    StartKatRun(*s);
    WriteKatStepBehind(*s, 1);
    WriteKatStepBehind(*s, 2);
    PutKatCheckpointBehind(*s, 1);
  }  // destroyed with the write in flight
  CHECK(Store::Open(dir.Sub("db"))->GetRun("kat")->leaves == 2);
}

}  // namespace
}  // namespace vt::store
