// Batch norm's elementwise passes fused (nn/reduce.cc BatchNormFn): each loop reads its
// [N, C, H, W] inputs once and writes several results, where the ATen expressions in the
// comments take a pass over memory per operation. Every element is the same IEEE operations
// in the same order as the expression (no FMA: -ffp-contract=off), so the same bits; the
// per-channel sums are BatchNormParamMagnitudes' (nn/magnitude.h), bit for bit. Tensors that
// are not contiguous CPU float64 [N, C, H, W] with [C] factors take the expressions.
// The channel sums of the statistics stay with the device profile (vt::Sum): only what no
// profile orders differently is fused here.
#pragma once

#include <ATen/core/Tensor.h>

#include "runtime/nn/magnitude.h"

namespace vt::nn {

// The forward's normalized input and output from the centered input:
//   xhat = centered * rstd_c,  y = (xhat * w_c) + b_c
struct BatchNormOutput {
  at::Tensor xhat, y;
};
BatchNormOutput BatchNormOutputOf(const at::Tensor& centered, const at::Tensor& rstd,
                                  const at::Tensor& w, const at::Tensor& b);

// The backward's products of the incoming gradient g:
//   gxhat = g * w_c,  gxx = gxhat * xhat,  gy_xhat = g * xhat
// and, with `magnitudes`, BatchNormParamMagnitudes(g, xhat) from the same pass.
struct BatchNormBackwardTerms {
  at::Tensor gxhat, gxx, gy_xhat;
  ParamMagnitudes magnitudes;  // undefined without `magnitudes`
};
BatchNormBackwardTerms BatchNormBackwardTermsOf(const at::Tensor& g, const at::Tensor& xhat,
                                                const at::Tensor& w, bool magnitudes);

// The input gradient: rstd_c * ((gxhat - mean_g_c) - xhat * mean_gx_c).
at::Tensor BatchNormInputGrad(const at::Tensor& gxhat, const at::Tensor& xhat,
                              const at::Tensor& rstd, const at::Tensor& mean_g,
                              const at::Tensor& mean_gx);

}  // namespace vt::nn
