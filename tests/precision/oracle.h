// A slow, independent oracle for ROUNDING.md, used only by the tests. It shares no code with
// runtime/precision: the FP32 neighbours come from the C++ float conversion plus
// std::nextafter stepping and integer arithmetic on FP32 patterns; ties are decided by
// exact comparison of 2|x| with lo + hi; the window test uses an error-free TwoSum instead
// of the kernel's Sterbenz argument. Also a seeded value generator for random and
// adversarial inputs (std::mt19937_64, whose output is fully specified by the standard).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace vt::precision::oracle {

inline uint32_t F32Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float F32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint64_t F64Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}
inline double F64(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

// The FP32 pattern value 0x7f800000 (infinity) stands for the virtual grid point 2^128.
inline double PatternValue(uint64_t pattern) {
  if (pattern >= 0x7f800000u) return std::ldexp(1.0, 128);
  return static_cast<double>(F32(static_cast<uint32_t>(pattern)));
}

struct Grid {
  bool out_of_range = false;  // NaN, Inf, or rnd_b at or beyond 2^128
  bool on_grid = false;
  double lo = 0, hi = 0, rnd = 0;  // signed
  double step = 0;                 // spacing: hi - lo, or for on-grid values the step above |x|
  double step_below = 0;           // on the grid: the step below |x| (the step above for 0)
};

// The b-grid around x.
inline Grid GridOf(double x, int bits) {
  Grid g;
  if (!std::isfinite(x) || std::fabs(x) >= std::ldexp(1.0, 128)) {
    g.out_of_range = true;
    return g;
  }
  const int k = 32 - bits;
  const double a = std::fabs(x);
  // t: the largest FP32 value <= a.
  float t = static_cast<float>(a);
  if (std::isinf(t)) t = std::numeric_limits<float>::max();
  while (static_cast<double>(t) > a) t = std::nextafter(t, 0.0f);
  const uint64_t unit = uint64_t{1} << k;
  const uint64_t lo_p = F32Bits(t) / unit * unit;
  double lo = PatternValue(lo_p);
  double hi, rnd;
  if (lo == a) {
    hi = rnd = lo;
    g.on_grid = true;
    g.step = PatternValue(lo_p + unit) - lo;
    g.step_below = lo_p == 0 ? g.step : lo - PatternValue(lo_p - unit);
  } else {
    hi = PatternValue(lo_p + unit);
    g.step = hi - lo;
    const double twice = 2.0 * a;  // exact
    const double sum = lo + hi;    // exact: both have at most 24 significant bits
    if (twice < sum) {
      rnd = lo;
    } else if (twice > sum) {
      rnd = hi;
    } else {
      rnd = ((lo_p / unit) % 2 == 0) ? lo : hi;
    }
  }
  if (rnd >= std::ldexp(1.0, 128)) g.out_of_range = true;
  if (std::signbit(x)) {
    g.lo = -hi;
    g.hi = -lo;
    g.rnd = -rnd;
  } else {
    g.lo = lo;
    g.hi = hi;
    g.rnd = rnd;
  }
  return g;
}

// |a - b| <= w in exact arithmetic (a, b, w finite doubles, w >= 0), via TwoSum.
inline bool AbsDiffAtMost(double a, double b, double w) {
  const double s = a - b;
  const double bb = s - a;
  const double err = (a - (s - bb)) + (-b - bb);  // a - b = s + err exactly
  // v = s + err with |err| <= ulp(s)/2, so v is on the same side of +-w as s unless s = +-w.
  const bool le_w = s < w || (s == w && err <= 0);
  const bool ge_minus_w = -s < w || (-s == w && err >= 0);
  return le_w && ge_minus_w;
}

// The grid spacing at a magnitude y >= 0: the step above y on the grid, hi - lo off it.
inline double SpacingOf(double y, int bits) {
  const Grid g = GridOf(y, bits);
  return g.on_grid ? g.step : g.hi - g.lo;
}

// The distance from |x| to the midpoint just below the grid value at or below |x|
// (docs/ROUNDING.md: with the own cell's midpoint, the nearest midpoint of any cell).
// Evaluated as the FP64 expression the contract gives: (|x| - lo) + step_below(lo) / 2.
inline double LowerMidDistance(double x, int bits) {
  const double a = std::fabs(x);
  const Grid g = GridOf(a, bits);
  const double lo = g.on_grid ? a : g.lo;
  const Grid gl = GridOf(lo, bits);
  return (a - lo) + gl.step_below / 2;
}

// 0 none, 1 down, 2 up, 3 exact (docs/ROUNDING.md's table). Requires !GridOf(x).out_of_range.
// Logged when a midpoint lies within w: the cell's own (|x - mid| <= w), or, for a window
// wider than a quarter spacing, any other one (strictly nearer than w); then EXACT.
inline int StateOf(double x, int bits, double band, double alpha_scale) {
  const Grid g = GridOf(x, bits);
  const double spacing = g.on_grid ? g.step : g.hi - g.lo;
  const double w = band * spacing + alpha_scale;
  const bool wide = w > spacing / 4;
  const bool in_cell = !g.on_grid && AbsDiffAtMost(x, (g.lo + g.hi) / 2, w);
  const bool other = wide && LowerMidDistance(x, bits) < w && x != 0;  // zeros: NONE
  if ((!in_cell && !other) || w == 0) return 0;                        // a zero window logs nothing
  if (wide) return 3;
  return g.rnd == g.lo ? 1 : 2;
}

// The auditor's tolerance for EXACT values at x (docs/ROUNDING.md, "Legitimate entries").
struct Tolerance {
  double t = 0;
  bool eligible = false;
};

inline Tolerance ToleranceAt(double x, int bits, double band, double alpha_scale) {
  const double a = std::fabs(x);
  const double w = band * SpacingOf(a, bits) + alpha_scale;
  const double top = std::min(a + 2 * w, std::ldexp(1.0, 127));
  Tolerance tol;
  tol.t = 2 * (band * SpacingOf(top, bits) + alpha_scale);
  const double g_minus = SpacingOf(std::max(a - tol.t, 0.0), bits);
  tol.eligible = band * g_minus + alpha_scale > g_minus / 4;
  return tol;
}

// Whether an EXACT entry holding v is legitimate for the auditor's x: v on the b-grid, the
// window admits EXACT near x, and a midpoint adjacent to v within the tolerance of x.
inline bool ExactLegitimate(double x, float v, int bits, double band, double alpha_scale) {
  if (!std::isfinite(v)) return false;
  const double vd = static_cast<double>(v);
  const Grid gv = GridOf(vd, bits);
  if (!gv.on_grid) return false;
  const Tolerance tol = ToleranceAt(x, bits, band, alpha_scale);
  if (!tol.eligible) return false;
  // Signed midpoints next to v: away from zero half the step above |v|, toward zero half
  // the step below; for +-0 only the one on its own side (values of the other sign round
  // to the other zero).
  const double av = std::fabs(vd);
  const double sgn = std::signbit(vd) ? -1.0 : 1.0;
  const double m_far = sgn * (av + gv.step / 2);
  const double m_near = av == 0 ? m_far : sgn * (av - gv.step_below / 2);
  // Measured in the frame where x >= 0 (negation is exact, so the same numbers).
  const double xs = std::fabs(x);
  const double f = std::signbit(x) ? -1.0 : 1.0;
  const double nearest = std::min(std::fabs(xs - f * m_far), std::fabs(xs - f * m_near));
  // A value other than rnd_b(x): the honest trainer's value rounds to v and x does not, so
  // the end of v's cell facing x (its nearer midpoint; 0 for a zero of x's other sign, where
  // the two zeros' cells meet) lies between them, within w <= t/2 of x.
  const Grid gx = GridOf(x, bits);
  if (F32Bits(static_cast<float>(gx.rnd)) != F32Bits(v)) {
    const bool other_zero = av == 0 && std::signbit(vd) != std::signbit(x);
    if (!((other_zero ? xs : nearest) <= tol.t / 2)) return false;
  }
  return nearest <= tol.t;
}

// Whether the trainer could have rounded x either way and passed (docs/ROUNDING.md
// "steerable"): a direction entry that moves x passes (off the grid, within w of mid, w <=
// spacing/2), or the window admits EXACT and an end of rnd_b(x)'s cell lies within half the
// tolerance (its midpoints; 0 where rnd_b(x) is a zero, with the other zero's midpoint
// within the tolerance).
inline bool SteerableAt(double x, int bits, double band, double alpha_scale) {
  const Grid g = GridOf(x, bits);
  const double spacing = g.on_grid ? g.step : g.hi - g.lo;
  const double w = band * spacing + alpha_scale;
  const double mid = (g.lo + g.hi) / 2;
  const bool dir_ok = !g.on_grid && AbsDiffAtMost(x, mid, w) && w <= spacing / 2 && w > 0;
  const Tolerance tol = ToleranceAt(x, bits, band, alpha_scale);
  const double lower = LowerMidDistance(x, bits);
  const bool near = (!g.on_grid && AbsDiffAtMost(x, mid, tol.t / 2)) || lower <= tol.t / 2 ||
                    (g.rnd == 0 && std::fabs(x) <= tol.t / 2 && lower <= tol.t);
  return dir_ok || (tol.eligible && near);
}

struct ReplayOutcome {
  bool out_of_range = false;
  double result = 0;
  bool correction = false;
  bool illegitimate = false;
  bool near_miss = false;
  bool steerable = false;
};

// Replaying one entry (state, and the stored value for EXACT) on the auditor's x.
inline ReplayOutcome ReplayOne(double x, int state, double stored, int bits, double band,
                               double alpha_scale) {
  ReplayOutcome o;
  const Grid g = GridOf(x, bits);
  if (g.out_of_range) {
    o.out_of_range = true;
    return o;
  }
  const double mid = g.on_grid ? x : (g.lo + g.hi) / 2;
  const double w = band * g.step + alpha_scale;
  switch (state) {
    case 0:
      o.result = g.rnd;
      // Off the grid: its own midpoint within w. On the grid: the nearest midpoint (half the
      // step below) strictly nearer than w, where an honest divergence could cross it.
      o.near_miss = g.on_grid ? g.step_below / 2 < w : AbsDiffAtMost(x, mid, w);
      break;
    case 1:
    case 2: {
      const double asked = state == 1 ? g.lo : g.hi;
      const bool moves = F64Bits(asked) != F64Bits(g.rnd);
      // On the grid a direction is never honest: the trainer's x lies in a cell ending at
      // x', whose midpoint is half that cell's step from x', and a direction needs x within
      // w <= step/4 of it while |x - x'| < w. One that moves x' needs the trainer's x across
      // the midpoint, so x' within w of it; and no honest rounding reaches 2^128.
      o.illegitimate = g.on_grid || !AbsDiffAtMost(x, mid, moves ? w : 2 * w) || w > g.step / 2 ||
                       w == 0 || std::fabs(asked) >= std::ldexp(1.0, 128);
      // An illegitimate entry is counted and not applied.
      o.result = o.illegitimate ? g.rnd : asked;
      break;
    }
    default:
      // An illegitimate EXACT value is counted and not applied: rnd_b(x') replays there.
      o.illegitimate = !ExactLegitimate(x, static_cast<float>(stored), bits, band, alpha_scale);
      o.result = o.illegitimate ? g.rnd : stored;
      break;
  }
  o.steerable = SteerableAt(x, bits, band, alpha_scale);
  o.correction = F64Bits(o.result) != F64Bits(g.rnd);
  return o;
}

// The seed of a randomized test: VT_TEST_SEED if set, else a fresh random one. Printed.
inline uint64_t TestSeed(const char* test) {
  uint64_t seed;
  if (const char* env = std::getenv("VT_TEST_SEED"); env != nullptr && *env != '\0') {
    seed = std::strtoull(env, nullptr, 0);
  } else {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  std::cout << test << ": seed " << seed << " (rerun with VT_TEST_SEED=" << seed << ")"
            << std::endl;
  return seed;
}

// Random and adversarial FP64 values for grid tests (all finite, |x| < 2^128 unless asked).
class ValueGenerator {
 public:
  explicit ValueGenerator(uint64_t seed) : rng_(seed) {}

  uint64_t Bits() { return rng_(); }
  double Unit() { return static_cast<double>(rng_() >> 11) * 0x1p-53; }
  int Int(int lo, int hi) {
    return lo + static_cast<int>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }

  // A random finite value with an exponent in [-160, 127] (FP32 normals, subnormals, and
  // values below half the smallest subnormal), random mantissa and sign.
  double Wide() {
    const int e = Int(-160, 127);
    const uint64_t mant = rng_() & ((uint64_t{1} << 52) - 1);
    double v = std::ldexp(1.0 + static_cast<double>(mant) * 0x1p-52, e);
    return (rng_() & 1) ? -v : v;
  }

  // A value at or within a few FP64 ulps of a b-grid point or a midpoint (ties), at a random
  // exponent (including the subnormal range and the top of the FP32 range).
  double NearGridOrMid(int bits) {
    const int k = 32 - bits;
    const uint64_t unit = uint64_t{1} << k;
    uint32_t p;
    switch (Int(0, 4)) {
      case 0:  // anywhere
        p = static_cast<uint32_t>(rng_() % 0x7f7fffffu);
        break;
      case 1:  // subnormals and the smallest normals
        p = static_cast<uint32_t>(rng_() % 0x01000000u);
        break;
      case 2:  // just below a power of two (top of a binade)
        p = static_cast<uint32_t>(((rng_() % 254) << 23) | (0x7fffffu & ~(unit - 1)));
        break;
      case 3:  // near FLT_MAX
        p = 0x7f7fffffu - static_cast<uint32_t>(rng_() % (4 * unit));
        break;
      default:  // a power of two
        p = static_cast<uint32_t>((rng_() % 254) << 23);
        break;
    }
    p = static_cast<uint32_t>(p / unit * unit);
    const double lo = PatternValue(p);
    const double hi = PatternValue(p + unit);
    double base = Int(0, 1) ? lo : (lo + hi) / 2;  // grid point or midpoint
    // Step a few FP64 ulps away (possibly zero steps).
    const int steps = Int(-3, 3);
    for (int i = 0; i < std::abs(steps); ++i) {
      base = std::nextafter(base, steps > 0 ? INFINITY : 0.0);
    }
    if (base >= std::ldexp(1.0, 128)) base = lo;
    return (rng_() & 1) ? -base : base;
  }

  // A random value from one of the shapes above, or a Gaussian-like value.
  double Any(int bits) {
    switch (Int(0, 3)) {
      case 0:
        return Wide();
      case 1:
        return NearGridOrMid(bits);
      case 2: {  // roughly Gaussian magnitudes around 1
        double s = 0;
        for (int i = 0; i < 4; ++i) s += Unit() - 0.5;
        return s * 1.7;
      }
      default: {  // tiny values around zero (cancellation), mixed with exact zeros
        if (Int(0, 15) == 0) return (rng_() & 1) ? -0.0 : 0.0;
        return std::ldexp(Unit() - 0.5, -Int(100, 1074));
      }
    }
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace vt::precision::oracle
