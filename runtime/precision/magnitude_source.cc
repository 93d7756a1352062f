#include "runtime/precision/magnitude_source.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/common/error.h"

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

int64_t Magnitude::numel() const {
  switch (kind_) {
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
  at::parallel_for(0, out.numel(), int64_t{1} << 15,
                   [&](int64_t begin, int64_t end) { Fill(begin, end - begin, p + begin); });
  return out;
}

}  // namespace vt::precision
