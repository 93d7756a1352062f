// The optimizer's passes fused into their rounding boundaries (Optimizer::set_fuse_boundaries,
// nn::ApplyBoundaryProduced) give what each pass followed by its boundary gives: the same
// parameters, optimizer state, log records, step statistics and trace, for the trainer, an
// auditor's replay of the trainer's log, a tampering trainer, and plain FP64 steps, with
// SGD (momentum, weight decay, Nesterov) and AdamW, on one and two threads.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/nn/context.h"
#include "runtime/optim/optimizer.h"
#include "runtime/precision/log_record.h"
#include "tests/precision/helpers.h"
#include "tests/train/step_checks.h"

namespace {

using vt::nn::Mode;
using vt::nn::StepContext;
using vt::nn::StepLog;
using vt::nn::Tamper;
using vt::nn::WindowTable;
using vt::optim::Optimizer;
using vt::optim::OptimizerConfig;
using vt::precision::testing::SameBits;

// A model's parameters (a weight over several checksummed blocks and producer blocks, a
// bias) and the optimizer that updates them.
struct Party {
  std::map<std::string, at::Tensor> params;
  Optimizer optimizer;
  StepLog log;  // the trainer's records, or the ones an auditor replays
  Party(const OptimizerConfig& config, bool fuse, uint64_t seed) : optimizer(config) {
    optimizer.set_fuse_boundaries(fuse);
    at::manual_seed(seed);
    params["fc.weight"] = at::randn({300, 233}, at::kDouble);
    params["fc.bias"] = at::randn({233}, at::kDouble) * 1e-3;
  }
  vt::optim::NamedTensors Named() {
    vt::optim::NamedTensors out;
    for (auto& [name, t] : params) out.emplace_back(name, &t);
    return out;
  }
};

struct StepResult {
  std::map<std::string, vt::nn::BoundaryStats> stats;
  vt::nn::StepTrace trace;
};

// The gradients' boundaries, to go with the update's (the weight's with a magnitude of its
// own, the bias's with none), as the engine hands them over.
std::vector<std::optional<vt::precision::Magnitude>> GradBoundaries(Party* party) {
  std::vector<std::optional<vt::precision::Magnitude>> grads;
  for (auto& [name, t] : party->params) {
    grads.emplace_back(name == "fc.weight" ? vt::precision::Magnitude(t.grad().abs() * 2.0 + 1e-6)
                                           : vt::precision::Magnitude());
  }
  return grads;
}

// One step of `party` in `mode` with gradients from `grad_seed` (the same for both parties).
StepResult Step(Party* party, Mode mode, const WindowTable& windows, int64_t step,
                uint64_t grad_seed, const Tamper& tamper = {}) {
  at::manual_seed(grad_seed);
  for (auto& [name, t] : party->params) t.mutable_grad() = at::randn_like(t) * 1e-2;
  StepContext context(mode, &windows, step, &party->log);
  if (tamper.kind != Tamper::Kind::kNone) context.set_tamper(tamper);
  const auto grads = GradBoundaries(party);
  {
    StepContext::Scope scope(&context);
    party->optimizer.Step(party->Named(), step, &grads);
  }
  context.Finish();
  return {context.stats(), context.trace()};
}

void CheckSame(Party& fused, Party& plain, const StepResult& a, const StepResult& b) {
  for (auto& [name, t] : fused.params) CHECK(SameBits(t, plain.params.at(name)));
  auto state_a = fused.optimizer.NamedState(), state_b = plain.optimizer.NamedState();
  REQUIRE(state_a.size() == state_b.size());
  for (size_t i = 0; i < state_a.size(); ++i) {
    INFO(state_a[i].first);
    CHECK(state_a[i].first == state_b[i].first);
    CHECK(SameBits(*state_a[i].second, *state_b[i].second));
  }
  const bool same_log = fused.log == plain.log, same_trace = a.trace == b.trace;
  CHECK(same_log);
  CHECK(same_trace);
  vt::train::testing::CheckSameBoundaryStats(a.stats, b.stats);
}

std::vector<std::pair<std::string, OptimizerConfig>> Configs() {
  std::vector<std::pair<std::string, OptimizerConfig>> out;
  OptimizerConfig sgd;
  sgd.lr = 0.05;
  out.emplace_back("sgd", sgd);
  sgd.momentum = 0.9;
  out.emplace_back("sgd momentum", sgd);
  sgd.weight_decay = 5e-4;
  out.emplace_back("sgd momentum decay", sgd);
  sgd.nesterov = true;
  out.emplace_back("sgd nesterov decay", sgd);
  OptimizerConfig adamw;
  adamw.kind = "adamw";
  adamw.lr = 3e-4;
  adamw.weight_decay = 0.01;
  out.emplace_back("adamw", adamw);
  return out;
}

}  // namespace

TEST_CASE("fused optimizer passes equal each pass followed by its boundary", "[train][optim]") {
  WindowTable paper;
  WindowTable calibrated;  // update boundaries exact, gradients' windows absolute
  calibrated.by_kind[static_cast<int>(vt::nn::BoundaryKind::kUpdate)] = {0.0, 0.0};
  calibrated.by_boundary["fc.weight:momentum"] = {0.0, 1e-9};
  calibrated.by_boundary["fc.weight:exp_avg"] = {0.0, 1e-9};
  calibrated.by_boundary["fc.weight:grad"] = {0.0, 1e-7};
  const int before = at::get_num_threads();
  for (const auto& [name, config] : Configs()) {
    for (const WindowTable* windows : {&paper, &calibrated}) {
      for (int threads : {1, 2}) {
        at::set_num_threads(threads);
        INFO(name << (windows == &paper ? ", paper" : ", calibrated") << ", threads " << threads);
        // The trainer, 3 steps, then an auditor (other starting values, so that its replay
        // corrects) replaying the fused trainer's log, both ways.
        Party fused(config, true, 7), plain(config, false, 7);
        std::vector<StepLog> logs;
        for (int64_t step = 1; step <= 3; ++step) {
          const StepResult a = Step(&fused, Mode::kLog, *windows, step, 100 + step);
          const StepResult b = Step(&plain, Mode::kLog, *windows, step, 100 + step);
          CheckSame(fused, plain, a, b);
          logs.push_back(fused.log);
        }
        Party audit_fused(config, true, 7), audit_plain(config, false, 7);
        for (auto* party : {&audit_fused, &audit_plain}) {
          for (auto& [n, t] : party->params) t.mul_(1.0 + 1e-9);
        }
        int64_t corrections = 0;  // the first step's replay corrects the auditor's values
        for (int64_t step = 1; step <= 3; ++step) {
          audit_fused.log = logs[static_cast<size_t>(step - 1)];
          audit_plain.log = logs[static_cast<size_t>(step - 1)];
          const StepResult a = Step(&audit_fused, Mode::kReplay, *windows, step, 100 + step);
          const StepResult b = Step(&audit_plain, Mode::kReplay, *windows, step, 100 + step);
          CheckSame(audit_fused, audit_plain, a, b);
          for (const auto& [n, s] : a.stats) corrections += s.corrections + s.near_misses;
        }
        if (windows == &paper) CHECK(corrections > 0);
        // A log with one record of the chain missing and one of another size: the auditor's
        // boundaries then run one after the other and report both mismatches, as unfused.
        Party broken_fused(config, true, 7), broken_plain(config, false, 7);
        StepLog broken = logs[0];
        const std::string second =
            config.kind == "adamw" ? "fc.weight:exp_avg_sq" : "fc.weight:update";
        REQUIRE(broken.erase({second, 0}) == 1);
        const auto bias = broken.find({"fc.bias:update", 0});
        REQUIRE(bias != broken.end());
        bias->second = vt::precision::LogRecord::FromStates(std::vector<uint8_t>(3, 0), {});
        broken_fused.log = broken;
        broken_plain.log = broken;
        StepContext fc(Mode::kReplay, windows, 1, &broken_fused.log);
        StepContext pc(Mode::kReplay, windows, 1, &broken_plain.log);
        for (auto [party, context] :
             {std::pair<Party*, StepContext*>{&broken_fused, &fc}, {&broken_plain, &pc}}) {
          at::manual_seed(101);
          for (auto& [n, t] : party->params) t.mutable_grad() = at::randn_like(t) * 1e-2;
          StepContext::Scope scope(context);
          const auto grads = GradBoundaries(party);
          party->optimizer.Step(party->Named(), 1, &grads);
          context->Finish();
        }
        CHECK(fc.log_mismatches() == 2);
        CHECK(fc.log_mismatches() == pc.log_mismatches());
        CHECK(fc.first_log_mismatch() == pc.first_log_mismatch());
        for (auto& [n, t] : broken_fused.params) CHECK(SameBits(t, broken_plain.params.at(n)));
        const bool same_trace = fc.trace() == pc.trace();
        CHECK(same_trace);
        // A tampering trainer (its boundaries take the unfused path) and plain FP64 steps.
        Party tamper_fused(config, true, 9), tamper_plain(config, false, 9);
        Tamper steer;
        steer.kind = Tamper::Kind::kSteer;
        const StepResult a = Step(&tamper_fused, Mode::kLog, *windows, 1, 5, steer);
        const StepResult b = Step(&tamper_plain, Mode::kLog, *windows, 1, 5, steer);
        CheckSame(tamper_fused, tamper_plain, a, b);
        int64_t steered = 0;
        for (const auto& [n, s] : a.stats) steered += s.steered;
        CHECK(steered > 0);
        Party fp64_fused(config, true, 11), fp64_plain(config, false, 11);
        for (int64_t step = 1; step <= 2; ++step) {
          Step(&fp64_fused, Mode::kFp64, *windows, step, 200 + step);
          Step(&fp64_plain, Mode::kFp64, *windows, step, 200 + step);
          for (auto& [n, t] : fp64_fused.params) CHECK(SameBits(t, fp64_plain.params.at(n)));
        }
      }
    }
  }
  at::set_num_threads(before);
}

TEST_CASE("a produced boundary needs a contiguous float64 tensor", "[train][optim]") {
  WindowTable windows;
  StepLog log;
  StepContext context(Mode::kLog, &windows, 1, &log);
  const auto nothing = [](int64_t, int64_t) {};
  at::Tensor strided = at::zeros({4, 4}, at::kDouble).t();
  CHECK_THROWS_WITH(context.ApplyProduced("w:update", &strided, nothing),
                    Catch::Equals("boundary 'w:update': a produced tensor must be a contiguous "
                                  "CPU float64 tensor"));
  at::Tensor single = at::zeros({4}, at::kFloat);
  CHECK_THROWS_AS(context.ApplyProduced("w:update", &single, nothing), vt::Error);
  // Outside a step the pass runs on its own.
  at::Tensor x = at::zeros({5000}, at::kDouble);
  double* p = x.data_ptr<double>();
  vt::nn::ApplyBoundaryProduced("w:update", &x, [p](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p[i] = 0.1 * static_cast<double>(i);
  });
  CHECK(x[4999].item<double>() == 0.1 * 4999.0);  // not rounded: no step
}

TEST_CASE("a chain of produced boundaries gives what its links give one after the other",
          "[train][optim]") {
  // Two links in one tensor's memory (they cannot share a pass) and two in their own, against
  // ApplyProduced link after link: the same values and records.
  const WindowTable paper;
  for (bool shared : {true, false}) {
    INFO((shared ? "links in one tensor's memory" : "links in their own memory"));
    StepLog chain_log, plain_log;
    at::Tensor both = at::zeros({2, 3000}, at::kDouble);
    at::Tensor a = shared ? both[0] : at::zeros({3000}, at::kDouble);
    at::Tensor b = shared ? both[1] : at::zeros({3000}, at::kDouble);
    at::Tensor a2 = at::zeros({3000}, at::kDouble), b2 = at::zeros({3000}, at::kDouble);
    auto fill = [](at::Tensor* t, double f) {
      double* p = t->data_ptr<double>();
      return [p, f](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) p[i] = std::sin(static_cast<double>(i) * f);
      };
    };
    // The second link reads what the first wrote at the same positions.
    auto twice = [](at::Tensor* out, const at::Tensor* in) {
      return [out, in](int64_t begin, int64_t end) {
        double* p = out->data_ptr<double>();
        const double* q = in->data_ptr<double>();
        for (int64_t i = begin; i < end; ++i) p[i] = q[i] * 3.0 + 1e-9;
      };
    };
    const auto fa = fill(&a, 0.37), fa2 = fill(&a2, 0.37);
    const auto fb = twice(&b, &a), fb2 = twice(&b2, &a2);
    {
      StepContext c(Mode::kLog, &paper, 1, &chain_log);
      StepContext::Scope scope(&c);
      vt::nn::ApplyBoundaryChain({{"a:update", &a, fa}, {"b:update", &b, fb}});
    }
    {
      StepContext c(Mode::kLog, &paper, 1, &plain_log);
      StepContext::Scope scope(&c);
      vt::nn::ApplyBoundaryProduced("a:update", &a2, fa2);
      vt::nn::ApplyBoundaryProduced("b:update", &b2, fb2);
    }
    CHECK(SameBits(a, a2));
    CHECK(SameBits(b, b2));
    const bool same_log = chain_log == plain_log;
    CHECK(same_log);
    CHECK(chain_log.at({"b:update", 0}).counts().logged() > 0);
  }
}
