#include "runtime/train/baseline.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/common/threads.h"

namespace vt::train {
namespace {

constexpr double kBnMomentum = 0.1;
constexpr double kNormEps = 1e-5;

std::string Join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

}  // namespace

TorchBaseline::TorchBaseline(const Spec& spec, std::shared_ptr<const data::Dataset> data,
                             at::ScalarType dtype)
    : spec_(spec), data_(std::move(data)), dtype_(dtype) {
  if (dtype != at::kFloat && dtype != at::kDouble)
    throw Error("the LibTorch baseline runs in float32 or float64");
  type_ = spec.fields().at("model.type");
  if (type_ != "mlp" && type_ != "resnet" && type_ != "gpt2")
    throw Error("the LibTorch baseline covers the built-in models (mlp, resnet, gpt2), not '" +
                type_ + "'");
  if (spec.shards() != 1) throw Error("the LibTorch baseline runs unsharded specs");
  spec.CheckData(*data_);
  auto model = spec.BuildModel();  // the spec's initial weights, by name
  for (const auto& [name, t] : model->NamedParameters()) {
    tensors_[name] = t->detach().to(dtype_).clone().set_requires_grad(true);
    is_parameter_[name] = true;
  }
  for (const auto& [name, t] : model->NamedBuffers())
    tensors_[name] = t->detach().to(dtype_).clone();
  const auto& f = spec.fields();
  if (f.count("model.dropout")) dropout_ = std::stod(f.at("model.dropout"));
  if (f.count("model.heads")) heads_ = std::stoll(f.at("model.heads"));
}

const at::Tensor& TorchBaseline::P(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("the LibTorch baseline has no tensor '" + name + "'");
  return it->second;
}

at::Tensor TorchBaseline::Linear(const at::Tensor& x, const std::string& name) {
  const std::string bias = name + ".bias";
  return at::linear(x, P(name + ".weight"), Has(bias) ? P(bias) : at::Tensor());
}

at::Tensor TorchBaseline::Conv(const at::Tensor& x, const std::string& name, int64_t stride) {
  const at::Tensor& w = P(name + ".weight");
  const int64_t padding = w.size(2) / 2;
  return at::conv2d(x, w, {}, {stride, stride}, {padding, padding});
}

at::Tensor TorchBaseline::BatchNorm(const at::Tensor& x, const std::string& name) {
  return at::batch_norm(x, P(name + ".weight"), P(name + ".bias"), P(name + ".running_mean"),
                        P(name + ".running_var"), /*training=*/true, kBnMomentum, kNormEps,
                        /*cudnn_enabled=*/false);
}

at::Tensor TorchBaseline::LayerNorm(const at::Tensor& x, const std::string& name) {
  return at::layer_norm(x, {x.size(-1)}, P(name + ".weight"), P(name + ".bias"), kNormEps);
}

at::Tensor TorchBaseline::Mlp(const at::Tensor& inputs) {
  at::Tensor x = inputs.reshape({inputs.size(0), -1});
  int layers = 0;
  while (Has("fc" + std::to_string(layers) + ".weight")) ++layers;
  for (int i = 0; i < layers; ++i) {
    x = Linear(x, "fc" + std::to_string(i));
    if (i + 1 < layers) {
      x = at::relu(x);
      if (dropout_ > 0) x = at::dropout(x, dropout_, /*train=*/true);
    }
  }
  return x;
}

at::Tensor TorchBaseline::ResNet(const at::Tensor& inputs) {
  at::Tensor x = at::relu(BatchNorm(Conv(inputs, "conv1", 1), "bn1"));
  for (int stage = 1; stage <= 4; ++stage) {
    for (int b = 0;; ++b) {
      const std::string block = "layer" + std::to_string(stage) + "." + std::to_string(b);
      if (!Has(block + ".conv1.weight")) break;
      const int64_t stride = (stage > 1 && b == 0) ? 2 : 1;
      const bool bottleneck = Has(block + ".conv3.weight");
      at::Tensor out;
      if (bottleneck) {
        out = at::relu(BatchNorm(Conv(x, Join(block, "conv1"), 1), Join(block, "bn1")));
        out = at::relu(BatchNorm(Conv(out, Join(block, "conv2"), stride), Join(block, "bn2")));
        out = BatchNorm(Conv(out, Join(block, "conv3"), 1), Join(block, "bn3"));
      } else {
        out = at::relu(BatchNorm(Conv(x, Join(block, "conv1"), stride), Join(block, "bn1")));
        out = BatchNorm(Conv(out, Join(block, "conv2"), 1), Join(block, "bn2"));
      }
      at::Tensor shortcut =
          Has(block + ".downsample.0.weight")
              ? BatchNorm(Conv(x, Join(block, "downsample.0"), stride), Join(block, "downsample.1"))
              : x;
      x = at::relu(out + shortcut);
    }
  }
  return Linear(x.mean({2, 3}), "fc");
}

at::Tensor TorchBaseline::Gpt2(const at::Tensor& tokens) {
  const int64_t b = tokens.size(0), t = tokens.size(1);
  at::Tensor positions = at::arange(t, at::kLong);
  at::Tensor x = at::embedding(P("wte.weight"), tokens) + at::embedding(P("wpe.weight"), positions);
  if (dropout_ > 0) x = at::dropout(x, dropout_, true);
  const int64_t d = x.size(2), hd = d / heads_;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  at::Tensor causal = at::ones({t, t}, at::TensorOptions().dtype(at::kBool)).triu(1);
  for (int i = 0;; ++i) {
    const std::string block = "h." + std::to_string(i);
    if (!Has(block + ".ln_1.weight")) break;
    at::Tensor qkv = Linear(LayerNorm(x, block + ".ln_1"), block + ".attn.c_attn");
    const std::vector<at::Tensor> parts = qkv.split(d, 2);  // as GPT-2's PyTorch versions do
    auto heads = [&](int64_t k) {
      return parts[static_cast<size_t>(k)].view({b, t, heads_, hd}).transpose(1, 2);
    };
    at::Tensor scores = at::matmul(heads(0), heads(1).transpose(-1, -2)) * scale;
    scores = scores.masked_fill(causal, -std::numeric_limits<double>::infinity());
    at::Tensor probs = at::softmax(scores, -1);
    if (dropout_ > 0) probs = at::dropout(probs, dropout_, true);
    at::Tensor mixed = at::matmul(probs, heads(2)).transpose(1, 2).reshape({b, t, d});
    at::Tensor attn = Linear(mixed, block + ".attn.c_proj");
    if (dropout_ > 0) attn = at::dropout(attn, dropout_, true);
    at::Tensor h = x + attn;
    at::Tensor m =
        Linear(at::gelu(Linear(LayerNorm(h, block + ".ln_2"), block + ".mlp.c_fc"), "tanh"),
               block + ".mlp.c_proj");
    if (dropout_ > 0) m = at::dropout(m, dropout_, true);
    x = h + m;
  }
  return at::linear(LayerNorm(x, "ln_f"), P("wte.weight"));  // tied to the token embedding
}

at::Tensor TorchBaseline::Forward(const at::Tensor& inputs) {
  if (type_ == "mlp") return Mlp(inputs);
  if (type_ == "resnet") return ResNet(inputs);
  return Gpt2(inputs);
}

// torch.optim's single-tensor SGD (momentum, nesterov, L2 weight decay) and AdamW, in place.
void TorchBaseline::Update() {
  at::NoGradGuard no_grad;
  const optim::OptimizerConfig c = spec_.Optimizer();
  const double lr = c.lr * c.schedule.Factor(step_);
  for (auto& [name, p] : tensors_) {
    if (!is_parameter_.count(name)) continue;
    at::Tensor grad = p.grad();
    if (!grad.defined()) continue;
    if (c.kind == "sgd") {
      at::Tensor d = c.weight_decay > 0 ? grad.add(p, c.weight_decay) : grad;
      if (c.momentum > 0) {
        auto it = first_.find(name);
        if (it == first_.end()) {
          it = first_.emplace(name, d.clone()).first;
        } else {
          it->second.mul_(c.momentum).add_(d);
        }
        d = c.nesterov ? d.add(it->second, c.momentum) : it->second;
      }
      p.add_(d, -lr);
    } else {
      auto& m = first_.try_emplace(name, at::zeros_like(p)).first->second;
      auto& v = second_.try_emplace(name, at::zeros_like(p)).first->second;
      p.mul_(1.0 - lr * c.weight_decay);
      m.lerp_(grad, 1.0 - c.beta1);
      v.mul_(c.beta2).addcmul_(grad, grad, 1.0 - c.beta2);
      const double c1 = 1.0 - std::pow(c.beta1, static_cast<double>(step_));
      const double c2 = 1.0 - std::pow(c.beta2, static_cast<double>(step_));
      at::Tensor denom = (v.sqrt() / std::sqrt(c2)).add_(c.eps);
      p.addcdiv_(m, denom, -lr / c1);
    }
    p.mutable_grad() = at::Tensor();
  }
}

double TorchBaseline::Step() {
  // The native profile's count, not whatever a runner's profile (splitk4: 1 thread) left.
  SetThreads(DefaultThreadCount());
  ++step_;
  const data::Batch batch = data::StepBatch(*data_, spec_.seed(), spec_.batch(), step_);
  at::Tensor inputs = batch.inputs.is_floating_point() ? batch.inputs.to(dtype_) : batch.inputs;
  at::Tensor logits = Forward(inputs);
  at::Tensor loss =
      at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), batch.targets.reshape({-1}));
  loss.backward();
  Update();
  const double value = loss.item<double>();
  if (!std::isfinite(value))
    throw Error("the LibTorch baseline's loss is " + std::to_string(value) + " at step " +
                std::to_string(step_));
  return value;
}

}  // namespace vt::train
