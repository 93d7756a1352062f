// Values every party computes alike (ROUNDING.md "Magnitudes", m = 0): what ops make of a
// boundary's rounded output and of the parameters by IEEE arithmetic keeps that property
// forward and backward (layer norm's output and input gradient, residual sums and forks,
// embedding rows and their broadcast sums, dropout's mask), and loses it where a value is not
// a boundary's output; a sum over such values (an embedding's weight gradient) still has its
// terms' sizes as its magnitude.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <catch2/catch.hpp>

#include "runtime/nn/autograd.h"
#include "runtime/nn/context.h"
#include "runtime/nn/layers.h"
#include "runtime/nn/magnitude.h"
#include "runtime/nn/reduce.h"
#include "tests/nn/helpers.h"

using vt::nn::IsAgreed;

TEST_CASE("layer norm of a value alike everywhere is alike, forward and backward",
          "[nn][magnitude]") {
  at::manual_seed(51);
  for (bool from_boundary : {true, false}) {
    INFO((from_boundary ? "input from a boundary" : "input from elsewhere"));
    vt::nn::testing::LoggedStep step;
    const vt::nn::StepLog& log = step.log;
    at::Tensor x0 = at::randn({4, 16, 32}, at::kDouble).set_requires_grad(true);
    at::Tensor x = vt::nn::testing::AlikeOrNot(x0, from_boundary, "fc");
    const at::Tensor w = at::rand({32}, at::kDouble).add_(0.5).set_requires_grad(true);
    const at::Tensor b = at::randn({32}, at::kDouble).set_requires_grad(true);
    const at::Tensor y0 = vt::nn::LayerNormOp(x, w, b, 1e-5, "ln");
    CHECK(IsAgreed(y0) == from_boundary);
    const at::Tensor y = vt::nn::Boundary(y0, "ln");
    if (from_boundary) CHECK(log.at({"ln:fwd", 0}).counts().none == y.numel());
    auto grads = torch::autograd::grad({y}, {x}, {at::randn(y.sizes(), at::kDouble)});
    CHECK(IsAgreed(grads[0]) == from_boundary);
  }
}

TEST_CASE("residual sums, forks, embeddings and dropout keep values alike", "[nn][magnitude]") {
  at::manual_seed(52);
  vt::nn::testing::LoggedStep step;
  vt::nn::StepContext& c = step.context;
  const at::Tensor weight = at::randn({10, 8}, at::kDouble).set_requires_grad(true);
  const at::Tensor positions = at::randn({5, 8}, at::kDouble).set_requires_grad(true);
  const at::Tensor tokens = at::randint(0, 10, {3, 5}, at::kLong);
  // Embedding rows are the parameter's values; their broadcast sum with another parameter's
  // rows, a fork of it and a residual sum with a boundary's output are alike too.
  const at::Tensor rows = vt::nn::EmbeddingOp(weight, tokens);
  CHECK(IsAgreed(rows));
  const at::Tensor pos = vt::nn::EmbeddingOp(positions, at::arange(5, at::kLong));
  const at::Tensor x = vt::nn::AddBroadcastOp(rows, pos);
  CHECK(IsAgreed(x));
  auto [into, around] = vt::nn::ForkOp(x);
  CHECK(IsAgreed(into));
  CHECK(IsAgreed(around));
  const at::Tensor branch = vt::nn::Boundary(into * 2.0, "branch");
  const at::Tensor h = vt::nn::AddOp(around, branch);
  CHECK(IsAgreed(h));
  CHECK_FALSE(IsAgreed(vt::nn::AddOp(around, into * 2.0)));  // an unrounded operand
  {
    vt::nn::StepContext::Current()->set_seed(7);
    CHECK(IsAgreed(vt::nn::Dropout(h, 0.25, true, "drop")));
  }
  // The embedding's weight gradient sums the incoming gradient's rows in the profile's order:
  // with a gradient alike everywhere (a boundary's), its magnitude is the index-add of |g|,
  // not zero.
  const at::Tensor out = vt::nn::Boundary(rows, "emb");
  const at::Tensor gy = at::randn(out.sizes(), at::kDouble);
  auto grads = torch::autograd::grad({out}, {weight}, {gy});
  const at::Tensor m = c.TakeGradMagnitude(weight);
  REQUIRE(m.defined());
  const at::Tensor want = at::zeros({10, 8}, at::kDouble)
                              .index_add_(0, tokens.reshape({-1}), gy.abs().reshape({-1, 8}));
  // (The gradient reaching the embedding is gy rounded to FP32 at "emb:bwd".)
  CHECK(at::allclose(m.reshape({10, 8}), want, 1e-7, 0.0));
  CHECK(m.abs().sum().item<double>() > 0.0);
}
