// One training step of the rounded engine: batch -> forward -> loss -> backward -> parameter
// gradient boundaries -> optimizer update, all under one StepContext. The trainer, the
// auditor and the judge run exactly this function; only the context's mode differs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "runtime/data/dataset.h"
#include "runtime/nn/context.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/train/deviation.h"

namespace vt::train {

struct StepResult {
  double loss = 0.0;     // the (rounded, in rounded modes) mean loss of the batch
  int64_t examples = 0;  // batch size
};

// Runs step `step` (1-based) of a run with `seed` and `batch` examples per step, updating
// `model` and `optimizer` in place. `context` decides the mode (it is installed for the
// duration of the call). `deviation` (a dishonest trainer's, for the game's scenarios) changes
// the batch, tampers with roundings (nn::Tamper) or skips the update (a deviating optimizer
// setting is the caller's to set); null or kNone is the honest step.
// Throws vt::Error (e.g. NaN loss).
StepResult TrainStep(nn::Model& model, optim::Optimizer& optimizer, const data::Dataset& data,
                     uint64_t seed, int64_t batch, int64_t step, nn::StepContext& context,
                     const Deviation* deviation = nullptr);

}  // namespace vt::train
