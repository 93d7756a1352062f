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
#include <vector>

#include "runtime/data/sources.h"
#include "runtime/nn/context.h"
#include "runtime/nn/magnitude.h"
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
  // Of those, the attention's qkv and heads-output gradients (h.0): rearrangements of rounded
  // gradients (SplitHeadsOp, MergeHeadsOp), not any boundary's output themselves.
  int64_t rearranged = 0;
};

StepOutcome Step(Party* p, const vt::data::Dataset& data, Mode mode, const WindowTable& windows,
                 int64_t step, bool shortcut, const StepLog* replayed = nullptr) {
  if (replayed != nullptr) p->log = *replayed;
  StepContext context(mode, &windows, step, &p->log);
  context.set_grid_shortcut(shortcut);
  vt::train::TrainStep(*p->model, *p->optimizer, data, 3, 8, step, context);
  context.Finish();
  return {
      context.stats(), context.trace(), context.divergence(), context.grid_shortcuts(),
      context.grid_shortcuts("h.0.attn.c_attn:bwd") + context.grid_shortcuts("h.0.attn.mix:bwd")};
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

// Two contexts that took the same calls, one with the shortcut and one without: the same
// trace and log, and the one without took none.
void CheckSameAsFullPass(const StepContext& fast, const StepContext& full, const StepLog& fast_log,
                         const StepLog& full_log) {
  CHECK(full.grid_shortcuts() == 0);
  const bool same_trace = fast.trace() == full.trace(), same_log = fast_log == full_log;
  CHECK(same_trace);
  CHECK(same_log);  // (Catch cannot print records)
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
      int64_t shortcuts = 0, audit_shortcuts = 0, rearranged = 0, audit_rearranged = 0;
      for (int64_t step = 1; step <= 3; ++step) {
        const StepOutcome a = Step(&fast, *data, Mode::kLog, *windows, step, true);
        const StepOutcome b = Step(&full, *data, Mode::kLog, *windows, step, false);
        CheckSameStep(a, b);
        const bool same_log = fast.log == full.log;  // (Catch cannot print records)
        CHECK(same_log);
        CHECK(SameModel(fast, full));
        CHECK(b.shortcuts == 0);
        shortcuts += a.shortcuts;
        rearranged += a.rearranged;

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
        audit_rearranged += c.rearranged;
      }
      // The control: backward boundaries did receive rounded gradients as they were.
      CHECK(shortcuts > 0);
      CHECK(audit_shortcuts > 0);
      // Both of h.0's attention rearrangements, every step, in both parties (under absolute
      // windows too: rearranged agreed values stay agreed).
      if (kind == "gpt") {
        CHECK(rearranged == 6);
        CHECK(audit_rearranged == 6);
      }
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
  CheckSameAsFullPass(fast, full, fast_log, full_log);
}

TEST_CASE("grid shortcut: rearranged rounded gradients pass, others are rounded", "[nn]") {
  // An op that rearranges rounded gradients (an attention's heads) registers its output
  // (AddGridRearrangement) only when every source is a whole, unchanged rounded output, and
  // on the coarsest of their grids; everything else is rounded in full.
  WindowTable windows;
  windows.bits = 24;  // fwd/bwd boundaries on 24 bits, updates on 32
  StepLog fast_log, full_log;
  StepContext fast(Mode::kLog, &windows, 1, &fast_log), full(Mode::kLog, &windows, 1, &full_log);
  full.set_grid_shortcut(false);
  at::manual_seed(4);
  const at::Tensor x = at::randn({2, 3, 8, 4}, at::kDouble);
  // The sources' values, in their memory order, one after the other.
  auto gather = [](std::vector<at::Tensor> sources) {
    for (at::Tensor& s : sources) s = s.contiguous().view(-1);
    return at::cat(sources);
  };
  for (StepContext* c : {&fast, &full}) {
    const at::Tensor r1 = c->Apply("r1:fwd", x), r2 = c->Apply("r2:fwd", x * 3);
    // Whole rounded outputs, one of them as a permuted view: passed on as they are.
    const at::Tensor ok = gather({r1, r2.transpose(2, 3)});
    c->AddGridRearrangement(ok, {r1, r2.transpose(2, 3)});
    const at::Tensor ok2 = c->ApplyGradient("ok:bwd", ok, 0);
    CHECK(SameBits(ok2, ok));
    // A source no boundary rounded: rounded in full (its values are off the grid).
    const at::Tensor raw = gather({r1, x});
    c->AddGridRearrangement(raw, {r1, x});
    CHECK(!SameBits(c->ApplyGradient("raw:bwd", raw, 0), raw));
    // A source changed in place since it was rounded.
    at::Tensor changed = c->Apply("c:fwd", x);
    changed.add_(1e-3);
    const at::Tensor ch = gather({changed});
    c->AddGridRearrangement(ch, {changed});
    CHECK(!SameBits(c->ApplyGradient("changed:bwd", ch, 0), ch));
    // A part of a rounded output as a source, and an output with more values than its sources.
    const at::Tensor part = gather({r1.narrow(0, 0, 1)});
    c->AddGridRearrangement(part, {r1.narrow(0, 0, 1)});
    c->ApplyGradient("part:bwd", part, 0);
    const at::Tensor more = gather({r1, x});
    c->AddGridRearrangement(more, {r1});
    CHECK(!SameBits(c->ApplyGradient("more:bwd", more, 0), more));
    // A source on the 32-bit grid of an update boundary: not on the 24-bit grid, rounded.
    at::Tensor u = x.clone();
    c->ApplyInPlace("w:update", &u);
    const at::Tensor coarse = gather({r1, u});
    c->AddGridRearrangement(coarse, {r1, u});
    CHECK(!SameBits(c->ApplyGradient("coarse:bwd", coarse, 0), coarse));
  }
  CHECK(fast.grid_shortcuts("ok:bwd") == 1);
  CHECK(fast.grid_shortcuts() == 1);
  CheckSameAsFullPass(fast, full, fast_log, full_log);
}

TEST_CASE("grid shortcut: agreed values stay agreed through a permuted view only", "[nn]") {
  // AgreedValues: a zero magnitude offered for a tensor holds for it and for a permuted view
  // of all of it (SplitHeadsOp passes it on), not for a part, values changed since, or a
  // magnitude that is not zero.
  const WindowTable absolute = Absolute();
  StepLog log;
  StepContext c(Mode::kLog, &absolute, 1, &log);
  REQUIRE(c.magnitudes_wanted());
  at::manual_seed(5);
  at::Tensor r = c.Apply("r:fwd", at::randn({2, 3, 8, 4}, at::kDouble));
  c.OfferMagnitude(r, vt::nn::ZeroMagnitude());
  CHECK(c.AgreedValues(r));
  CHECK(c.AgreedValues(r.transpose(2, 3)));
  CHECK_FALSE(c.AgreedValues(r.narrow(0, 0, 1)));
  const at::Tensor m = c.Apply("m:fwd", at::randn({2, 3, 8, 4}, at::kDouble));
  c.OfferMagnitude(m, m.abs());
  CHECK_FALSE(c.AgreedValues(m));
  r.add_(1.0);
  CHECK_FALSE(c.AgreedValues(r));
}
