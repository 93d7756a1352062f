// Per-element magnitudes of the rounded ops (ROUNDING.md "The window", "Magnitudes"): for
// each value an op hands to a boundary, a bound m of the size of the terms it was computed
// from, so that a window's absolute term alpha * m follows each value's own error instead of
// its tensor's largest value. Both parties compute m from their own values; the two differ
// by rounding only (sums of non-negative terms and products), which the auditor's slack
// covers (precision/kernels.h kMagnitudeSlack).
//
//   product  y = a b (+ bias):   m_ij = ||a_i|| ||b_j|| (+ |bias_j|)   (Cauchy-Schwarz)
//   sum      y = sum_k t_k:      m = sum_k |t_k|
//   elementwise, no cancellation (softmax, log-softmax, sums of positive terms): m = |y|
//   values every party computes alike (a boundary's rounded output, and what masks, copies
//   and sums make of such values): m = 0, ZeroMagnitude()
//
// These helpers compute them without autograd (the magnitudes are not differentiated).
#pragma once

#include <ATen/core/Tensor.h>

#include "runtime/precision/magnitude_source.h"

namespace vt::nn {

// ||t_i,:||_2 over the last dimension, kept: [..., m, k] -> [..., m, 1].
at::Tensor RowNorms(const at::Tensor& t);
// ||t_:,j||_2 over the second-to-last dimension, kept: [..., k, n] -> [..., 1, n].
at::Tensor ColNorms(const at::Tensor& t);
// Several of these in one pass over t's memory (a product's backward wants the row and
// column norms of its incoming gradient, a bias the sums of |g|; a forward's inputs
// are read once for the norms both passes use). `wanted` is a mask of NormsWanted; the
// fields not asked for stay undefined. The same values as RowNorms, ColNorms and
// t.abs().sum(-1) or (-2) up to the order of the sums, the same bits on any thread count or ISA.
enum NormsWanted : unsigned { kRowNorms = 1, kColNorms = 2, kRowAbsSums = 4, kColAbsSums = 8 };
struct MatrixNorms {
  at::Tensor rows;     // [..., m, 1]
  at::Tensor cols;     // [..., 1, k]
  at::Tensor row_abs;  // [..., m]: sum over the last dimension of |t|
  at::Tensor col_abs;  // [..., k]: sum over the second-to-last
};
MatrixNorms NormsOf(const at::Tensor& t, unsigned wanted);
// The magnitude of a [..., m, k] @ b [..., k, n]: RowNorms(a) * ColNorms(b), [..., m, n].
at::Tensor ProductMagnitude(const at::Tensor& a, const at::Tensor& b);

// Offers y, a product's output, the magnitude `row * col` (+ `add`), the tensor expression in
// ATen's broadcasting whose result has y's elements in y's order. When y, viewed as [batch,
// rows, cols], is what the factors span (row: rows or batch * rows values, col: cols or
// batch * cols, add: rows values if add_per_row, else cols), the offer is the outer product
// itself (precision/magnitude_source.h: the same bits, never written out); otherwise the
// expression is computed.
void OfferProductMagnitude(const at::Tensor& y, int64_t rows, int64_t cols, const at::Tensor& row,
                           const at::Tensor& col, const at::Tensor& add = {},
                           bool add_per_row = false);

// Adds to `parameter`'s gradient magnitude the outer product row_i * col_j of its flat
// factors (row.numel() * col.numel() == parameter.numel(), the parameter's elements in
// row-major order): a product's weight gradient, ||g_:,o|| ||x_:,i||. Kept computed
// (precision::OuterMagnitude, the same bits as the product of the factors, never written out)
// unless another op adds to it. Factors of another element count: vt::Error.
void AddGradOuterMagnitude(const at::Tensor& parameter, const at::Tensor& row,
                           const at::Tensor& col);

// Offers y the magnitude |a| (times `mul` when given), elementwise in y's order: computed by
// the boundary's kernels when y, a and mul are contiguous float64 of y's element count (the
// same bits as a.abs() * mul), else that expression.
void OfferAbsMagnitude(const at::Tensor& y, const at::Tensor& a, const at::Tensor& mul = {});

// Batch-norm magnitudes in one pass each over [N, C, H, W] (the per-channel factors are [C]),
// equal to the ATen expressions in the comments up to the order of the sums:
//   ChannelAbsSum(a)          sum over n, h, w of |a|                      -> [C]
//   ChannelAbsSum(a, b)       sum over n, h, w of |a b|                    -> [C]
//   AbsPlusChannel(a, c)      |a| + |c_ch|                                 -> a's shape
//   BatchNormParamMagnitudes(g, xhat), in one pass over g and xhat:
//     .w   ChannelAbsSum(g, xhat), .b  ChannelAbsSum(g) (the same bits)    -> [C]
//     (they also give the backward statistics' magnitudes: sum |g w_c| = |w_c| sum |g|,
//     sum |g w_c xhat| = |w_c| sum |g xhat|)
//   BatchNormInputGradMagnitude(g, xhat, w, rstd, mean_g, mean_gx):
//     rstd_ch (|g w_ch| + |mean_g_ch| + |xhat mean_gx_ch|)                -> g's shape
//   computed by the boundary's kernels block by block (precision::ChannelMagnitude, the
//   expression's bits, never written out); so is OfferAbsPlusChannel's |a| + |c_ch|, or
//   |a p_ch| + |c_ch| with a per-channel factor p.
// Tensors that are not contiguous CPU float64 [N, C, H, W] take the ATen expressions.
at::Tensor ChannelAbsSum(const at::Tensor& a, const at::Tensor& b = {});
at::Tensor AbsPlusChannel(const at::Tensor& a, const at::Tensor& c);
void OfferAbsPlusChannel(const at::Tensor& y, const at::Tensor& a, const at::Tensor& c,
                         const at::Tensor& p = {});
struct ParamMagnitudes {
  at::Tensor w, b;
};
ParamMagnitudes BatchNormParamMagnitudes(const at::Tensor& g, const at::Tensor& xhat);
precision::Magnitude BatchNormInputGradMagnitude(const at::Tensor& g, const at::Tensor& xhat,
                                                 const at::Tensor& w, const at::Tensor& rstd,
                                                 const at::Tensor& mean_g,
                                                 const at::Tensor& mean_gx);

// Layer-norm magnitudes over [..., D] (per-row factors [..., 1], per-column [D]), each in one
// pass, equal to the ATen expressions in the comments up to the order of the sums (the
// elementwise ones bit for bit); tensors that are not CPU float64 with a contiguous layout of
// those sizes take the expressions:
//   RowAbsMean(t)                     |t|.sum(-1, keepdim) / D               -> [..., 1]
//   ColumnAbsSum(t)                   |t| summed over all but the last dim   -> [D]
//   AbsPlusColumn(a, c)               |a| + |c_j|                            -> a's shape
//   RowAbsSum3(r, a, q, b)            r_i * ((|a_ij| + |q_i|) + |b_ij|)     -> a's shape
// Layer norm's output |xhat w| + |b|, its input gradient rstd (|g w| + |mean_g| + |xhat
// mean_gx|), the means' |x| / D, |g w| / D, |g w xhat| / D, and its parameters' sum |g xhat|
// and sum |g| (ROUNDING.md "Magnitudes").
at::Tensor RowAbsMean(const at::Tensor& t);
at::Tensor ColumnAbsSum(const at::Tensor& t);
at::Tensor AbsPlusColumn(const at::Tensor& a, const at::Tensor& c);
at::Tensor RowAbsSum3(const at::Tensor& r, const at::Tensor& a, const at::Tensor& q,
                      const at::Tensor& b);

// The magnitude of values every party computes bit for bit alike (0-dim zero): a window's
// absolute term is 0 for them.
at::Tensor ZeroMagnitude();
bool IsZeroMagnitude(const at::Tensor& m);
// Whether x was offered the zero magnitude in the current step (a value every party computes
// alike: a boundary's rounded output, and what ops that keep that property make of it).
bool IsAgreed(const at::Tensor& x);

// The magnitude of the terms in an op's incoming gradient g: the one offered for g, else |g|
// (a value no op gave a magnitude is its own, ROUNDING.md "Magnitudes"). May be
// ZeroMagnitude().
at::Tensor IncomingMagnitude(const at::Tensor& g);

// Moves the magnitude offered for `from` (if any) to `to = from * factor` (factor > 0),
// scaled by `factor`: for an op's output that the caller scales before its boundary.
void MoveOffer(const at::Tensor& from, const at::Tensor& to, double factor);

}  // namespace vt::nn
