#include "runtime/train/engine.h"

#include <ATen/ATen.h>

#include <cmath>

#include "runtime/common/error.h"

namespace vt::train {

StepResult TrainStep(nn::Model& model, optim::Optimizer& optimizer, const data::Dataset& data,
                     uint64_t seed, int64_t batch, int64_t step, nn::StepContext& context,
                     const Deviation* deviation) {
  nn::StepContext::Scope scope(&context);
  context.set_seed(seed);
  model.Train(true);
  data::Batch b = data::StepBatch(data, seed, batch, step);
  if (deviation != nullptr) deviation->ApplyToBatch(step, seed, data, &b);
  // Tampering with roundings: forge_exact and flip_within from the step's first boundary on;
  // steer only in the optimizer update (set below).
  nn::Tamper tamper = deviation != nullptr ? deviation->TamperAt(step) : nn::Tamper{};
  if (deviation != nullptr && deviation->SteersToward(step)) {
    tamper.directions = BackdoorDirections(model, b, deviation->target);
  }
  if (tamper.kind != nn::Tamper::Kind::kSteer) context.set_tamper(tamper);
  at::Tensor inputs = b.inputs.is_floating_point() ? b.inputs.to(context.dtype()) : b.inputs;
  at::Tensor loss = model.Loss(model.Forward(inputs), b.targets);
  const double loss_value = loss.item<double>();
  if (!std::isfinite(loss_value)) {
    throw Error("loss is " + std::to_string(loss_value) + " at step " + std::to_string(step));
  }
  loss.backward();
  auto params = model.NamedParameters();
  for (const auto& [name, p] : params) {
    if (p->grad().defined()) context.ApplyInPlace(name + ":grad", &p->mutable_grad());
  }
  // The optimizer settings of a deviating step are set by the runner (it holds the honest ones).
  if (tamper.kind == nn::Tamper::Kind::kSteer) context.set_tamper(tamper);
  if (deviation == nullptr || !deviation->SkipsUpdate(step)) optimizer.Step(params, step);
  context.Finish();
  return {loss_value, batch};
}

}  // namespace vt::train
