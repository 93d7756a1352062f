// Differentiable operations that reduce, with every reduction of the forward AND backward
// pass taken through the device profile's summation order (vt::Sum, vt::IndexAddRows), as a
// GPU's kernels would order them: softmax, log-softmax, layer norm, batch norm (training),
// the embedding's backward index-add and the gradient of a broadcast addition. ATen's fused
// kernels (at::layer_norm, at::softmax, the autograd of broadcasting ops) would reduce in
// one fixed order under every profile, so honest profiles would never disagree there.
//
// All take float64 (or float32 in the plain-FP32 mode) tensors. Max-subtraction in softmax is
// order-free (a maximum is exact), so it is not a profile matter.
//
// `name` is the op's boundary name: under a step context each op rounds the statistics it
// reduces before the elementwise arithmetic that uses them, so no order-dependent value flows
// on unrounded: "<name>.sum:fwd" and "<name>.sum:bwd" (softmax, log-softmax: the row sums of
// the forward and of the backward), "<name>.mean:fwd", "<name>.var:fwd" (the variance taken
// around the rounded mean) and "<name>.stats:bwd" (the two means of the backward, side by
// side) for layer and batch norm. The ops' outputs and input gradients are rounded by their
// callers (Boundary, InputGrad).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace vt::nn {

// Softmax over the last dimension.
at::Tensor SoftmaxOp(const at::Tensor& x, const std::string& name);

// Log-softmax over the last dimension.
at::Tensor LogSoftmaxOp(const at::Tensor& x, const std::string& name);

// Layer norm over the last dimension (size of weight and bias).
at::Tensor LayerNormOp(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       double eps, const std::string& name);

// Batch norm of x [N, C, H, W] with batch statistics. Returns {y, mean, var} with the biased
// variance; mean and var carry no gradient (they feed the running statistics).
struct BatchNormResult {
  at::Tensor y, mean, var;
};
BatchNormResult BatchNormTrainOp(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias, double eps, const std::string& name);

// weight[indices]; the backward adds the rows of equal indices in the profile's order.
at::Tensor EmbeddingOp(const at::Tensor& weight, const at::Tensor& indices);

// a + b with b broadcast to a's shape (b's dimensions align with a's trailing ones); b's
// gradient sums over the broadcast dimensions in the profile's order.
at::Tensor AddBroadcastOp(const at::Tensor& a, const at::Tensor& b);

}  // namespace vt::nn
