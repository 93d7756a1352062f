#include "runtime/train/deviation.h"

#include <ATen/ATen.h>

#include "runtime/common/error.h"

namespace vt::train {
namespace {

const std::vector<std::pair<Deviation::Kind, std::string>>& Kinds() {
  static const std::vector<std::pair<Deviation::Kind, std::string>> kinds = {
      {Deviation::Kind::kNone, "none"},
      {Deviation::Kind::kLabels, "labels"},
      {Deviation::Kind::kTrigger, "trigger"},
      {Deviation::Kind::kLazy, "lazy"},
      {Deviation::Kind::kLr, "lr"},
      {Deviation::Kind::kWeightDecay, "weight_decay"},
      {Deviation::Kind::kSteer, "steer"},
      {Deviation::Kind::kSilentFlip, "silent_flip"},
      {Deviation::Kind::kForgeExact, "forge_exact"},
      {Deviation::Kind::kFlipWithin, "flip_within"},
      {Deviation::Kind::kReplaceExample, "replace_example"},
      {Deviation::Kind::kSteerToward, "steer_toward"},
  };
  return kinds;
}

constexpr int64_t kPatch = 4;  // side of the trigger square, in pixels

}  // namespace

Deviation::Kind Deviation::ParseKind(const std::string& name) {
  for (const auto& [kind, n] : Kinds()) {
    if (n == name) return kind;
  }
  std::string valid;
  for (const auto& n : KindNames()) valid += (valid.empty() ? "" : ", ") + n;
  throw Error("unknown deviation '" + name + "' (valid: " + valid + ")");
}

std::string Deviation::KindName(Kind kind) {
  for (const auto& [k, n] : Kinds()) {
    if (k == kind) return n;
  }
  return "?";
}

std::vector<std::string> Deviation::KindNames() {
  std::vector<std::string> names;
  for (const auto& [k, n] : Kinds()) names.push_back(n);
  return names;
}

void Deviation::Validate(const data::Dataset& data) const {
  if (from_step < 1)
    throw Error("deviation from_step must be >= 1, got " + std::to_string(from_step));
  if (to_step != 0 && to_step < from_step) {
    throw Error("deviation to_step must be >= from_step (" + std::to_string(from_step) +
                ") or 0, got " + std::to_string(to_step));
  }
  if (!(amount >= 0.0)) throw Error("deviation amount must be >= 0, got " + std::to_string(amount));
  if (kind == Kind::kTrigger || kind == Kind::kSteerToward) {
    const auto shape = data.input_shape();
    if (shape.size() != 3 || shape[1] < kPatch || shape[2] < kPatch) {
      throw Error("a trigger patch (" + KindName(kind) +
                  ") needs image data (inputs [C, H, W] of at least 4x4); '" + data.name() +
                  "' has none");
    }
    if (target < 0 || target >= data.classes()) {
      throw Error(KindName(kind) + " target must be a class in [0, " +
                  std::to_string(data.classes()) + "), got " + std::to_string(target));
    }
  }
  const bool counts = kind == Kind::kSteer || kind == Kind::kSilentFlip ||
                      kind == Kind::kForgeExact || kind == Kind::kFlipWithin;
  if (counts && amount != 0.0 && amount != static_cast<double>(static_cast<int64_t>(amount))) {
    throw Error(KindName(kind) + " amount (values per boundary call) must be an integer, got " +
                std::to_string(amount));
  }
  if (kind == Kind::kReplaceExample && data.size() < 2) {
    throw Error("replacing an example needs a data set of two or more examples; '" + data.name() +
                "' has " + std::to_string(data.size()));
  }
}

std::string Deviation::Describe() const {
  if (kind == Kind::kNone) return "none";
  if (to_step != 0)
    return KindName(kind) + " at steps " + std::to_string(from_step) + ".." +
           std::to_string(to_step);
  return KindName(kind) + " from step " + std::to_string(from_step);
}

void Deviation::ApplyToBatch(int64_t step, uint64_t seed, const data::Dataset& data,
                             data::Batch* batch) const {
  if (!Active(step)) return;
  if (kind == Kind::kLabels) {
    batch->targets = (batch->targets + 1).remainder(data.classes());
  } else if (kind == Kind::kTrigger) {
    at::Tensor x = batch->inputs.clone();
    at::Tensor y = batch->targets.clone();
    PatchTrigger(&x, 2);
    for (int64_t i = 0; i < y.size(0); i += 2) y[i].fill_(target);
    batch->inputs = x;
    batch->targets = y;
  } else if (kind == Kind::kReplaceExample) {
    // Position and replacement from the step (a fixed odd multiplier spreads them); the
    // first candidate that differs from the example it replaces (input or target).
    at::Tensor x = batch->inputs.clone();
    at::Tensor y = batch->targets.clone();
    const int64_t n = data.size();
    const uint64_t h = static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull;
    const int64_t position = static_cast<int64_t>((h >> 32) % static_cast<uint64_t>(x.size(0)));
    for (int64_t tries = 0; tries < n; ++tries) {
      const int64_t index =
          static_cast<int64_t>((h + static_cast<uint64_t>(tries)) % static_cast<uint64_t>(n));
      data::Batch example = data.Get({index}, seed, 0);
      if (at::equal(example.inputs[0].to(x.scalar_type()), x[position]) &&
          at::equal(example.targets[0], y[position])) {
        continue;
      }
      x[position].copy_(example.inputs[0]);
      y[position].copy_(example.targets[0]);
      break;
    }
    batch->inputs = x;
    batch->targets = y;
  }
}

nn::Tamper Deviation::TamperAt(int64_t step) const {
  nn::Tamper t;
  if (!Active(step)) return t;
  switch (kind) {
    case Kind::kSteer:
      t.kind = nn::Tamper::Kind::kSteer;
      t.count = static_cast<int64_t>(AmountOr(4.0));
      break;
    case Kind::kSilentFlip:  // kSteer's values, left NONE in the record
      t.kind = nn::Tamper::Kind::kSteer;
      t.count = static_cast<int64_t>(AmountOr(1.0));
      t.silent = true;
      break;
    case Kind::kForgeExact:
      t.kind = nn::Tamper::Kind::kForgeExact;
      t.count = static_cast<int64_t>(AmountOr(1.0));
      break;
    case Kind::kFlipWithin:
      t.kind = nn::Tamper::Kind::kFlipWithin;
      t.count = static_cast<int64_t>(amount);
      break;
    case Kind::kSteerToward:
      t.kind = nn::Tamper::Kind::kToward;
      t.count = static_cast<int64_t>(amount);
      break;
    default:
      break;
  }
  return t;
}

optim::OptimizerConfig Deviation::OptimizerAt(int64_t step,
                                              const optim::OptimizerConfig& honest) const {
  if (!Active(step)) return honest;
  optim::OptimizerConfig c = honest;
  if (kind == Kind::kLr) c.lr = honest.lr * AmountOr(10.0);
  if (kind == Kind::kWeightDecay) c.weight_decay = AmountOr(0.1);
  return c;
}

void PatchTrigger(at::Tensor* inputs, int64_t every) {
  at::Tensor& x = *inputs;
  const double bright = x.max().item<double>();
  const int64_t h = x.size(2), w = x.size(3);
  for (int64_t i = 0; i < x.size(0); i += every) {
    x[i].narrow(1, h - kPatch, kPatch).narrow(2, w - kPatch, kPatch).fill_(bright);
  }
}

std::map<std::string, at::Tensor> BackdoorDirections(nn::Model& model, const data::Batch& batch,
                                                     int64_t target) {
  nn::StepContext::Scope plain(nullptr);  // no boundary rounds or logs
  const bool was_training = model.training();
  model.Train(false);
  auto params = model.NamedParameters();
  const at::ScalarType dtype = params.front().second->scalar_type();
  at::Tensor x = batch.inputs.to(dtype).clone();
  PatchTrigger(&x, 1);
  at::Tensor y = at::full_like(batch.targets, target);
  model.Loss(model.Forward(x), y).backward();
  model.Train(was_training);
  std::map<std::string, at::Tensor> directions;
  for (const auto& [name, p] : params) {
    at::Tensor g = p->grad().defined() ? p->grad().detach().clone() : at::zeros_like(*p).detach();
    p->mutable_grad() = at::Tensor();
    directions[name + ":grad"] = g;
    directions[name + ":momentum"] = g;
    directions[name + ":exp_avg"] = g;
    directions[name + ":update"] = -g;
  }
  return directions;
}

}  // namespace vt::train
