#include "runtime/nn/batch_norm.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/nn/lane_sums.h"
#include "runtime/nn/planes.h"
#include "runtime/profile/profile.h"

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

VT_PLANE_CLONES void InputGradFromGPlane(const double* __restrict g, const double* __restrict x,
                                         double w, double r, double mean_g, double mean_gx,
                                         int64_t n, double* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = r * ((g[i] * w - mean_g) - x[i] * mean_gx);
}

VT_PLANE_CLONES void InputGradPlane(const double* __restrict gxhat, const double* __restrict x,
                                    double r, double mean_g, double mean_gx, int64_t n,
                                    double* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = r * ((gxhat[i] - mean_g) - x[i] * mean_gx);
}

VT_PLANE_CLONES void OutputFromInputPlane(const double* __restrict x, double m, double r, double w,
                                          double b, int64_t n, double* __restrict xhat,
                                          double* __restrict y) {
  for (int64_t i = 0; i < n; ++i) {
    const double xh = (x[i] - m) * r;
    xhat[i] = xh;
    y[i] = xh * w + b;
  }
}

// The backward's four sums into acc (eight lanes each: gxhat, gxx, gy_xhat, g).
VT_PLANE_CLONES void GradSumsPlane(const double* __restrict g, const double* __restrict x, double w,
                                   int64_t n, double* __restrict acc) {
  auto one = [&](int64_t i, int l) __attribute__((always_inline)) {
    const double gv = g[i], xv = x[i], gh = gv * w;
    acc[l] += gh;
    acc[8 + l] += gh * xv;
    acc[16 + l] += gv * xv;
    acc[24 + l] += gv;
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) one(i + l, l);
  }
  for (; i < n; ++i) one(i, static_cast<int>(i & 7));
}

// GradSumsPlane, and the plane's sums of |g x| and |g| as TermsPlaneSums takes them (lane l of
// four taking elements 4j + l, what is left over lane 0) into *sum_w and *sum_b.
VT_PLANE_CLONES void GradSumsPlaneMagnitudes(const double* __restrict g, const double* __restrict x,
                                             double w, int64_t n, double* __restrict acc,
                                             double* __restrict sum_w, double* __restrict sum_b) {
  double sw[4] = {0.0, 0.0, 0.0, 0.0}, sb[4] = {0.0, 0.0, 0.0, 0.0};
  auto one = [&](int64_t i, int l, int m) __attribute__((always_inline)) {
    const double gv = g[i], xv = x[i], gh = gv * w, gx = gv * xv;
    acc[l] += gh;
    acc[8 + l] += gh * xv;
    acc[16 + l] += gx;
    acc[24 + l] += gv;
    sw[m] += std::fabs(gx);
    sb[m] += std::fabs(gv);
  };
  const int64_t fours = n - n % 4;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) one(i + l, l, l & 3);
  }
  for (; i < n; ++i) one(i, static_cast<int>(i & 7), i < fours ? static_cast<int>(i & 3) : 0);
  *sum_w = (sw[0] + sw[1]) + (sw[2] + sw[3]);
  *sum_b = (sb[0] + sb[1]) + (sb[2] + sb[3]);
}

// K per-channel sums of x [N, C, H, W] (or of g: the planes' offsets are x's): for each image
// range of the profile's split, plane(ch, offset, size, lanes) for the channel's planes in
// image order, all on one thread, into K x 8 lanes, then each sum's lanes as a tree; the
// ranges' sums combined as the profile adds them. Returns K tensors [C].
template <int K, class Plane>
std::array<at::Tensor, K> ChannelLaneSums(const at::Tensor& x, Plane&& plane) {
  const int64_t n = x.size(0), c = x.size(1), size = x.size(2) * x.size(3);
  const std::optional<SumSplit> split = FusedSumSplit(n);
  if (!split) throw Error("internal error: fused batch-norm sums under a device profile");
  std::array<std::vector<at::Tensor>, K> parts;
  for (const auto& range : split->ranges) {
    // Plain copies: C++17 lambdas cannot capture structured bindings (clang rejects it).
    const int64_t first = range.first, count = range.second;
    at::Tensor part = at::empty({K, c}, x.options());
    double* out = part.data_ptr<double>();
    at::parallel_for(0, c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        double lanes[K * 8] = {};
        for (int64_t img = first; img < first + count; ++img) {
          plane(ch, (img * c + ch) * size, size, lanes);
        }
        for (int k = 0; k < K; ++k) {
          out[k * c + ch] = LaneTree(lanes + 8 * k);
        }
      }
    });
    for (int k = 0; k < K; ++k) parts[k].push_back(part[k]);
  }
  std::array<at::Tensor, K> sums;
  for (int k = 0; k < K; ++k) sums[k] = CombinePartialSums(std::move(parts[k]), split->pairwise);
  return sums;
}

}  // namespace

bool BatchNormStatisticsFused(const at::Tensor& x,
                              std::initializer_list<const at::Tensor*> factors) {
  return FusablePlanes({&x}, factors) && !CurrentProfile().cuda;
}

at::Tensor BatchNormChannelSum(const at::Tensor& x) {
  const double* px = x.data_ptr<double>();
  return ChannelLaneSums<1>(x, [&](int64_t, int64_t off, int64_t size, double* lanes) {
    LaneSum(px + off, size, lanes);
  })[0];
}

at::Tensor BatchNormCenteredSquareSum(const at::Tensor& x, const at::Tensor& mean_in) {
  const at::Tensor mean = mean_in.contiguous();
  const double *px = x.data_ptr<double>(), *pm = mean.data_ptr<double>();
  return ChannelLaneSums<1>(x, [&](int64_t ch, int64_t off, int64_t size, double* lanes) {
    LaneCenteredSquareSum(px + off, pm[ch], size, lanes);
  })[0];
}

BatchNormOutput BatchNormOutputFromInput(const at::Tensor& x, const at::Tensor& mean_in,
                                         const at::Tensor& rstd_in, const at::Tensor& w_in,
                                         const at::Tensor& b_in) {
  const at::Tensor mean = mean_in.contiguous(), rstd = rstd_in.contiguous();
  const at::Tensor w = w_in.contiguous(), b = b_in.contiguous();
  BatchNormOutput out{at::empty_like(x), at::empty_like(x)};
  const double *px = x.data_ptr<double>(), *pm = mean.data_ptr<double>();
  const double *pr = rstd.data_ptr<double>(), *pw = w.data_ptr<double>();
  const double* pb = b.data_ptr<double>();
  double *xhat = out.xhat.data_ptr<double>(), *y = out.y.data_ptr<double>();
  ForEachPlane(x, [&](int64_t ch, int64_t off, int64_t plane) {
    OutputFromInputPlane(px + off, pm[ch], pr[ch], pw[ch], pb[ch], plane, xhat + off, y + off);
  });
  return out;
}

BatchNormGradSums BatchNormGradSumsOf(const at::Tensor& g, const at::Tensor& xhat,
                                      const at::Tensor& w_in, bool magnitudes) {
  const at::Tensor w = w_in.contiguous();
  BatchNormGradSums out;
  double *mw = nullptr, *mb = nullptr;
  if (magnitudes) {
    at::NoGradGuard no_grad;
    out.magnitudes = {at::zeros({g.size(1)}, g.options()), at::zeros({g.size(1)}, g.options())};
    mw = out.magnitudes.w.data_ptr<double>();
    mb = out.magnitudes.b.data_ptr<double>();
  }
  const double *pg = g.data_ptr<double>(), *px = xhat.data_ptr<double>();
  const double* pw = w.data_ptr<double>();
  const std::array<at::Tensor, 4> sums =
      ChannelLaneSums<4>(g, [&](int64_t ch, int64_t off, int64_t size, double* lanes) {
        if (!magnitudes) {
          GradSumsPlane(pg + off, px + off, pw[ch], size, lanes);
          return;
        }
        double sw, sb;
        GradSumsPlaneMagnitudes(pg + off, px + off, pw[ch], size, lanes, &sw, &sb);
        mw[ch] += sw;
        mb[ch] += sb;
      });
  out.gxhat = sums[0];
  out.gxx = sums[1];
  out.gy_xhat = sums[2];
  out.g = sums[3];
  return out;
}

at::Tensor BatchNormInputGradFromG(const at::Tensor& g, const at::Tensor& xhat,
                                   const at::Tensor& w_in, const at::Tensor& rstd_in,
                                   const at::Tensor& mean_g_in, const at::Tensor& mean_gx_in) {
  const at::Tensor w = w_in.contiguous(), rstd = rstd_in.contiguous();
  const at::Tensor mean_g = mean_g_in.contiguous(), mean_gx = mean_gx_in.contiguous();
  at::Tensor out = at::empty_like(g);
  const double *pg = g.data_ptr<double>(), *px = xhat.data_ptr<double>();
  const double *pw = w.data_ptr<double>(), *pr = rstd.data_ptr<double>();
  const double *pm = mean_g.data_ptr<double>(), *pmx = mean_gx.data_ptr<double>();
  double* o = out.data_ptr<double>();
  ForEachPlane(g, [&](int64_t ch, int64_t off, int64_t plane) {
    InputGradFromGPlane(pg + off, px + off, pw[ch], pr[ch], pm[ch], pmx[ch], plane, o + off);
  });
  return out;
}

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
