#include "runtime/nn/layers.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/nn/autograd.h"
#include "runtime/nn/context.h"
#include "runtime/nn/magnitude.h"
#include "runtime/nn/reduce.h"
#include "runtime/profile/profile.h"
#include "runtime/random/philox.h"

namespace vt::nn {
namespace {

constexpr double kBnMomentum = 0.1;
constexpr double kNormEps = 1e-5;

std::string Join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

}  // namespace

Linear::Linear(int64_t in, int64_t out, bool bias, uint64_t seed, const std::string& full_name,
               double init_std)
    : Module(full_name) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight_ = &RegisterParameter(
      "weight", init_std > 0 ? InitNormal({out, in}, init_std, seed, Join(full_name, "weight"))
                             : InitUniform({out, in}, bound, seed, Join(full_name, "weight")));
  if (bias) {
    bias_ = &RegisterParameter(
        "bias", init_std > 0 ? at::zeros({out}, at::kDouble)
                             : InitUniform({out}, bound, seed, Join(full_name, "bias")));
  }
}

at::Tensor Linear::Forward(const at::Tensor& x) {
  return Boundary(
      LinearOp(InputGrad(x, BoundaryName("dx")), *weight_, bias_ ? *bias_ : at::Tensor()),
      BoundaryName());
}

Conv2d::Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias,
               uint64_t seed, const std::string& full_name)
    : Module(full_name), stride_(stride), padding_(padding) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in * kernel * kernel));
  weight_ = &RegisterParameter(
      "weight", InitUniform({out, in, kernel, kernel}, bound, seed, Join(full_name, "weight")));
  if (bias)
    bias_ = &RegisterParameter("bias", InitUniform({out}, bound, seed, Join(full_name, "bias")));
}

at::Tensor Conv2d::Forward(const at::Tensor& x) {
  return Boundary(Conv2dOp(InputGrad(x, BoundaryName("dx")), *weight_,
                           bias_ ? *bias_ : at::Tensor(), stride_, padding_),
                  BoundaryName());
}

BatchNorm2d::BatchNorm2d(int64_t channels, const std::string& full_name) : Module(full_name) {
  weight_ = &RegisterParameter("weight", at::ones({channels}, at::kDouble));
  bias_ = &RegisterParameter("bias", at::zeros({channels}, at::kDouble));
  running_mean_ = &RegisterBuffer("running_mean", at::zeros({channels}, at::kDouble));
  running_var_ = &RegisterBuffer("running_var", at::ones({channels}, at::kDouble));
}

at::Tensor BatchNorm2d::Forward(const at::Tensor& x) {
  const int64_t c = x.size(1);
  auto per_channel = [&](const at::Tensor& t) { return t.view({1, c, 1, 1}); };
  if (training()) {
    const double count = static_cast<double>(x.numel() / c);
    BatchNormResult bn = BatchNormTrainOp(x, *weight_, *bias_, kNormEps, BoundaryName());
    {
      at::NoGradGuard no_grad;
      const double unbias = count / std::max(1.0, count - 1.0);
      at::Tensor m = (1.0 - kBnMomentum) * *running_mean_ + kBnMomentum * bn.mean;
      at::Tensor v = (1.0 - kBnMomentum) * *running_var_ + kBnMomentum * unbias * bn.var;
      *running_mean_ =
          ApplyBoundary(Join(name(), "running_mean:update"), m.to(running_mean_->scalar_type()));
      *running_var_ =
          ApplyBoundary(Join(name(), "running_var:update"), v.to(running_var_->scalar_type()));
    }
    return Boundary(bn.y, BoundaryName());
  }
  at::Tensor y = (x - per_channel(*running_mean_)) /
                     per_channel(at::sqrt(*running_var_ + kNormEps)) * per_channel(*weight_) +
                 per_channel(*bias_);
  return Boundary(y, BoundaryName());
}

LayerNorm::LayerNorm(int64_t dim, const std::string& full_name) : Module(full_name) {
  weight_ = &RegisterParameter("weight", at::ones({dim}, at::kDouble));
  bias_ = &RegisterParameter("bias", at::zeros({dim}, at::kDouble));
}

at::Tensor LayerNorm::Forward(const at::Tensor& x) {
  return Boundary(LayerNormOp(x, *weight_, *bias_, kNormEps, BoundaryName()), BoundaryName());
}

Embedding::Embedding(int64_t count, int64_t dim, uint64_t seed, const std::string& full_name,
                     double init_std)
    : Module(full_name) {
  weight_ = &RegisterParameter("weight",
                               InitNormal({count, dim}, init_std, seed, Join(full_name, "weight")));
}

at::Tensor Embedding::Forward(const at::Tensor& indices) {
  if (indices.numel() > 0 &&
      (indices.min().item<int64_t>() < 0 || indices.max().item<int64_t>() >= weight_->size(0))) {
    throw Error("embedding '" + name() + "': index out of range [0, " +
                std::to_string(weight_->size(0)) + ")");
  }
  return EmbeddingOp(*weight_, indices);
}

at::Tensor Dropout(const at::Tensor& x, double p, bool training, const std::string& name) {
  if (!training || p <= 0.0) return x;
  if (p >= 1.0) throw Error("dropout probability must be in [0, 1), got " + std::to_string(p));
  StepContext* step = StepContext::Current();
  const uint64_t seed = step ? step->seed() : 0;
  const uint64_t step_number = step ? static_cast<uint64_t>(step->step()) : 0;
  // Key: run seed mixed with the boundary name; counter stream: dropout; index: element,
  // offset by the step in the counter's high bits (steps < 2^24, elements < 2^40).
  // A sharded step's shards draw their own masks (the boundary prefix "s<k>/").
  const uint64_t key =
      seed ^
      NameHash(step != nullptr && !step->name_prefix().empty() ? step->name_prefix() + name : name);
  at::Tensor u = UniformTensor(
      x.sizes(), at::kDouble, key,
      static_cast<uint32_t>(RandomStream::kDropout) + static_cast<uint32_t>(step_number << 8));
  at::Tensor mask = (u >= p).to(x.scalar_type()) * (1.0 / (1.0 - p));
  at::Tensor y = x * mask;
  // The mask is the run's own (seeded by step and name): of values alike everywhere, alike.
  if (IsAgreed(x)) OfferMagnitude(y, ZeroMagnitude());
  return y;
}

at::Tensor Gelu(const at::Tensor& x, const std::string& name) { return Boundary(GeluOp(x), name); }

at::Tensor GlobalAvgPool(const at::Tensor& x, const std::string& name) {
  return Boundary(AvgPoolOp(x), name);
}

at::Tensor CrossEntropy(const at::Tensor& logits, const at::Tensor& targets) {
  at::Tensor log_probs = Boundary(LogSoftmaxOp(logits, "log_softmax"), "log_softmax");
  at::Tensor picked = log_probs.gather(1, targets.view({-1, 1})).view({-1});
  const double n = static_cast<double>(targets.numel());
  return Boundary(-vt::Sum(picked, {0}) / n, "loss");
}

CausalSelfAttention::CausalSelfAttention(int64_t dim, int64_t heads, double dropout, uint64_t seed,
                                         const std::string& full_name, double proj_std)
    : Module(full_name), dim_(dim), heads_(heads), dropout_(dropout) {
  if (dim % heads != 0) {
    throw Error("attention '" + full_name + "': width " + std::to_string(dim) +
                " is not divisible by " + std::to_string(heads) + " heads");
  }
  c_attn_ = RegisterModule("c_attn", std::make_shared<Linear>(dim, 3 * dim, true, seed,
                                                              Join(full_name, "c_attn"), 0.02));
  c_proj_ = RegisterModule("c_proj", std::make_shared<Linear>(dim, dim, true, seed,
                                                              Join(full_name, "c_proj"), proj_std));
}

at::Tensor CausalSelfAttention::Forward(const at::Tensor& x) {
  const int64_t t = x.size(1), hd = dim_ / heads_;
  // q, k, v [B, H, T, hd] from [B, T, 3D]: one op whose backward writes the three gradients
  // in one pass (three narrows' backward zero-filled a qkv-sized gradient each and added
  // them) and keeps their rounding known, so that the qkv gradient's boundary makes no pass.
  const std::vector<at::Tensor> qkv = SplitHeadsOp(c_attn_->Forward(x), heads_);
  const at::Tensor &q = qkv[0], &k = qkv[1], &v = qkv[2];
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const at::Tensor product =
      MatmulOp(InputGrad(q, BoundaryName("scores.da")),
               InputGrad(k.transpose(-1, -2).contiguous(), BoundaryName("scores.db")));
  at::Tensor scores = product * scale;
  MoveOffer(product, scores, scale);
  scores = Boundary(scores, BoundaryName("scores"));
  at::Tensor causal = at::ones({t, t}, at::TensorOptions().dtype(at::kBool)).triu(1);
  scores = scores.masked_fill(causal, -std::numeric_limits<double>::infinity());
  at::Tensor probs = Boundary(SoftmaxOp(scores, BoundaryName("softmax")), BoundaryName("softmax"));
  probs = Dropout(probs, dropout_, training(), BoundaryName("attn_dropout"));
  const at::Tensor mixed = Boundary(
      MatmulOp(InputGrad(probs, BoundaryName("mix.da")), InputGrad(v, BoundaryName("mix.db"))),
      BoundaryName("mix"));  // [B, H, T, hd]
  return Dropout(c_proj_->Forward(MergeHeadsOp(mixed)), dropout_, training(),
                 BoundaryName("resid_dropout"));
}

}  // namespace vt::nn
