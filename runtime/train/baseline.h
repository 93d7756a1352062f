// What a user would otherwise run: a spec's model trained in plain LibTorch, with ATen's own
// operators (at::conv2d, at::batch_norm, at::linear, at::layer_norm, at::softmax, at::gelu,
// at::cross_entropy_loss), LibTorch's autograd and a torch.optim-style in-place update, in
// FP32 or FP64. It is the reference the benchmarks measure vtrun's cost against
// (scripts/bench/training.lua): no rounding, no logs, no device profiles, nothing verifiable.
// Each step runs on the default thread count (VTRUN_THREADS or vt.set_threads), as a native
// runner's step does.
//
// It starts from the spec's initial weights (the same names and values as vtrun's model) and
// draws the spec's batches, so in FP64 its losses equal vtrun's plain FP64 engine's up to
// summation order (tests/lua/baseline_test.lua checks that it computes the same model).
// Built-in models only (mlp, resnet, gpt2); dropout is applied as ATen's (its own masks).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "runtime/data/dataset.h"
#include "runtime/train/spec.h"

namespace vt::train {

class TorchBaseline {
 public:
  // dtype: at::kFloat or at::kDouble. Throws vt::Error for a model type it does not cover.
  TorchBaseline(const Spec& spec, std::shared_ptr<const data::Dataset> data, at::ScalarType dtype);

  // Runs the next step (forward, backward, update); returns its mean loss.
  double Step();
  int64_t steps_run() const { return step_; }

 private:
  at::Tensor Forward(const at::Tensor& inputs);
  at::Tensor Mlp(const at::Tensor& inputs);
  at::Tensor ResNet(const at::Tensor& inputs);
  at::Tensor Gpt2(const at::Tensor& tokens);
  at::Tensor Conv(const at::Tensor& x, const std::string& name, int64_t stride);
  at::Tensor BatchNorm(const at::Tensor& x, const std::string& name);
  at::Tensor Linear(const at::Tensor& x, const std::string& name);
  at::Tensor LayerNorm(const at::Tensor& x, const std::string& name);
  const at::Tensor& P(const std::string& name) const;  // a parameter or buffer by name
  bool Has(const std::string& name) const { return tensors_.count(name) > 0; }
  void Update();

  Spec spec_;
  std::shared_ptr<const data::Dataset> data_;
  at::ScalarType dtype_;
  std::string type_;
  std::map<std::string, at::Tensor> tensors_;         // parameters (leaves with grad) and buffers
  std::map<std::string, at::Tensor> first_, second_;  // momentum / exp_avg, exp_avg_sq
  std::map<std::string, bool> is_parameter_;
  double dropout_ = 0.0;
  int64_t heads_ = 1;
  int64_t step_ = 0;
};

}  // namespace vt::train
