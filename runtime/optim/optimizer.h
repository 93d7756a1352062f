// Optimizers and learning-rate schedules, deterministic to the bit: elementwise FP64
// arithmetic only (IEEE +, -, *, /, sqrt), powers by repeated multiplication, and a portable
// cosine, so every machine computes the same update from the same gradients. New
// parameters and optimizer state pass through update boundaries onto the FP32 grid
// ("fc.weight:update", "fc.weight:exp_avg", ...; ROUNDING.md rule 4).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/precision/magnitude_source.h"

namespace vt::optim {

struct Schedule {
  std::string kind = "constant";  // "constant", "cosine" or "linear". Default: "constant".
  int64_t warmup = 0;             // Linear warm-up steps from lr/warmup to lr. Default: 0.
  int64_t total = 0;              // Steps the cosine/linear decay spans (the run's steps).
  double min_factor = 0.0;        // Floor of the decay as a fraction of lr. Default: 0.

  // The multiplier of the base lr at `step` (1-based). Throws vt::Error on a bad kind.
  double Factor(int64_t step) const;
  void Validate() const;
};

struct OptimizerConfig {
  std::string kind = "sgd";   // "sgd" or "adamw". Default: "sgd".
  double lr = 0.01;           // Default: 0.01.
  double momentum = 0.0;      // sgd. Default: 0.
  bool nesterov = false;      // sgd. Default: false.
  double weight_decay = 0.0;  // sgd: L2 added to the gradient; adamw: decoupled. Default: 0.
  double beta1 = 0.9;         // adamw. Default: 0.9.
  double beta2 = 0.999;       // adamw. Default: 0.999.
  double eps = 1e-8;          // adamw. Default: 1e-8.
  Schedule schedule;

  // Throws vt::Error naming the field and the allowed range.
  void Validate() const;
  // Canonical key/value strings for the spec.
  std::map<std::string, std::string> Canonical() const;
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor*>>;

class Optimizer {
 public:
  explicit Optimizer(OptimizerConfig config);

  // Applies one update at `step` (1-based) to `params` (leaf tensors with .grad() set, which
  // must already have passed their ":grad" boundaries). Writes new values in place.
  // With `grad_boundaries` (one entry per parameter), a parameter with an entry has its
  // gradient sent through "<name>:grad" here first, with that magnitude (undefined: the
  // offered one, or none), as StepContext::ApplyInPlace would: where the update's boundaries
  // take one pass, the gradient's joins it, so the moments read each block of the rounded
  // gradient while it is in cache.
  void Step(const NamedTensors& params, int64_t step,
            const std::vector<std::optional<precision::Magnitude>>* grad_boundaries = nullptr);

  // Optimizer state as named tensors ("optim.fc.weight.exp_avg"), for checkpoints; created
  // lazily on the first Step, or by InitState.
  void InitState(const NamedTensors& params);
  std::vector<std::pair<std::string, at::Tensor*>> NamedState();

  const OptimizerConfig& config() const { return config_; }
  // Replaces the settings (validated); the state is kept. For a deviating trainer's
  // scenarios (train/deviation.h).
  void set_config(OptimizerConfig config);

  // Where boundaries round, each elementwise pass runs inside its boundary's rounding pass
  // (nn::ApplyBoundaryProduced); false runs the pass, then the boundary over its output. The
  // results are the same bits either way: false is the tests' and benchmarks' control.
  // Default: true.
  void set_fuse_boundaries(bool fuse) { fuse_boundaries_ = fuse; }

 private:
  OptimizerConfig config_;
  bool fuse_boundaries_ = true;
  std::map<std::string, at::Tensor> first_;   // momentum buffer / exp_avg
  std::map<std::string, at::Tensor> second_;  // exp_avg_sq
};

// cos(x) for x in [0, pi] from IEEE arithmetic only (|error| < 1e-15), the same everywhere.
double PortableCos(double x);

// x^n by repeated squaring, multiplications in a fixed order.
double PowInt(double x, int64_t n);

}  // namespace vt::optim
