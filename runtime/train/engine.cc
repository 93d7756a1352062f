#include "runtime/train/engine.h"

#include <ATen/ATen.h>

#include <cmath>
#include <optional>
#include <vector>

#include "runtime/common/error.h"

namespace vt::train {

ShardPlan ShardPlan::For(int64_t shards, dist::Group* group) {
  ShardPlan plan;
  plan.shards = shards;
  plan.group = group;
  plan.count = shards;
  if (group == nullptr) return plan;
  const int64_t world = group->world();
  if (shards % world != 0) {
    throw Error("the spec's " + std::to_string(shards) + " shards do not split over " +
                std::to_string(world) + " processes: make shards a multiple of the world size");
  }
  plan.count = shards / world;
  plan.first = group->rank() * plan.count;
  return plan;
}

namespace {

double CheckedLoss(const at::Tensor& loss, int64_t step, int64_t shard) {
  const double value = loss.item<double>();
  if (!std::isfinite(value)) {
    throw Error("loss is " + std::to_string(value) + " at step " + std::to_string(step) +
                (shard >= 0 ? " (shard " + std::to_string(shard) + ")" : ""));
  }
  return value;
}

// Every rank gets rank 0's buffers (float64 ones in one message, the others one by one).
void BroadcastBuffers(dist::Group& group,
                      const std::vector<std::pair<std::string, at::Tensor*>>& buffers) {
  std::vector<at::Tensor> doubles;
  for (const auto& [name, t] : buffers) {
    if (t->scalar_type() == at::kDouble) {
      doubles.push_back(t->reshape(-1));
    } else {
      at::Tensor c = t->contiguous();
      group.Broadcast(c, 0);
      t->copy_(c);
    }
  }
  if (doubles.empty()) return;
  at::Tensor flat = at::cat(doubles);
  group.Broadcast(flat, 0);
  int64_t offset = 0;
  for (const auto& [name, t] : buffers) {
    if (t->scalar_type() != at::kDouble) continue;
    t->copy_(flat.narrow(0, offset, t->numel()).view(t->sizes()));
    offset += t->numel();
  }
}

// The step after the batch is made: each shard this process computes (all of the batch when
// the spec has one shard, which is the plain step), the gradient sum across processes, the
// ":grad" boundary, the update.
StepResult ComputeStep(nn::Model& model, optim::Optimizer& optimizer, const data::Batch& b,
                       int64_t batch, int64_t step, nn::StepContext& context,
                       const nn::Tamper& tamper, const Deviation* deviation,
                       const ShardPlan& plan) {
  const int64_t k = plan.shards;
  if (k < 1 || batch % k != 0) {
    throw Error("a batch of " + std::to_string(batch) + " does not split into " +
                std::to_string(k) + " equal shards");
  }
  const int64_t per = batch / k;
  auto params = model.NamedParameters();
  auto buffers = model.NamedBuffers();
  // A process computing several shards starts each from the step's buffers and keeps shard
  // 0's updates (batch-norm running statistics); with one shard nothing needs copying.
  const bool several = plan.count > 1;
  std::vector<at::Tensor> start, shard0;
  if (several) {
    for (const auto& [name, t] : buffers) start.push_back(t->clone());
  }
  std::vector<at::Tensor> sums(params.size());
  // The gradients' per-element magnitudes (nn/magnitude.h), summed like the gradients. One
  // shard's stay as the ops gave them (a computed one is never written out); a sum over
  // shards or processes is written out.
  const bool one_part = k == 1 && plan.group == nullptr;
  std::vector<at::Tensor> magnitudes(params.size());
  std::vector<precision::Magnitude> as_given(params.size());
  std::vector<double> losses(static_cast<size_t>(k), 0.0);
  for (int64_t s = plan.first; s < plan.first + plan.count; ++s) {
    if (s != plan.first) {
      for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second->copy_(start[i]);
    }
    // Every shard starts from no gradient (a step that skipped its update, the game's lazy
    // trainer, would otherwise leave its gradient for this backward pass to add to).
    for (auto& [name, p] : params) p->mutable_grad() = at::Tensor();
    if (k > 1) context.set_shard(s);
    at::Tensor inputs = k > 1 ? b.inputs.narrow(0, s * per, per) : b.inputs;
    if (inputs.is_floating_point()) inputs = inputs.to(context.dtype());
    at::Tensor loss =
        model.Loss(model.Forward(inputs), k > 1 ? b.targets.narrow(0, s * per, per) : b.targets);
    losses[static_cast<size_t>(s)] = CheckedLoss(loss, step, k > 1 ? s : -1);
    loss.backward();
    // The shard gradients are summed unrounded, in shard order (this process's own order of
    // the sum), as the examples of one batch are summed inside the backward pass: the sum is
    // rounded once, at ":grad", and that boundary absorbs every order of it.
    for (size_t i = 0; i < params.size(); ++i) {
      if (one_part) {
        as_given[i] = context.TakeGradMagnitudeAsIs(*params[i].second);
      } else {
        at::Tensor m = context.TakeGradMagnitude(*params[i].second);
        if (m.defined()) magnitudes[i] = magnitudes[i].defined() ? magnitudes[i].add_(m) : m;
      }
      at::Tensor& grad = params[i].second->mutable_grad();
      if (!grad.defined()) continue;
      sums[i] = sums[i].defined() ? sums[i].add_(grad) : grad;
    }
    if (several && s == 0) {
      for (const auto& [name, t] : buffers) shard0.push_back(t->clone());
    }
  }
  context.set_shard(-1);
  if (several && plan.first == 0) {
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second->copy_(shard0[i]);
  }
  if (plan.group != nullptr) {
    // Which gradients and magnitudes some rank defines: a forward whose use of a parameter
    // depends on the data (a Lua model that picks a head by its input) defines them on some
    // ranks' shards only, and the ranks' messages would differ in length or layout. A rank
    // without one adds -0.0, the exact identity of IEEE addition (x + -0 = x, the sign of a
    // zero sum included), so the sums are those of one process, where such a shard adds
    // nothing.
    {
      const int64_t np = static_cast<int64_t>(params.size());
      at::Tensor defined = at::zeros({2 * np}, at::kDouble);
      double* d = defined.data_ptr<double>();
      for (int64_t i = 0; i < np; ++i) {
        d[i] = sums[static_cast<size_t>(i)].defined() ? 1.0 : 0.0;
        d[np + i] = magnitudes[static_cast<size_t>(i)].defined() ? 1.0 : 0.0;
      }
      plan.group->AllReduceSum(defined);
      d = defined.data_ptr<double>();
      for (int64_t i = 0; i < np; ++i) {
        const size_t j = static_cast<size_t>(i);
        const at::Tensor& p = *params[j].second;
        if (d[i] > 0 && !sums[j].defined()) sums[j] = at::full_like(p, -0.0);
        if (d[np + i] > 0 && !magnitudes[j].defined()) magnitudes[j] = at::full_like(p, -0.0);
      }
    }
    // One message: the gradient sums, then the shard losses (each slot has one non-zero
    // contributor, so those sums are exact).
    std::vector<at::Tensor> parts;
    for (const at::Tensor& t : sums) {
      if (t.defined()) parts.push_back(t.reshape(-1));
    }
    for (const at::Tensor& t : magnitudes) {
      if (t.defined()) parts.push_back(t.reshape(-1));
    }
    parts.push_back(at::tensor(losses, at::kDouble));
    at::Tensor flat = at::cat(parts);
    plan.group->AllReduceSum(flat);
    int64_t offset = 0;
    for (std::vector<at::Tensor>* list : {&sums, &magnitudes}) {
      for (at::Tensor& t : *list) {
        if (!t.defined()) continue;
        t = flat.narrow(0, offset, t.numel()).view(t.sizes());
        offset += t.numel();
      }
    }
    const double* l = flat.data_ptr<double>() + offset;
    losses.assign(l, l + k);
    if (!buffers.empty()) BroadcastBuffers(*plan.group, buffers);
  }
  // Each gradient's ":grad" boundary: the optimizer's, which rounds it in the same pass as
  // the update's boundaries; here when no update follows (a lazy trainer's step).
  const bool update = deviation == nullptr || !deviation->SkipsUpdate(step);
  std::vector<std::optional<precision::Magnitude>> grad_boundaries(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!sums[i].defined()) continue;
    at::Tensor grad = k > 1 ? sums[i].div(static_cast<double>(k)) : sums[i];
    precision::Magnitude magnitude = as_given[i];
    if (!one_part) {
      at::Tensor m = magnitudes[i];
      if (m.defined() && k > 1) m = m.div(static_cast<double>(k));
      magnitude = precision::Magnitude(m);
    }
    if (update) {
      grad_boundaries[i] = std::move(magnitude);
    } else {
      context.ApplyInPlace(params[i].first + ":grad", &grad, magnitude);
    }
    params[i].second->mutable_grad() = grad;
  }
  double loss_sum = 0.0;
  for (double l : losses) loss_sum += l;
  // The optimizer settings of a deviating step are set by the runner (it holds the honest ones).
  // (A steering trainer tampers with update boundaries only, not the gradients'.)
  if (tamper.kind == nn::Tamper::Kind::kSteer) context.set_tamper(tamper);
  if (update) optimizer.Step(params, step, &grad_boundaries);
  context.Finish();
  return {loss_sum / static_cast<double>(k), batch};
}

}  // namespace

StepResult TrainStep(nn::Model& model, optim::Optimizer& optimizer, const data::Dataset& data,
                     uint64_t seed, int64_t batch, int64_t step, nn::StepContext& context,
                     const Deviation* deviation, const ShardPlan* plan) {
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
  return ComputeStep(model, optimizer, b, batch, step, context, tamper, deviation,
                     plan != nullptr ? *plan : ShardPlan{});
}

}  // namespace vt::train
