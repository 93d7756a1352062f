// Trainer and auditor with their stores: equal roots across profiles, resume after a crash,
// and tampering caught at the right leaf.
#include "runtime/train/runner.h"

#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include "runtime/common/error.h"
#include "runtime/data/sources.h"
#include "runtime/precision/codec.h"
#include "store/sha256.h"
#include "tests/support/subprocess.h"

using Catch::Matchers::Contains;
using vt::train::Auditor;
using vt::train::RunnerOptions;
using vt::train::Spec;
using vt::train::Trainer;

namespace {

std::shared_ptr<vt::data::Dataset> Data(uint64_t seed = 5) {
  vt::data::SyntheticOptions o;
  o.size = 300;
  o.input_shape = {24};
  o.classes = 5;
  o.seed = seed;
  return vt::data::Synthetic(o);
}

Spec MakeSpec(int64_t steps, int64_t k, double lr = 0.05, double band = 0.25) {
  vt::nn::MlpConfig mc;
  mc.input_shape = {24};
  mc.hidden = {32};
  mc.classes = 5;
  auto model = vt::nn::MakeMlp(mc, 1);
  vt::optim::OptimizerConfig oc;
  oc.lr = lr;
  oc.momentum = 0.9;
  vt::nn::WindowTable windows;
  for (auto& w : windows.by_kind) w.band = band;
  return Spec::FromFields(Spec::Fields(*model, *Data(), oc, windows, 16, steps, 1, k));
}

RunnerOptions Options(const std::string& dir, const std::string& profile,
                      std::shared_ptr<vt::data::Dataset> data = Data()) {
  RunnerOptions o;
  o.data = data;
  o.store = vt::store::Store::Open(dir);
  o.profile = profile;
  return o;
}

}  // namespace

TEST_CASE("an auditor on another profile ends with the trainer's root", "[runner]") {
  vt::testing::TempDir dir;
  Spec spec = MakeSpec(23, 5);
  Trainer trainer(spec, Options(dir.path() + "/t", "native"));
  int64_t logged = 0;
  while (!trainer.done()) logged += trainer.Step().logged;
  CHECK(logged > 0);
  CHECK(trainer.store().TreeSize("run") == 6);  // leaves 0, 5, 10, 15, 20, 23
  Auditor auditor(spec, Options(dir.path() + "/a", "splitk4"),
                  vt::train::StoreRecords(trainer.options().store, "run"));
  int64_t illegitimate = 0;
  while (!auditor.done()) illegitimate += auditor.Step().illegitimate;
  CHECK(illegitimate == 0);
  CHECK(auditor.Root() == trainer.Root());
  for (uint64_t i = 0; i < 3; ++i) {
    auto a = trainer.store().GetLeaf("run", i), b = auditor.store().GetLeaf("run", i);
    INFO("leaf " << i << " state " << vt::store::ToHex(a->state_digest) << " vs "
                 << vt::store::ToHex(b->state_digest) << " log " << vt::store::ToHex(a->log_digest)
                 << " vs " << vt::store::ToHex(b->log_digest));
    CHECK(a->leaf == b->leaf);
  }
  CHECK_FALSE(
      vt::train::FirstDifferingLeaf(trainer.store(), "run", auditor.store(), "run").has_value());
}

TEST_CASE("a trainer resumed after losing its process ends with the same root", "[runner]") {
  vt::testing::TempDir dir;
  Spec spec = MakeSpec(17, 4);
  vt::store::Digest straight;
  {
    Trainer t(spec, Options(dir.path() + "/straight", "native"));
    while (!t.done()) t.Step();
    straight = t.Root();
  }
  {
    Trainer t(spec, Options(dir.path() + "/crashy", "native"));
    for (int i = 0; i < 10; ++i) t.Step();  // steps 9 and 10 are after the last checkpoint (8)
  }
  {
    Trainer resumed(spec, Options(dir.path() + "/crashy", "native"));
    CHECK(resumed.step() == 8);
    while (!resumed.done()) resumed.Step();
    CHECK(resumed.Root() == straight);
  }
  // Another spec on the same run id is refused.
  CHECK_THROWS_WITH(Trainer(MakeSpec(17, 4, 0.01), Options(dir.path() + "/crashy", "native")),
                    Contains("another spec"));
}

TEST_CASE("a flipped logged direction or a changed label shows at the right leaf", "[runner]") {
  vt::testing::TempDir dir;
  // A narrow window (band 0.1), so that forced directions lie far from their midpoints.
  Spec spec = MakeSpec(12, 3, 0.05, 0.1);
  Trainer trainer(spec, Options(dir.path() + "/t", "native"));
  while (!trainer.done()) trainer.Step();
  auto source = vt::train::StoreRecords(trainer.options().store, "run");

  // The trainer's logs of step 7 with its first logged direction of the first layer's output
  // flipped (within w of its midpoint: accepted, and it moves the value) and directions
  // forced onto eight unlogged values, alternately DOWN and UP: those that would move a value
  // lie more than w from their midpoints, so they are flagged and not applied.
  auto flipped = [&](int64_t step) {
    auto records = source(step);
    if (step != 7) return records;
    for (auto& r : records) {
      if (r.boundary != "fc0:fwd") continue;
      vt::precision::LogRecord rec = vt::precision::DecodeLog(r.value);
      std::vector<uint8_t> states(rec.states(), rec.states() + rec.size());
      int forced = 0;
      bool flipped_one = false;
      for (auto& s : states) {
        if ((s == 1 || s == 2) && !flipped_one) {
          s = static_cast<uint8_t>(3 - s);
          flipped_one = true;
        } else if (s == 0 && forced < 8) {
          s = (forced++ % 2 == 0) ? 1 : 2;
        }
      }
      REQUIRE(flipped_one);
      r.value = vt::precision::EncodeLog(vt::precision::LogRecord::FromStates(states, rec.exact()));
    }
    return records;
  };
  Auditor liar(spec, Options(dir.path() + "/a1", "splitk4"), flipped);
  int64_t illegitimate = 0;
  std::string divergence;
  while (!liar.done()) {
    auto report = liar.Step();
    illegitimate += report.illegitimate;
    if (divergence.empty()) divergence = report.divergence;
  }
  CHECK(illegitimate >= 1);
  // The trace names the first boundary whose values left the trainer's.
  CHECK(divergence == "boundary 'fc0:fwd' call 0 at step 7");
  // The auditor copied the flipped direction, so its state differs from leaf 3 (steps 7-9) on.
  auto first = vt::train::FirstDifferingLeaf(trainer.store(), "run", liar.store(), "run");
  REQUIRE(first.has_value());
  CHECK(*first == 3);

  // A data set with one label changed is a different data set: the spec check refuses it.
  CHECK_THROWS_WITH(Auditor(spec, Options(dir.path() + "/a2", "splitk4", Data(6)), source),
                    Contains("digest"));
}

namespace {

// A sparse record of no entries that declares `elements` states: a few bytes that would
// make a decoder allocate 2^32 states, were it not bounded by the tensor the record is for.
std::string RecordDeclaring(uint64_t elements) {
  std::vector<uint8_t> none(3, 0);
  std::string bytes = vt::precision::EncodeLog(vt::precision::LogRecord::FromStates(none, {}),
                                               vt::precision::LogEncoding::kSparse);
  REQUIRE(static_cast<uint8_t>(bytes[6]) == 3);  // magic, version, encoding, then the count
  std::string count;
  do {
    const uint8_t low = elements & 0x7f;
    elements >>= 7;
    count.push_back(static_cast<char>(low | (elements != 0 ? 0x80 : 0)));
  } while (elements != 0);
  return bytes.substr(0, 6) + count + bytes.substr(7);
}

// A finished trainer run of `spec` on `native`, in `dir`/t.
std::unique_ptr<Trainer> Trained(const vt::testing::TempDir& dir, const Spec& spec) {
  auto trainer = std::make_unique<Trainer>(spec, Options(dir.path() + "/t", "native"));
  while (!trainer->done()) trainer->Step();
  return trainer;
}

}  // namespace

TEST_CASE("an auditor decodes records at their boundary when it must, with equal roots",
          "[runner]") {
  vt::testing::TempDir dir;
  Spec spec = MakeSpec(6, 3);
  auto trainer = Trained(dir, spec);
  // No state decoded before a step: every record waits for its boundary call.
  RunnerOptions o = Options(dir.path() + "/a", "splitk4");
  o.eager_log_states = 0;
  Auditor auditor(spec, o, vt::train::StoreRecords(trainer->options().store, "run"));
  while (!auditor.done()) {
    const auto report = auditor.Step();
    CHECK(report.log_mismatches == 0);
    CHECK(report.illegitimate == 0);
  }
  CHECK(auditor.Root() == trainer->Root());
}

TEST_CASE("records no honest trainer writes are mismatches, never a failed replay", "[runner]") {
  vt::testing::TempDir dir;
  Spec spec = MakeSpec(8, 4);
  auto trainer = Trained(dir, spec);
  auto source = vt::train::StoreRecords(trainer->options().store, "run");
  // One kind of bad record a step (the log digest would hold them all: the trainer committed
  // them), each of which made the replay throw before, or allocate 2^32 states.
  const std::map<int64_t, std::string> expected = {
      {2, "could not be decoded"},            // garbage bytes for fc0:fwd
      {3, "does not decode for its tensor"},  // fc0:fwd declaring 2^32 states
      {4, "never reached"},                   // a boundary the model has not, 2^32 states
      {5, "could not be decoded"},            // a trace that does not parse
      {6, "two records"},                     // fc0:fwd twice
  };
  auto tampered = [&](int64_t step) {
    auto records = source(step);
    for (auto& r : records) {
      if (step == 2 && r.boundary == "fc0:fwd") r.value = "junk";
      if (step == 3 && r.boundary == "fc0:fwd") r.value = RecordDeclaring(uint64_t{1} << 32);
      if (step == 5 && r.boundary == "~trace") r.value = "x";
    }
    if (step == 4) {
      vt::store::LogRecord extra;
      extra.boundary = "no.such.layer:fwd";
      extra.call = 0;
      extra.value = RecordDeclaring(uint64_t{1} << 32);
      records.push_back(extra);
    }
    if (step == 6) {
      for (const auto& r : std::vector<vt::store::LogRecord>(records)) {
        if (r.boundary == "fc0:fwd") records.push_back(r);
      }
    }
    return records;
  };
  // Without a store, as the judge replays (a store refuses to commit a step with a duplicate).
  RunnerOptions o = Options(dir.path() + "/a", "splitk4");
  o.store = nullptr;
  Auditor auditor(spec, o, tampered);
  while (!auditor.done()) {
    vt::train::StepReport report;
    REQUIRE_NOTHROW(report = auditor.Step());
    auto it = expected.find(report.step);
    INFO("step " << report.step << ": " << report.log_mismatch);
    if (it == expected.end()) {
      CHECK(report.log_mismatches == 0);
    } else {
      CHECK(report.log_mismatches >= 1);
      CHECK_THAT(report.log_mismatch, Contains(it->second));
    }
  }
}

TEST_CASE("a forged EXACT value is counted and not applied, so it cannot fail the replay",
          "[runner]") {
  // Every value of the first layer's output at step 2 forged to FP32's largest value. Were
  // they applied, the next product would overflow and the step throw before its entries were
  // counted; a judge would then have no verdict.
  vt::testing::TempDir dir;
  Spec spec = MakeSpec(3, 3);
  auto trainer = Trained(dir, spec);
  auto source = vt::train::StoreRecords(trainer->options().store, "run");
  int64_t forged = 0;
  auto huge = [&](int64_t step) {
    auto records = source(step);
    for (auto& r : records) {
      if (step != 2 || r.boundary != "fc0:fwd") continue;
      const vt::precision::LogRecord rec = vt::precision::DecodeLog(r.value);
      std::vector<uint8_t> states(rec.size(), 3);
      std::vector<vt::precision::ExactEntry> exact;
      for (int64_t i = 0; i < rec.size(); ++i) {
        exact.push_back(vt::precision::ExactEntry{i, 0x7f7fffffu});  // 3.4028235e38
      }
      forged = rec.size();
      r.value = vt::precision::EncodeLog(vt::precision::LogRecord::FromStates(states, exact));
    }
    return records;
  };
  RunnerOptions o = Options(dir.path() + "/a", "splitk4");
  o.store = nullptr;
  Auditor auditor(spec, o, huge);
  int64_t illegitimate = 0;
  while (!auditor.done()) {
    vt::train::StepReport report;
    REQUIRE_NOTHROW(report = auditor.Step());
    illegitimate += report.illegitimate;
  }
  REQUIRE(forged > 0);
  CHECK(illegitimate >= forged);
}
