// The central promise on small models: a run logged on one profile replays bit for bit on
// another; without the logs (rounding alone) or in plain FP32 the two profiles diverge.
#include "runtime/train/engine.h"

#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include "runtime/data/sources.h"
#include "runtime/nn/context.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/profile/profile.h"

namespace {

using vt::nn::Mode;

struct Run {
  std::shared_ptr<vt::nn::Model> model;
  std::unique_ptr<vt::optim::Optimizer> optimizer;
};

Run MakeRun(const std::string& kind, uint64_t seed, const vt::optim::OptimizerConfig& oc) {
  Run r;
  if (kind == "mlp") {
    vt::nn::MlpConfig c;
    c.input_shape = {32};
    c.hidden = {64, 32};
    c.classes = 10;
    r.model = vt::nn::MakeMlp(c, seed);
  } else if (kind == "resnet") {
    vt::nn::ResNetConfig c;
    c.width = 4;
    c.in_channels = 1;
    r.model = vt::nn::MakeResNet(c, seed);
  } else {
    vt::nn::Gpt2Config c;
    c.layers = 2;
    c.d_model = 32;
    c.heads = 4;
    c.vocab = 256;
    c.context = 16;
    r.model = vt::nn::MakeGpt2(c, seed);
  }
  r.optimizer = std::make_unique<vt::optim::Optimizer>(oc);
  return r;
}

bool SameState(Run& a, Run& b) {
  auto sa = a.model->NamedState(), sb = b.model->NamedState();
  for (size_t i = 0; i < sa.size(); ++i) {
    if (!at::equal(*sa[i].second, *sb[i].second)) return false;
  }
  return true;
}

std::shared_ptr<vt::data::Dataset> DataFor(const std::string& kind) {
  vt::data::SyntheticOptions o;
  o.size = 256;
  o.seed = 5;
  if (kind == "mlp") o.input_shape = {32};
  if (kind == "resnet") o.input_shape = {1, 8, 8};
  if (kind == "gpt") {
    return vt::data::TextCorpus({std::string(VTRUN_SOURCE_DIR) + "/data/shakespeare.txt", 16});
  }
  return vt::data::Synthetic(o);
}

// Trains `steps` steps on profile `trainer_profile` in `trainer_mode` and on `auditor_profile`
// in `auditor_mode` (kReplay uses the trainer's logs). Returns the first step whose state
// differs, or 0 if all agree. `differing` (optional) counts the values whose FP64 input to a
// boundary differed between the two (the control: the profiles really computed otherwise).
int64_t FirstDivergence(const std::string& kind, Mode trainer_mode, Mode auditor_mode,
                        const std::string& trainer_profile, const std::string& auditor_profile,
                        int64_t steps, int64_t* corrections = nullptr,
                        int64_t* differing = nullptr) {
  vt::optim::OptimizerConfig oc;
  oc.kind = kind == "gpt" ? "adamw" : "sgd";
  oc.lr = kind == "gpt" ? 1e-3 : 0.05;
  oc.momentum = kind == "gpt" ? 0.0 : 0.9;
  auto data = DataFor(kind);
  Run trainer = MakeRun(kind, 1, oc), auditor = MakeRun(kind, 1, oc);
  if (trainer_mode == Mode::kFp32) trainer.model->To(at::kFloat);
  if (auditor_mode == Mode::kFp32) auditor.model->To(at::kFloat);
  vt::nn::WindowTable windows;
  vt::nn::StepLog log;
  int64_t total_corrections = 0, total_differing = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    std::map<vt::nn::RecordKey, at::Tensor> captured;
    vt::ActivateProfile(vt::FindProfile(trainer_profile));
    vt::nn::StepContext tc(trainer_mode, &windows, step, &log);
    if (differing) tc.set_capture(&captured);
    vt::train::TrainStep(*trainer.model, *trainer.optimizer, *data, 3, 16, step, tc);
    vt::ActivateProfile(vt::FindProfile(auditor_profile));
    vt::nn::StepContext ac(auditor_mode, &windows, step, &log);
    if (differing) ac.set_compare(&captured);
    vt::train::TrainStep(*auditor.model, *auditor.optimizer, *data, 3, 16, step, ac);
    for (const auto& [name, s] : ac.stats()) total_corrections += s.corrections;
    for (const auto& [name, d] : ac.divergence_stats()) total_differing += d.differ;
    if (!SameState(trainer, auditor)) {
      vt::ActivateProfile(vt::FindProfile("native"));
      return step;
    }
  }
  vt::ActivateProfile(vt::FindProfile("native"));
  if (corrections) *corrections = total_corrections;
  if (differing) *differing = total_differing;
  return 0;
}

}  // namespace

TEST_CASE("logged runs replay bit for bit across in-process profiles", "[train]") {
  for (std::string kind : {"mlp", "resnet", "gpt"}) {
    for (auto [a, b] : {std::pair<const char*, const char*>{"native", "splitk4"},
                        {"splitk4", "blocked"},
                        {"blocked", "native"}}) {
      int64_t corrections = 0, differing = 0;
      INFO(kind << ": trainer " << a << ", auditor " << b);
      CHECK(FirstDivergence(kind, Mode::kLog, Mode::kReplay, a, b, 6, &corrections, &differing) ==
            0);
      // The control: the two profiles computed other FP64 values at the boundaries (so the
      // equal states come from rounding and the log, not from identical arithmetic). Honest
      // profiles straddle a midpoint rarely, so corrections are counted, not required here;
      // train_test.lua and the flip_within scenarios make the auditor copy directions.
      INFO("values differing before rounding: " << differing
                                                << ", corrections copied: " << corrections);
      CHECK(differing > 0);
    }
  }
}

// (Rounding without logs also diverges, but only after a midpoint straddle: roughly one per
// 2^29 rounded values at b = 32, so small models need thousands of steps; the long-run
// experiments show it.)
TEST_CASE("without rounding, profiles diverge at once, and the same profile agrees", "[train]") {
  CHECK(FirstDivergence("mlp", Mode::kFp32, Mode::kFp32, "native", "splitk4", 20) == 1);
  CHECK(FirstDivergence("mlp", Mode::kFp64, Mode::kFp64, "native", "splitk4", 20) == 1);
  CHECK(FirstDivergence("mlp", Mode::kRounded, Mode::kRounded, "splitk4", "splitk4", 5) == 0);
}
