// GELU (tanh form) in FP64 with vtrun's own tanh: one pass forward, one pass backward.
//
//   y  = 0.5 x (1 + t),  t = tanh(k (x + c x^3)),  k = sqrt(2 / pi), c = 0.044715
//   gx = g (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2))
//
// The forward keeps t, so the backward needs no second tanh (ATen's gelu and gelu_backward
// each evaluate one, with SLEEF, and the two passes were a GPT step's largest elementwise
// cost). Tanh is a polynomial expm1 and IEEE additions, products and one division only, so it
// gives the same bits on every CPU, vector width and thread count (-ffp-contract=off), within
// 4 ulp of tanh (tests/nn/gelu_test.cc measures it).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace vt::nn {

// tanh(x) per element, as the GELU kernels compute it. TanhOne is the same function on one
// value, never vectorized: the tests compare the two bit for bit.
void TanhSpan(const double* x, double* out, int64_t n);
double TanhOne(double x);

// y = gelu(x) and t = tanh(k (x + c x^3)). A contiguous copy is made of any other layout;
// tensors that are not CPU float64 take ATen's gelu (t is then undefined).
struct GeluForwardResult {
  at::Tensor y, t;
};
GeluForwardResult GeluTanhForward(const at::Tensor& x);

// gx from the incoming gradient g, x and the forward's t (undefined: ATen's gelu_backward).
// With `terms`, also the sizes of the derivative's three terms, 0.5 + 0.5 |t| +
// 0.5 |x| (1 - t^2) k (1 + 3 c x^2) = gelu'(|x|) (t is odd in x), in the same pass: the
// input gradient's magnitude is |g| times them (docs/ROUNDING.md "Magnitudes").
at::Tensor GeluTanhBackward(const at::Tensor& g, const at::Tensor& x, const at::Tensor& t,
                            at::Tensor* terms = nullptr);

}  // namespace vt::nn
