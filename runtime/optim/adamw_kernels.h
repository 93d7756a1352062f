// AdamW's elementwise arithmetic in two passes over memory instead of a dozen ATen operators
// (each allocating and reading its operands again), both in place: the moments overwrite
// themselves and the update overwrites the parameter's values, so a step allocates nothing
// for them and copies nothing back. The passes perform the same IEEE-754 operations in the
// same order as the tensor expressions they replace (written next to each function), so the
// results are the same bits (tests/train/adamw_kernels_test.cc); the rounding boundaries stay
// between them, in Optimizer::Step. Tensors that are not contiguous CPU float64 of one size
// (the FP32 engine's, for one) take the tensor expressions and copy the result in.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vt::optim {

// m <- beta1 * m + (1 - beta1) * g,  v <- beta2 * v + (1 - beta2) * g * g.
void AdamWMomentsInPlace(at::Tensor& m, at::Tensor& v, const at::Tensor& g, double beta1,
                         double beta2);

// value <- value * decay - lr * (m / c1) / (sqrt(v / c2) + eps).
void AdamWUpdateInPlace(at::Tensor& value, const at::Tensor& m, const at::Tensor& v, double lr,
                        double c1, double c2, double eps, double decay);

// The same arithmetic over elements [begin, end) of flat arrays, one output each, for a
// rounding boundary to run block by block while it rounds (nn::ApplyBoundaryProduced): the
// moments as two passes (each output rounded as it is written) instead of one.
void AdamWFirstMomentRange(double* m, const double* g, double beta1, int64_t begin, int64_t end);
void AdamWSecondMomentRange(double* v, const double* g, double beta2, int64_t begin, int64_t end);
void AdamWUpdateRange(double* value, const double* m, const double* v, double lr, double c1,
                      double c2, double eps, double decay, int64_t begin, int64_t end);

}  // namespace vt::optim
