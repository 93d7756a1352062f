#include "runtime/nn/gelu.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstring>

namespace vt::nn {
namespace {

constexpr double kBeta = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kCubic = 0.044715;

// Elementwise passes are split into chunks this long over LibTorch's threads.
constexpr int64_t kGrain = int64_t{1} << 15;

// ln 2 in two parts (fdlibm's): the high part has 32 trailing zero bits, so k * kLn2Hi is
// exact for the k below (0..58).
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kInvLn2 = 1.44269504088896338700e+00;
// 1.5 * 2^52: adding it rounds a value below 2^51 to an integer, held in the low mantissa bits.
constexpr double kShifter = 6755399441055744.0;

// 1/j! for j = 2..13: expm1(r) = r + r^2 (1/2! + r/3! + ... + r^11/13!) leaves out
// r^14/14! < 2^-56 |r| for |r| <= 0.35.
constexpr double kInvFact[12] = {1.0 / 2.0,        1.0 / 6.0,         1.0 / 24.0,
                                 1.0 / 120.0,      1.0 / 720.0,       1.0 / 5040.0,
                                 1.0 / 40320.0,    1.0 / 362880.0,    1.0 / 3628800.0,
                                 1.0 / 39916800.0, 1.0 / 479001600.0, 1.0 / 6227020800.0};

// tanh(z) = sign(z) e / (e + 2), e = expm1(2 |z|) = 2^k (1 + expm1(r)) - 1 with
// 2 |z| = k ln 2 + r, |r| <= ln(2) / 2. |z| is capped at 20, where tanh is 1 in FP64 (e + 2
// rounds to e). NaN stays NaN; the sign of zero is kept.
__attribute__((always_inline)) inline double TanhCore(double z) {
  double a = std::fabs(z);
  a = a > 20.0 ? 20.0 : a;
  const double x = a + a;
  const double shifted = x * kInvLn2 + kShifter;
  const double kd = shifted - kShifter;
  const double r = (x - kd * kLn2Hi) - kd * kLn2Lo;
  double q = kInvFact[11];
  for (int j = 10; j >= 0; --j) q = q * r + kInvFact[j];
  const double p = r + (r * r) * q;
  uint64_t shifted_bits, shifter_bits;
  std::memcpy(&shifted_bits, &shifted, sizeof shifted);
  std::memcpy(&shifter_bits, &kShifter, sizeof kShifter);
  const uint64_t scale_bits = (shifted_bits - shifter_bits + 1023) << 52;  // 2^k
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const double e = scale * p + (scale - 1.0);
  return std::copysign(e / (e + 2.0), z);
}

#define VT_GELU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

VT_GELU_CLONES void TanhLoop(const double* x, double* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) out[i] = TanhCore(x[i]);
}

VT_GELU_CLONES void ForwardLoop(const double* x, double* y, double* t, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const double xi = x[i];
    const double ti = TanhCore(kBeta * (xi + kCubic * ((xi * xi) * xi)));
    t[i] = ti;
    y[i] = (0.5 * xi) * (1.0 + ti);
  }
}

template <bool kTerms>
__attribute__((always_inline)) inline void BackwardBody(const double* g, const double* x,
                                                        const double* t, double* gx, double* terms,
                                                        int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const double xi = x[i], ti = t[i];
    const double slope = kBeta * (1.0 + 3.0 * kCubic * (xi * xi));  // d(inner)/dx
    const double flat = 1.0 - ti * ti;                              // tanh' at inner
    gx[i] = g[i] * (0.5 * (1.0 + ti) + ((0.5 * xi) * flat) * slope);
    if (kTerms) {
      terms[i] = (0.5 + 0.5 * std::fabs(ti)) + ((0.5 * std::fabs(xi)) * flat) * slope;
    }
  }
}

VT_GELU_CLONES void BackwardLoop(const double* g, const double* x, const double* t, double* gx,
                                 int64_t begin, int64_t end) {
  BackwardBody<false>(g, x, t, gx, nullptr, begin, end);
}

VT_GELU_CLONES void BackwardTermsLoop(const double* g, const double* x, const double* t, double* gx,
                                      double* terms, int64_t begin, int64_t end) {
  BackwardBody<true>(g, x, t, gx, terms, begin, end);
}

bool CpuDouble(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == at::kDouble;
}

}  // namespace

void TanhSpan(const double* x, double* out, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) { TanhLoop(x, out, begin, end); });
}

__attribute__((noinline)) double TanhOne(double x) { return TanhCore(x); }

GeluForwardResult GeluTanhForward(const at::Tensor& x_in) {
  if (!CpuDouble(x_in)) return {at::gelu(x_in, "tanh"), at::Tensor()};
  at::NoGradGuard no_grad;
  const at::Tensor x = x_in.detach().contiguous();
  GeluForwardResult r{at::empty_like(x), at::empty_like(x)};
  const double* px = x.data_ptr<double>();
  double *py = r.y.data_ptr<double>(), *pt = r.t.data_ptr<double>();
  at::parallel_for(0, x.numel(), kGrain,
                   [&](int64_t begin, int64_t end) { ForwardLoop(px, py, pt, begin, end); });
  return r;
}

at::Tensor GeluTanhBackward(const at::Tensor& g_in, const at::Tensor& x_in, const at::Tensor& t_in,
                            at::Tensor* terms) {
  at::NoGradGuard no_grad;
  if (!CpuDouble(g_in) || !CpuDouble(x_in) || !CpuDouble(t_in) ||
      !g_in.sizes().equals(x_in.sizes()) || !t_in.sizes().equals(x_in.sizes())) {
    if (terms != nullptr) *terms = at::gelu_backward(at::ones_like(x_in), x_in.abs(), "tanh");
    return at::gelu_backward(g_in, x_in, "tanh");
  }
  const at::Tensor g = g_in.contiguous(), x = x_in.contiguous(), t = t_in.contiguous();
  at::Tensor gx = at::empty_like(x);
  const double *pg = g.data_ptr<double>(), *px = x.data_ptr<double>(), *pt = t.data_ptr<double>();
  double* pgx = gx.data_ptr<double>();
  if (terms == nullptr) {
    at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
      BackwardLoop(pg, px, pt, pgx, begin, end);
    });
    return gx;
  }
  *terms = at::empty_like(x);
  double* pterms = terms->data_ptr<double>();
  at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    BackwardTermsLoop(pg, px, pt, pgx, pterms, begin, end);
  });
  return gx;
}

}  // namespace vt::nn
