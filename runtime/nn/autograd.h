// Differentiable operations of the rounded engine, as LibTorch autograd functions:
//
//  - Boundary(x, name): identity on the graph whose forward sends x through "name:fwd" and
//    whose backward sends the incoming gradient through "name:bwd" (the same call number as
//    the forward call, so records pair up whatever order autograd visits branches in);
//  - Linear, Conv2d, Matmul: whose forward AND backward products follow the current device
//    profile's summation order (runtime/profile), as a GPU's kernels would, so honest
//    profiles really disagree in both passes.
//
// All take float64 (or float32 in the plain-FP32 mode) tensors. Errors are vt::Error or
// LibTorch's c10::Error with shapes named.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace vt::nn {

at::Tensor Boundary(const at::Tensor& x, const std::string& name);

// Identity on the graph whose backward sends the gradient flowing back into x through
// "name:bwd": an order-dependent op's input gradient (a matrix product's, a reduction's) is
// rounded where the op produces it, before residual sums, shortcuts, GELU or an index-add
// consume it. The call number is taken in the forward pass, so records pair up whatever
// order autograd visits branches in. Without a step context, or when x needs no gradient,
// x is returned as it is (no call is numbered).
at::Tensor InputGrad(const at::Tensor& x, const std::string& name);

// x [..., in] @ w[out, in]^T + bias[out] (bias may be undefined).
at::Tensor LinearOp(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias);

// Convolution: x [N, C, H, W] * w [O, C, kh, kw] (+ bias [O]), square stride and padding.
at::Tensor Conv2dOp(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                    int64_t stride, int64_t padding);

// ReLU, a + b (same shapes), two uses of one tensor, and the spatial mean of [N, C, H, W]: ATen's
// arithmetic, with backward passes that carry magnitudes (ROUNDING.md "Magnitudes"), so
// that gradients every party computes alike (sums and masks of rounded gradients) are known
// as such at the next boundary.
at::Tensor ReluOp(const at::Tensor& x);
at::Tensor AddOp(const at::Tensor& a, const at::Tensor& b);
std::pair<at::Tensor, at::Tensor> ForkOp(const at::Tensor& x);
at::Tensor AvgPoolOp(const at::Tensor& x);

// GELU, tanh approximation (ATen's kernels), offering magnitudes for its output and its input
// gradient.
at::Tensor GeluOp(const at::Tensor& x);

// Batched a [..., m, k] @ b [..., k, n] (same batch shape).
at::Tensor MatmulOp(const at::Tensor& a, const at::Tensor& b);

// An attention's heads: [B, T, 3D] -> q, k, v as [B, H, T, D/H] (contiguous), and the heads'
// outputs [B, H, T, hd] -> [B, T, H*hd]. Their backward passes move gradients in one copy and
// keep a rearranged rounded gradient known as rounded (StepContext::AddGridRearrangement).
std::vector<at::Tensor> SplitHeadsOp(const at::Tensor& qkv, int64_t heads);
at::Tensor MergeHeadsOp(const at::Tensor& x);

}  // namespace vt::nn
