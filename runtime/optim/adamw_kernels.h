// AdamW's elementwise arithmetic in two passes over memory instead of a dozen ATen operators
// (each allocating and reading its operands again). The passes perform the same IEEE-754
// operations in the same order as the tensor expressions they replace (written next to each
// function), so the results are the same bits (tests/train/adamw_kernels_test.cc); the
// rounding boundaries stay between them, in Optimizer::Step. Tensors that are not contiguous
// CPU float64 of one size (the FP32 engine's, for one) take the tensor expressions.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace vt::optim {

// {beta1 * m + (1 - beta1) * g, beta2 * v + (1 - beta2) * g * g}, new tensors.
std::pair<at::Tensor, at::Tensor> AdamWMoments(const at::Tensor& m, const at::Tensor& v,
                                               const at::Tensor& g, double beta1, double beta2);

// value * decay - lr * (m / c1) / (sqrt(v / c2) + eps), a new tensor.
at::Tensor AdamWUpdate(const at::Tensor& value, const at::Tensor& m, const at::Tensor& v, double lr,
                       double c1, double c2, double eps, double decay);

}  // namespace vt::optim
