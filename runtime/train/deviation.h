// How a dishonest trainer departs from the spec it commits to: the cheating behaviours of the
// verification game's scenarios (PROTOCOL.md), so that tests and experiments can show the
// game catches each one. An honest trainer has kind kNone. The trainer still commits the
// honest spec's hash; only its computation from step `from_step` on differs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/optim/optimizer.h"

namespace vt::train {

struct Deviation {
  enum class Kind {
    kNone,
    kLabels,       // every label y of the batch becomes (y + 1) mod classes
    kTrigger,      // a bright square patch in the corner of every other image, its label set to `target`
    kLazy,         // the optimizer update is skipped (no update records are logged)
    kLr,           // the learning rate is multiplied by `amount` (default 10)
    kWeightDecay,  // weight decay becomes `amount` (default 0.1)
    kSteer,        // `amount` (default 4) values per update boundary call, far from any midpoint,
                   // are rounded the other way and logged as if they were in the window
  };
  Kind kind = Kind::kNone;
  int64_t from_step = 1;  // first step that deviates (>= 1)
  double amount = 0.0;    // 0 takes the kind's default
  int64_t target = 0;     // kTrigger: the label the patch is meant to teach

  bool Active(int64_t step) const { return kind != Kind::kNone && step >= from_step; }
  double AmountOr(double fallback) const { return amount != 0.0 ? amount : fallback; }

  // "none", "labels", "trigger", "lazy", "lr", "weight_decay", "steer"; Parse throws
  // vt::Error listing them.
  static Kind ParseKind(const std::string& name);
  static std::string KindName(Kind kind);
  static std::vector<std::string> KindNames();
  // Throws vt::Error for from_step < 1, a negative amount, or a trigger on non-image data.
  void Validate(const data::Dataset& data) const;
  std::string Describe() const;  // "labels from step 25"

  // Applies the data deviations (labels, trigger) to a batch of `step` in place.
  void ApplyToBatch(int64_t step, int64_t classes, data::Batch* batch) const;
  // The optimizer settings of `step`: `honest` or the deviating ones.
  optim::OptimizerConfig OptimizerAt(int64_t step, const optim::OptimizerConfig& honest) const;
  // Whether the update of `step` is skipped (kLazy).
  bool SkipsUpdate(int64_t step) const { return kind == Kind::kLazy && Active(step); }
};

}  // namespace vt::train
