// Layer norm's passes fused (nn/reduce.cc LayerNormFn), as batch norm's are (batch_norm.h):
// over x [..., D] as rows of D contiguous values, each loop reads its inputs once and writes
// only its results, where the ATen expressions in the comments take a pass over memory per
// operation. Every element is the same IEEE operations in the same order as the expression (no
// FMA: -ffp-contract=off), so the same bits.
//
// The sums follow the device profile's split of the reduced extent (vt::FusedSumSplit): a
// row's sum takes its columns in the profile's ranges, each range in eight lanes (column j of
// the range in lane j mod 8) added as a tree; a column sum takes the rows in the profile's
// ranges, each range row after row. So no sum depends on the thread count or the vector width.
// LayerNormFused says when they apply: contiguous CPU float64 rows, [D] factors, a CPU profile;
// otherwise the op takes the expressions and vt::Sum.
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>

namespace vt::nn {

// Whether the fused passes apply to x [..., D] (g in the backward) with these [D] factors.
bool LayerNormFused(const at::Tensor& x, std::initializer_list<const at::Tensor*> factors);

// Per-row sum of x -> [..., 1] (RowSum).
at::Tensor LayerNormRowSum(const at::Tensor& x);
// LayerNormRowSum, and in the same pass the per-row sums of |x| -> [..., 1] in NormsOf's
// order (the same bits as RowAbsMean's sums; see LayerNormGradAbsSums).
struct LayerNormRowSumAndAbs {
  at::Tensor sum, abs;
};
LayerNormRowSumAndAbs LayerNormRowSumAndAbsOf(const at::Tensor& x);
// Per-row sum of (x - mean_r)^2 -> [..., 1], mean [..., 1].
at::Tensor LayerNormCenteredSquareSum(const at::Tensor& x, const at::Tensor& mean);
// xhat = (x - mean_r) * rstd_r and y = (xhat * w_j) + b_j, x's shape each.
struct LayerNormOutput {
  at::Tensor xhat, y;
};
LayerNormOutput LayerNormOutputFromInput(const at::Tensor& x, const at::Tensor& mean,
                                         const at::Tensor& rstd, const at::Tensor& w,
                                         const at::Tensor& b);

// The backward's per-row sums of gxhat = g * w_j and of gxx = gxhat * xhat -> [..., 1] each.
struct LayerNormRowSums {
  at::Tensor gxhat, gxx;
};
LayerNormRowSums LayerNormGradRowSums(const at::Tensor& g, const at::Tensor& xhat,
                                      const at::Tensor& w);
// rstd_r * (((g * w_j) - mean_g_r) - xhat * mean_gx_r), g's shape.
at::Tensor LayerNormInputGrad(const at::Tensor& g, const at::Tensor& xhat, const at::Tensor& w,
                              const at::Tensor& rstd, const at::Tensor& mean_g,
                              const at::Tensor& mean_gx);
// The sums the backward's magnitudes read, in one pass over g and xhat: per row, of |g * w_j|
// and of |(g * w_j) * xhat| -> [rows] each (RowAbsMean's sums of gxhat and gxx); per column, of
// |g * xhat| and of |g| over the rows -> [D] each (ColumnAbsSum's, the parameters' gradient
// magnitudes). In NormsOf's fixed order (nn/magnitude.h: tiles of 128 rows by 512 columns,
// eight lanes across a row), not the profile's: the same bits as those functions of the
// products, on any profile, thread count or vector width.
struct LayerNormGradAbsSums {
  at::Tensor row_gxhat, row_gxx, col_gy_xhat, col_g;
};
LayerNormGradAbsSums LayerNormGradAbsSumsOf(const at::Tensor& g, const at::Tensor& xhat,
                                            const at::Tensor& w);
// The parameters' gradients: column sums of g * xhat and of g over the rows -> [D] each.
struct LayerNormColumnSums {
  at::Tensor gy_xhat, g;
};
LayerNormColumnSums LayerNormGradColumnSums(const at::Tensor& g, const at::Tensor& xhat);

}  // namespace vt::nn
