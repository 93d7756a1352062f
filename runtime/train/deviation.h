// How a dishonest trainer departs from the spec it commits to: the cheating behaviours of the
// verification game's scenarios (PROTOCOL.md), so that tests and experiments can show the
// game catches each one. An honest trainer has kind kNone. The trainer still commits the
// honest spec's hash; only its computation from step `from_step` on differs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/nn/context.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"

namespace vt::train {

struct Deviation {
  enum class Kind {
    kNone,
    kLabels,       // every label y of the batch becomes (y + 1) mod classes
    kTrigger,      // a bright square patch in the corner of every other image, its label set to
                   // `target`
    kLazy,         // the optimizer update is skipped (no update records are logged)
    kLr,           // the learning rate is multiplied by `amount` (default 10)
    kWeightDecay,  // weight decay becomes `amount` (default 0.1)
    kSteer,        // `amount` (default 4) values per update boundary call, far from any midpoint,
                   // are rounded the other way and logged as if they were in the window
                   // (exact boundaries included; nn::Tamper)
    kSilentFlip,   // as kSteer, `amount` (default 1) values per call, but their entries stay
                   // NONE: nothing in the log betrays them, only the replay's result does
    kForgeExact,   // `amount` (default 1) values per boundary call of every kind, far from any
                   // midpoint, are rounded the other way and logged EXACT with that value
    kFlipWithin,   // at every boundary, every value that can be rounded the other way with a
                   // legitimate entry is: logged entries reversed, and unlogged values just
                   // outside the window (w < |x - mid| <= 1.5 w) newly logged; `amount` per
                   // call (default 0: all)
    kReplaceExample,  // one example of each deviating step's batch is replaced by another
                      // example of the data set (position and replacement fixed by the step)
    kSteerToward,     // greedy steering with legitimate entries only (E10): the trainer computes
                      // the FP64 gradient of a backdoor loss (the step's batch, every image with
                      // the trigger patch, every label `target`) and at every parameter-gradient
                      // and first-moment/update boundary rounds each value it legitimately can
                      // the way that lowers that loss (nn::Tamper kToward); the batch is honest
  };
  Kind kind = Kind::kNone;
  int64_t from_step = 1;  // first step that deviates (>= 1)
  int64_t to_step = 0;    // last step that deviates (>= from_step); 0: every step from from_step on
  double amount = 0.0;    // 0 takes the kind's default
  int64_t target = 0;     // kTrigger: the label the patch is meant to teach

  bool Active(int64_t step) const {
    return kind != Kind::kNone && step >= from_step && (to_step == 0 || step <= to_step);
  }
  double AmountOr(double fallback) const { return amount != 0.0 ? amount : fallback; }

  // "none", "labels", "trigger", "lazy", "lr", "weight_decay", "steer", "silent_flip",
  // "forge_exact", "flip_within", "replace_example", "steer_toward"; Parse throws vt::Error
  // listing them.
  static Kind ParseKind(const std::string& name);
  static std::string KindName(Kind kind);
  static std::vector<std::string> KindNames();
  // Throws vt::Error for from_step < 1, to_step in [1, from_step), a negative amount, a
  // fractional count, a trigger on non-image data or a replacement in a one-example data set.
  void Validate(const data::Dataset& data) const;
  std::string Describe() const;  // "labels from step 25", "lr at steps 25..25"

  // Applies the data deviations (labels, trigger, replace_example) to the batch of `step`
  // (from `data` under `seed`) in place.
  void ApplyToBatch(int64_t step, uint64_t seed, const data::Dataset& data,
                    data::Batch* batch) const;
  // The roundings of `step` (steer, silent_flip, forge_exact, flip_within, steer_toward): kNone
  // for the other kinds. steer_toward's directions are the caller's to fill (BackdoorDirections).
  nn::Tamper TamperAt(int64_t step) const;
  // Whether the trainer needs the backdoor gradient at `step` (kSteerToward).
  bool SteersToward(int64_t step) const { return kind == Kind::kSteerToward && Active(step); }
  // The optimizer settings of `step`: `honest` or the deviating ones.
  optim::OptimizerConfig OptimizerAt(int64_t step, const optim::OptimizerConfig& honest) const;
  // Whether the update of `step` is skipped (kLazy).
  bool SkipsUpdate(int64_t step) const { return kind == Kind::kLazy && Active(step); }
};

// The trigger patch: a bright square (the batch's maximum) in the bottom-right corner of
// every `every`-th image of `inputs` ([N, C, H, W], at least 4x4), in place.
void PatchTrigger(at::Tensor* inputs, int64_t every = 1);

// The directions a greedy backdoor trainer wants each optimizer boundary of `model` to move
// (kSteerToward): g = d loss / d parameter of `batch` with every image patched and every
// label `target`, in FP64 without rounding and in evaluation mode (no batch-norm statistics
// change). "P:grad", "P:momentum", "P:exp_avg" want +g (the update subtracts them),
// "P:update" wants -g. Leaves the parameters' gradients as it found them (none).
std::map<std::string, at::Tensor> BackdoorDirections(nn::Model& model, const data::Batch& batch,
                                                     int64_t target);

}  // namespace vt::train
