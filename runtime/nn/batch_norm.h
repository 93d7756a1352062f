// Batch norm's elementwise passes fused (nn/reduce.cc BatchNormFn): each loop reads its
// [N, C, H, W] inputs once and writes several results, where the ATen expressions in the
// comments take a pass over memory per operation. Every element is the same IEEE operations
// in the same order as the expression (no FMA: -ffp-contract=off), so the same bits; the
// per-channel sums are BatchNormParamMagnitudes' (nn/magnitude.h), bit for bit. Tensors that
// are not contiguous CPU float64 [N, C, H, W] with [C] factors take the expressions.
// The channel sums of the statistics and of the parameter gradients are fused too, in the
// device profile's split of the images (vt::FusedSumSplit: the batch in one range
// natively, in the profile's chunks otherwise); within a range each channel's sum has eight
// lanes, lane l taking each plane's elements j = l mod 8, image after image, the lanes added
// as a tree at the end: one order on any thread count and vector width. So batch norm needs
// no centered input, no products of g in memory, and a pass over the input or g per statistic
// at most. Under the CUDA profile, or for tensors the loops do not take, the statistics are
// vt::Sum's (BatchNormStatisticsFused says which).
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>

#include "runtime/nn/magnitude.h"

namespace vt::nn {

// The forward's normalized input and output from the centered input:
//   xhat = centered * rstd_c,  y = (xhat * w_c) + b_c
struct BatchNormOutput {
  at::Tensor xhat, y;
};
BatchNormOutput BatchNormOutputOf(const at::Tensor& centered, const at::Tensor& rstd,
                                  const at::Tensor& w, const at::Tensor& b);

// Whether the fused statistics below apply to x (g in the backward) with these [C] factors:
// FusablePlanes and a CPU profile.
bool BatchNormStatisticsFused(const at::Tensor& x,
                              std::initializer_list<const at::Tensor*> factors);

// Per-channel sum of x [N, C, H, W] -> [C].
at::Tensor BatchNormChannelSum(const at::Tensor& x);
// Per-channel sum of (x - mean_c)^2 -> [C].
at::Tensor BatchNormCenteredSquareSum(const at::Tensor& x, const at::Tensor& mean);
// BatchNormOutputOf(x - mean_c, rstd, w, b) without the centered tensor: the same bits.
BatchNormOutput BatchNormOutputFromInput(const at::Tensor& x, const at::Tensor& mean,
                                         const at::Tensor& rstd, const at::Tensor& w,
                                         const at::Tensor& b);

// The backward's per-channel sums, from g and xhat in one pass: of gxhat = g * w_c, of
// gxx = gxhat * xhat, of gy_xhat = g * xhat and of g, each -> [C]; with `magnitudes`,
// BatchNormParamMagnitudes(g, xhat) from the same pass.
struct BatchNormGradSums {
  at::Tensor gxhat, gxx, gy_xhat, g;
  ParamMagnitudes magnitudes;  // undefined without `magnitudes`
};
BatchNormGradSums BatchNormGradSumsOf(const at::Tensor& g, const at::Tensor& xhat,
                                      const at::Tensor& w, bool magnitudes);
// BatchNormInputGrad(g * w_c, xhat, rstd, mean_g, mean_gx) without the gxhat tensor: the
// same bits.
at::Tensor BatchNormInputGradFromG(const at::Tensor& g, const at::Tensor& xhat, const at::Tensor& w,
                                   const at::Tensor& rstd, const at::Tensor& mean_g,
                                   const at::Tensor& mean_gx);

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
