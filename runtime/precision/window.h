// The per-element arithmetic of ROUNDING.md, for one finite FP64 value: the b-grid
// neighbours lo/hi, rnd_b, the spacing, the midpoint and the logging-window test.
//
// Everything here is branch-free integer work on the FP64 bit pattern plus IEEE-754
// additions, subtractions and multiplications. The same inline functions are used by the
// vectorized kernels (kernels.cc), by the error scans and by the scalar helpers, so every
// path agrees bit for bit. They assume the IEEE default floating-point environment: round
// to nearest even, no flush-to-zero or denormals-are-zero (vtrun never changes it). No
// ATen, no allocation; all functions are pure and thread-safe.
//
// How rnd_b is computed. Let a = |x|, e = its binary exponent clamped below at -126 (FP32
// subnormals and the smallest normal binade share one spacing), and g = 2^(e - 23 + k) with
// k = 32 - b: g is the b-grid spacing at a. Adding C = g * 2^52 puts a + C in the binade
// [C, 2C), whose FP64 ulp is exactly g, so the hardware addition rounds a to the nearest
// multiple of g with ties to the even multiple, and (a + C) - C is that multiple, exactly.
// "Even multiple of g" is "lowest kept bit 0" of the FP32 pattern (k <= 22), and a carry to
// the next power of two comes out right, so this is rnd_b(a); for b = 32 it is
// (double)(float)a. Signs are handled on magnitudes: for x < 0, lo(x) = -hi(|x|).
//
// The window test |a - mid| <= w is evaluated exactly: for a >= g/4 the subtraction a - mid
// is exact (Sterbenz: mid/2 <= a <= 2 mid); for a < g/4 (only possible with lo = 0) it is
// evaluated as mid - w <= a, which is exact or sign-correct in every case where it can
// decide the outcome (w in [g/4, g] makes mid - w exact; other w decide it either way).
#pragma once

#include <cstdint>
#include <cstring>

#define VT_PRECISION_INLINE inline __attribute__((always_inline))

namespace vt::precision {

// 2^128: the FP32 overflow threshold. A value whose rnd_b reaches it is out of range.
constexpr double kFp32Overflow = 0x1p128;

constexpr uint64_t kSignBit = 0x8000000000000000ull;

// Biased FP64 exponent of 2^-126 (the smallest FP32 normal): below it the grid is uniform.
constexpr uint64_t kMinNormalExponent = 1023 - 126;

VT_PRECISION_INLINE uint64_t DoubleBits(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

VT_PRECISION_INLINE double BitsDouble(uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

VT_PRECISION_INLINE uint32_t FloatBits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

VT_PRECISION_INLINE float BitsFloat(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The grid geometry around one magnitude a = |x| (a finite, non-negative FP64 value).
// All fields are magnitudes; `up` says rnd_b(a) = hi(a) (false when a is on the grid).
struct Cell {
  double r;    // rnd_b(a). >= kFp32Overflow (or NaN for NaN/Inf input) means out of range.
  double g;    // the grid spacing at a (for a on the grid: the step above a). A power of 2.
  double mid;  // (lo + hi) / 2 when a is off the grid. Exact.
  bool on_grid;
  bool up;
};

// rnd_b and the cell of a = |x| for k = 32 - b in [0, 22]. Branch-free.
VT_PRECISION_INLINE Cell CellOf(double a, uint64_t k) {
  uint64_t e = DoubleBits(a) >> 52;
  e = e < kMinNormalExponent ? kMinNormalExponent : e;
  // For Inf/NaN/huge inputs these exponent fields are garbage, but then r is not below
  // kFp32Overflow and the caller raises the range error; unsigned arithmetic has no UB.
  const double c = BitsDouble((e + k + 29) << 52);  // g * 2^52
  const double g = BitsDouble((e + k - 23) << 52);  // 2^(e - 1023 - 23 + k)
  const double r = (a + c) - c;
  Cell cell;
  cell.r = r;
  cell.g = g;
  cell.up = r > a;
  cell.on_grid = r == a;
  // mid = r - g/2 if rounded up, else r + g/2 (exact: r and g/2 are multiples of g/2 of
  // modest size). Written as a sign flip so that the vectorizer sees no branch.
  cell.mid = r + BitsDouble(DoubleBits(0.5 * g) ^ (static_cast<uint64_t>(cell.up) << 63));
  return cell;
}

// |a - mid| <= w, exactly (see the file comment). a, mid, g from CellOf; w >= 0 or NaN.
VT_PRECISION_INLINE bool InWindow(double a, double mid, double g, double w) {
  const bool tiny = a < 0.25 * g;
  const double d = BitsDouble(DoubleBits(a - mid) & ~kSignBit);
  // Bitwise & and | (not && / ?:) keep the expression free of branches.
  return (tiny & (mid - w <= a)) | (!tiny & (d <= w));
}

// For a on the grid (a >= 0, g = CellOf(a).g): the distance to the nearest midpoint, which
// is half the spacing of the cell just below a (g/2 below a power of two, else g; g for 0).
VT_PRECISION_INLINE double OnGridMidDistance(double a, uint64_t k, double g) {
  const uint64_t ua = DoubleBits(a);
  uint64_t e = (ua - 1) >> 52;  // exponent of the next smaller double (garbage for a = 0)
  e = e < kMinNormalExponent ? kMinNormalExponent : e;
  const uint64_t zero = 0 - static_cast<uint64_t>(ua == 0);  // all ones for a = 0
  const uint64_t below = (e + k - 23) << 52;
  return 0.5 * BitsDouble((DoubleBits(g) & zero) | (below & ~zero));
}

// The window w(x) = band * spacing(x) + alpha * scale, evaluated as
// fl(fl(band * g) + alpha_scale) with alpha_scale = fl(alpha * scale).
VT_PRECISION_INLINE double Window(double band, double g, double alpha_scale) {
  return band * g + alpha_scale;
}

}  // namespace vt::precision
