#include "runtime/nn/magnitude.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "runtime/nn/context.h"
#include "runtime/tensor/layout.h"

namespace vt::nn {

namespace {

// Sums of squares of the rows of a contiguous [batch, m, k] block: out[b, i] = sum_j t[b,i,j]^2.
// Each output is one thread's sequential sum (the result never depends on the thread count).
void RowSquares(const double* t, int64_t rows, int64_t k, double* out) {
  at::parallel_for(0, rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(k, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       const double* row = t + r * k;
                       // Four partial sums: the loop vectorizes without -ffast-math.
                       double s[4] = {0.0, 0.0, 0.0, 0.0};
                       int64_t j = 0;
                       for (; j + 4 <= k; j += 4) {
                         for (int l = 0; l < 4; ++l) s[l] += row[j + l] * row[j + l];
                       }
                       for (; j < k; ++j) s[0] += row[j] * row[j];
                       out[r] = (s[0] + s[1]) + (s[2] + s[3]);
                     }
                   });
}

// Sums of squares of the columns of a contiguous [batch, m, k] block: out[b, j] = sum_i t[b,i,j]^2,
// accumulated row by row so the inner loop runs along contiguous memory. Threads take blocks
// of columns (each column's sum is one thread's, in row order: the same bits on any count).
void ColSquares(const double* t, int64_t batch, int64_t m, int64_t k, double* out) {
  constexpr int64_t kColumns = 512;  // columns per task: 4 KiB of accumulators
  const int64_t chunks = (k + kColumns - 1) / kColumns;
  at::parallel_for(0, batch * chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t task = first; task < last; ++task) {
      const int64_t b = task / chunks, j0 = (task % chunks) * kColumns;
      const int64_t j1 = std::min(k, j0 + kColumns);
      const double* block = t + b * m * k;
      double* __restrict acc = out + b * k;
      for (int64_t j = j0; j < j1; ++j) acc[j] = 0.0;
      for (int64_t i = 0; i < m; ++i) {
        const double* __restrict row = block + i * k;
        for (int64_t j = j0; j < j1; ++j) acc[j] += row[j] * row[j];
      }
    }
  });
}

// The norms of t's rows (over_rows) or columns (else), [..., m, 1] or [..., 1, n], from
// whichever of t and its transpose is laid out contiguously (one copy otherwise).
at::Tensor Norms(const at::Tensor& input, bool over_last) {
  at::NoGradGuard no_grad;
  at::Tensor t = input.detach();
  if (t.dim() < 2 || t.scalar_type() != at::kDouble || !t.device().is_cpu()) {
    return at::linalg_vector_norm(t, 2, {over_last ? -1 : -2}, /*keepdim=*/true);
  }
  const int64_t m = t.size(-2), k = t.size(-1);
  const int64_t batch = m * k == 0 ? 0 : t.numel() / (m * k);
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  shape[shape.size() - (over_last ? 1 : 2)] = 1;
  at::Tensor out = at::empty(shape, t.options().memory_format(at::MemoryFormat::Contiguous));
  if (out.numel() == 0) return out;
  if (t.numel() == 0) return out.zero_();
  // A transposed contiguous block: rows of t are columns of its transpose.
  const at::Tensor tt = t.transpose(-1, -2);
  bool rows = over_last;
  at::Tensor src = t;
  if (!t.is_contiguous() && tt.is_contiguous()) {
    src = tt;
    rows = !over_last;
  } else if (!t.is_contiguous()) {
    src = t.contiguous();
  }
  const int64_t sm = src.size(-2), sk = src.size(-1);
  double* o = out.data_ptr<double>();
  if (rows) {
    RowSquares(src.data_ptr<double>(), batch * sm, sk, o);
  } else {
    ColSquares(src.data_ptr<double>(), batch, sm, sk, o);
  }
  return out.sqrt_();
}

}  // namespace

at::Tensor RowNorms(const at::Tensor& t) { return Norms(t, /*over_last=*/true); }

at::Tensor ColNorms(const at::Tensor& t) { return Norms(t, /*over_last=*/false); }

namespace {

// Whether the fused batch-norm loops apply: contiguous CPU float64 [N, C, H, W] tensors and
// per-channel factors of C values.
bool Fusable(std::initializer_list<const at::Tensor*> maps,
             std::initializer_list<const at::Tensor*> factors) {
  const at::Tensor& first = **maps.begin();
  if (first.dim() != 4 || !ContiguousCpuDoubles(maps)) return false;
  for (const at::Tensor* t : factors) {
    if (!t->defined() || !t->device().is_cpu() || t->scalar_type() != at::kDouble ||
        t->numel() != first.size(1)) {
      return false;
    }
  }
  return true;
}

at::Tensor PerChannelView(const at::Tensor& t) { return t.reshape({1, -1, 1, 1}); }

// Runs body(ch, offset, plane) for every (image, channel) plane of an [N, C, H, W] tensor,
// channels split over threads (each channel's planes in image order on one thread).
template <class Body>
void ForEachPlane(const at::Tensor& t, Body&& body) {
  const int64_t n = t.size(0), c = t.size(1), plane = t.size(2) * t.size(3);
  at::parallel_for(0, c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      for (int64_t img = 0; img < n; ++img) body(ch, (img * c + ch) * plane, plane);
    }
  });
}

}  // namespace

at::Tensor ChannelAbsSum(const at::Tensor& a_in, const at::Tensor& b_in) {
  at::NoGradGuard no_grad;
  const at::Tensor a = a_in.detach(), b = b_in.defined() ? b_in.detach() : at::Tensor();
  if (!(b.defined() ? Fusable({&a, &b}, {}) : Fusable({&a}, {}))) {
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

at::Tensor AbsPlusChannel(const at::Tensor& a_in, const at::Tensor& c_in) {
  at::NoGradGuard no_grad;
  const at::Tensor a = a_in.detach(), c = c_in.detach().contiguous();
  if (!Fusable({&a}, {&c})) return a.abs() + PerChannelView(c).abs();
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

at::Tensor BatchNormInputGradMagnitude(const at::Tensor& g_in, const at::Tensor& xhat_in,
                                       const at::Tensor& w_in, const at::Tensor& rstd_in,
                                       const at::Tensor& mean_g_in, const at::Tensor& mean_gx_in) {
  at::NoGradGuard no_grad;
  const at::Tensor g = g_in.detach(), xhat = xhat_in.detach();
  const at::Tensor w = w_in.detach().contiguous(), rstd = rstd_in.detach().contiguous();
  const at::Tensor mean_g = mean_g_in.detach().contiguous();
  const at::Tensor mean_gx = mean_gx_in.detach().contiguous();
  if (!Fusable({&g, &xhat}, {&w, &rstd, &mean_g, &mean_gx})) {
    return PerChannelView(rstd) * ((g * PerChannelView(w)).abs() + PerChannelView(mean_g).abs() +
                                   (xhat * PerChannelView(mean_gx)).abs());
  }
  at::Tensor out = at::empty_like(g);
  const double *pg = g.data_ptr<double>(), *px = xhat.data_ptr<double>();
  const double *pw = w.data_ptr<double>(), *pr = rstd.data_ptr<double>();
  const double *pm = mean_g.data_ptr<double>(), *pmx = mean_gx.data_ptr<double>();
  double* o = out.data_ptr<double>();
  ForEachPlane(g, [&](int64_t ch, int64_t off, int64_t plane) {
    const double wc = pw[ch], rc = pr[ch], mc = std::fabs(pm[ch]), mxc = pmx[ch];
    for (int64_t i = 0; i < plane; ++i) {
      o[off + i] = rc * (std::fabs(pg[off + i] * wc) + mc + std::fabs(px[off + i] * mxc));
    }
  });
  return out;
}

namespace {

__attribute__((target_clones("avx512f", "avx2", "default"))) void GeluTermsLoop(
    const double* x, const double* y, double* out, int64_t begin, int64_t end) {
  constexpr double kBeta = 0.7978845608028654;  // sqrt(2 / pi)
  constexpr double kCubic = 0.044715;
  for (int64_t i = begin; i < end; ++i) {
    const double xi = x[i], a = std::fabs(xi);
    // t = tanh(k (x + c x^3)) from y = x (1 + t) / 2; x = 0 gives 0 / 0, whose t is 0.
    double t = xi != 0.0 ? 2.0 * y[i] / xi - 1.0 : 0.0;
    t = t > 1.0 ? 1.0 : t < -1.0 ? -1.0 : t;
    const double at = t < 0.0 ? -t : t;
    out[i] = (0.5 + 0.5 * at) + 0.5 * a * (1.0 - t * t) * kBeta * (1.0 + 3.0 * kCubic * (a * a));
  }
}

}  // namespace

at::Tensor GeluGradTerms(const at::Tensor& x_in, const at::Tensor& y_in) {
  at::NoGradGuard no_grad;
  const at::Tensor x = x_in.detach(), y = y_in.detach();
  if (!ContiguousCpuDoubles({&x, &y})) {
    return at::gelu_backward(at::ones_like(x), x.abs(), "tanh");
  }
  at::Tensor out = at::empty_like(x);
  const double *px = x.data_ptr<double>(), *py = y.data_ptr<double>();
  double* o = out.data_ptr<double>();
  at::parallel_for(0, x.numel(), int64_t{1} << 15,
                   [&](int64_t begin, int64_t end) { GeluTermsLoop(px, py, o, begin, end); });
  return out;
}

at::Tensor ProductMagnitude(const at::Tensor& a, const at::Tensor& b) {
  at::NoGradGuard no_grad;
  return RowNorms(a) * ColNorms(b);
}

at::Tensor ZeroMagnitude() { return at::zeros({}, at::kDouble); }

bool IsZeroMagnitude(const at::Tensor& m) { return m.defined() && m.dim() == 0; }

at::Tensor IncomingMagnitude(const at::Tensor& g) {
  StepContext* step = StepContext::Current();
  at::Tensor m = step != nullptr ? step->OfferedFor(g) : at::Tensor();
  if (m.defined()) return m;
  at::NoGradGuard no_grad;
  return g.detach().abs();
}

at::Tensor Materialized(const at::Tensor& m, const at::Tensor& like) {
  return IsZeroMagnitude(m) ? at::zeros(like.sizes(), like.options().dtype(at::kDouble)) : m;
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
