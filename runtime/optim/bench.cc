#include "runtime/optim/bench.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/common/threads.h"
#include "runtime/nn/context.h"
#include "runtime/optim/optimizer.h"

namespace vt::optim {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One arm: a fresh parameter and optimizer, one untimed step (the state is made), then
// `repeats` timed steps in `mode`. A logging arm reuses its record buffers from step to step,
// as a trainer does, and copies each step's records into `logs` (untimed); a replaying arm
// reads them from there.
double TimeArm(const OptimizerConfig& config, int64_t n, int repeats, nn::Mode mode, bool fuse,
               std::vector<nn::StepLog>* logs) {
  at::manual_seed(1);
  at::Tensor w = at::randn({n}, at::kDouble);
  Optimizer optimizer(config);
  optimizer.set_fuse_boundaries(fuse);
  const nn::WindowTable paper;  // band 1/4: about half of the values logged
  std::vector<double> seconds;
  nn::StepLog written;
  for (int step = 1; step <= repeats + 1; ++step) {
    at::manual_seed(100 + step);
    w.mutable_grad() = at::randn({n}, at::kDouble) * 1e-2;
    nn::StepLog* log =
        mode == nn::Mode::kReplay ? &logs->at(static_cast<size_t>(step - 1)) : &written;
    nn::StepContext context(mode, &paper, step, log);
    const auto start = std::chrono::steady_clock::now();
    {
      nn::StepContext::Scope scope(&context);
      // The gradient's boundary goes with the update's, as a training step's does.
      const std::vector<std::optional<precision::Magnitude>> grads(1, precision::Magnitude());
      optimizer.Step({{"w", &w}}, step, &grads);
    }
    context.Finish();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step > 1) seconds.push_back(s);
    if (mode == nn::Mode::kLog && logs != nullptr) logs->push_back(written);
    if (mode == nn::Mode::kReplay && context.log_mismatches() != 0) {
      throw Error("optimizer benchmark: the replay did not fit the log: " +
                  context.first_log_mismatch());
    }
  }
  return Median(seconds);
}

}  // namespace

std::vector<OptimizerTiming> RunOptimizerBench(const OptimizerBenchOptions& options) {
  if (options.elements < 1) {
    throw Error("optimizer benchmark: elements must be >= 1, got " +
                std::to_string(options.elements));
  }
  if (options.repeats < 1) {
    throw Error("optimizer benchmark: repeats must be >= 1, got " +
                std::to_string(options.repeats));
  }
  if (options.threads.empty()) throw Error("optimizer benchmark: threads must not be empty");
  for (int t : options.threads) {
    if (t < 1)
      throw Error("optimizer benchmark: thread counts must be >= 1, got " + std::to_string(t));
  }
  OptimizerConfig sgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  sgd.weight_decay = 5e-4;
  OptimizerConfig adamw;
  adamw.kind = "adamw";
  adamw.lr = 3e-4;
  adamw.weight_decay = 0.01;
  const ThreadsRestorer restore;
  std::vector<OptimizerTiming> out;
  for (const OptimizerConfig& config : {sgd, adamw}) {
    for (int threads : options.threads) {
      at::set_num_threads(threads);
      OptimizerTiming t;
      t.kind = config.kind;
      t.threads = threads;
      const int64_t n = options.elements;
      const int r = options.repeats;
      t.fp64 = TimeArm(config, n, r, nn::Mode::kFp64, true, nullptr);
      std::vector<nn::StepLog> logs;
      t.trainer_unfused = TimeArm(config, n, r, nn::Mode::kLog, false, nullptr);
      t.trainer_fused = TimeArm(config, n, r, nn::Mode::kLog, true, &logs);
      t.auditor_unfused = TimeArm(config, n, r, nn::Mode::kReplay, false, &logs);
      t.auditor_fused = TimeArm(config, n, r, nn::Mode::kReplay, true, &logs);
      out.push_back(t);
    }
  }
  return out;
}

}  // namespace vt::optim
