#include "runtime/train/deviation.h"

#include <ATen/ATen.h>

#include "runtime/common/error.h"

namespace vt::train {
namespace {

const std::vector<std::pair<Deviation::Kind, std::string>>& Kinds() {
  static const std::vector<std::pair<Deviation::Kind, std::string>> kinds = {
      {Deviation::Kind::kNone, "none"},   {Deviation::Kind::kLabels, "labels"},
      {Deviation::Kind::kTrigger, "trigger"}, {Deviation::Kind::kLazy, "lazy"},
      {Deviation::Kind::kLr, "lr"},       {Deviation::Kind::kWeightDecay, "weight_decay"},
      {Deviation::Kind::kSteer, "steer"},
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
  if (from_step < 1) throw Error("deviation from_step must be >= 1, got " + std::to_string(from_step));
  if (!(amount >= 0.0)) throw Error("deviation amount must be >= 0, got " + std::to_string(amount));
  if (kind == Kind::kTrigger) {
    const auto shape = data.input_shape();
    if (shape.size() != 3 || shape[1] < kPatch || shape[2] < kPatch) {
      throw Error("a trigger patch needs image data (inputs [C, H, W] of at least 4x4); '" + data.name() + "' has none");
    }
    if (target < 0 || target >= data.classes()) {
      throw Error("trigger target must be a class in [0, " + std::to_string(data.classes()) + "), got " +
                  std::to_string(target));
    }
  }
  if (kind == Kind::kSteer && amount != 0.0 && amount != static_cast<double>(static_cast<int64_t>(amount))) {
    throw Error("steer amount (values per update call) must be an integer, got " + std::to_string(amount));
  }
}

std::string Deviation::Describe() const {
  if (kind == Kind::kNone) return "none";
  return KindName(kind) + " from step " + std::to_string(from_step);
}

void Deviation::ApplyToBatch(int64_t step, int64_t classes, data::Batch* batch) const {
  if (!Active(step)) return;
  if (kind == Kind::kLabels) {
    batch->targets = (batch->targets + 1).remainder(classes);
  } else if (kind == Kind::kTrigger) {
    at::Tensor x = batch->inputs.clone();
    at::Tensor y = batch->targets.clone();
    const double bright = x.max().item<double>();
    const int64_t h = x.size(2), w = x.size(3);
    for (int64_t i = 0; i < x.size(0); i += 2) {
      x[i].narrow(1, h - kPatch, kPatch).narrow(2, w - kPatch, kPatch).fill_(bright);
      y[i].fill_(target);
    }
    batch->inputs = x;
    batch->targets = y;
  }
}

optim::OptimizerConfig Deviation::OptimizerAt(int64_t step, const optim::OptimizerConfig& honest) const {
  if (!Active(step)) return honest;
  optim::OptimizerConfig c = honest;
  if (kind == Kind::kLr) c.lr = honest.lr * AmountOr(10.0);
  if (kind == Kind::kWeightDecay) c.weight_decay = AmountOr(0.1);
  return c;
}

}  // namespace vt::train
