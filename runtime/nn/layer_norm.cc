#include "runtime/nn/layer_norm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/nn/lane_sums.h"
#include "runtime/profile/profile.h"
#include "runtime/tensor/layout.h"

namespace vt::nn {
namespace {

// The loops over one row (or a span of one), compiled for AVX-512, AVX2 and the baseline (the
// same IEEE operations at every width: no FMA, lanes independent).
#define VT_ROW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

VT_ROW_CLONES void OutputRow(const double* __restrict x, double m, double r,
                             const double* __restrict w, const double* __restrict b, int64_t n,
                             double* __restrict xhat, double* __restrict y) {
  for (int64_t j = 0; j < n; ++j) {
    const double xh = (x[j] - m) * r;
    xhat[j] = xh;
    y[j] = xh * w[j] + b[j];
  }
}

// acc[j mod 8] += g[j] w[j] and acc[8 + j mod 8] += (g[j] w[j]) xhat[j].
VT_ROW_CLONES void GradRowSpan(const double* __restrict g, const double* __restrict x,
                               const double* __restrict w, int64_t n, double* __restrict acc) {
  auto one = [&](int64_t j, int l) __attribute__((always_inline)) {
    const double gh = g[j] * w[j];
    acc[l] += gh;
    acc[8 + l] += gh * x[j];
  };
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) one(j + l, l);
  }
  for (; j < n; ++j) one(j, static_cast<int>(j & 7));
}

VT_ROW_CLONES void InputGradRow(const double* __restrict g, const double* __restrict x,
                                const double* __restrict w, double r, double mean_g, double mean_gx,
                                int64_t n, double* __restrict out) {
  for (int64_t j = 0; j < n; ++j) out[j] = r * ((g[j] * w[j] - mean_g) - x[j] * mean_gx);
}

// One row's terms added to the column sums: gx[j] += g[j] xhat[j], gs[j] += g[j].
VT_ROW_CLONES void ColumnRow(const double* __restrict g, const double* __restrict x, int64_t n,
                             double* __restrict gx, double* __restrict gs) {
  for (int64_t j = 0; j < n; ++j) {
    gx[j] += g[j] * x[j];
    gs[j] += g[j];
  }
}

// NormsOf's tiles (nn/magnitude.cc): 128 rows by 512 columns.
constexpr int64_t kAbsTileRows = 128, kAbsTileCols = 512;

// The sum of |x[j]| over a row in NormsOf's order: its column tiles each in eight lanes (the
// columns past the last group of eight into lane 0), the lanes as a tree, the tiles in order.
VT_ROW_CLONES double RowAbsSum(const double* __restrict x, int64_t n) {
  double total = 0.0;
  for (int64_t j0 = 0; j0 < n; j0 += kAbsTileCols) {
    const int64_t j1 = std::min(n, j0 + kAbsTileCols);
    double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8) {
      for (int l = 0; l < 8; ++l) a[l] += std::fabs(x[j + l]);
    }
    for (; j < j1; ++j) a[0] += std::fabs(x[j]);
    const double t = LaneTree(a);
    total = j0 == 0 ? t : total + t;
  }
  return total;
}

// One row of the backward's magnitude sums: the row's sums of |g w| and |(g w) xhat| over
// its column tiles (each in eight lanes, the columns past the last group of eight into lane
// 0, the lanes as a tree, the tiles added in order) into *row_gw, *row_gwx; |g xhat| and |g|
// added to the column partials cx[j], cg[j].
VT_ROW_CLONES void AbsSumsRow(const double* __restrict g, const double* __restrict x,
                              const double* __restrict w, int64_t n, double* __restrict row_gw,
                              double* __restrict row_gwx, double* __restrict cx,
                              double* __restrict cg) {
  double total_gw = 0.0, total_gwx = 0.0;
  for (int64_t j0 = 0; j0 < n; j0 += kAbsTileCols) {
    const int64_t j1 = std::min(n, j0 + kAbsTileCols);
    double a[8] = {0, 0, 0, 0, 0, 0, 0, 0}, b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    auto one = [&](int64_t j, int l) __attribute__((always_inline)) {
      const double gw = g[j] * w[j];
      a[l] += std::fabs(gw);
      b[l] += std::fabs(gw * x[j]);
      cx[j] += std::fabs(g[j] * x[j]);
      cg[j] += std::fabs(g[j]);
    };
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8) {
      for (int l = 0; l < 8; ++l) one(j + l, l);
    }
    for (; j < j1; ++j) one(j, 0);
    const double ta = LaneTree(a), tb = LaneTree(b);
    total_gw = j0 == 0 ? ta : total_gw + ta;
    total_gwx = j0 == 0 ? tb : total_gwx + tb;
  }
  *row_gw = total_gw;
  *row_gwx = total_gwx;
}

// The rows of x [..., D]: the product of the leading sizes (also when D is 0).
int64_t RowsOf(const at::Tensor& x) {
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < x.dim(); ++i) rows *= x.size(i);
  return rows;
}

// Rows per parallel task: about 2^15 values.
int64_t RowGrain(int64_t d) {
  return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, d));
}

SumSplit SplitOf(int64_t extent) {
  const std::optional<SumSplit> split = FusedSumSplit(extent);
  if (!split) throw Error("internal error: fused layer-norm sums under a device profile");
  return *split;
}

// K per-row sums of x [..., D]: span(r, j0, count, lanes) adds row r's columns [j0, j0 + count)
// into K x 8 lanes, once per range of the profile's split of the columns; each range's lanes
// as a tree, the ranges combined as the profile adds them. Returns K tensors [..., 1].
template <int K, class Span>
std::array<at::Tensor, K> RowLaneSums(const at::Tensor& x, Span&& span) {
  const int64_t d = x.size(-1), rows = RowsOf(x);
  const SumSplit split = SplitOf(d);
  const int64_t ranges = static_cast<int64_t>(split.ranges.size());
  at::Tensor parts = at::empty({ranges, K, rows}, x.options());
  double* out = parts.data_ptr<double>();
  at::parallel_for(0, rows, RowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t q = 0; q < ranges; ++q) {
        const auto [j0, count] = split.ranges[static_cast<size_t>(q)];
        double lanes[K * 8] = {};
        span(r, j0, count, lanes);
        for (int k = 0; k < K; ++k) out[(q * K + k) * rows + r] = LaneTree(lanes + 8 * k);
      }
    }
  });
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = 1;
  std::array<at::Tensor, K> sums;
  for (int k = 0; k < K; ++k) {
    std::vector<at::Tensor> per_range;
    for (int64_t q = 0; q < ranges; ++q) per_range.push_back(parts[q][k]);
    sums[k] = CombinePartialSums(std::move(per_range), split.pairwise).view(shape);
  }
  return sums;
}

}  // namespace

bool LayerNormFused(const at::Tensor& x, std::initializer_list<const at::Tensor*> factors) {
  if (x.dim() < 1 || !ContiguousCpuDoubles({&x}) || CurrentProfile().cuda) return false;
  for (const at::Tensor* t : factors) {
    if (!t->defined() || !t->device().is_cpu() || t->scalar_type() != at::kDouble ||
        !t->is_contiguous() || t->dim() != 1 || t->numel() != x.size(-1)) {
      return false;
    }
  }
  return true;
}

at::Tensor LayerNormRowSum(const at::Tensor& x) {
  const double* px = x.data_ptr<double>();
  const int64_t d = x.size(-1);
  return RowLaneSums<1>(x, [&](int64_t r, int64_t j0, int64_t count, double* lanes) {
    LaneSum(px + r * d + j0, count, lanes);
  })[0];
}

LayerNormRowSumAndAbs LayerNormRowSumAndAbsOf(const at::Tensor& x) {
  const double* px = x.data_ptr<double>();
  const int64_t d = x.size(-1);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = 1;
  at::Tensor abs = at::zeros(shape, x.options());
  double* pa = abs.data_ptr<double>();
  at::Tensor sum = RowLaneSums<1>(x, [&](int64_t r, int64_t j0, int64_t count, double* lanes) {
    // The row's |x| sum with its first range (the ranges start at column 0), which then
    // reads the row from the cache.
    if (j0 == 0) pa[r] = RowAbsSum(px + r * d, d);
    LaneSum(px + r * d + j0, count, lanes);
  })[0];
  return {sum, abs};
}

at::Tensor LayerNormCenteredSquareSum(const at::Tensor& x, const at::Tensor& mean_in) {
  const at::Tensor mean = mean_in.contiguous();
  const double *px = x.data_ptr<double>(), *pm = mean.data_ptr<double>();
  const int64_t d = x.size(-1);
  return RowLaneSums<1>(x, [&](int64_t r, int64_t j0, int64_t count, double* lanes) {
    LaneCenteredSquareSum(px + r * d + j0, pm[r], count, lanes);
  })[0];
}

LayerNormOutput LayerNormOutputFromInput(const at::Tensor& x, const at::Tensor& mean_in,
                                         const at::Tensor& rstd_in, const at::Tensor& w_in,
                                         const at::Tensor& b_in) {
  const at::Tensor mean = mean_in.contiguous(), rstd = rstd_in.contiguous();
  const at::Tensor w = w_in.contiguous(), b = b_in.contiguous();
  LayerNormOutput out{at::empty_like(x), at::empty_like(x)};
  const double *px = x.data_ptr<double>(), *pm = mean.data_ptr<double>();
  const double *pr = rstd.data_ptr<double>(), *pw = w.data_ptr<double>();
  const double* pb = b.data_ptr<double>();
  double *xhat = out.xhat.data_ptr<double>(), *y = out.y.data_ptr<double>();
  const int64_t d = x.size(-1);
  at::parallel_for(0, RowsOf(x), RowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      OutputRow(px + r * d, pm[r], pr[r], pw, pb, d, xhat + r * d, y + r * d);
    }
  });
  return out;
}

LayerNormRowSums LayerNormGradRowSums(const at::Tensor& g, const at::Tensor& xhat,
                                      const at::Tensor& w_in) {
  const at::Tensor w = w_in.contiguous();
  const double *pg = g.data_ptr<double>(), *px = xhat.data_ptr<double>();
  const double* pw = w.data_ptr<double>();
  const int64_t d = g.size(-1);
  const std::array<at::Tensor, 2> sums =
      RowLaneSums<2>(g, [&](int64_t r, int64_t j0, int64_t count, double* lanes) {
        GradRowSpan(pg + r * d + j0, px + r * d + j0, pw + j0, count, lanes);
      });
  return {sums[0], sums[1]};
}

at::Tensor LayerNormInputGrad(const at::Tensor& g, const at::Tensor& xhat, const at::Tensor& w_in,
                              const at::Tensor& rstd_in, const at::Tensor& mean_g_in,
                              const at::Tensor& mean_gx_in) {
  const at::Tensor w = w_in.contiguous(), rstd = rstd_in.contiguous();
  const at::Tensor mean_g = mean_g_in.contiguous(), mean_gx = mean_gx_in.contiguous();
  at::Tensor out = at::empty_like(g);
  const double *pg = g.data_ptr<double>(), *px = xhat.data_ptr<double>();
  const double *pw = w.data_ptr<double>(), *pr = rstd.data_ptr<double>();
  const double *pm = mean_g.data_ptr<double>(), *pmx = mean_gx.data_ptr<double>();
  double* o = out.data_ptr<double>();
  const int64_t d = g.size(-1);
  at::parallel_for(0, RowsOf(g), RowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      InputGradRow(pg + r * d, px + r * d, pw, pr[r], pm[r], pmx[r], d, o + r * d);
    }
  });
  return out;
}

LayerNormGradAbsSums LayerNormGradAbsSumsOf(const at::Tensor& g, const at::Tensor& xhat,
                                            const at::Tensor& w_in) {
  const at::Tensor w = w_in.contiguous();
  const int64_t d = g.size(-1), rows = RowsOf(g);
  const int64_t tiles = (rows + kAbsTileRows - 1) / kAbsTileRows;
  LayerNormGradAbsSums out{at::empty({rows}, g.options()), at::empty({rows}, g.options()),
                           at::empty({d}, g.options()), at::empty({d}, g.options())};
  // Per row tile: [2, D] column partials, the tile's rows added in order from zero.
  std::vector<double> parts(static_cast<size_t>(tiles * 2 * d), 0.0);
  const double *pg = g.data_ptr<double>(), *px = xhat.data_ptr<double>();
  const double* pw = w.data_ptr<double>();
  double *rgw = out.row_gxhat.data_ptr<double>(), *rgwx = out.row_gxx.data_ptr<double>();
  at::parallel_for(0, tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      double* cx = parts.data() + t * 2 * d;
      for (int64_t r = t * kAbsTileRows; r < std::min(rows, (t + 1) * kAbsTileRows); ++r) {
        AbsSumsRow(pg + r * d, px + r * d, pw, d, rgw + r, rgwx + r, cx, cx + d);
      }
    }
  });
  // The tiles' column partials in tile order.
  double *cx = out.col_gy_xhat.data_ptr<double>(), *cg = out.col_g.data_ptr<double>();
  for (int64_t j = 0; j < d; ++j) {
    cx[j] = tiles > 0 ? parts[static_cast<size_t>(j)] : 0.0;
    cg[j] = tiles > 0 ? parts[static_cast<size_t>(d + j)] : 0.0;
  }
  for (int64_t t = 1; t < tiles; ++t) {
    const double* p = parts.data() + t * 2 * d;
    for (int64_t j = 0; j < d; ++j) {
      cx[j] += p[j];
      cg[j] += p[d + j];
    }
  }
  return out;
}

LayerNormColumnSums LayerNormGradColumnSums(const at::Tensor& g, const at::Tensor& xhat) {
  const int64_t d = g.size(-1), rows = RowsOf(g);
  const SumSplit split = SplitOf(rows);
  const int64_t ranges = static_cast<int64_t>(split.ranges.size());
  // Per range of rows: [2, D] partial sums, each column's rows added in order.
  at::Tensor parts = at::zeros({ranges, 2, d}, g.options());
  double* out = parts.data_ptr<double>();
  const double *pg = g.data_ptr<double>(), *px = xhat.data_ptr<double>();
  constexpr int64_t kColumnBlock = 512;
  at::parallel_for(0, (d + kColumnBlock - 1) / kColumnBlock, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t q = 0; q < ranges; ++q) {
      const auto [first, count] = split.ranges[static_cast<size_t>(q)];
      double* gx = out + q * 2 * d;
      double* gs = gx + d;
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t j0 = blk * kColumnBlock, n = std::min(d, j0 + kColumnBlock) - j0;
        for (int64_t r = first; r < first + count; ++r) {
          ColumnRow(pg + r * d + j0, px + r * d + j0, n, gx + j0, gs + j0);
        }
      }
    }
  });
  std::array<std::vector<at::Tensor>, 2> per_range;
  for (int64_t q = 0; q < ranges; ++q) {
    per_range[0].push_back(parts[q][0]);
    per_range[1].push_back(parts[q][1]);
  }
  return {CombinePartialSums(std::move(per_range[0]), split.pairwise),
          CombinePartialSums(std::move(per_range[1]), split.pairwise)};
}

}  // namespace vt::nn
