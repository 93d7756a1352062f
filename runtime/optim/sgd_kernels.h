// SGD's elementwise arithmetic in one pass over memory per rounding boundary instead of up to
// six ATen operators (with two temporaries the size of the parameter): the momentum buffer
// and the parameter's values are updated in place. As for AdamW (adamw_kernels.h), the passes
// perform the same IEEE-754 operations in the same order as the tensor expressions they
// replace (written next to each function), so the results are the same bits
// (tests/train/sgd_kernels_test.cc); the boundaries stay between them, in Optimizer::Step.
// Tensors that are not contiguous CPU float64 of one size take the expressions.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vt::optim {

// buf <- buf * momentum + d, where d = grad + weight_decay * value if weight_decay > 0, else
// grad.
void SgdMomentumInPlace(at::Tensor& buf, const at::Tensor& grad, const at::Tensor& value,
                        double momentum, double weight_decay);

// value <- value - lr * e, where e = d + momentum * buf with `nesterov`, else buf if `buf` is
// defined, else d (d as above, from value before the update).
void SgdUpdateInPlace(at::Tensor& value, const at::Tensor& grad, const at::Tensor& buf, double lr,
                      double momentum, double weight_decay, bool nesterov);

// The same arithmetic over elements [begin, end) of flat arrays, for a rounding boundary to
// run block by block while it rounds (nn::ApplyBoundaryProduced). `buf` may be null in
// SgdUpdateRange (no momentum).
void SgdMomentumRange(double* buf, const double* grad, const double* value, double momentum,
                      double weight_decay, int64_t begin, int64_t end);
void SgdUpdateRange(double* value, const double* grad, const double* buf, double lr,
                    double momentum, double weight_decay, bool nesterov, int64_t begin,
                    int64_t end);

}  // namespace vt::optim
