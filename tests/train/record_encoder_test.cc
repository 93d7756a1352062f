// Encoding a step's records while the step runs (train/record_encoder.h): the bytes are
// EncodeLog's, a record written twice in a step is encoded as last written, and a trainer
// stores the same records, digests and root with it as without it, honest or tampering.
#include "runtime/train/record_encoder.h"

#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include "runtime/data/sources.h"
#include "runtime/precision/codec.h"
#include "runtime/train/runner.h"
#include "tests/support/subprocess.h"

using vt::precision::LogRecord;
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

}  // namespace

TEST_CASE("a trainer stores the same records and root with records encoded ahead or after",
          "[record_encoder][runner]") {
  const bool tampering = GENERATE(false, true);
  vt::testing::TempDir dir;
  vt::train::Spec spec = MakeSpec();
  auto run = [&](const std::string& name, RunnerOptions::Background ahead) {
    RunnerOptions o;
    o.data = Data();
    o.store = vt::store::Store::Open(dir.path() + "/" + name);
    o.encode_ahead = ahead;
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
