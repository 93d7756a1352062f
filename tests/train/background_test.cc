// Work beside the step on a background thread (RunnerOptions::Background). Encoding a
// step's records while the step runs (train/record_encoder.h): the bytes are EncodeLog's, a
// record written twice in a step is encoded as last written, and a trainer stores the same
// records, digests and root with it and its store writing each step behind (while the next
// step computes) as without either, honest or tampering. An auditor that
// reads and decodes the next step's records ahead (RunnerOptions::read_ahead): the same
// replay, reports and root as one that reads each step when it comes, whether the trainer
// finished first or steps in turn with it, and the same error for a bad record.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <mutex>
#include <set>
#include <thread>

#include "runtime/data/sources.h"
#include "runtime/precision/codec.h"
#include "runtime/train/record_encoder.h"
#include "runtime/train/runner.h"
#include "tests/support/subprocess.h"

using vt::precision::LogRecord;
using vt::train::Auditor;
using vt::train::RecordEncoder;
using vt::train::RunnerOptions;
using vt::train::Trainer;

namespace {

LogRecord Pattern(int64_t n, int seed) {
  std::vector<uint8_t> states(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) states[i] = static_cast<uint8_t>((i * 7 + seed) % 5 % 3);
  return LogRecord::FromStates(std::move(states), {});
}

}  // namespace

TEST_CASE("records encoded ahead are EncodeLog's bytes, the last write of a key kept",
          "[record_encoder]") {
  RecordEncoder encoder;
  std::map<vt::nn::RecordKey, LogRecord> log;
  for (int i = 0; i < 40; ++i) {
    const vt::nn::RecordKey key{"b" + std::to_string(i % 13) + ":fwd", i / 13};
    encoder.WillWrite(key);
    log[key] = Pattern(1000 + 977 * i, i);
    encoder.Written(key, log[key]);
  }
  // A second write of a key in the same step: WillWrite waits until the first is encoded.
  // (The 40 records hold fewer values than wake the worker on their own: WillWrite and Take
  // must wake it for what is queued.)
  const vt::nn::RecordKey again{"b3:fwd", 0};
  encoder.WillWrite(again);
  log[again] = Pattern(5000, 99);
  encoder.Written(again, log[again]);
  std::map<vt::nn::RecordKey, std::string> bytes = encoder.Take();
  REQUIRE(bytes.size() == log.size());
  for (const auto& [key, record] : log) CHECK(bytes.at(key) == vt::precision::EncodeLog(record));
  // Taken: the next step starts empty; Reset forgets a failed step's records.
  CHECK(encoder.Take().empty());
  encoder.Written(again, log[again]);
  encoder.Reset();
  CHECK(encoder.Take().empty());
}

namespace {

std::shared_ptr<vt::data::Dataset> Data() {
  vt::data::SyntheticOptions o;
  o.size = 200;
  o.input_shape = {20};
  o.classes = 4;
  o.seed = 3;
  return vt::data::Synthetic(o);
}

vt::train::Spec MakeSpec() {
  vt::nn::MlpConfig mc;
  mc.input_shape = {20};
  mc.hidden = {24, 16};
  mc.classes = 4;
  auto model = vt::nn::MakeMlp(mc, 1);
  vt::optim::OptimizerConfig oc;
  oc.lr = 0.05;
  oc.momentum = 0.9;
  vt::nn::WindowTable windows;
  return vt::train::Spec::FromFields(
      vt::train::Spec::Fields(*model, *Data(), oc, windows, 16, 9, 1, 4));
}

// Every record of every step of `run` in `store`, in key order.
std::vector<vt::store::LogRecord> AllRecords(vt::store::Store& store, int64_t steps) {
  std::vector<vt::store::LogRecord> out;
  for (int64_t s = 1; s <= steps; ++s) {
    auto records = store.GetStepRecords("run", static_cast<uint64_t>(s));
    REQUIRE(records.has_value());
    for (auto& r : *records) out.push_back(std::move(r));
  }
  return out;
}

RunnerOptions Options(const std::string& dir, RunnerOptions::Background read_ahead) {
  RunnerOptions o;
  o.data = Data();
  o.store = vt::store::Store::Open(dir);
  o.profile = "splitk4";  // another profile than the trainer's
  o.read_ahead = read_ahead;
  return o;
}

struct Replay {
  std::vector<int64_t> corrections, logged;
  vt::store::Digest root;
};

Replay Audit(Auditor& auditor) {
  Replay r;
  while (!auditor.done()) {
    const vt::train::StepReport report = auditor.Step();
    CHECK(report.illegitimate == 0);
    CHECK(report.log_mismatches == 0);
    r.corrections.push_back(report.corrections);
    r.logged.push_back(report.logged);
  }
  r.root = auditor.Root();
  return r;
}

}  // namespace

TEST_CASE(
    "a trainer stores the same records and root with records encoded ahead and written behind "
    "or neither",
    "[record_encoder][runner]") {
  const bool tampering = GENERATE(false, true);
  vt::testing::TempDir dir;
  vt::train::Spec spec = MakeSpec();
  auto run = [&](const std::string& name, RunnerOptions::Background ahead) {
    RunnerOptions o;
    o.data = Data();
    o.store = vt::store::Store::Open(dir.path() + "/" + name);
    o.encode_ahead = ahead;
    o.write_behind = ahead;
    if (tampering) {
      o.deviation.kind = vt::train::Deviation::Kind::kFlipWithin;
      o.deviation.from_step = 3;
    }
    auto trainer = std::make_unique<Trainer>(spec, o);
    int64_t steered = 0;
    while (!trainer->done()) steered += trainer->Step().steered;
    CHECK((steered > 0) == tampering);
    return trainer;
  };
  auto ahead = run("ahead", RunnerOptions::Background::kOn);
  auto after = run("after", RunnerOptions::Background::kOff);
  CHECK(ahead->Root() == after->Root());
  const auto a = AllRecords(ahead->store(), spec.steps());
  const auto b = AllRecords(after->store(), spec.steps());
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("step " << a[i].step << " record " << a[i].boundary << " call " << a[i].call);
    CHECK(a[i].boundary == b[i].boundary);
    CHECK(a[i].call == b[i].call);
    CHECK(a[i].value == b[i].value);
  }
}

TEST_CASE("an auditor reading ahead replays as one reading each step when it comes",
          "[read_ahead][runner]") {
  using B = RunnerOptions::Background;
  vt::testing::TempDir dir;
  const vt::train::Spec spec = MakeSpec();
  RunnerOptions to;
  to.data = Data();
  to.store = vt::store::Store::Open(dir.path() + "/t");
  Trainer trainer(spec, to);
  while (!trainer.done()) trainer.Step();
  auto source = vt::train::StoreRecords(trainer.options().store, "run");

  // Which steps the source was asked for on another thread than the auditor's.
  std::set<int64_t> elsewhere;
  std::mutex mu;
  const std::thread::id main = std::this_thread::get_id();
  auto watched = [&](int64_t step) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (std::this_thread::get_id() != main) elsewhere.insert(step);
    }
    return source(step);
  };
  Auditor plain(spec, Options(dir.path() + "/plain", B::kOff), watched);
  const Replay a = Audit(plain);
  CHECK(elsewhere.empty());
  Auditor ahead(spec, Options(dir.path() + "/ahead", B::kOn), watched);
  const Replay b = Audit(ahead);
  CHECK(elsewhere == std::set<int64_t>{2, 3, 4, 5, 6, 7, 8, 9});  // each read ahead of its step
  CHECK(a.root == trainer.Root());
  CHECK(b.root == trainer.Root());
  CHECK(a.corrections == b.corrections);
  CHECK(a.logged == b.logged);
  int64_t logged = 0;
  for (int64_t n : a.logged) logged += n;
  CHECK(logged > 0);  // the records were applied

  SECTION("in turn with the trainer: the next step's records are not written yet") {
    RunnerOptions t2 = to;
    t2.store = vt::store::Store::Open(dir.path() + "/t2");
    t2.write_behind = B::kOn;  // each step read while the trainer's store may still write it
    Trainer second(spec, t2);
    Auditor follower(spec, Options(dir.path() + "/follower", B::kOn),
                     vt::train::StoreRecords(second.options().store, "run"));
    std::vector<int64_t> corrections_in_turn;
    while (!second.done()) {
      second.Step();
      corrections_in_turn.push_back(follower.Step().corrections);
    }
    CHECK(corrections_in_turn == a.corrections);
    CHECK(follower.Root() == trainer.Root());
  }

  SECTION("a record that does not decode is the same mismatch with or without read-ahead") {
    auto garbled = [source](int64_t step) {
      auto records = source(step);
      if (step == 5) {
        for (auto& r : records) {
          if (r.boundary == "fc0:fwd") r.value = "\x07not a record";
        }
      }
      return records;
    };
    auto mismatch = [&](B read_ahead, const std::string& name) {
      Auditor auditor(spec, Options(dir.path() + "/" + name, read_ahead), garbled);
      for (int s = 1; s <= 4; ++s) CHECK(auditor.Step().log_mismatches == 0);
      const auto report = auditor.Step();
      CHECK(report.log_mismatches >= 1);
      return report.log_mismatch;
    };
    const std::string without = mismatch(B::kOff, "g1");
    CHECK_THAT(without,
               Catch::Matchers::Contains("step 5, record 'fc0:fwd' call 0 could not be decoded"));
    CHECK(mismatch(B::kOn, "g2") == without);
  }
}
