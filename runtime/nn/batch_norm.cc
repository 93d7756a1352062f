#include "runtime/nn/batch_norm.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "runtime/nn/planes.h"

namespace vt::nn {
namespace {

// The loops over one plane, compiled for AVX-512, AVX2 and the baseline (the same IEEE
// operations at every width: no FMA, lanes independent).
#define VT_PLANE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

at::Tensor PerChannel(const at::Tensor& t) { return t.reshape({1, -1, 1, 1}); }

VT_PLANE_CLONES void OutputPlane(const double* __restrict c, double r, double w, double b,
                                 int64_t n, double* __restrict xhat, double* __restrict y) {
  for (int64_t i = 0; i < n; ++i) {
    const double xh = c[i] * r;
    xhat[i] = xh;
    y[i] = xh * w + b;
  }
}

VT_PLANE_CLONES void TermsPlane(const double* __restrict g, const double* __restrict x, double w,
                                int64_t n, double* __restrict gxhat, double* __restrict gxx,
                                double* __restrict gy_xhat) {
  for (int64_t i = 0; i < n; ++i) {
    const double gh = g[i] * w;
    gxhat[i] = gh;
    gxx[i] = gh * x[i];
    gy_xhat[i] = g[i] * x[i];
  }
}

// TermsPlane, and the plane's sums of |g x| and |g| into *sw and *sb as
// BatchNormParamMagnitudes adds them: four partial sums, lane l taking elements 4j + l.
VT_PLANE_CLONES void TermsPlaneSums(const double* __restrict g, const double* __restrict x,
                                    double w, int64_t n, double* __restrict gxhat,
                                    double* __restrict gxx, double* __restrict gy_xhat,
                                    double* __restrict sum_w, double* __restrict sum_b) {
  double sw[4] = {0.0, 0.0, 0.0, 0.0}, sb[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int l = 0; l < 4; ++l) {
      const double gv = g[i + l], xv = x[i + l];
      const double gh = gv * w, gx = gv * xv;
      gxhat[i + l] = gh;
      gxx[i + l] = gh * xv;
      gy_xhat[i + l] = gx;
      sw[l] += std::fabs(gx);
      sb[l] += std::fabs(gv);
    }
  }
  for (; i < n; ++i) {
    const double gv = g[i], xv = x[i];
    const double gh = gv * w, gx = gv * xv;
    gxhat[i] = gh;
    gxx[i] = gh * xv;
    gy_xhat[i] = gx;
    sw[0] += std::fabs(gx);
    sb[0] += std::fabs(gv);
  }
  *sum_w = (sw[0] + sw[1]) + (sw[2] + sw[3]);
  *sum_b = (sb[0] + sb[1]) + (sb[2] + sb[3]);
}

VT_PLANE_CLONES void InputGradPlane(const double* __restrict gxhat, const double* __restrict x,
                                    double r, double mean_g, double mean_gx, int64_t n,
                                    double* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = r * ((gxhat[i] - mean_g) - x[i] * mean_gx);
}

}  // namespace

BatchNormOutput BatchNormOutputOf(const at::Tensor& centered, const at::Tensor& rstd_in,
                                  const at::Tensor& w_in, const at::Tensor& b_in) {
  const at::Tensor rstd = rstd_in.contiguous(), w = w_in.contiguous(), b = b_in.contiguous();
  if (!FusablePlanes({&centered}, {&rstd, &w, &b})) {
    BatchNormOutput out;
    out.xhat = centered * PerChannel(rstd);
    out.y = out.xhat * PerChannel(w) + PerChannel(b);
    return out;
  }
  BatchNormOutput out{at::empty_like(centered), at::empty_like(centered)};
  const double* pc = centered.data_ptr<double>();
  const double *pr = rstd.data_ptr<double>(), *pw = w.data_ptr<double>();
  const double* pb = b.data_ptr<double>();
  double *xhat = out.xhat.data_ptr<double>(), *y = out.y.data_ptr<double>();
  ForEachPlane(centered, [&](int64_t ch, int64_t off, int64_t plane) {
    OutputPlane(pc + off, pr[ch], pw[ch], pb[ch], plane, xhat + off, y + off);
  });
  return out;
}

BatchNormBackwardTerms BatchNormBackwardTermsOf(const at::Tensor& g, const at::Tensor& xhat,
                                                const at::Tensor& w_in, bool magnitudes) {
  const at::Tensor w = w_in.contiguous();
  BatchNormBackwardTerms t;
  if (!FusablePlanes({&g, &xhat}, {&w})) {
    t.gxhat = g * PerChannel(w);
    t.gxx = t.gxhat * xhat;
    t.gy_xhat = g * xhat;
    if (magnitudes) t.magnitudes = BatchNormParamMagnitudes(g, xhat);
    return t;
  }
  t.gxhat = at::empty_like(g);
  t.gxx = at::empty_like(g);
  t.gy_xhat = at::empty_like(g);
  double *mw = nullptr, *mb = nullptr;
  if (magnitudes) {
    at::NoGradGuard no_grad;
    t.magnitudes = {at::zeros({g.size(1)}, g.options()), at::zeros({g.size(1)}, g.options())};
    mw = t.magnitudes.w.data_ptr<double>();
    mb = t.magnitudes.b.data_ptr<double>();
  }
  const double *pg = g.data_ptr<double>(), *px = xhat.data_ptr<double>();
  double *gxhat = t.gxhat.data_ptr<double>(), *gxx = t.gxx.data_ptr<double>();
  double* gy_xhat = t.gy_xhat.data_ptr<double>();
  const double* pw = w.data_ptr<double>();
  ForEachPlane(g, [&](int64_t ch, int64_t off, int64_t plane) {
    if (!magnitudes) {
      TermsPlane(pg + off, px + off, pw[ch], plane, gxhat + off, gxx + off, gy_xhat + off);
      return;
    }
    double sw, sb;
    TermsPlaneSums(pg + off, px + off, pw[ch], plane, gxhat + off, gxx + off, gy_xhat + off, &sw,
                   &sb);
    mw[ch] += sw;
    mb[ch] += sb;
  });
  return t;
}

at::Tensor BatchNormInputGrad(const at::Tensor& gxhat, const at::Tensor& xhat,
                              const at::Tensor& rstd_in, const at::Tensor& mean_g_in,
                              const at::Tensor& mean_gx_in) {
  const at::Tensor rstd = rstd_in.contiguous(), mean_g = mean_g_in.contiguous();
  const at::Tensor mean_gx = mean_gx_in.contiguous();
  if (!FusablePlanes({&gxhat, &xhat}, {&rstd, &mean_g, &mean_gx})) {
    return PerChannel(rstd) * (gxhat - PerChannel(mean_g) - xhat * PerChannel(mean_gx));
  }
  at::Tensor out = at::empty_like(gxhat);
  const double *pgh = gxhat.data_ptr<double>(), *px = xhat.data_ptr<double>();
  const double *pr = rstd.data_ptr<double>(), *pm = mean_g.data_ptr<double>();
  const double* pmx = mean_gx.data_ptr<double>();
  double* o = out.data_ptr<double>();
  ForEachPlane(gxhat, [&](int64_t ch, int64_t off, int64_t plane) {
    InputGradPlane(pgh + off, px + off, pr[ch], pm[ch], pmx[ch], plane, o + off);
  });
  return out;
}

}  // namespace vt::nn
