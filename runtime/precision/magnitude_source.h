// Where the round and replay kernels read a per-element magnitude from (round.h,
// ROUNDING.md "The window", "Magnitudes"): an array with one value per element, the outer
// product of two factors that a matrix product hands over instead of writing it out, or the
// absolute values of another tensor (times a third), as an activation's magnitude follows
// its input.
//
// A product's magnitude m_ij = ||a_i|| ||b_j|| (+ |bias|) is as large as its output; written
// out, it costs a pass of stores and a pass of loads over memory the size of the output.
// Given as factors, the kernels compute each block's magnitudes into a buffer that stays in
// the L1 cache, with the same IEEE-754 operations in the same order as the tensor expression
// (so the same bits; tests/precision/magnitude_source_test.cc):
//
//   x viewed as [batch, rows, cols] (row-major), element (b, i, j):
//     m = fl(row[b, i] * col[b, j])            row/col: [batch, n] or [1, n] (shared by all b)
//     m = fl(m + add[i])  or  fl(m + add[j])   when `add` is given (per row or per column)
//     m = fl(m * factor)                       when factor != 1
//
// An absolute magnitude (AbsMagnitude) is m[i] = |a[i]|, or fl(|a[i]| * mul[i]) with `mul`:
// GELU's output takes |x| of its input, its input gradient |g| times its derivative's terms.
//
// A channel magnitude (ChannelMagnitude) over an [N, C, H, W] tensor, element i in channel
// c = (i / plane) % C, is batch norm's (its output's and its input gradient's):
//   m = fl(r_c * fl(fl(|fl(a[i] * p_c)| + |q_c|) + |fl(b[i] * s_c)|))
// where an undefined r or p is 1 (a product by 1 is exact) and without b the last term is
// left out: |a| + |q_c| for the output, rstd (|g w| + |mean_g| + |xhat mean_gx|) for the
// input gradient.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace vt::precision {

struct OuterMagnitude {
  at::Tensor row;  // float64, [batch, rows] or [1, rows] (any shape with that many elements)
  at::Tensor col;  // float64, [batch, cols] or [1, cols]
  at::Tensor add;  // optional float64, [rows] (add_per_row) or [cols], >= 0
  bool add_per_row = false;
  double factor = 1.0;  // finite, > 0
  int64_t batch = 1, rows = 0, cols = 0;
};

struct AbsMagnitude {
  at::Tensor a;    // float64, contiguous
  at::Tensor mul;  // optional float64, contiguous, a's element count, >= 0
};

struct ChannelMagnitude {
  at::Tensor a;                     // float64, contiguous, [N, C, H, W] in that order
  at::Tensor b;                     // optional float64, contiguous, a's element count
  at::Tensor r, p, q, s;            // float64 [C]: q required, s with b, r and p optional
  int64_t channels = 0, plane = 0;  // C and H * W
};

// Whether t is defined, a contiguous CPU float64 tensor, and holds n or n * batch values: a
// factor the kernels can read as a flat array (what the constructors below require).
bool FlatDoubles(const at::Tensor& t, int64_t n, int64_t batch = 1);

// Upper bounds of an outer magnitude over runs of its elements: Over(begin, count) >= the
// magnitude of every element in [begin, begin + count), computed as the elements' own are
// (fl(fl(fl(row * col) + add) * factor), each rounding monotone) from the run's largest row
// factor and the largest column factor and added term. The bounded kernels use it to skip an
// element's magnitude where even the bound leaves it far from its window. valid() when every
// factor is finite and >= 0 (then so is every element's magnitude, up to overflow, which the
// bound shows as infinity); otherwise the caller fills the magnitudes, whose check reports them.
class OuterBound {
 public:
  OuterBound() = default;
  explicit OuterBound(const OuterMagnitude& o);
  bool valid() const { return valid_; }
  double Over(int64_t begin, int64_t count) const;

 private:
  const OuterMagnitude* o_ = nullptr;
  std::vector<double> col_max_;  // per batch (one value when the column factor is shared)
  double add_max_ = 0.0;         // the largest added term per column
  bool valid_ = false;
};

class Magnitude {
 public:
  Magnitude() = default;
  // Implicit, so that callers holding a tensor pass it as before.
  Magnitude(at::Tensor values);  // NOLINT(google-explicit-constructor)
  // Throw vt::Error for factors of the wrong dtype, device, layout or size.
  explicit Magnitude(OuterMagnitude outer);
  explicit Magnitude(AbsMagnitude abs);
  explicit Magnitude(ChannelMagnitude channel);

  bool defined() const { return kind_ != Kind::kArray || values_.defined(); }
  // Computed block by block (an outer product or absolute values), not read from an array.
  bool computed() const { return kind_ != Kind::kArray; }
  bool is_outer() const { return kind_ == Kind::kOuter; }
  // The array (undefined for a computed magnitude).
  const at::Tensor& values() const { return values_; }
  const OuterMagnitude& outer() const { return outer_; }
  // Elements covered: the array's, batch * rows * cols, or a's.
  int64_t numel() const;
  // Magnitudes of the elements [begin, begin + count) into out (computed magnitudes only).
  void Fill(int64_t begin, int64_t count, double* out) const;
  // One element's magnitude.
  double At(int64_t i) const;
  // The magnitudes as a tensor with `like`'s shape (the array itself when it has the size).
  at::Tensor Materialize(const at::Tensor& like) const;

 private:
  enum class Kind { kArray, kOuter, kAbs, kChannel };
  Kind kind_ = Kind::kArray;
  at::Tensor values_;
  OuterMagnitude outer_;
  AbsMagnitude abs_;
  ChannelMagnitude channel_;
};

}  // namespace vt::precision
