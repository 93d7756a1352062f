#include "runtime/nn/magnitude.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/common/helped_for.h"
#include "runtime/nn/context.h"
#include "runtime/nn/planes.h"
#include "runtime/tensor/layout.h"

namespace vt::nn {

namespace {

// One pass over a contiguous [batch, m, k] block collects any of four sums: per row, of the
// squares (row norms) and of the absolute values; per column, the same two. A product's
// backward wants the row and column norms of its incoming gradient and a bias the column sums
// of |g|: one pass instead of three over memory the size of the output.
//
// The block is cut into tiles of kTileRows rows by kTileCols columns, a fixed grid: each
// tile's partial sums are one thread's, in a fixed order (eight lanes across a row, rows in
// order down a column), and the tiles' partials add up in tile order. So the result never
// depends on the thread count or the ISA (no FMA: -ffp-contract=off; lanes are independent).
constexpr int64_t kTileRows = 128, kTileCols = 512;

struct SumsWanted {
  bool row_sq = false, row_abs = false, col_sq = false, col_abs = false;
};

// One tile, rows [i0, i1) and columns [j0, j1): row partials into rsq/rab[i], column partials
// into csq/cab[j] (which start at zero).
template <bool kRowSq, bool kRowAbs, bool kColSq, bool kColAbs>
__attribute__((always_inline)) inline void TileSums(const double* __restrict t, int64_t k,
                                                    int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                                                    double* __restrict rsq, double* __restrict rab,
                                                    double* __restrict csq,
                                                    double* __restrict cab) {
  for (int64_t i = i0; i < i1; ++i) {
    const double* __restrict row = t + i * k;
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8) {
      for (int l = 0; l < 8; ++l) {
        const double v = row[j + l], q = v * v, av = std::fabs(v);
        if (kColSq) csq[j + l] += q;
        if (kColAbs) cab[j + l] += av;
        if (kRowSq) s[l] += q;
        if (kRowAbs) a[l] += av;
      }
    }
    for (; j < j1; ++j) {
      const double v = row[j], q = v * v, av = std::fabs(v);
      if (kColSq) csq[j] += q;
      if (kColAbs) cab[j] += av;
      if (kRowSq) s[0] += q;
      if (kRowAbs) a[0] += av;
    }
    if (kRowSq) rsq[i] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    if (kRowAbs) rab[i] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  }
}

// TileSums for the sums `w` asks for, compiled for AVX-512, AVX2 and the baseline.
__attribute__((target_clones("avx512f", "avx2", "default"))) void TileSumsFor(
    SumsWanted w, const double* t, int64_t k, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
    double* rsq, double* rab, double* csq, double* cab) {
  const int which =
      (w.row_sq ? 1 : 0) | (w.row_abs ? 2 : 0) | (w.col_sq ? 4 : 0) | (w.col_abs ? 8 : 0);
  switch (which) {
#define VT_TILE_SUMS(n)                                                                         \
  case n:                                                                                       \
    TileSums<((n)&1) != 0, ((n)&2) != 0, ((n)&4) != 0, ((n)&8) != 0>(t, k, i0, i1, j0, j1, rsq, \
                                                                     rab, csq, cab);            \
    break;
    VT_TILE_SUMS(1)
    VT_TILE_SUMS(2)
    VT_TILE_SUMS(3)
    VT_TILE_SUMS(4)
    VT_TILE_SUMS(5)
    VT_TILE_SUMS(6)
    VT_TILE_SUMS(7)
    VT_TILE_SUMS(8)
    VT_TILE_SUMS(9)
    VT_TILE_SUMS(10)
    VT_TILE_SUMS(11)
    VT_TILE_SUMS(12)
    VT_TILE_SUMS(13)
    VT_TILE_SUMS(14)
    VT_TILE_SUMS(15)
#undef VT_TILE_SUMS
    default:
      break;
  }
}

// The sums of a contiguous [batch, m, k] block: rsq/rab [batch, m], csq/cab [batch, k] (null
// when not wanted).
void BlockSums(const double* t, int64_t batch, int64_t m, int64_t k, SumsWanted w, double* rsq,
               double* rab, double* csq, double* cab) {
  const int64_t row_tiles = (m + kTileRows - 1) / kTileRows;
  const int64_t col_tiles = (k + kTileCols - 1) / kTileCols;
  const bool rows = w.row_sq || w.row_abs, cols = w.col_sq || w.col_abs;
  // Partials: per column tile for the rows, per row tile for the columns.
  std::vector<double> rpart(rows ? static_cast<size_t>(2 * batch * col_tiles * m) : 0);
  std::vector<double> cpart(cols ? static_cast<size_t>(2 * batch * row_tiles * k) : 0, 0.0);
  const int64_t row_plane = batch * col_tiles * m, col_plane = batch * row_tiles * k;
  HelpedFor(batch * row_tiles * col_tiles, 1, [&](int64_t first, int64_t last) {
    for (int64_t task = first; task < last; ++task) {
      const int64_t b = task / (row_tiles * col_tiles);
      const int64_t rt = (task / col_tiles) % row_tiles, ct = task % col_tiles;
      const int64_t i0 = rt * kTileRows, i1 = std::min(m, i0 + kTileRows);
      const int64_t j0 = ct * kTileCols, j1 = std::min(k, j0 + kTileCols);
      // Row partials of this column tile, column partials of this row tile, both indexed by
      // the block's own i and j.
      double* r = rows ? rpart.data() + (b * col_tiles + ct) * m : nullptr;
      double* c = cols ? cpart.data() + (b * row_tiles + rt) * k : nullptr;
      TileSumsFor(w, t + b * m * k, k, i0, i1, j0, j1, r, r != nullptr ? r + row_plane : nullptr, c,
                  c != nullptr ? c + col_plane : nullptr);
    }
  });
  // Tile partials in tile order.
  auto combine = [](const double* part, int64_t tiles, int64_t n, double* out) {
    for (int64_t x = 0; x < n; ++x) out[x] = part[x];
    for (int64_t tile = 1; tile < tiles; ++tile) {
      for (int64_t x = 0; x < n; ++x) out[x] += part[tile * n + x];
    }
  };
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t rbase = b * col_tiles * m, cbase = b * row_tiles * k;
    if (w.row_sq) combine(rpart.data() + rbase, col_tiles, m, rsq + b * m);
    if (w.row_abs) combine(rpart.data() + row_plane + rbase, col_tiles, m, rab + b * m);
    if (w.col_sq) combine(cpart.data() + cbase, row_tiles, k, csq + b * k);
    if (w.col_abs) combine(cpart.data() + col_plane + cbase, row_tiles, k, cab + b * k);
  }
}

}  // namespace

// From whichever of t and its transpose is laid out contiguously (one copy otherwise);
// float32 and other devices take ATen's expressions.
MatrixNorms NormsOf(const at::Tensor& input, unsigned wanted) {
  at::NoGradGuard no_grad;
  const at::Tensor t = input.detach();
  MatrixNorms out;
  if (t.dim() < 2 || t.scalar_type() != at::kDouble || !t.device().is_cpu()) {
    if (wanted & kRowNorms) out.rows = at::linalg_vector_norm(t, 2, {-1}, /*keepdim=*/true);
    if (wanted & kColNorms) out.cols = at::linalg_vector_norm(t, 2, {-2}, /*keepdim=*/true);
    if (wanted & kRowAbsSums) out.row_abs = t.abs().sum(-1);
    if (wanted & kColAbsSums) out.col_abs = t.abs().sum(-2);
    return out;
  }
  const int64_t m = t.size(-2), k = t.size(-1);
  const int64_t batch = m * k == 0 ? 0 : t.numel() / (m * k);
  const at::TensorOptions contiguous = t.options().memory_format(at::MemoryFormat::Contiguous);
  std::vector<int64_t> row_shape(t.sizes().begin(), t.sizes().end()), col_shape = row_shape;
  row_shape.back() = 1;
  col_shape[col_shape.size() - 2] = 1;
  std::vector<int64_t> row_abs_shape(t.sizes().begin(), t.sizes().end() - 1);
  std::vector<int64_t> col_abs_shape(t.sizes().begin(), t.sizes().end() - 2);
  col_abs_shape.push_back(k);
  // BlockSums writes every sum; an empty t has sums of zero.
  auto make = [&](const std::vector<int64_t>& shape) {
    return t.numel() > 0 ? at::empty(shape, contiguous) : at::zeros(shape, contiguous);
  };
  if (wanted & kRowNorms) out.rows = make(row_shape);
  if (wanted & kColNorms) out.cols = make(col_shape);
  if (wanted & kRowAbsSums) out.row_abs = make(row_abs_shape);
  if (wanted & kColAbsSums) out.col_abs = make(col_abs_shape);
  if (t.numel() > 0) {
    // A transposed contiguous block: rows of t are columns of its transpose.
    const at::Tensor tt = t.transpose(-1, -2);
    bool swapped = false;
    at::Tensor src = t;
    if (!t.is_contiguous() && tt.is_contiguous()) {
      src = tt;
      swapped = true;
    } else if (!t.is_contiguous()) {
      src = t.contiguous();
    }
    auto ptr = [](const at::Tensor& o) { return o.defined() ? o.data_ptr<double>() : nullptr; };
    SumsWanted w;
    double *rsq = ptr(out.rows), *csq = ptr(out.cols);
    double *rab = ptr(out.row_abs), *cab = ptr(out.col_abs);
    if (swapped) {
      std::swap(rsq, csq);
      std::swap(rab, cab);
    }
    w.row_sq = rsq != nullptr;
    w.row_abs = rab != nullptr;
    w.col_sq = csq != nullptr;
    w.col_abs = cab != nullptr;
    BlockSums(src.data_ptr<double>(), batch, src.size(-2), src.size(-1), w, rsq, rab, csq, cab);
  }
  if (out.rows.defined()) out.rows.sqrt_();
  if (out.cols.defined()) out.cols.sqrt_();
  return out;
}

at::Tensor RowNorms(const at::Tensor& t) { return NormsOf(t, kRowNorms).rows; }

at::Tensor ColNorms(const at::Tensor& t) { return NormsOf(t, kColNorms).cols; }

namespace {

at::Tensor PerChannelView(const at::Tensor& t) { return t.reshape({1, -1, 1, 1}); }

}  // namespace

at::Tensor ChannelAbsSum(const at::Tensor& a_in, const at::Tensor& b_in) {
  at::NoGradGuard no_grad;
  const at::Tensor a = a_in.detach(), b = b_in.defined() ? b_in.detach() : at::Tensor();
  if (!(b.defined() ? FusablePlanes({&a, &b}, {}) : FusablePlanes({&a}, {}))) {
    return (b.defined() ? (a * b).abs() : a.abs()).sum({0, 2, 3});
  }
  at::Tensor out = at::zeros({a.size(1)}, a.options());
  const double* pa = a.data_ptr<double>();
  const double* pb = b.defined() ? b.data_ptr<double>() : nullptr;
  double* o = out.data_ptr<double>();
  ForEachPlane(a, [&](int64_t ch, int64_t off, int64_t plane) {
    // Four partial sums, so the loop is not one chain of dependent additions.
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 4 <= plane; i += 4) {
      for (int l = 0; l < 4; ++l) {
        const double v = pa[off + i + l];
        s[l] += std::fabs(pb != nullptr ? v * pb[off + i + l] : v);
      }
    }
    for (; i < plane; ++i)
      s[0] += std::fabs(pb != nullptr ? pa[off + i] * pb[off + i] : pa[off + i]);
    o[ch] += (s[0] + s[1]) + (s[2] + s[3]);
  });
  return out;
}

void OfferAbsPlusChannel(const at::Tensor& y, const at::Tensor& a_in, const at::Tensor& c_in,
                         const at::Tensor& p_in) {
  StepContext* step = StepContext::Current();
  if (step == nullptr || !step->magnitudes_wanted()) return;
  at::NoGradGuard no_grad;
  const at::Tensor a = a_in.detach(), c = c_in.detach().contiguous();
  const at::Tensor p = p_in.defined() ? p_in.detach().contiguous() : at::Tensor();
  const bool fusable = p.defined() ? FusablePlanes({&a}, {&c, &p}) : FusablePlanes({&a}, {&c});
  if (y.is_contiguous() && y.numel() == a.numel() && fusable && a.numel() > 0) {
    step->OfferComputedMagnitude(y, precision::Magnitude(precision::ChannelMagnitude{
                                        a, {}, {}, p, c, {}, a.size(1), a.size(2) * a.size(3)}));
    return;
  }
  step->OfferMagnitude(y, AbsPlusChannel(p.defined() ? a * PerChannelView(p) : a, c));
}

at::Tensor AbsPlusChannel(const at::Tensor& a_in, const at::Tensor& c_in) {
  at::NoGradGuard no_grad;
  const at::Tensor a = a_in.detach(), c = c_in.detach().contiguous();
  if (!FusablePlanes({&a}, {&c})) return a.abs() + PerChannelView(c).abs();
  at::Tensor out = at::empty_like(a);
  const double* pa = a.data_ptr<double>();
  const double* pc = c.data_ptr<double>();
  double* o = out.data_ptr<double>();
  ForEachPlane(a, [&](int64_t ch, int64_t off, int64_t plane) {
    const double cc = std::fabs(pc[ch]);
    for (int64_t i = 0; i < plane; ++i) o[off + i] = std::fabs(pa[off + i]) + cc;
  });
  return out;
}

precision::Magnitude BatchNormInputGradMagnitude(const at::Tensor& g_in, const at::Tensor& xhat_in,
                                                 const at::Tensor& w_in, const at::Tensor& rstd_in,
                                                 const at::Tensor& mean_g_in,
                                                 const at::Tensor& mean_gx_in) {
  at::NoGradGuard no_grad;
  const at::Tensor g = g_in.detach(), xhat = xhat_in.detach();
  const at::Tensor w = w_in.detach().contiguous(), rstd = rstd_in.detach().contiguous();
  const at::Tensor mean_g = mean_g_in.detach().contiguous();
  const at::Tensor mean_gx = mean_gx_in.detach().contiguous();
  if (!FusablePlanes({&g, &xhat}, {&w, &rstd, &mean_g, &mean_gx})) {
    return precision::Magnitude(PerChannelView(rstd) *
                                ((g * PerChannelView(w)).abs() + PerChannelView(mean_g).abs() +
                                 (xhat * PerChannelView(mean_gx)).abs()));
  }
  // Computed where it is used (precision::ChannelMagnitude: rstd (|g w| + |mean_g| + |xhat
  // mean_gx|), the expression's bits).
  return precision::Magnitude(precision::ChannelMagnitude{g, xhat, rstd, w, mean_g, mean_gx,
                                                          g.size(1), g.size(2) * g.size(3)});
}

ParamMagnitudes BatchNormParamMagnitudes(const at::Tensor& g_in, const at::Tensor& xhat_in) {
  at::NoGradGuard no_grad;
  const at::Tensor g = g_in.detach(), xhat = xhat_in.detach();
  if (!FusablePlanes({&g, &xhat}, {})) return {ChannelAbsSum(g, xhat), ChannelAbsSum(g)};
  // The two channel sums in one pass, with ChannelAbsSum's four partial sums.
  const int64_t c = g.size(1);
  ParamMagnitudes out{at::zeros({c}, g.options()), at::zeros({c}, g.options())};
  const double *pg = g.data_ptr<double>(), *px = xhat.data_ptr<double>();
  double *ow = out.w.data_ptr<double>(), *ob = out.b.data_ptr<double>();
  ForEachPlane(g, [&](int64_t ch, int64_t off, int64_t plane) {
    double sw[4] = {0.0, 0.0, 0.0, 0.0}, sb[4] = {0.0, 0.0, 0.0, 0.0};
    auto one = [&](int64_t i, int l) __attribute__((always_inline)) {
      const double gv = pg[off + i], xv = px[off + i];
      sw[l] += std::fabs(gv * xv);
      sb[l] += std::fabs(gv);
    };
    int64_t i = 0;
    for (; i + 4 <= plane; i += 4) {
      for (int l = 0; l < 4; ++l) one(i + l, l);
    }
    for (; i < plane; ++i) one(i, 0);
    ow[ch] += (sw[0] + sw[1]) + (sw[2] + sw[3]);
    ob[ch] += (sb[0] + sb[1]) + (sb[2] + sb[3]);
  });
  return out;
}

namespace {

// Whether t is CPU float64 and contiguous, with at least one dimension.
bool FlatRows(const at::Tensor& t) {
  return t.defined() && t.dim() >= 1 && ContiguousCpuDoubles({&t});
}

// Whether f holds one CPU float64 value per row of a (a's elements over its last size).
bool PerRow(const at::Tensor& f, const at::Tensor& a) {
  return f.defined() && f.device().is_cpu() && f.scalar_type() == at::kDouble &&
         f.is_contiguous() && a.size(-1) > 0 && f.numel() * a.size(-1) == a.numel();
}

// Runs body(row, offset, d) for every row of d values of a contiguous a (d its last size), rows
// split over the calling thread and helpers (HelpedFor) in chunks of about 2^15 values.
template <class Body>
void ForEachRow(const at::Tensor& a, Body&& body) {
  const int64_t d = a.size(-1);
  if (a.numel() == 0) return;
  HelpedFor(a.numel() / d, std::max<int64_t>(1, (int64_t{1} << 15) / d),
            [&](int64_t begin, int64_t end) {
              for (int64_t i = begin; i < end; ++i) body(i, i * d, d);
            });
}

}  // namespace

at::Tensor RowAbsMean(const at::Tensor& t_in) {
  at::NoGradGuard no_grad;
  const at::Tensor t = t_in.detach();
  const double d = static_cast<double>(t.size(-1));
  if (t.dim() < 2) return t.abs().sum(-1, /*keepdim=*/true) / d;
  return NormsOf(t, kRowAbsSums).row_abs.unsqueeze(-1) / d;
}

at::Tensor ColumnAbsSum(const at::Tensor& t_in) {
  at::NoGradGuard no_grad;
  const at::Tensor t = t_in.detach();
  if (t.dim() < 2) return t.abs();
  return NormsOf(t.reshape({-1, t.size(-1)}), kColAbsSums).col_abs;
}

at::Tensor AbsPlusColumn(const at::Tensor& a_in, const at::Tensor& c_in) {
  at::NoGradGuard no_grad;
  const at::Tensor a = a_in.detach(), c = c_in.detach().contiguous();
  if (!FlatRows(a) || !c.device().is_cpu() || c.scalar_type() != at::kDouble ||
      c.numel() != a.size(-1)) {
    return a.abs() + c.abs();
  }
  at::Tensor out = at::empty_like(a);
  const double *pa = a.data_ptr<double>(), *pc = c.data_ptr<double>();
  double* o = out.data_ptr<double>();
  ForEachRow(a, [&](int64_t, int64_t off, int64_t d) {
    for (int64_t j = 0; j < d; ++j) o[off + j] = std::fabs(pa[off + j]) + std::fabs(pc[j]);
  });
  return out;
}

at::Tensor RowAbsSum3(const at::Tensor& r_in, const at::Tensor& a_in, const at::Tensor& q_in,
                      const at::Tensor& b_in) {
  at::NoGradGuard no_grad;
  const at::Tensor a = a_in.detach(), b = b_in.detach();
  const at::Tensor r = r_in.detach(), q = q_in.detach();
  if (!FlatRows(a) || !FlatRows(b) || !b.sizes().equals(a.sizes()) || !PerRow(r, a) ||
      !PerRow(q, a)) {
    return r * ((a.abs() + q.abs()) + b.abs());
  }
  at::Tensor out = at::empty_like(a);
  const double *pa = a.data_ptr<double>(), *pb = b.data_ptr<double>();
  const double *pr = r.data_ptr<double>(), *pq = q.data_ptr<double>();
  double* o = out.data_ptr<double>();
  ForEachRow(a, [&](int64_t i, int64_t off, int64_t d) {
    const double ri = pr[i], qi = std::fabs(pq[i]);
    for (int64_t j = 0; j < d; ++j) {
      o[off + j] = ri * ((std::fabs(pa[off + j]) + qi) + std::fabs(pb[off + j]));
    }
  });
  return out;
}

at::Tensor ProductMagnitude(const at::Tensor& a, const at::Tensor& b) {
  at::NoGradGuard no_grad;
  return RowNorms(a) * ColNorms(b);
}

at::Tensor ZeroMagnitude() { return at::zeros({}, at::kDouble); }

bool IsZeroMagnitude(const at::Tensor& m) { return m.defined() && m.dim() == 0; }

bool IsAgreed(const at::Tensor& x) {
  StepContext* step = StepContext::Current();
  if (step == nullptr || !step->magnitudes_wanted() || !x.defined()) return false;
  const precision::Magnitude m = step->OfferedMagnitudeFor(x);
  return m.defined() && !m.computed() && IsZeroMagnitude(m.values());
}

at::Tensor IncomingMagnitude(const at::Tensor& g) {
  StepContext* step = StepContext::Current();
  at::Tensor m = step != nullptr ? step->OfferedFor(g) : at::Tensor();
  if (m.defined()) return m;
  at::NoGradGuard no_grad;
  return g.detach().abs();
}

void MoveOffer(const at::Tensor& from, const at::Tensor& to, double factor) {
  StepContext* step = StepContext::Current();
  if (step == nullptr || !step->magnitudes_wanted()) return;
  const precision::Magnitude m = step->OfferedMagnitudeFor(from);
  if (!m.defined()) return;
  if (m.is_outer() && m.outer().factor == 1.0) {
    precision::OuterMagnitude scaled = m.outer();
    scaled.factor = factor;  // fl(m * factor) per element, as the expression below
    step->OfferComputedMagnitude(to, precision::Magnitude(std::move(scaled)));
    return;
  }
  step->OfferMagnitude(to, (m.computed() ? m.Materialize(from) : m.values()) * factor);
}

void OfferProductMagnitude(const at::Tensor& y, int64_t rows, int64_t cols, const at::Tensor& row,
                           const at::Tensor& col, const at::Tensor& add, bool add_per_row) {
  StepContext* step = StepContext::Current();
  if (step == nullptr || !step->magnitudes_wanted()) return;
  at::NoGradGuard no_grad;
  const int64_t per_batch = rows * cols;
  const int64_t batch = per_batch > 0 ? y.numel() / per_batch : 0;
  const bool outer = per_batch > 0 && batch * per_batch == y.numel() && y.is_contiguous() &&
                     precision::FlatDoubles(row, rows, batch) &&
                     precision::FlatDoubles(col, cols, batch) &&
                     (!add.defined() || precision::FlatDoubles(add, add_per_row ? rows : cols));
  if (outer) {
    precision::OuterMagnitude o;
    o.row = row;
    o.col = col;
    o.add = add;
    o.add_per_row = add_per_row;
    o.batch = batch;
    o.rows = rows;
    o.cols = cols;
    step->OfferComputedMagnitude(y, precision::Magnitude(std::move(o)));
    return;
  }
  at::Tensor m = row * col;
  if (add.defined()) m.add_(add);
  step->OfferMagnitude(y, m.reshape(y.sizes()));
}

void AddGradOuterMagnitude(const at::Tensor& parameter, const at::Tensor& row_in,
                           const at::Tensor& col_in) {
  if (!MagnitudesWanted()) return;
  at::NoGradGuard no_grad;
  const at::Tensor row = row_in.detach(), col = col_in.detach();
  const int64_t rows = row.numel(), cols = col.numel();
  if (rows * cols != parameter.numel()) {
    throw Error("a gradient magnitude's factors (" + std::to_string(rows) + " x " +
                std::to_string(cols) + " = " + std::to_string(rows * cols) +
                " values) do not cover the parameter's " + std::to_string(parameter.numel()) +
                " elements");
  }
  if (rows > 0 && cols > 0 && precision::FlatDoubles(row, rows) &&
      precision::FlatDoubles(col, cols)) {
    precision::OuterMagnitude o;
    o.row = row;
    o.col = col;
    o.rows = rows;
    o.cols = cols;
    AddGradMagnitude(parameter, precision::Magnitude(std::move(o)));
    return;
  }
  AddGradMagnitude(parameter, row.reshape({-1, 1}) * col.reshape({1, -1}));
}

void OfferAbsMagnitude(const at::Tensor& y, const at::Tensor& a, const at::Tensor& mul) {
  StepContext* step = StepContext::Current();
  if (step == nullptr || !step->magnitudes_wanted()) return;
  at::NoGradGuard no_grad;
  const int64_t n = y.numel();
  if (y.is_contiguous() && precision::FlatDoubles(a, n) &&
      (!mul.defined() || precision::FlatDoubles(mul, n))) {
    step->OfferComputedMagnitude(y, precision::Magnitude(precision::AbsMagnitude{a, mul}));
    return;
  }
  at::Tensor m = a.abs();
  if (mul.defined()) m.mul_(mul);
  step->OfferMagnitude(y, m);
}

}  // namespace vt::nn
