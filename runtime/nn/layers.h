// Layers of the rounded engine. Each layer's output that depends on summation order or on a
// transcendental function passes through a boundary named after the layer ("fc:fwd" and, in
// backward, "fc:bwd"); pure data movement (ReLU, reshapes, embedding lookup, max pooling,
// dropout masking) needs none (ROUNDING.md, "Where rounding happens"). In backward, a product's
// input gradient (a GEMM in the profile's order) is rounded where it is produced ("fc.dx:bwd",
// "attn.scores.da:bwd"), and norms and softmaxes round the statistics they reduce
// ("ln_1.mean:fwd", "ln_1.var:fwd", "ln_1.stats:bwd", "softmax.sum:fwd"), which leaves their
// input gradients elementwise functions of rounded values: no order-dependent value meets a
// residual sum, a shortcut, GELU or an index-add unrounded.
//
// Constructors take the sizes, the run's seed and the layer's full name (initial values are
// Philox draws keyed by the seed and each parameter's full name).
#pragma once

#include <ATen/core/Tensor.h>

#include "runtime/nn/module.h"

namespace vt::nn {

class Linear : public Module {
 public:
  // PyTorch's default init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias; or N(0, std)
  // weights and zero bias when init_std > 0.
  Linear(int64_t in, int64_t out, bool bias, uint64_t seed, const std::string& full_name,
         double init_std = 0.0);
  at::Tensor Forward(const at::Tensor& x);
  at::Tensor& weight() { return *weight_; }

 private:
  at::Tensor* weight_;
  at::Tensor* bias_ = nullptr;
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias,
         uint64_t seed, const std::string& full_name);
  at::Tensor Forward(const at::Tensor& x);

 private:
  int64_t stride_, padding_;
  at::Tensor* weight_;
  at::Tensor* bias_ = nullptr;
};

// Batch statistics through the profile's reductions; running statistics updated through
// update boundaries ("bn1.running_mean:update"), momentum 0.1, eps 1e-5.
class BatchNorm2d : public Module {
 public:
  BatchNorm2d(int64_t channels, const std::string& full_name);
  at::Tensor Forward(const at::Tensor& x);

 private:
  at::Tensor *weight_, *bias_, *running_mean_, *running_var_;
};

class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, const std::string& full_name);
  at::Tensor Forward(const at::Tensor& x);

 private:
  at::Tensor *weight_, *bias_;
};

class Embedding : public Module {
 public:
  Embedding(int64_t count, int64_t dim, uint64_t seed, const std::string& full_name,
            double init_std);
  at::Tensor Forward(const at::Tensor& indices);
  at::Tensor& weight() { return *weight_; }

 private:
  at::Tensor* weight_;
};

// Inverted dropout with a Philox mask keyed by (seed, step, boundary name): identical on
// every machine; scaling by 1/(1-p) is one IEEE multiplication.
at::Tensor Dropout(const at::Tensor& x, double p, bool training, const std::string& name);

// tanh-approximated GELU (GPT-2's), through boundary `name`.
at::Tensor Gelu(const at::Tensor& x, const std::string& name);

// Mean over the spatial dimensions [N, C, H, W] -> [N, C], through boundary `name`.
at::Tensor GlobalAvgPool(const at::Tensor& x, const std::string& name);

// Mean cross-entropy of logits [N, C] against int64 targets [N], through "loss".
at::Tensor CrossEntropy(const at::Tensor& logits, const at::Tensor& targets);

// Causal multi-head self-attention with GPT-2's layout (c_attn, c_proj); the scores, the
// softmax and the value mixing are boundaries of their own ("h.0.attn.scores:fwd", ...).
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t dim, int64_t heads, double dropout, uint64_t seed,
                      const std::string& full_name, double proj_std);
  at::Tensor Forward(const at::Tensor& x);

 private:
  int64_t dim_, heads_;
  double dropout_;
  std::shared_ptr<Linear> c_attn_, c_proj_;
};

}  // namespace vt::nn
