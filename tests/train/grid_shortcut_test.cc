// A gradient that is an earlier boundary's rounded output of the step, unchanged since, passes a
// backward boundary as it is (StepContext::ApplyGradient, grid_shortcuts()): the trainer's
// records, traces, statistics and model are those of the full pass, and so are an auditor's
// replay and report, under the paper's window and under absolute windows. The controls: the
// shortcut is taken (and not without it), and the forgeries and stale tensors it must not
// take are rounded or replayed in full.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>

#include "runtime/data/sources.h"
#include "runtime/nn/context.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/precision/log_record.h"
#include "runtime/profile/profile.h"
#include "runtime/train/engine.h"
#include "tests/precision/helpers.h"
#include "tests/train/step_checks.h"

namespace {

using vt::nn::Mode;
using vt::nn::StepContext;
using vt::nn::StepLog;
using vt::nn::WindowTable;
using vt::precision::testing::SameBits;

struct Party {
  std::shared_ptr<vt::nn::Model> model;
  std::unique_ptr<vt::optim::Optimizer> optimizer;
  StepLog log;
};

Party MakeParty(const std::string& kind) {
  Party p;
  vt::optim::OptimizerConfig oc;
  if (kind == "resnet") {
    vt::nn::ResNetConfig c;
    c.width = 4;
    c.in_channels = 1;
    p.model = vt::nn::MakeResNet(c, 1);
    oc.lr = 0.05;
    oc.momentum = 0.9;
  } else {
    vt::nn::Gpt2Config c;
    c.layers = 2;
    c.d_model = 32;
    c.heads = 4;
    c.vocab = 256;
    c.context = 16;
    p.model = vt::nn::MakeGpt2(c, 1);
    oc.kind = "adamw";
    oc.lr = 1e-3;
    oc.weight_decay = 0.01;
  }
  p.optimizer = std::make_unique<vt::optim::Optimizer>(oc);
  return p;
}

std::shared_ptr<vt::data::Dataset> DataFor(const std::string& kind) {
  if (kind == "gpt") {
    return vt::data::TextCorpus({std::string(VTRUN_SOURCE_DIR) + "/data/shakespeare.txt", 16});
  }
  vt::data::SyntheticOptions o;
  o.size = 256;
  o.seed = 5;
  o.input_shape = {1, 8, 8};
  return vt::data::Synthetic(o);
}

struct StepOutcome {
  std::map<std::string, vt::nn::BoundaryStats> stats;
  vt::nn::StepTrace trace;
  std::string divergence;
  int64_t shortcuts = 0;
};

StepOutcome Step(Party* p, const vt::data::Dataset& data, Mode mode, const WindowTable& windows,
                 int64_t step, bool shortcut, const StepLog* replayed = nullptr) {
  if (replayed != nullptr) p->log = *replayed;
  StepContext context(mode, &windows, step, &p->log);
  context.set_grid_shortcut(shortcut);
  vt::train::TrainStep(*p->model, *p->optimizer, data, 3, 8, step, context);
  context.Finish();
  return {context.stats(), context.trace(), context.divergence(), context.grid_shortcuts()};
}

void CheckSameStep(const StepOutcome& a, const StepOutcome& b) {
  const bool same_trace = a.trace == b.trace;
  CHECK(same_trace);
  CHECK(a.divergence == b.divergence);
  vt::train::testing::CheckSameBoundaryStats(a.stats, b.stats);
}

bool SameModel(Party& a, Party& b) {
  auto sa = a.model->NamedState(), sb = b.model->NamedState();
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i) {
    if (!SameBits(*sa[i].second, *sb[i].second)) return false;
  }
  return true;
}

// Windows with an absolute term everywhere (as calibration writes them): values every party
// computes alike (a rounded gradient) take no absolute term, others do.
WindowTable Absolute() {
  WindowTable w;
  for (vt::nn::Window& k : w.by_kind) k = {0.0, 0x1p-40};
  return w;
}

}  // namespace

TEST_CASE("grid shortcut: trainer and auditor give what the full pass gives", "[train][nn]") {
  const WindowTable paper, absolute = Absolute();
  for (std::string kind : {"gpt", "resnet"}) {
    const auto data = DataFor(kind);
    for (const WindowTable* windows : {&paper, &absolute}) {
      INFO(kind << (windows == &paper ? ", paper window" : ", absolute windows"));
      Party fast = MakeParty(kind), full = MakeParty(kind);
      // Auditors on another profile (other sums, so that replays correct values).
      Party audit_fast = MakeParty(kind), audit_full = MakeParty(kind);
      int64_t shortcuts = 0, audit_shortcuts = 0;
      for (int64_t step = 1; step <= 3; ++step) {
        const StepOutcome a = Step(&fast, *data, Mode::kLog, *windows, step, true);
        const StepOutcome b = Step(&full, *data, Mode::kLog, *windows, step, false);
        CheckSameStep(a, b);
        const bool same_log = fast.log == full.log;  // (Catch cannot print records)
        CHECK(same_log);
        CHECK(SameModel(fast, full));
        CHECK(b.shortcuts == 0);
        shortcuts += a.shortcuts;

        vt::ActivateProfile(vt::FindProfile("splitk4"));
        const StepOutcome c =
            Step(&audit_fast, *data, Mode::kReplay, *windows, step, true, &fast.log);
        const StepOutcome d =
            Step(&audit_full, *data, Mode::kReplay, *windows, step, false, &fast.log);
        vt::ActivateProfile(vt::FindProfile("native"));
        CheckSameStep(c, d);
        CHECK(SameModel(audit_fast, audit_full));
        CHECK(SameModel(audit_fast, fast));
        CHECK(d.shortcuts == 0);
        audit_shortcuts += c.shortcuts;
      }
      // The control: backward boundaries did receive rounded gradients as they were.
      CHECK(shortcuts > 0);
      CHECK(audit_shortcuts > 0);
    }
  }
  // Rounding without a log (vt.round-style runs) takes it too, with the same model.
  const auto data = DataFor("gpt");
  Party fast = MakeParty("gpt"), full = MakeParty("gpt");
  const StepOutcome a = Step(&fast, *data, Mode::kRounded, paper, 1, true);
  const StepOutcome b = Step(&full, *data, Mode::kRounded, paper, 1, false);
  CHECK(a.shortcuts > 0);
  CHECK(SameModel(fast, full));
}

TEST_CASE("grid shortcut: an entry on a shortcut boundary is replayed and flagged", "[train][nn]") {
  // A trainer that writes a direction where its values are on the grid (such an entry is
  // never honest, ROUNDING.md): the auditor must not pass the gradient on unchecked.
  const WindowTable paper;
  const auto data = DataFor("gpt");
  Party trainer = MakeParty("gpt");
  Step(&trainer, *data, Mode::kLog, paper, 1, true);
  const vt::nn::RecordKey key{"h.0.mlp.gelu:bwd", 0};
  REQUIRE(trainer.log.count(key) == 1);
  const vt::precision::LogRecord& honest = trainer.log.at(key);
  REQUIRE(honest.counts().logged() == 0);
  std::vector<uint8_t> states(honest.states(), honest.states() + honest.size());
  states[7] = static_cast<uint8_t>(vt::precision::LogState::kUp);
  StepLog forged = trainer.log;
  forged[key] = vt::precision::LogRecord::FromStates(std::move(states), {});

  Party fast = MakeParty("gpt"), full = MakeParty("gpt");
  const StepOutcome a = Step(&fast, *data, Mode::kReplay, paper, 1, true, &forged);
  const StepOutcome b = Step(&full, *data, Mode::kReplay, paper, 1, false, &forged);
  CheckSameStep(a, b);
  CHECK(a.stats.at("h.0.mlp.gelu:bwd").illegitimate == 1);
  CHECK(a.shortcuts > 0);  // the other boundaries still take it
}

TEST_CASE("grid shortcut: changed, partial and coarser-grid gradients are rounded", "[nn]") {
  WindowTable windows;
  windows.bits = 24;  // fwd/bwd/grad boundaries on 24 bits, updates on 32
  // Windows under which values on the grid take entries (EXACT): a wide absolute term, and a
  // band of 1/2 at powers of two (the midpoint below is a quarter step away).
  windows.by_boundary["wide:bwd"] = {0.0, 0.5};
  windows.by_boundary["half:bwd"] = {0.5, 0.0};
  StepLog fast_log, full_log;
  StepContext fast(Mode::kLog, &windows, 1, &fast_log), full(Mode::kLog, &windows, 1, &full_log);
  full.set_grid_shortcut(false);
  at::manual_seed(3);
  const at::Tensor x = at::randn({64, 33}, at::kDouble);
  const at::Tensor powers = at::exp2(at::randint(-20, 20, {300}, at::kLong).to(at::kDouble));
  for (StepContext* c : {&fast, &full}) {
    // Changed in place since it was rounded (a gradient accumulated into): rounded again.
    at::Tensor a = c->Apply("a:fwd", x);
    a.add_(1e-3);
    const at::Tensor a2 = c->ApplyGradient("a2:bwd", a, 0);
    CHECK(!SameBits(a2, a));
    // A part of a rounded output: its own CRC in the trace.
    const at::Tensor b = c->Apply("b:fwd", x);
    c->ApplyGradient("b2:bwd", b.narrow(0, 0, 10), 0);
    // On the 32-bit grid of an update boundary, not on a 24-bit one: rounded.
    at::Tensor u = x.clone();
    c->ApplyInPlace("w:update", &u);
    const at::Tensor u2 = c->ApplyGradient("u2:bwd", u, 0);
    CHECK(!SameBits(u2, u));
    // Values on the grid under windows that give them entries: rounded, and logged.
    const at::Tensor w = c->Apply("w:fwd", x);
    c->ApplyGradient("wide:bwd", w, 0);
    const at::Tensor h = c->Apply("h:fwd", powers);
    c->ApplyGradient("half:bwd", h, 0);
    // A 24-bit output on a 24-bit boundary: passed on as it is.
    const at::Tensor v = c->Apply("v:fwd", x);
    const at::Tensor v2 = c->ApplyGradient("v2:bwd", v, 0);
    CHECK(SameBits(v2, v));
  }
  CHECK(fast_log.at({"wide:bwd", 0}).counts().exact > 0);
  CHECK(fast_log.at({"half:bwd", 0}).counts().exact > 0);
  CHECK(fast.grid_shortcuts() == 1);
  CHECK(full.grid_shortcuts() == 0);
  const bool same_trace = fast.trace() == full.trace(), same_log = fast_log == full_log;
  CHECK(same_trace);
  CHECK(same_log);
}
