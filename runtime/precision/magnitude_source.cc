#include "runtime/precision/magnitude_source.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/common/error.h"
#include "runtime/common/helped_for.h"

namespace vt::precision {
namespace {

// The run loops, compiled for AVX-512, AVX2 and plain x86-64 (products and sums are
// correctly rounded at every width, and -ffp-contract=off keeps them separate: same bits).
#define VT_MAGNITUDE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// dst[k] = fl(fl(r * col[k]) + add[k]) (add per column; null: none), then fl(dst[k] * factor)
// when factor != 1.
VT_MAGNITUDE_CLONES void RunWithColumnAdd(double r, const double* col, const double* add,
                                          double factor, int64_t n, double* dst) {
  if (add == nullptr) {
    for (int64_t k = 0; k < n; ++k) dst[k] = r * col[k];
  } else {
    for (int64_t k = 0; k < n; ++k) dst[k] = r * col[k] + add[k];
  }
  if (factor != 1.0) {
    for (int64_t k = 0; k < n; ++k) dst[k] = dst[k] * factor;
  }
}

// dst[k] = fl(fl(r * col[k]) + a), then fl(dst[k] * factor) when factor != 1.
VT_MAGNITUDE_CLONES void RunWithRowAdd(double r, const double* col, double a, double factor,
                                       int64_t n, double* dst) {
  for (int64_t k = 0; k < n; ++k) dst[k] = r * col[k] + a;
  if (factor != 1.0) {
    for (int64_t k = 0; k < n; ++k) dst[k] = dst[k] * factor;
  }
}

// dst[k] = |a[k]|, or fl(|a[k]| * mul[k]).
VT_MAGNITUDE_CLONES void AbsRun(const double* a, const double* mul, int64_t n, double* dst) {
  if (mul == nullptr) {
    for (int64_t k = 0; k < n; ++k) dst[k] = std::fabs(a[k]);
  } else {
    for (int64_t k = 0; k < n; ++k) dst[k] = std::fabs(a[k]) * mul[k];
  }
}

// dst[k] = fl(r * fl(fl(|fl(a[k] * p)| + q) + |fl(b[k] * s)|)) (q >= 0), without the b term
// when b is null.
VT_MAGNITUDE_CLONES void ChannelRun(const double* a, const double* b, double r, double p, double q,
                                    double s, int64_t n, double* dst) {
  if (b == nullptr) {
    for (int64_t k = 0; k < n; ++k) dst[k] = r * (std::fabs(a[k] * p) + q);
  } else {
    for (int64_t k = 0; k < n; ++k) dst[k] = r * ((std::fabs(a[k] * p) + q) + std::fabs(b[k] * s));
  }
}

// Throws vt::Error, naming `what`, unless t is a flat float64 factor of n or n * batch values.
void RequireFactor(const at::Tensor& t, const char* what, int64_t n, int64_t batch) {
  if (FlatDoubles(t, n, batch)) return;
  if (!t.defined()) throw Error(std::string(what) + " is undefined");
  if (!t.device().is_cpu() || t.scalar_type() != at::kDouble || !t.is_contiguous()) {
    throw Error(std::string(what) + " must be a contiguous CPU float64 tensor");
  }
  throw Error(std::string(what) + " has " + std::to_string(t.numel()) + " elements, expected " +
              std::to_string(n) + " or " + std::to_string(n * batch));
}

}  // namespace

namespace {

// Whether n values are finite and >= 0, and their largest (0 for none) into *max.
bool FiniteNonNegative(const double* v, int64_t n, double* max) {
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (!(v[i] >= 0.0) || !std::isfinite(v[i])) return false;
    m = std::max(m, v[i]);
  }
  *max = m;
  return true;
}

}  // namespace

OuterBound::OuterBound(const OuterMagnitude& o) : o_(&o) {
  if (o.rows <= 0 || o.cols <= 0 || o.batch <= 0) return;
  double unused = 0.0;
  if (!FiniteNonNegative(o.row.data_ptr<double>(), o.row.numel(), &unused)) return;
  const double* col = o.col.data_ptr<double>();
  const int64_t col_sets = o.col.numel() == o.cols ? 1 : o.batch;
  col_max_.resize(static_cast<size_t>(col_sets));
  for (int64_t b = 0; b < col_sets; ++b) {
    if (!FiniteNonNegative(col + b * o.cols, o.cols, &col_max_[static_cast<size_t>(b)])) return;
  }
  if (o.add.defined()) {
    if (!FiniteNonNegative(o.add.data_ptr<double>(), o.add.numel(), &add_max_)) return;
  }
  valid_ = true;
}

double OuterBound::Over(int64_t begin, int64_t count) const {
  const OuterMagnitude& o = *o_;
  const double* row = o.row.data_ptr<double>();
  const double* add = o.add.defined() ? o.add.data_ptr<double>() : nullptr;
  const int64_t row_stride = o.row.numel() == o.rows ? 0 : o.rows;
  const int64_t first = begin / o.cols, last = (begin + count - 1) / o.cols;  // rows of all batches
  double bound = 0.0;
  for (int64_t q = first; q <= last; ++q) {
    const int64_t b = q / o.rows, i = q % o.rows;
    const double c = col_max_[col_max_.size() == 1 ? 0 : static_cast<size_t>(b)];
    double m = row[b * row_stride + i] * c;
    if (add != nullptr) m = m + (o.add_per_row ? add[i] : add_max_);
    if (o.factor != 1.0) m = m * o.factor;
    bound = std::max(bound, m);
  }
  return bound;
}

bool FlatDoubles(const at::Tensor& t, int64_t n, int64_t batch) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == at::kDouble &&
         t.is_contiguous() && (t.numel() == n || t.numel() == n * batch);
}

Magnitude::Magnitude(at::Tensor values) : values_(std::move(values)) {}

Magnitude::Magnitude(OuterMagnitude outer) : kind_(Kind::kOuter), outer_(std::move(outer)) {
  const OuterMagnitude& o = outer_;
  if (o.batch < 0 || o.rows < 0 || o.cols < 0) {
    throw Error("outer magnitude: batch, rows and cols must be >= 0");
  }
  RequireFactor(o.row, "outer magnitude: row factor", o.rows, o.batch);
  RequireFactor(o.col, "outer magnitude: column factor", o.cols, o.batch);
  if (o.add.defined()) {
    const int64_t n = o.add_per_row ? o.rows : o.cols;
    RequireFactor(o.add, "outer magnitude: added term", n, 1);
  }
  if (!(std::isfinite(o.factor) && o.factor > 0.0)) {
    throw Error("outer magnitude: factor must be finite and > 0");
  }
}

Magnitude::Magnitude(AbsMagnitude abs) : kind_(Kind::kAbs), abs_(std::move(abs)) {
  RequireFactor(abs_.a, "absolute magnitude: tensor", abs_.a.defined() ? abs_.a.numel() : 0, 1);
  if (abs_.mul.defined()) RequireFactor(abs_.mul, "absolute magnitude: factor", abs_.a.numel(), 1);
}

Magnitude::Magnitude(ChannelMagnitude channel)
    : kind_(Kind::kChannel), channel_(std::move(channel)) {
  const ChannelMagnitude& c = channel_;
  const int64_t n = c.a.defined() ? c.a.numel() : 0;
  RequireFactor(c.a, "channel magnitude: tensor", n, 1);
  if (c.channels <= 0 || c.plane <= 0 || n % (c.channels * c.plane) != 0) {
    throw Error("channel magnitude: " + std::to_string(n) + " elements are not images of " +
                std::to_string(c.channels) + " channels of " + std::to_string(c.plane) + " values");
  }
  if (c.b.defined()) RequireFactor(c.b, "channel magnitude: second tensor", n, 1);
  RequireFactor(c.q, "channel magnitude: added term", c.channels, 1);
  if (c.r.defined()) RequireFactor(c.r, "channel magnitude: scale", c.channels, 1);
  if (c.p.defined()) RequireFactor(c.p, "channel magnitude: factor", c.channels, 1);
  if (c.b.defined()) RequireFactor(c.s, "channel magnitude: second factor", c.channels, 1);
}

int64_t Magnitude::numel() const {
  switch (kind_) {
    case Kind::kChannel:
      return channel_.a.numel();
    case Kind::kOuter:
      return outer_.batch * outer_.rows * outer_.cols;
    case Kind::kAbs:
      return abs_.a.numel();
    default:
      return values_.defined() ? values_.numel() : 0;
  }
}

void Magnitude::Fill(int64_t begin, int64_t count, double* out) const {
  if (count <= 0) return;
  if (kind_ == Kind::kChannel) {
    const ChannelMagnitude& c = channel_;
    const double* a = c.a.data_ptr<double>();
    const double* b = c.b.defined() ? c.b.data_ptr<double>() : nullptr;
    const double* r = c.r.defined() ? c.r.data_ptr<double>() : nullptr;
    const double* p = c.p.defined() ? c.p.data_ptr<double>() : nullptr;
    const double* q = c.q.data_ptr<double>();
    const double* s = b != nullptr ? c.s.data_ptr<double>() : nullptr;
    for (int64_t done = 0; done < count;) {
      const int64_t i = begin + done;
      const int64_t ch = (i / c.plane) % c.channels;
      const int64_t run = std::min(c.plane - i % c.plane, count - done);
      ChannelRun(a + i, b != nullptr ? b + i : nullptr, r != nullptr ? r[ch] : 1.0,
                 p != nullptr ? p[ch] : 1.0, std::fabs(q[ch]), s != nullptr ? s[ch] : 0.0, run,
                 out + done);
      done += run;
    }
    return;
  }
  if (kind_ == Kind::kAbs) {
    AbsRun(abs_.a.data_ptr<double>() + begin,
           abs_.mul.defined() ? abs_.mul.data_ptr<double>() + begin : nullptr, count, out);
    return;
  }
  const OuterMagnitude& o = outer_;
  const double* row = o.row.data_ptr<double>();
  const double* col = o.col.data_ptr<double>();
  const double* add = o.add.defined() ? o.add.data_ptr<double>() : nullptr;
  const int64_t row_stride = o.row.numel() == o.rows ? 0 : o.rows;  // per batch
  const int64_t col_stride = o.col.numel() == o.cols ? 0 : o.cols;
  const int64_t per_batch = o.rows * o.cols;
  int64_t b = begin / per_batch, i = (begin % per_batch) / o.cols, j = begin % o.cols;
  int64_t done = 0;
  while (done < count) {
    const int64_t run = std::min(o.cols - j, count - done);
    const double r = row[b * row_stride + i];
    const double* c = col + b * col_stride + j;
    if (add != nullptr && o.add_per_row) {
      RunWithRowAdd(r, c, add[i], o.factor, run, out + done);
    } else {
      RunWithColumnAdd(r, c, add != nullptr ? add + j : nullptr, o.factor, run, out + done);
    }
    done += run;
    j = 0;
    if (++i == o.rows) {
      i = 0;
      ++b;
    }
  }
}

double Magnitude::At(int64_t i) const {
  if (!computed()) return values_.data_ptr<double>()[i];
  double m = 0.0;
  Fill(i, 1, &m);
  return m;
}

at::Tensor Magnitude::Materialize(const at::Tensor& like) const {
  if (!computed()) return values_;
  at::Tensor out = at::empty(like.sizes(), like.options().dtype(at::kDouble));
  if (out.numel() != numel()) {
    throw Error("magnitude: covers " + std::to_string(numel()) + " elements, the tensor has " +
                std::to_string(out.numel()));
  }
  double* p = out.data_ptr<double>();
  HelpedFor(out.numel(), int64_t{1} << 15,
            [&](int64_t begin, int64_t end) { Fill(begin, end - begin, p + begin); });
  return out;
}

}  // namespace vt::precision
