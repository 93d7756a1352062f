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

#include <cmath>
#include <cstdint>
#include <cstring>

#define VT_PRECISION_INLINE inline __attribute__((always_inline))

namespace vt::precision {

// 2^128: the FP32 overflow threshold. A value whose rnd_b reaches it is out of range.
constexpr double kFp32Overflow = 0x1p128;

constexpr double kInfinity = __builtin_inf();

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

// The distance from a (>= 0, with its Cell c) to the midpoint just below lo(a): a - lo(a)
// plus half the grid step below lo(a). With |a - mid| (off the grid) it gives the distance to
// the nearest midpoint of any cell: every other midpoint is at least as far as one of these
// two (the one above hi(a) is never nearer than mid(a)). For a on the grid, lo(a) = a and
// this is OnGridMidDistance(a). Below lo(a) = 0 the next midpoint is -(g/2), at a + g/2.
// a - lo(a) is exact (same binade, or lo(a) = 0); the sum rounds to nearest.
VT_PRECISION_INLINE double LowerMidDistance(double a, const Cell& c, uint64_t k) {
  const double lo = c.r - BitsDouble(DoubleBits(c.g) & (0 - static_cast<uint64_t>(c.up)));
  return (a - lo) + OnGridMidDistance(lo, k, c.g);
}

// The grid spacing at magnitude a (>= 0, finite): CellOf(a, k).g without the rounding.
VT_PRECISION_INLINE double SpacingAt(double a, uint64_t k) {
  uint64_t e = DoubleBits(a) >> 52;
  e = e < kMinNormalExponent ? kMinNormalExponent : e;
  return BitsDouble((e + k - 23) << 52);
}

// The window w(x) = band * spacing(x) + alpha * scale, evaluated as
// fl(fl(band * g) + alpha_scale) with alpha_scale = fl(alpha * scale).
VT_PRECISION_INLINE double Window(double band, double g, double alpha_scale) {
  return band * g + alpha_scale;
}

// The auditor's tolerance for values that an EXACT entry may hold (docs/ROUNDING.md,
// "Legitimate entries"), at the auditor's own magnitude a with its own window w:
//   t = 2 (band * g+ + alpha_scale), g+ the spacing at a + 2w: an honest trainer's value
//     lies within w of a, so at most one binade above it, where its band term is wider;
//   eligible: the window admits EXACT somewhere within t of a, i.e. band * g- + alpha_scale
//     > g-/4 with g- the spacing at max(a - t, 0) (the window grows relative to the
//     spacing toward zero, so that is where EXACT arises first).
struct ExactTolerance {
  double t;
  bool eligible;
};

VT_PRECISION_INLINE ExactTolerance ExactToleranceAt(double a, double w, uint64_t k, double band,
                                                    double alpha_scale) {
  const double top = a + 2.0 * w;
  const double g_plus = SpacingAt(top < 0x1p127 ? top : 0x1p127, k);
  const double t = 2.0 * Window(band, g_plus, alpha_scale);
  const double low = a - t;
  const double g_minus = SpacingAt(low > 0.0 ? low : 0.0, k);
  return ExactTolerance{t, Window(band, g_minus, alpha_scale) > 0.25 * g_minus};
}

// Whether the trainer could choose this value's rounding either way and pass the auditor's
// checks (ROUNDING.md "steerable"), for the auditor's magnitude a, cell c and window w: some
// entry that moves the value off rnd_b is accepted, which needs the boundary it crosses
// within the divergence an honest trainer may have (w, or t/2 for EXACT):
//   a DOWN/UP entry moving to the other neighbour (off the grid, |a - mid| <= w, w <= g/2);
//   or an EXACT entry naming a grid value other than rnd_b: a boundary of rnd_b's cell within
//   t/2 (its own midpoint, the one below lo, or 0 where rnd_b is a zero: the other zero),
//   with the value's adjacent midpoint within t.
VT_PRECISION_INLINE bool Steerable(double a, const Cell& c, double w, uint64_t k, double band,
                                   double alpha_scale) {
  const bool off = !c.on_grid;
  const bool dir_ok = off & InWindow(a, c.mid, c.g, w) & (w <= 0.5 * c.g) & (w > 0.0);
  const ExactTolerance tol = ExactToleranceAt(a, w, k, band, alpha_scale);
  const double half_t = 0.5 * tol.t;
  // Named operands keep `|` branch-free without clang's bitwise-on-bool warning.
  const bool near_own_mid = off & InWindow(a, c.mid, c.g, half_t);
  const double lower_mid = LowerMidDistance(a, c, k);
  const bool near_lower_mid = lower_mid <= half_t;
  const bool other_zero = (c.r == 0.0) & (a <= half_t) & (lower_mid <= tol.t);
  const bool near_mid = near_own_mid | near_lower_mid | other_zero;
  return dir_ok | (tol.eligible & near_mid);
}

// Whether a call's window can be wide anywhere: with alpha_scale = 0 and band <= 1/4 the
// window is at most g/4 everywhere, so no value is EXACT, no midpoint but a value's own is
// within reach, and Steerable reduces to its direction term (SteerableNarrow).
VT_PRECISION_INLINE bool MayBeWide(double band, double alpha_scale) {
  return alpha_scale > 0.0 || band > 0.25;
}

// Where the wide-window terms can matter for one value (magnitude a, spacing g, window w):
// outside this (w <= g/16 and a >= g) the honest trainer logs only its own cell's midpoint,
// EXACT is not eligible within the tolerance (t <= 6w < a/2, so the spacing there is at
// least g/2 and the window below a quarter of it), and Steerable is SteerableNarrow.
VT_PRECISION_INLINE bool WideAt(double a, double g, double w) { return (w > 0.0625 * g) | (a < g); }

// Steerable where WideAt is false or !MayBeWide: a direction entry that moves the value is
// accepted (then w <= g/4: the window logs exactly these values).
VT_PRECISION_INLINE bool SteerableNarrow(double a, const Cell& c, double w) {
  return !c.on_grid & InWindow(a, c.mid, c.g, w) & (w > 0.0);
}

// Whether a DOWN/UP entry is one an honest trainer could have written for the auditor's value
// (magnitude a, cell c, window w): off the grid, under a window that is neither zero nor
// wider than g/2, with x' within 2w of the midpoint; and, if it moves the value off rnd_b(x'),
// within w: the trainer's x lay across the midpoint from x', and |x - x'| < w. Its result
// must stay below 2^128 too (no honest trainer rounds to 2^128). `moves`: the entry names the
// neighbour rnd_b did not pick.
VT_PRECISION_INLINE bool DirectionLegitimate(double a, const Cell& c, double w, bool moves) {
  const bool beyond = !(c.r + c.g < kFp32Overflow);  // the neighbour above |x'| is 2^128
  const double reach = moves ? w : 2.0 * w;
  return !c.on_grid & (w > 0.0) & (w <= 0.5 * c.g) & InWindow(a, c.mid, c.g, reach) &
         !(moves & !c.up & beyond);
}

// Whether an EXACT entry holding v (an FP32 value) is one an honest trainer could have
// written for the auditor's value x (ROUNDING.md, "Legitimate entries"): v is on the b-grid,
// the window admits EXACT near x, and a midpoint adjacent to v (the two ends of the set
// of values that round to v) lies within the tolerance t of x (ExactLegitimate, below), with
// the fractions of t scaled: the adjacent midpoint within `near_frac` t, and for v other than
// rnd_b(x) the facing end within `facing_frac` t (ExactLegitimate: 1 and 1/2).
inline bool ExactWithin(double x, float v, uint64_t k, double band, double alpha_scale,
                        double near_frac, double facing_frac) {
  const uint32_t vb = FloatBits(v);
  if ((vb & 0x7f800000u) == 0x7f800000u) return false;     // Inf/NaN
  if ((vb & ((uint32_t{1} << k) - 1)) != 0) return false;  // not on the b-grid
  const uint64_t ux = DoubleBits(x);
  const uint64_t x_sign = ux & kSignBit;
  const double a = BitsDouble(ux ^ x_sign);
  const Cell c = CellOf(a, k);
  const double w = Window(band, c.g, alpha_scale);
  const ExactTolerance tol = ExactToleranceAt(a, w, k, band, alpha_scale);
  if (!tol.eligible) return false;
  // v in the frame where x >= 0: its magnitude and whether it lies on the other side of 0
  // (a zero by its sign bit: +-0 is what values of that sign round to).
  const double av = static_cast<double>(BitsFloat(vb & 0x7fffffffu));
  const bool v_neg = ((vb >> 31) != 0) != (x_sign != 0);
  const double g_above = SpacingAt(av, k);                         // step from |v| away from 0
  const double g_below = 2.0 * OnGridMidDistance(av, k, g_above);  // step toward 0 (g for 0)
  // The midpoints adjacent to v, as signed values in that frame. A zero's cell runs from 0
  // to the midpoint on its own side only.
  const double m_far = v_neg ? -(av + 0.5 * g_above) : av + 0.5 * g_above;
  const double m_near = av == 0.0 ? m_far : v_neg ? -(av - 0.5 * g_below) : av - 0.5 * g_below;
  const double nearest = std::fmin(std::fabs(a - m_far), std::fabs(a - m_near));
  // A value other than rnd_b(x'): the honest x rounds to v and x' does not, so the boundary
  // of v's cell that faces x' lies between them, within w(x) <= t/2 of x': v's nearer
  // adjacent midpoint, or 0 for a zero of the other sign than x' (the zeros' cells meet there).
  const uint32_t rnd_bits = FloatBits(static_cast<float>(c.r)) | (x_sign != 0 ? 0x80000000u : 0u);
  const double facing = av == 0.0 && v_neg ? a : nearest;
  if (vb != rnd_bits && !(facing <= facing_frac * tol.t)) return false;
  return nearest <= near_frac * tol.t;
}

inline bool ExactLegitimate(double x, float v, uint64_t k, double band, double alpha_scale) {
  return ExactWithin(x, v, k, band, alpha_scale, 1.0, 0.5);
}

// A legitimate EXACT entry in the outer part of its tolerance (ReplayReport::near_limit): an
// honest trainer's x lies within w <= t/2 of v's adjacent midpoint, so where two honest
// replays differ by at most w/2 <= t/4, x' lies within 3t/4 of it, and within t/4 of the
// facing end for a value other than rnd_b(x').
inline bool ExactNearLimit(double x, float v, uint64_t k, double band, double alpha_scale) {
  return ExactLegitimate(x, v, k, band, alpha_scale) &&
         !ExactWithin(x, v, k, band, alpha_scale, 0.75, 0.25);
}

}  // namespace vt::precision
