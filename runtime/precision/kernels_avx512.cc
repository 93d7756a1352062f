// AVX-512 RoundLog and Replay (kernels_avx512.h): window.h's arithmetic on 8 lanes, with
// comparisons into mask registers. Each step names the window.h line it mirrors.
#include "runtime/precision/kernels_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "runtime/precision/window.h"

// GCC 12 warns about the undefined upper lanes some intrinsics start from (clang has no
// -Wmaybe-uninitialized and does not warn).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define VT_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

namespace vt::precision::avx512 {
namespace {

// The Cell of 8 magnitudes (window.h CellOf), plus the sign bits and the window.
struct Lanes {
  __m512i sign;  // sign bits of x
  __m512d a;     // |x|
  __m512d r;     // rnd_b(a)
  __m512d g;     // spacing
  __m512d mid;   // midpoint of the cell (off the grid)
  __mmask8 up;   // r > a
  __mmask8 on_grid;
  __mmask8 bad;  // !(r < 2^128)
};

VT_AVX512 inline Lanes CellOf8(__m512d x, __m512i k_plus_29, __m512i k_minus_23) {
  const __m512i sign_bit = _mm512_set1_epi64(static_cast<long long>(kSignBit));
  const __m512i ux = _mm512_castpd_si512(x);
  Lanes l;
  l.sign = _mm512_and_si512(ux, sign_bit);
  const __m512i ua = _mm512_xor_si512(ux, l.sign);
  l.a = _mm512_castsi512_pd(ua);
  __m512i e = _mm512_srli_epi64(ua, 52);
  e = _mm512_max_epu64(e, _mm512_set1_epi64(static_cast<long long>(kMinNormalExponent)));
  const __m512d c = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(e, k_plus_29), 52));
  l.g = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(e, k_minus_23), 52));
  l.r = _mm512_sub_pd(_mm512_add_pd(l.a, c), c);
  l.up = _mm512_cmp_pd_mask(l.r, l.a, _CMP_GT_OQ);
  l.on_grid = _mm512_cmp_pd_mask(l.r, l.a, _CMP_EQ_OQ);
  // mid = r - g/2 if up, else r + g/2 (r + (-g/2) and r - g/2 are the same IEEE result).
  const __m512d half = _mm512_mul_pd(_mm512_set1_pd(0.5), l.g);
  l.mid = _mm512_mask_sub_pd(_mm512_add_pd(l.r, half), l.up, l.r, half);
  l.bad = _mm512_cmp_pd_mask(l.r, _mm512_set1_pd(kFp32Overflow), _CMP_NLT_UQ);
  return l;
}

// window.h InWindow: (a < g/4 and mid - w <= a) or (a >= g/4 and |a - mid| <= w).
VT_AVX512 inline __mmask8 InWindow8(const Lanes& l, __m512d w) {
  const __mmask8 tiny =
      _mm512_cmp_pd_mask(l.a, _mm512_mul_pd(_mm512_set1_pd(0.25), l.g), _CMP_LT_OQ);
  const __m512d d = _mm512_abs_pd(_mm512_sub_pd(l.a, l.mid));
  const __mmask8 tiny_in = _mm512_cmp_pd_mask(_mm512_sub_pd(l.mid, w), l.a, _CMP_LE_OQ);
  const __mmask8 in = _mm512_cmp_pd_mask(d, w, _CMP_LE_OQ);
  return static_cast<__mmask8>((tiny & tiny_in) | (~tiny & in));
}

// window.h Window: fl(fl(band * g) + alpha_scale), never fused.
VT_AVX512 inline __m512d Window8(__m512d band, __m512d g, __m512d alpha_scale) {
  return _mm512_add_pd(_mm512_mul_pd(band, g), alpha_scale);
}

// window.h OnGridMidDistance for 8 magnitudes.
VT_AVX512 inline __m512d OnGridMid8(const Lanes& l, __m512i k_minus_23) {
  const __m512i ua = _mm512_castpd_si512(l.a);
  __m512i e = _mm512_srli_epi64(_mm512_sub_epi64(ua, _mm512_set1_epi64(1)), 52);
  e = _mm512_max_epu64(e, _mm512_set1_epi64(static_cast<long long>(kMinNormalExponent)));
  const __m512i below = _mm512_slli_epi64(_mm512_add_epi64(e, k_minus_23), 52);
  const __mmask8 zero = _mm512_cmpeq_epi64_mask(ua, _mm512_setzero_si512());
  const __m512d base = _mm512_mask_mov_pd(_mm512_castsi512_pd(below), zero, l.g);
  return _mm512_mul_pd(_mm512_set1_pd(0.5), base);
}

// window.h SpacingAt for 8 magnitudes.
VT_AVX512 inline __m512d SpacingAt8(__m512d a, __m512i k_minus_23) {
  __m512i e = _mm512_srli_epi64(_mm512_castpd_si512(a), 52);
  e = _mm512_max_epu64(e, _mm512_set1_epi64(static_cast<long long>(kMinNormalExponent)));
  return _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(e, k_minus_23), 52));
}

// window.h LowerMidDistance for 8 lanes: (a - lo) + OnGridMidDistance(lo).
VT_AVX512 inline __m512d LowerMid8(const Lanes& l, __m512i k_minus_23) {
  Lanes lo = l;
  lo.a = _mm512_mask_sub_pd(l.r, l.up, l.r, l.g);
  return _mm512_add_pd(_mm512_sub_pd(l.a, lo.a), OnGridMid8(lo, k_minus_23));
}

// The parts of the window that only matter when it is wide against the spacing (window.h:
// the honest trainer's other midpoints, Steerable's EXACT term, the DOWN/UP width check).
struct Wide {
  __mmask8 other;      // w > g/4 and a midpoint other than mid within w (honest EXACT)
  __mmask8 steerable;  // window.h Steerable
  __mmask8 too_wide;   // w > g/2
};

VT_AVX512 inline Wide Wide8(const Lanes& l, __m512d w, __mmask8 in1, const KernelParams& p,
                            __m512d alpha_scale, __m512i k_minus_23) {
  const __m512d band = _mm512_set1_pd(p.band);
  const __m512d lower_mid = LowerMid8(l, k_minus_23);
  const __mmask8 off = static_cast<__mmask8>(~l.on_grid);
  Wide r;
  const __mmask8 exact_window =
      _mm512_cmp_pd_mask(w, _mm512_mul_pd(_mm512_set1_pd(0.25), l.g), _CMP_GT_OQ);
  // Exact zeros are exempt (kernels.cc RoundOne).
  const __mmask8 nonzero = _mm512_cmp_pd_mask(l.a, _mm512_setzero_pd(), _CMP_NEQ_OQ);
  r.other =
      static_cast<__mmask8>(exact_window & nonzero & _mm512_cmp_pd_mask(lower_mid, w, _CMP_LT_OQ));
  // Too wide for a direction (w > g/2), or a zero window, where an honest trainer logs nothing.
  r.too_wide = static_cast<__mmask8>(
      _mm512_cmp_pd_mask(w, _mm512_mul_pd(_mm512_set1_pd(0.5), l.g), _CMP_GT_OQ) |
      _mm512_cmp_pd_mask(w, _mm512_setzero_pd(), _CMP_EQ_OQ));
  // ExactToleranceAt.
  const __m512d top = _mm512_min_pd(_mm512_add_pd(l.a, _mm512_mul_pd(_mm512_set1_pd(2.0), w)),
                                    _mm512_set1_pd(0x1p127));
  const __m512d t =
      _mm512_mul_pd(_mm512_set1_pd(2.0), Window8(band, SpacingAt8(top, k_minus_23), alpha_scale));
  const __m512d low = _mm512_max_pd(_mm512_sub_pd(l.a, t), _mm512_setzero_pd());
  const __m512d g_minus = SpacingAt8(low, k_minus_23);
  const __mmask8 eligible =
      _mm512_cmp_pd_mask(Window8(band, g_minus, alpha_scale),
                         _mm512_mul_pd(_mm512_set1_pd(0.25), g_minus), _CMP_GT_OQ);
  // A value other than rnd_b: a boundary of rnd_b's cell within t/2 (window.h Steerable).
  const __m512d half_t = _mm512_mul_pd(_mm512_set1_pd(0.5), t);
  const __mmask8 other_zero = static_cast<__mmask8>(
      _mm512_cmp_pd_mask(l.r, _mm512_setzero_pd(), _CMP_EQ_OQ) &
      _mm512_cmp_pd_mask(l.a, half_t, _CMP_LE_OQ) & _mm512_cmp_pd_mask(lower_mid, t, _CMP_LE_OQ));
  const __mmask8 near_mid =
      static_cast<__mmask8>((off & InWindow8(l, half_t)) |
                            _mm512_cmp_pd_mask(lower_mid, half_t, _CMP_LE_OQ) | other_zero);
  const __mmask8 dir_ok = static_cast<__mmask8>(off & in1 & ~r.too_wide);
  r.steerable = static_cast<__mmask8>(dir_ok | (eligible & near_mid));
  return r;
}

// Lanes where Wide8 can differ from its narrow-window value (w <= g/16, off-grid only
// logging, no EXACT): w > g/16, or a below g (zeros and the smallest magnitudes, where the
// tolerance reaches down to the uniform grid around 0). Never for the kRelative shape with
// band <= 1/4, where w <= g/4 everywhere and EXACT is never eligible.
VT_AVX512 inline __mmask8 WideLanes(const Lanes& l, __m512d w) {
  return static_cast<__mmask8>(
      _mm512_cmp_pd_mask(w, _mm512_mul_pd(_mm512_set1_pd(0.0625), l.g), _CMP_GT_OQ) |
      _mm512_cmp_pd_mask(l.a, l.g, _CMP_LT_OQ));
}

VT_AVX512 inline int Count(__mmask8 m) { return __builtin_popcount(static_cast<unsigned>(m)); }

// How far ahead (in values, so bytes of states) a replay prefetches its log states. The
// auditor decodes a step's records on another thread while the previous step runs, so the
// states come from memory, where x, made by the op just before, is in cache; the hardware's
// prefetcher alone left the GPT 4x256 auditor's boundaries waiting on them (2 threads: 29-42
// ms a step without, 25-36 with, in alternating runs; prefetching x as well was slower).
constexpr int64_t kStatesAhead = 1024;

// Counts kept per lane and summed at the end: a masked vector add per group, where Count
// needs a mask move to a general register, the popcount and an add (mask moves and logic
// were what bounded the kernels' integer paths).
VT_AVX512 inline __m512i CountLanes(__m512i counts, __mmask8 m) {
  return _mm512_mask_sub_epi64(counts, m, counts, _mm512_set1_epi64(-1));
}

VT_AVX512 inline int64_t SumLanes(__m512i v) {
  alignas(64) int64_t lanes[8];
  _mm512_store_si512(lanes, v);
  int64_t sum = 0;
  for (int64_t lane : lanes) sum += lane;
  return sum;
}

VT_AVX512 inline __mmask8 TailMask(int64_t left) {
  return left >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << left) - 1);
}

// The window's shape, known per call, so that the common shapes skip work:
// kAbsolute (band 0, calibrated): w = alpha_scale, since fl(0 * g) + alpha_scale = alpha_scale.
// kRelative (alpha_scale 0, band <= 1/4, the paper's): w = fl(band * g) <= g/4, never EXACT.
enum class Shape { kGeneral, kAbsolute, kRelative };

// Where the window's absolute term comes from (kernels.cc MagnitudeMode): alpha_scale for
// every lane, fl(alpha * m[i]) from a magnitude array, or fl(alpha * |x[i]|).
enum class Mag { kScale, kArray, kOwn };

// The absolute term of 8 lanes; for an array, folds the lanes whose magnitude breaks its
// contract (window.h: finite and >= 0; kernels.cc BadMagnitude) into `bad_m`.
template <Mag kMag>
VT_AVX512 inline __m512d AbsoluteTerm8(const KernelParams& p, const Lanes& l, const double* mag,
                                       __mmask8 valid, __mmask8* bad_m) {
  if (kMag == Mag::kScale) return _mm512_set1_pd(p.alpha_scale);
  if (kMag == Mag::kOwn) return _mm512_mul_pd(_mm512_set1_pd(p.alpha), l.a);
  const __m512d m = _mm512_maskz_loadu_pd(valid, mag);
  *bad_m |= static_cast<__mmask8>((_mm512_cmp_pd_mask(m, _mm512_setzero_pd(), _CMP_NGE_UQ) |
                                   _mm512_cmp_pd_mask(m, _mm512_set1_pd(kInfinity), _CMP_NLT_UQ)) &
                                  valid);
  return _mm512_mul_pd(_mm512_set1_pd(p.alpha), m);
}

// The integer path. For a magnitude a on the normal FP32 grid (2^-126 <= a < 2^128) the
// spacing is g = 2^D units in the last place of a, D = 29 + k, so rnd_b(a) is a's bits rounded
// to a multiple of 2^D, ties to even (the carry into the exponent is the next binade), a is on
// the grid when its low D bits are zero, and |a - mid| is |low D bits - 2^(D-1)| units exactly
// (Sterbenz), and a >= g (no tiny case). The window's comparisons then need no cell:
// - relative (alpha_scale 0, 0 < band <= 1/4, the paper's): fl(band * g) is band * 2^D units,
//   exact for band >= 2^-800, so `d <= w` is `|low - half| <= floor(band * 2^D)` on integers.
//   Zeros round, log and replay alike (their low bits are zero: on the grid).
// - absolute (band 0, calibrated): d is that distance times the unit, exact in doubles, against
//   w = the lane's absolute term, for lanes where w <= g/16 (narrow: no EXACT, no wide terms).
//   A zero (any w) logs nothing; the wide terms (Wide8) make it steerable when w > g0/4 and,
//   replaying, too wide for a direction when w > g0/2, g0 = 2^(k-149) the spacing at zero.
// A group of 8 lanes takes this path when every lane qualifies; any other (FP32 subnormals,
// overflow, NaN, a wide window) sends the group through CellOf8, so the results are CellOf8's
// bit for bit (tests: round_test "kernel variants agree", magnitude tests per ISA).
struct BitsWindow {
  bool usable = false;  // the call's window has a shape this path takes
  __m128i shift;        // D
  __m512i low_mask;     // 2^D - 1
  __m512i half;         // 2^(D-1)
  __m512i half_minus_1;
  __m512i w1, w2;  // relative: floor(band * 2^D), floor(2 * band * 2^D), the windows in units
  // absolute: subtracted from a's exponent bits, the bits of a's unit in the last place
  // (2^(E-52)) and of g/16 (2^(E-52+D-4)); g0/4 and g0/2 for zeros.
  __m512i ulp_below, g16_below;
  __m512d zero_quarter, zero_half;
  // The mask paths (RoundRelative8, ReplayRelativeAgreed8): for an off-grid lane, |a - mid| is
  // half - |u - r| units, so `d <= w` is `|u - r| >= half - w`, and on-grid lanes (u = r) fail
  // it while the threshold is >= 1: t1 = half - w1 (>= half / 2 for band <= 1/4) and
  // t2 = max(half - w2, 1). `rounds_below` bounds u - 2^-126's bits for the lanes those paths
  // take: rnd_b(|x|) stays below 2^128 (the midpoint under 2^128 rounds up to it, ties to
  // even), so they need no range check.
  __m512i t1, t2, rounds_below;
};

template <Shape kShape>
VT_AVX512 inline BitsWindow MakeBitsWindow(const KernelParams& p) {
  BitsWindow b;
  b.usable = p.k <= 22 &&
             (kShape == Shape::kAbsolute || (kShape == Shape::kRelative && p.alpha_scale == 0.0 &&
                                             p.band >= 0x1p-800 && p.band <= 0.25));
  if (!b.usable) return b;
  const int d = 29 + static_cast<int>(p.k);
  b.shift = _mm_cvtsi64_si128(d);
  b.low_mask = _mm512_set1_epi64(static_cast<long long>((uint64_t{1} << d) - 1));
  b.half = _mm512_set1_epi64(static_cast<long long>(uint64_t{1} << (d - 1)));
  b.half_minus_1 = _mm512_set1_epi64(static_cast<long long>((uint64_t{1} << (d - 1)) - 1));
  b.w1 = _mm512_set1_epi64(static_cast<long long>(std::ldexp(p.band, d)));
  b.w2 = _mm512_set1_epi64(static_cast<long long>(std::ldexp(2.0 * p.band, d)));
  b.ulp_below = _mm512_set1_epi64(static_cast<long long>(uint64_t{52} << 52));
  b.g16_below = _mm512_set1_epi64(static_cast<long long>(uint64_t(56 - d) << 52));
  b.zero_quarter = _mm512_set1_pd(std::ldexp(1.0, static_cast<int>(p.k) - 151));
  b.zero_half = _mm512_set1_pd(std::ldexp(1.0, static_cast<int>(p.k) - 150));
  const uint64_t half = uint64_t{1} << (d - 1);
  const uint64_t w1 = static_cast<uint64_t>(std::ldexp(p.band, d));
  const uint64_t w2 = static_cast<uint64_t>(std::ldexp(2.0 * p.band, d));
  b.t1 = _mm512_set1_epi64(static_cast<long long>(w1 < half ? half - w1 : 1));
  b.t2 = _mm512_set1_epi64(static_cast<long long>(w2 < half ? half - w2 : 1));
  b.rounds_below = _mm512_set1_epi64(
      static_cast<long long>(DoubleBits(kFp32Overflow) - half - (kMinNormalExponent << 52)));
  return b;
}

// The bit patterns of 8 lanes split for the integer path.
struct BitLanes {
  __m512i sign, u;  // sign bits and |x| bits
  __m512i r;        // rnd_b(|x|) bits
  __m512i dist;     // |low D bits - 2^(D-1)|: |a - mid| in units of the last place
  __mmask8 off;     // off the grid
  __mmask8 up;      // r > a
  __mmask8 zero;    // zeros (and missing lanes)
};

// Whether every valid lane is zero or on the normal grid; if so, fills `l`.
VT_AVX512 inline bool BitLanesOf8(const BitsWindow& b, const double* x, __mmask8 valid,
                                  BitLanes* l) {
  const __m512i ux = _mm512_maskz_loadu_epi64(valid, x);  // missing lanes are zeros
  l->sign = _mm512_and_si512(ux, _mm512_set1_epi64(static_cast<long long>(kSignBit)));
  l->u = _mm512_xor_si512(ux, l->sign);
  const uint64_t min_normal = kMinNormalExponent << 52;
  const __mmask8 normal = _mm512_cmplt_epu64_mask(
      _mm512_sub_epi64(l->u, _mm512_set1_epi64(static_cast<long long>(min_normal))),
      _mm512_set1_epi64(static_cast<long long>(DoubleBits(kFp32Overflow) - min_normal)));
  l->zero = _mm512_testn_epi64_mask(l->u, l->u);
  if (!_kortestc_mask8_u8(normal, l->zero)) return false;  // some lane neither normal nor zero
  const __m512i lsb = _mm512_and_si512(_mm512_srl_epi64(l->u, b.shift), _mm512_set1_epi64(1));
  l->r = _mm512_andnot_si512(b.low_mask,
                             _mm512_add_epi64(_mm512_add_epi64(l->u, b.half_minus_1), lsb));
  l->dist = _mm512_abs_epi64(_mm512_sub_epi64(_mm512_and_si512(l->u, b.low_mask), b.half));
  l->off = _mm512_test_epi64_mask(l->u, b.low_mask);
  l->up = _mm512_cmpgt_epu64_mask(l->r, l->u);
  return true;
}

// The DOWN (1) or UP (2) state rounding writes for each lane of `m` (0 elsewhere), by the
// direction of x: 1 + ((r > u) ^ sign), r > u read off u - r wrapping (both below 2^63).
VT_AVX512 inline __m512i DirectionStates8(const BitLanes& l, __mmask8 m) {
  const __m512i dir_up = _mm512_xor_si512(_mm512_srli_epi64(_mm512_sub_epi64(l.u, l.r), 63),
                                          _mm512_srli_epi64(l.sign, 63));
  return _mm512_maskz_add_epi64(m, dir_up, _mm512_set1_epi64(1));
}

// An absolute window's w for 8 lanes of BitLanesOf8, and d = |a - mid| in doubles (for the
// nonzero lanes): false when some valid nonzero lane's window is not narrow (w <= g/16 fails,
// NaN included). The magnitude checks fold into `bad_m` only when it is (the cell's path
// folds its own).
template <Mag kMag>
VT_AVX512 inline bool AbsoluteBits8(const BitsWindow& b, const KernelParams& p, const BitLanes& l,
                                    const double* mag, __mmask8 valid, __m512d* w, __m512d* d,
                                    __mmask8* bad_m) {
  Lanes cell;
  cell.a = _mm512_castsi512_pd(l.u);
  __mmask8 bad = 0;
  *w = AbsoluteTerm8<kMag>(p, cell, mag, valid, &bad);
  const __m512i exponent = _mm512_and_si512(l.u, _mm512_set1_epi64(0x7ff0000000000000ll));
  const __m512d g16 = _mm512_castsi512_pd(_mm512_sub_epi64(exponent, b.g16_below));
  if (static_cast<__mmask8>(_mm512_cmp_pd_mask(*w, g16, _CMP_LE_OQ) | l.zero) != 0xff) {
    return false;
  }
  *bad_m |= bad;
  const __m512d ulp = _mm512_castsi512_pd(_mm512_sub_epi64(exponent, b.ulp_below));
  *d = _mm512_mul_pd(_mm512_cvtepi64_pd(l.dist), ulp);
  return true;
}

// RoundLog8 on the integer path: false, writing nothing, when it does not apply.
template <Shape kShape, Mag kMag>
VT_AVX512 inline bool RoundLogBits8(const BitsWindow& b, const KernelParams& p, const double* x,
                                    const double* mag, double* out, __mmask8 valid, __m512i* max_r,
                                    __m512i* lane_steerable, __mmask8* bad_m, __m128i* states) {
  BitLanes l;
  if (!BitLanesOf8(b, x, valid, &l)) return false;
  const __mmask8 off = static_cast<__mmask8>(l.off & valid);
  __mmask8 logged, steer;
  if (kShape == Shape::kRelative) {
    logged = _mm512_mask_cmple_epi64_mask(off, l.dist, b.w1);
    steer = logged;  // (w <= g/4: a value is steerable where it is logged)
  } else {
    __m512d w, d;
    if (!AbsoluteBits8<kMag>(b, p, l, mag, valid, &w, &d, bad_m)) return false;
    const __mmask8 open = _mm512_mask_cmp_pd_mask(off, w, _mm512_setzero_pd(), _CMP_GT_OQ);
    logged = _mm512_mask_cmp_pd_mask(open, d, w, _CMP_LE_OQ);
    steer = logged;
    const __mmask8 zero = static_cast<__mmask8>(l.zero & valid);
    if (zero != 0) steer |= _mm512_mask_cmp_pd_mask(zero, w, b.zero_quarter, _CMP_GT_OQ);
  }
  *max_r = _mm512_max_epu64(*max_r, l.r);
  *lane_steerable = CountLanes(*lane_steerable, steer);
  _mm512_mask_storeu_epi64(out, valid, _mm512_or_si512(l.r, l.sign));
  *states = _mm512_cvtepi64_epi8(DirectionStates8(l, logged));
  return true;
}

// 8 lanes of x, the missing ones (not in `valid`) zeros; a full group (valid a constant 0xff
// where the kernels inline this) is a plain load, without a mask to build.
VT_AVX512 inline __m512i Load8(const double* x, __mmask8 valid) {
  return valid == 0xff ? _mm512_loadu_si512(x) : _mm512_maskz_loadu_epi64(valid, x);
}

// Load8 for 8 state bytes.
VT_AVX512 inline __m128i LoadStates8(const uint8_t* states, __mmask8 valid) {
  return valid == 0xff ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(states))
                       : _mm_maskz_loadu_epi8(valid, states);
}

// Stores the valid lanes of v into out (Load8's counterpart).
VT_AVX512 inline void Store8(double* out, __mmask8 valid, __m512i v) {
  if (valid == 0xff) {
    _mm512_storeu_si512(out, v);
  } else {
    _mm512_mask_storeu_epi64(out, valid, v);
  }
}

// The shared part of RoundRelative8 and ReplayRelativeAgreed8: false unless every valid lane
// of x is zero or on the normal grid with rnd_b(|x|) < 2^128; else x's bits, r = rnd_b(|x|)'s,
// dr = |x| - r and |dr| (as bits: units of x's last place).
VT_AVX512 inline bool RelativeLanes8(const BitsWindow& b, const double* x, __mmask8 valid,
                                     __m512i* ux, __m512i* r, __m512i* dr, __m512i* adr,
                                     __m512i* u_out = nullptr, __mmask8* zero_out = nullptr) {
  *ux = Load8(x, valid);
  const __m512i u = _mm512_andnot_si512(_mm512_set1_epi64(static_cast<long long>(kSignBit)), *ux);
  const __mmask8 normal = _mm512_cmplt_epu64_mask(
      _mm512_sub_epi64(u, _mm512_set1_epi64(static_cast<long long>(kMinNormalExponent << 52))),
      b.rounds_below);
  const __mmask8 zero = _mm512_testn_epi64_mask(u, u);
  if (!_kortestc_mask8_u8(normal, zero)) return false;
  if (u_out != nullptr) *u_out = u;
  if (zero_out != nullptr) *zero_out = zero;
  const __m512i lsb = _mm512_and_si512(_mm512_srl_epi64(u, b.shift), _mm512_set1_epi64(1));
  *r = _mm512_andnot_si512(b.low_mask, _mm512_add_epi64(_mm512_add_epi64(u, b.half_minus_1), lsb));
  *dr = _mm512_sub_epi64(u, *r);
  *adr = _mm512_abs_epi64(*dr);
  return true;
}

// The state bytes rounding writes for the lanes of `logged` (0 elsewhere): DOWN (1) or UP (2)
// by the signed direction, the top bit of (u - r) ^ x: (r > u) ^ sign; 1 - (-1 or 0).
VT_AVX512 inline __m128i StateBytes8(__m512i dr, __m512i ux, __mmask8 logged) {
  const __m512i up = _mm512_srai_epi64(_mm512_xor_si512(dr, ux), 63);
  return _mm512_cvtepi64_epi8(_mm512_maskz_sub_epi64(logged, _mm512_set1_epi64(1), up));
}

// Stores r | (x & sign) (ternary logic A | (B & C): 0xF8) into the valid lanes of out.
VT_AVX512 inline void StoreSigned8(__m512i r, __m512i ux, double* out, __mmask8 valid) {
  const __m512i sign_bit = _mm512_set1_epi64(static_cast<long long>(kSignBit));
  Store8(out, valid, _mm512_ternarylogic_epi64(r, ux, sign_bit, 0xF8));
}

// The relative window's rounding (the paper's) of 8 lanes: false, writing nothing, unless
// RelativeLanes8 takes them (then no range check is needed); else the state bytes, with the
// steerable lanes counted into `lane_steerable` (CountLanes). RoundLogBits8's results bit for
// bit with about two thirds of its vector instructions: |a - mid| and the direction are read
// off u - r (BitsWindow t1, t2).
VT_AVX512 inline bool RoundRelative8(const BitsWindow& b, const double* x, double* out,
                                     __mmask8 valid, __m128i* states, __m512i* lane_steerable) {
  __m512i ux, r, dr, adr;
  if (!RelativeLanes8(b, x, valid, &ux, &r, &dr, &adr)) return false;
  const __mmask8 near = _mm512_mask_cmpge_epu64_mask(valid, adr, b.t1);
  *lane_steerable = CountLanes(*lane_steerable, near);  // (steerable where logged)
  *states = StateBytes8(dr, ux, near);
  StoreSigned8(r, ux, out, valid);
  return true;
}

// Classifies and rounds 8 lanes (the first `valid` ones are real); returns the 8 state
// bytes and folds the bit patterns of rnd_b(|x|) into `max_r` for the range check.
template <Shape kShape, Mag kMag>
VT_AVX512 inline __m128i RoundLog8(const KernelParams& p, const double* x, const double* mag,
                                   double* out, __mmask8 valid, __m512i* max_r, int64_t* steerable,
                                   __mmask8* bad_m) {
  const __m512i k_plus_29 = _mm512_set1_epi64(static_cast<long long>(p.k + 29));
  const __m512i k_minus_23 = _mm512_set1_epi64(static_cast<long long>(p.k - 23));
  const __m512d xv = _mm512_maskz_loadu_pd(valid, x);
  const Lanes l = CellOf8(xv, k_plus_29, k_minus_23);
  // !(r < 2^128) for a non-negative r or NaN is "bits of r >= bits of 2^128" (unsigned).
  *max_r = _mm512_max_epu64(*max_r, _mm512_castpd_si512(l.r));
  const __m512d as = AbsoluteTerm8<kMag>(p, l, mag, valid, bad_m);
  const __m512d w = kShape == Shape::kAbsolute   ? as
                    : kShape == Shape::kRelative ? _mm512_mul_pd(_mm512_set1_pd(p.band), l.g)
                                                 : Window8(_mm512_set1_pd(p.band), l.g, as);
  const __m512d quarter_g = _mm512_mul_pd(_mm512_set1_pd(0.25), l.g);
  // InWindow without its tiny-magnitude case when no lane is below g/4 (lo = 0 needs
  // |x| < 2^-151): the common case costs one comparison.
  const __m512d d = _mm512_abs_pd(_mm512_sub_pd(l.a, l.mid));
  __mmask8 in = _mm512_cmp_pd_mask(d, w, _CMP_LE_OQ);
  const __mmask8 tiny = _mm512_cmp_pd_mask(l.a, quarter_g, _CMP_LT_OQ);
  if (__builtin_expect(tiny != 0, 0)) in = InWindow8(l, w);
  // A zero window (an exact boundary) logs nothing and leaves nothing to steer.
  const __mmask8 open = _mm512_cmp_pd_mask(w, _mm512_setzero_pd(), _CMP_GT_OQ);
  __mmask8 logged = static_cast<__mmask8>(~l.on_grid & in & open & valid);
  __mmask8 steer = logged;  // a direction that moves the value needs |a - mid| <= w
  if (kShape != Shape::kRelative) {
    if (__builtin_expect((WideLanes(l, w) & valid) != 0, 0)) {
      const Wide wide = Wide8(l, w, in, p, as, k_minus_23);
      logged = static_cast<__mmask8>((logged | wide.other) & open & valid);
      steer = static_cast<__mmask8>(wide.steerable & valid);
    }
  }
  *steerable += Count(steer);
  // Signed direction: for x < 0 rounding the magnitude up is rounding toward -inf (DOWN).
  const __mmask8 dir_up = static_cast<__mmask8>(l.up ^ _mm512_test_epi64_mask(l.sign, l.sign));
  __m512i s = _mm512_mask_mov_epi64(_mm512_set1_epi64(1), dir_up, _mm512_set1_epi64(2));
  if (kShape != Shape::kRelative) {
    const __mmask8 needs_exact = _mm512_cmp_pd_mask(w, quarter_g, _CMP_GT_OQ);
    s = _mm512_mask_mov_epi64(s, needs_exact, _mm512_set1_epi64(3));
  }
  s = _mm512_maskz_mov_epi64(logged, s);
  _mm512_mask_storeu_pd(out, valid,
                        _mm512_castsi512_pd(_mm512_or_si512(_mm512_castpd_si512(l.r), l.sign)));
  return _mm512_cvtepi64_epi8(s);
}

// Adds the DOWN/UP/EXACT counts of n <= 64 state bytes.
VT_AVX512 inline void CountStates64(const uint8_t* states, int64_t n, RoundTally* t) {
  const __mmask64 valid = n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
  const __m512i v = _mm512_maskz_loadu_epi8(valid, states);
  t->down += __builtin_popcountll(_mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(1)) & valid);
  t->up += __builtin_popcountll(_mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(2)) & valid);
  t->exact += __builtin_popcountll(_mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(3)) & valid);
}

// Adds a rounding's counts to `tally`, with its range check (the bit patterns of rnd_b(|x|),
// folded into max_r, against those of 2^128) and its magnitudes' check.
VT_AVX512 inline void AddRoundCounts(const RoundTally& t, int64_t steerable, __m512i max_r,
                                     __mmask8 bad_m, RoundTally* tally) {
  const __mmask8 bad = _mm512_cmpge_epu64_mask(
      max_r, _mm512_set1_epi64(static_cast<long long>(DoubleBits(kFp32Overflow))));
  tally->down += t.down;
  tally->up += t.up;
  tally->exact += t.exact;
  tally->steerable += steerable;
  tally->out_of_range |= bad != 0;
  tally->bad_magnitude |= bad_m != 0;
}

// Writes the state bytes group8(j, valid) returns for each group of 8 of n values and counts
// them into `t`, in blocks of 64 states, each counted one block later: reading 64 bytes just
// written by eight 8-byte stores would stall on store forwarding; a block later they are in L1.
template <class Group8>
VT_AVX512 inline void WriteStates(int64_t n, uint8_t* states, RoundTally* t, Group8&& group8) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int64_t j = i; j < i + 64; j += 8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(states + j), group8(j, 0xff));
    }
    if (i > 0) CountStates64(states + i - 64, 64, t);
  }
  if (i > 0) CountStates64(states + i - 64, 64, t);
  if (i < n) {
    for (int64_t j = i; j < n; j += 8) {
      const __mmask8 valid = TailMask(n - j);
      _mm_mask_storeu_epi8(states + j, valid, group8(j, valid));
    }
    CountStates64(states + i, n - i, t);
  }
}

template <Shape kShape, Mag kMag = Mag::kScale>
VT_AVX512 void RoundLogShaped(const KernelParams& params, const double* x, double* out,
                              uint8_t* states, int64_t n, RoundTally* tally,
                              const double* mag = nullptr) {
  const KernelParams p = params;  // a local copy: the state stores cannot alias it
  __m512i max_r = _mm512_setzero_si512();
  __mmask8 bad_m = 0;
  // Lane j's magnitude, if any (only read by Mag::kArray).
  auto m_at = [mag](int64_t j) __attribute__((always_inline)) {
    return kMag == Mag::kArray ? mag + j : nullptr;
  };
  RoundTally t;
  int64_t steerable = 0;
  const BitsWindow bits = MakeBitsWindow<kShape>(p);  // not usable for kGeneral
  __m512i lane_steerable = _mm512_setzero_si512();
  auto round8 = [&](int64_t j, __mmask8 valid) __attribute__((always_inline)) {
    __m128i s;
    if (kShape != Shape::kGeneral && bits.usable &&
        RoundLogBits8<kShape, kMag>(bits, p, x + j, m_at(j), out + j, valid, &max_r,
                                    &lane_steerable, &bad_m, &s)) {
      return s;
    }
    return RoundLog8<kShape, kMag>(p, x + j, m_at(j), out + j, valid, &max_r, &steerable, &bad_m);
  };
  if (kShape == Shape::kRelative && bits.usable) {
    // The paper's window: RoundRelative8, in a loop of its own (a first test in round8 cost
    // 8% of the kernel); a group it does not take goes through RoundLog8, which counts its
    // own steerable lanes.
    WriteStates(
        n, states, &t, [&](int64_t j, __mmask8 valid) __attribute__((always_inline)) {
          __m128i s;
          if (__builtin_expect(RoundRelative8(bits, x + j, out + j, valid, &s, &lane_steerable),
                               1)) {
            return s;
          }
          return RoundLog8<kShape, kMag>(p, x + j, m_at(j), out + j, valid, &max_r, &steerable,
                                         &bad_m);
        });
  } else {
    WriteStates(n, states, &t, round8);
  }
  AddRoundCounts(t, steerable + SumLanes(lane_steerable), max_r, bad_m, tally);
}

// What a replay counts, per lane group.
struct ReplayCounts {
  int64_t corrections = 0, illegitimate = 0, near_misses = 0, steerable = 0;
};

// Per-lane counts of ReplayRelativeAgreed8 and ReplayBits8 (CountLanes), summed at the end.
struct ReplayLaneCounts {
  __m512i illegitimate, near_misses, steerable;
  VT_AVX512 ReplayLaneCounts()
      : illegitimate(_mm512_setzero_si512()),
        near_misses(_mm512_setzero_si512()),
        steerable(_mm512_setzero_si512()) {}
};

VT_AVX512 inline void AddLaneCounts(const ReplayLaneCounts& lanes, ReplayCounts* c) {
  c->illegitimate += SumLanes(lanes.illegitimate);
  c->near_misses += SumLanes(lanes.near_misses);
  c->steerable += SumLanes(lanes.steerable);
}

// The relative window's replay (kRelative on BitsWindow's integer path) of 8 lanes whose
// entries all agree with x': every DOWN/UP entry is the one rounding x' itself writes
// (StateBytes8) and none sits on the grid, so nothing moves and the output is rnd_b(x').
// That is an honest log's common case; it skips ReplayBits8's mask logic. False, writing and
// counting nothing, for any other group: a lane RelativeLanes8 does not take, an entry that
// moves a value, one on the grid; ReplayBits8 then takes it. Needs no range check either.
VT_AVX512 inline bool ReplayRelativeAgreed8(const BitsWindow& b, const double* x,
                                            const uint8_t* states, double* out, __mmask8 valid,
                                            ReplayLaneCounts* c) {
  __m512i ux, r, dr, adr;
  if (!RelativeLanes8(b, x, valid, &ux, &r, &dr, &adr)) return false;
  // Every DOWN/UP entry must sit off the grid and name the direction rounding x' takes (the
  // top bit of (u - r) ^ x, StateBytes8): UP (2) exactly where that direction is up.
  const __m128i st = LoadStates8(states, valid);
  const __mmask8 off = _mm512_test_epi64_mask(dr, dr);
  const __mmask8 up = _mm512_movepi64_mask(_mm512_xor_si512(dr, ux));
  const __mmask8 is_dir = static_cast<__mmask8>(
      _mm_cmplt_epu8_mask(_mm_sub_epi8(st, _mm_set1_epi8(1)), _mm_set1_epi8(2)));
  const __mmask8 wants_up = static_cast<__mmask8>(_mm_cmpeq_epi8_mask(st, _mm_set1_epi8(2)));
  if ((is_dir & (~off | (up ^ wants_up))) != 0) return false;
  // near (|a - mid| <= w1) and within 2w (<= w2) imply off (BitsWindow t1, t2). A DOWN/UP
  // entry that moves nothing (all here) is illegitimate beyond 2w; a value is steerable
  // (an entry that moves it is accepted) where it is near.
  const __mmask8 near = _mm512_cmpge_epu64_mask(adr, b.t1);
  const __mmask8 in2 = _mm512_cmpge_epu64_mask(adr, b.t2);
  const __mmask8 none = static_cast<__mmask8>(_mm_testn_epi8_mask(st, st));
  c->steerable = CountLanes(c->steerable, near);
  c->illegitimate = CountLanes(c->illegitimate, static_cast<__mmask8>(is_dir & ~in2));
  c->near_misses = CountLanes(c->near_misses, static_cast<__mmask8>(near & none));
  StoreSigned8(r, ux, out, valid);
  return true;
}

// Replay8 on the integer path: false, writing nothing, when it does not apply. Corrections
// move by g and values on the grid compare their distance to the nearest midpoint in doubles,
// as Replay8 does; both are rare, so g is only built for them.
template <Shape kShape, Mag kMag>
VT_AVX512 inline bool ReplayBits8(const BitsWindow& b, const KernelParams& p, const double* x,
                                  const double* mag, const uint8_t* states, double* out,
                                  __mmask8 valid, ReplayCounts* c, ReplayLaneCounts* lanes,
                                  __m512i* max_r, __mmask8* bad_m) {
  BitLanes l;
  if (!BitLanesOf8(b, x, valid, &l)) return false;
  const __mmask8 off = static_cast<__mmask8>(l.off & valid);
  // far: a DOWN/UP entry there is illegitimate (beyond 2w, or under a shut window); in1:
  // within w, where one that moves the value is accepted, which makes it steerable.
  __mmask8 far, near, in1, steer;
  __m512d w_abs = _mm512_setzero_pd();  // absolute: the window
  if (kShape == Shape::kRelative) {
    far = _mm512_mask_cmpgt_epi64_mask(off, l.dist, b.w2);
    near = _mm512_mask_cmple_epi64_mask(off, l.dist, b.w1);
    in1 = near;
    steer = near;
  } else {
    __m512d d;
    if (!AbsoluteBits8<kMag>(b, p, l, mag, valid, &w_abs, &d, bad_m)) return false;
    const __m512d w2 = _mm512_mul_pd(_mm512_set1_pd(2.0), w_abs);
    const __mmask8 in2 = _mm512_mask_cmp_pd_mask(off, d, w2, _CMP_LE_OQ);
    const __mmask8 shut = _mm512_cmp_pd_mask(w_abs, _mm512_setzero_pd(), _CMP_EQ_OQ);
    far = static_cast<__mmask8>((off & ~in2) | shut);
    near = _mm512_mask_cmp_pd_mask(off, d, w_abs, _CMP_LE_OQ);
    in1 = near;
    steer = static_cast<__mmask8>(near & ~shut);
    if (const __mmask8 zero = static_cast<__mmask8>(l.zero & valid); zero != 0) {
      // (A direction on a zero is illegitimate below, as on any grid value.)
      steer |= _mm512_mask_cmp_pd_mask(zero, w_abs, b.zero_quarter, _CMP_GT_OQ);
      // A zero's nearest midpoint is g0/2 (OnGridMid8): a near miss as the branch for values
      // on the grid below finds it, which zeros without an entry skip.
      near |= _mm512_mask_cmp_pd_mask(zero, w_abs, b.zero_half, _CMP_GT_OQ);
    }
  }
  const __m512i st = _mm512_cvtepu8_epi64(_mm_maskz_loadu_epi8(valid, states));
  const __m512i st_minus_1 = _mm512_sub_epi64(st, _mm512_set1_epi64(1));
  const __mmask8 is_dir = _mm512_cmplt_epu64_mask(st_minus_1, _mm512_set1_epi64(2));
  // Nothing moves and no entry sits on the grid where every DOWN/UP entry is the one rounding
  // x' writes (1 + ((r > u) ^ sign), RoundLogBits8; 0 on the grid): then the branch below,
  // which finds move_up | move_down | on_grid, is skipped (an honest log's common case).
  const __m512i expected = DirectionStates8(l, off);
  __m512i result = l.r;
  if (_mm512_mask_cmpneq_epi64_mask(is_dir, st, expected) != 0) {
    const __mmask8 st_up = _mm512_cmpeq_epi64_mask(st, _mm512_set1_epi64(2));
    const __mmask8 want_hi = static_cast<__mmask8>(st_up ^ _mm512_test_epi64_mask(l.sign, l.sign));
    const __mmask8 move_up = static_cast<__mmask8>(is_dir & want_hi & ~l.up & off);
    const __mmask8 move_down = static_cast<__mmask8>(is_dir & ~want_hi & l.up);
    // A DOWN/UP entry on the grid is never honest (kernels.cc ReplayOne). A NONE value there
    // is never a near miss on this path: its nearest midpoint is at least g/4 away (g/4 at a
    // power of two, g/2 elsewhere, g0/2 at zero) and the window at most g/4 (the relative one,
    // band <= 1/4 here, and the absolute one off zero, w <= g/16, AbsoluteBits8); a zero's,
    // under the absolute window, is above.
    far |= static_cast<__mmask8>(~l.off & valid & is_dir);
    const __m512i k_minus_23 = _mm512_set1_epi64(static_cast<long long>(p.k - 23));
    Lanes lanes;
    lanes.a = _mm512_castsi512_pd(l.u);
    lanes.g = SpacingAt8(lanes.a, k_minus_23);
    const __m512d r = _mm512_castsi512_pd(l.r);
    __m512d moved = _mm512_mask_add_pd(r, move_up, r, lanes.g);
    moved = _mm512_mask_sub_pd(moved, move_down, r, lanes.g);
    // An entry that moves the value is honest only within w (kernels.cc ReplayOne) and below
    // 2^128; an illegitimate one is not applied.
    const __mmask8 asks = static_cast<__mmask8>(move_up | move_down);
    far |= static_cast<__mmask8>(asks & ~in1);
    far |= _mm512_mask_cmpge_epu64_mask(
        asks, _mm512_castpd_si512(moved),
        _mm512_set1_epi64(static_cast<long long>(DoubleBits(kFp32Overflow))));
    const __mmask8 apply = static_cast<__mmask8>(asks & ~far);
    result = _mm512_mask_mov_epi64(l.r, apply, _mm512_castpd_si512(moved));
    c->corrections += Count(apply);
  }
  lanes->steerable = CountLanes(lanes->steerable, steer);
  lanes->illegitimate = CountLanes(
      lanes->illegitimate, _mm512_mask_cmplt_epu64_mask(far, st_minus_1, _mm512_set1_epi64(2)));
  lanes->near_misses = CountLanes(lanes->near_misses,
                                  _mm512_mask_cmpeq_epi64_mask(near, st, _mm512_setzero_si512()));
  *max_r = _mm512_max_epu64(*max_r, _mm512_max_epu64(l.r, result));
  _mm512_mask_storeu_epi64(out, valid, _mm512_or_si512(result, l.sign));
  return true;
}

// Replays 8 lanes (the first `valid` ones are real): writes the results, adds the counts
// and folds the bit patterns of rnd_b(|x'|) and of the results into `max_r`.
template <Shape kShape, Mag kMag>
VT_AVX512 inline void Replay8(const KernelParams& p, const double* x, const double* mag,
                              const uint8_t* states, double* out, __mmask8 valid, ReplayCounts* c,
                              __m512i* max_r, __mmask8* bad_m) {
  const __m512i k_plus_29 = _mm512_set1_epi64(static_cast<long long>(p.k + 29));
  const __m512i k_minus_23 = _mm512_set1_epi64(static_cast<long long>(p.k - 23));
  const __m512d xv = _mm512_maskz_loadu_pd(valid, x);
  const __m512i st = _mm512_cvtepu8_epi64(_mm_maskz_loadu_epi8(valid, states));
  const Lanes l = CellOf8(xv, k_plus_29, k_minus_23);
  // kRelative here only means alpha_scale = 0 (any band): w = fl(band * g) + 0 = fl(band * g).
  const __m512d as = AbsoluteTerm8<kMag>(p, l, mag, valid, bad_m);
  const __m512d w = kShape == Shape::kAbsolute   ? as
                    : kShape == Shape::kRelative ? _mm512_mul_pd(_mm512_set1_pd(p.band), l.g)
                                                 : Window8(_mm512_set1_pd(p.band), l.g, as);
  const __m512d w2 = _mm512_mul_pd(_mm512_set1_pd(2.0), w);
  const __mmask8 off = static_cast<__mmask8>(~l.on_grid);
  const __mmask8 st_none = _mm512_cmpeq_epi64_mask(st, _mm512_setzero_si512());
  const __mmask8 st_up = _mm512_cmpeq_epi64_mask(st, _mm512_set1_epi64(2));
  const __mmask8 is_dir = static_cast<__mmask8>(
      _mm512_cmplt_epu64_mask(_mm512_sub_epi64(st, _mm512_set1_epi64(1)), _mm512_set1_epi64(2)));
  // The entry asks for hi(|x'|) when (UP and x' >= 0) or (DOWN and x' < 0).
  const __mmask8 want_hi = static_cast<__mmask8>(st_up ^ _mm512_test_epi64_mask(l.sign, l.sign));
  const __mmask8 move_up = static_cast<__mmask8>(is_dir & want_hi & ~l.up & off);
  const __mmask8 move_down = static_cast<__mmask8>(is_dir & ~want_hi & l.up);
  __m512d moved = _mm512_mask_add_pd(l.r, move_up, l.r, l.g);
  moved = _mm512_mask_sub_pd(moved, move_down, l.r, l.g);
  // Off the grid: InWindow with w and 2w; its tiny-magnitude case only when some lane has it.
  const __m512d d = _mm512_abs_pd(_mm512_sub_pd(l.a, l.mid));
  __mmask8 in1 = _mm512_cmp_pd_mask(d, w, _CMP_LE_OQ);
  __mmask8 in2 = _mm512_cmp_pd_mask(d, w2, _CMP_LE_OQ);
  const __mmask8 tiny =
      _mm512_cmp_pd_mask(l.a, _mm512_mul_pd(_mm512_set1_pd(0.25), l.g), _CMP_LT_OQ);
  if (__builtin_expect(tiny != 0, 0)) {
    in1 = InWindow8(l, w);
    in2 = InWindow8(l, w2);
  }
  __mmask8 far = static_cast<__mmask8>(off & ~in2);
  __mmask8 near = static_cast<__mmask8>(off & in1);
  // On the grid (zeros, exact values): the distance to the nearest midpoint, below.
  const __mmask8 on_grid = static_cast<__mmask8>(l.on_grid & valid);
  far |= on_grid;  // a DOWN/UP entry on the grid is never honest (kernels.cc ReplayOne)
  if (on_grid != 0) {
    near |= on_grid & _mm512_cmp_pd_mask(OnGridMid8(l, k_minus_23), w, _CMP_LT_OQ);
  }
  const __mmask8 shut = _mm512_cmp_pd_mask(w, _mm512_setzero_pd(), _CMP_EQ_OQ);  // zero window
  far |= shut;
  __mmask8 steer = static_cast<__mmask8>(off & in1 & ~shut & valid);
  if (kShape != Shape::kRelative || p.band > 0.25) {
    if (__builtin_expect((WideLanes(l, w) & valid) != 0, 0)) {
      const Wide wide = Wide8(l, w, in1, p, as, k_minus_23);
      far |= wide.too_wide;
      steer = static_cast<__mmask8>(wide.steerable & valid);
    }
  }
  // An entry that moves the value is honest only within w (kernels.cc ReplayOne) and below
  // 2^128; an illegitimate one is not applied (the replay keeps rnd_b(x')).
  const __mmask8 asks = static_cast<__mmask8>(move_up | move_down);
  far |= static_cast<__mmask8>(asks & ~in1);
  far |= static_cast<__mmask8>(
      asks & _mm512_cmp_pd_mask(moved, _mm512_set1_pd(kFp32Overflow), _CMP_GE_OQ));
  const __mmask8 apply = static_cast<__mmask8>(asks & ~far);
  const __m512d result = _mm512_mask_mov_pd(l.r, apply, moved);
  c->corrections += Count(apply);
  c->steerable += Count(steer);
  c->illegitimate += Count(static_cast<__mmask8>(is_dir & far));
  c->near_misses += Count(static_cast<__mmask8>(st_none & near & valid));
  // Range: rnd_b(|x'|) and |result| (non-negative or NaN) below 2^128, compared as bits.
  *max_r = _mm512_max_epu64(
      *max_r, _mm512_max_epu64(_mm512_castpd_si512(l.r), _mm512_castpd_si512(result)));
  _mm512_mask_storeu_pd(out, valid,
                        _mm512_castsi512_pd(_mm512_or_si512(_mm512_castpd_si512(result), l.sign)));
}

// Adds a replay's counts to `tally`, with its range check (the bit patterns of rnd_b(|x'|)
// and of the results, folded into max_r, against those of 2^128) and its magnitudes' check.
VT_AVX512 inline void AddReplayCounts(const ReplayCounts& c, __m512i max_r, __mmask8 bad_m,
                                      ReplayTally* tally) {
  const __mmask8 bad = _mm512_cmpge_epu64_mask(
      max_r, _mm512_set1_epi64(static_cast<long long>(DoubleBits(kFp32Overflow))));
  tally->corrections += c.corrections;
  tally->illegitimate += c.illegitimate;
  tally->near_misses += c.near_misses;
  tally->steerable += c.steerable;
  tally->out_of_range |= bad != 0;
  tally->bad_magnitude |= bad_m != 0;
}

template <Shape kShape, Mag kMag = Mag::kScale>
VT_AVX512 void ReplayShaped(const KernelParams& params, const double* x, const uint8_t* states,
                            double* out, int64_t n, ReplayTally* tally,
                            const double* mag = nullptr) {
  const KernelParams p = params;  // a local copy: the output stores cannot alias it
  __m512i max_r = _mm512_setzero_si512();
  __mmask8 bad_m = 0;
  ReplayCounts c;
  auto m_at = [mag](int64_t j) __attribute__((always_inline)) {
    return kMag == Mag::kArray ? mag + j : nullptr;
  };
  // kRelative replays any band > 0; the integer path only takes the paper's (<= 1/4).
  const BitsWindow bits = MakeBitsWindow<kShape>(p);
  ReplayLaneCounts lanes;
  auto replay8 = [&](int64_t i, __mmask8 valid) __attribute__((always_inline)) {
    if (kShape == Shape::kRelative && bits.usable &&
        ReplayRelativeAgreed8(bits, x + i, states + i, out + i, valid, &lanes)) {
      return;
    }
    if (kShape != Shape::kGeneral && bits.usable &&
        ReplayBits8<kShape, kMag>(bits, p, x + i, m_at(i), states + i, out + i, valid, &c, &lanes,
                                  &max_r, &bad_m)) {
      return;
    }
    Replay8<kShape, kMag>(p, x + i, m_at(i), states + i, out + i, valid, &c, &max_r, &bad_m);
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(states + i + kStatesAhead), _MM_HINT_T0);
    for (int64_t j = i; j < i + 64; j += 8) replay8(j, 0xff);
  }
  for (; i + 8 <= n; i += 8) replay8(i, 0xff);
  if (i < n) replay8(i, TailMask(n - i));
  AddLaneCounts(lanes, &c);
  AddReplayCounts(c, max_r, bad_m, tally);
}

// A record without entries (every state NONE) under the zero window (band 0, alpha 0: an
// exact boundary's). ReplayBits8 then gives rnd_b(x'), and of its counts only near_misses can
// be nonzero: the exact ties, where d = 0 <= w = 0 (no entry, so no corrections or
// illegitimate entries; a shut window, so nothing steerable). Lanes off the integer path
// take Replay8 with NONE states, so every result and count is ReplayShaped's.

// 8 lanes of it on the integer path: false, writing nothing, when that does not apply.
VT_AVX512 inline bool ReplayNoneZeroBits8(const BitsWindow& b, const double* x, double* out,
                                          __mmask8 valid, ReplayCounts* c) {
  __m512i ux, r, dr, adr;
  if (!b.usable || !RelativeLanes8(b, x, valid, &ux, &r, &dr, &adr)) return false;
  // The ties: |a - mid| = half - |u - r| = 0 (a zero's |u - r| is 0).
  c->near_misses += Count(_mm512_mask_cmpeq_epi64_mask(valid, adr, b.half));
  StoreSigned8(r, ux, out, valid);
  return true;
}

// 8 lanes of RoundZeroWindow on the integer path: false, writing nothing, when that does not
// apply. The zero window logs nothing and leaves nothing to steer, so only the rounding
// remains (RelativeLanes8's lanes need no range check).
VT_AVX512 inline bool RoundZeroBits8(const BitsWindow& b, const double* x, double* out,
                                     __mmask8 valid) {
  __m512i ux, r, dr, adr;
  if (!b.usable || !RelativeLanes8(b, x, valid, &ux, &r, &dr, &adr)) return false;
  StoreSigned8(r, ux, out, valid);
  return true;
}

// The window of a span whose magnitudes are all <= bound: fl(alpha * bound) >= fl(alpha * m_i)
// for every m_i (rounding is monotone), twice it (exact), and whether zeros are then never
// steerable (w_max <= g0/4). A NaN or infinite bound fails every test of RoundFarFromWindow8.
struct BoundedWindow {
  __m512d w_max, w2_max;
  bool zeros_ok;
};

VT_AVX512 inline BoundedWindow BoundedWindowOf(const KernelParams& p, const BitsWindow& b,
                                               double bound) {
  const double w = p.alpha * bound;
  return {_mm512_set1_pd(w), _mm512_set1_pd(2.0 * w),
          b.usable && w <= std::ldexp(1.0, static_cast<int>(p.k) - 151)};
}

// The bounded kernels' test for 8 lanes (kernels.h RoundLogBoundedSpan): true when, under
// the absolute window with every lane's w_i <= w_max, the lanes take RelativeLanes8 (all
// normal or zero, rnd_b(|x|) below 2^128), every nonzero lane is narrow (w_max <= g/16), no
// off-grid lane lies within 2 w_max of its midpoint (half - |u - r| units away; a nonzero lane
// on the grid is g/2 > 2 w_max away), and no zero is steerable (w_max <= g0/4). Then, for
// every such w_i, RoundLogBits8 logs nothing and counts nothing steerable, and ReplayBits8 on
// NONE states counts no near miss and nothing steerable: both write rnd_b(x), which this
// stores into out (only when it returns true).
VT_AVX512 inline bool RoundFarFromWindow8(const BitsWindow& b, const double* x, __mmask8 valid,
                                          const BoundedWindow& bw, double* out) {
  __m512i ux, r, dr, adr, u;
  __mmask8 zero;
  if (!RelativeLanes8(b, x, valid, &ux, &r, &dr, &adr, &u, &zero)) return false;
  const __m512i exponent = _mm512_and_si512(u, _mm512_set1_epi64(0x7ff0000000000000ll));
  const __m512d g16 = _mm512_castsi512_pd(_mm512_sub_epi64(exponent, b.g16_below));
  if (static_cast<__mmask8>(_mm512_cmp_pd_mask(bw.w_max, g16, _CMP_LE_OQ) | zero) != 0xff) {
    return false;
  }
  if (!bw.zeros_ok && static_cast<__mmask8>(zero & valid) != 0) return false;
  const __m512d ulp = _mm512_castsi512_pd(_mm512_sub_epi64(exponent, b.ulp_below));
  const __m512d d = _mm512_mul_pd(_mm512_cvtepi64_pd(_mm512_sub_epi64(b.half, adr)), ulp);
  const __mmask8 nonzero = static_cast<__mmask8>(~zero & valid);
  if (_mm512_mask_cmp_pd_mask(nonzero, d, bw.w2_max, _CMP_LE_OQ) != 0) return false;
  StoreSigned8(r, ux, out, valid);
  return true;
}

// Whether the valid lanes' states are all NONE.
VT_AVX512 inline bool NoEntries8(const uint8_t* states, __mmask8 valid) {
  const __m128i st = _mm_maskz_loadu_epi8(valid, states);
  return _mm_test_all_zeros(st, st) != 0;
}

// RoundFarFromWindow8's test at b = 32 by the hardware's FP32 conversion, in a loop of its
// own: the constants stay in registers and the loop holds no slow path, about half the
// integer path's instructions per group. For a lane on the normal FP32 grid (2^-126 <= |x|,
// rnd(|x|) < 2^128), r = rnd(x) comes from the conversion, |x - r| is exact (Sterbenz), and
// g/2 (the spacing of |x|'s binade, halved) from |x|'s exponent bits; its distance to its
// midpoint is g/2 - |x - r|. The lane is far when |x - r| < RD(g/2 - 8 w_max): then
// d > 8 w_max and g/2 > 8 w_max (w_max < g/16, narrow), RoundFarFromWindow8's test with a
// wider margin (a lane within 8 w_max of its midpoint takes the slow path, which decides it
// exactly). Zeros pass when they are never steerable.
struct FarFp32 {
  __m512d w8;            // 8 w_max (NaN or infinite: no lane passes)
  __m512i halfg_below;   // subtracted from |x|'s exponent bits: those of g/2
  __m512i min_normal;    // 2^-126's bits
  __m512i rounds_below;  // |x|'s bits minus min_normal below this: rnd(|x|) < 2^128
  __mmask8 zeros;        // 0xff when zeros are never steerable, else 0
};

VT_AVX512 inline FarFp32 FarFp32Of(const BitsWindow& b, const BoundedWindow& bw) {
  FarFp32 f;
  f.w8 = _mm512_mul_pd(bw.w_max, _mm512_set1_pd(8.0));
  f.halfg_below = _mm512_set1_epi64(static_cast<long long>(uint64_t{24} << 52));
  f.min_normal = _mm512_set1_epi64(static_cast<long long>(kMinNormalExponent << 52));
  f.rounds_below = b.rounds_below;
  f.zeros = bw.zeros_ok ? 0xff : 0;
  return f;
}

// Rounds the full groups of 8 in [i, end) while each is far from its window (for a replay,
// `kReplay`, also while its states are all NONE), writing out (and, rounding, NONE states);
// returns the first group that is not, or the end. A group that stops the run is left as it
// was (out may be x).
// (`states` is read for a replay, written for a rounding.)
template <bool kReplay>
VT_AVX512 inline int64_t FarRunFp32(const FarFp32& f, const double* x, double* out,
                                    std::conditional_t<kReplay, const uint8_t*, uint8_t*> states,
                                    int64_t i, int64_t end) {
  const __m512i sign = _mm512_set1_epi64(static_cast<long long>(kSignBit));
  const __m512i exponent = _mm512_set1_epi64(0x7ff0000000000000ll);
  for (; i + 8 <= end; i += 8) {
    uint64_t st;
    if (kReplay) {
      std::memcpy(&st, states + i, 8);
      if (st != 0) break;
    }
    const __m512d v = _mm512_loadu_pd(x + i);
    const __m512i u = _mm512_andnot_si512(sign, _mm512_castpd_si512(v));
    const __mmask8 normal =
        _mm512_cmplt_epu64_mask(_mm512_sub_epi64(u, f.min_normal), f.rounds_below);
    const __mmask8 zero = static_cast<__mmask8>(_mm512_testn_epi64_mask(u, u) & f.zeros);
    const __m512d r =
        _mm512_cvtps_pd(_mm512_cvt_roundpd_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512d half_g =
        _mm512_castsi512_pd(_mm512_sub_epi64(_mm512_and_si512(u, exponent), f.halfg_below));
    const __m512d limit =
        _mm512_sub_round_pd(half_g, f.w8, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512d dr =
        _mm512_castsi512_pd(_mm512_andnot_si512(sign, _mm512_castpd_si512(_mm512_sub_pd(v, r))));
    const __mmask8 far = _mm512_mask_cmp_pd_mask(normal, dr, limit, _CMP_LT_OQ);
    if (static_cast<__mmask8>(far | zero) != 0xff) break;
    _mm512_storeu_pd(out + i, r);
    if constexpr (!kReplay) {
      st = 0;
      std::memcpy(states + i, &st, 8);
    }
  }
  return i;
}

// Adds the DOWN, UP and EXACT states among 8 state bytes (the low 8 of s, `valid` lanes).
VT_AVX512 inline void CountStates8(__m128i s, __mmask8 valid, RoundTally* t) {
  const __mmask16 v = valid;
  t->down += __builtin_popcount(_mm_mask_cmpeq_epi8_mask(v, s, _mm_set1_epi8(1)));
  t->up += __builtin_popcount(_mm_mask_cmpeq_epi8_mask(v, s, _mm_set1_epi8(2)));
  t->exact += __builtin_popcount(_mm_mask_cmpeq_epi8_mask(v, s, _mm_set1_epi8(3)));
}

}  // namespace

VT_AVX512 void RoundLogBounded(const KernelParams& params, const double* x, double* out,
                               uint8_t* states, int64_t n, RoundTally* tally, double bound,
                               const MagnitudeFiller& f) {
  const KernelParams p = params;  // a local copy: the state stores cannot alias it
  __m512i max_r = _mm512_setzero_si512();
  __mmask8 bad_m = 0;
  RoundTally t;
  int64_t steerable = 0;
  __m512i lane_steerable = _mm512_setzero_si512();
  const BitsWindow bits = MakeBitsWindow<Shape::kAbsolute>(p);
  const BoundedWindow bw = BoundedWindowOf(p, bits, bound);
  alignas(64) double m[8];
  auto round8 = [&](int64_t j, __mmask8 valid) __attribute__((always_inline)) {
    if (bits.usable && RoundFarFromWindow8(bits, x + j, valid, bw, out + j)) return __m128i{};
    f.fill(f.ctx, f.offset + j, std::min<int64_t>(8, n - j), m);
    __m128i s;
    if (bits.usable &&
        RoundLogBits8<Shape::kAbsolute, Mag::kArray>(bits, p, x + j, m, out + j, valid, &max_r,
                                                     &lane_steerable, &bad_m, &s)) {
      return s;
    }
    return RoundLog8<Shape::kAbsolute, Mag::kArray>(p, x + j, m, out + j, valid, &max_r, &steerable,
                                                    &bad_m);
  };
  int64_t i = 0;
  if (bits.usable && p.k == 0) {
    // Runs of far groups by the conversion; each group that stops one takes round8 (which
    // tries the integer test first: cheap next to its magnitudes) and is counted on its own.
    const FarFp32 far = FarFp32Of(bits, bw);
    const int64_t full = n - n % 8;
    while ((i = FarRunFp32<false>(far, x, out, states, i, full)) < full) {
      const __m128i s = round8(i, 0xff);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(states + i), s);
      CountStates8(s, 0xff, &t);
      i += 8;
    }
    if (i < n) {
      const __mmask8 valid = TailMask(n - i);
      const __m128i s = round8(i, valid);
      _mm_mask_storeu_epi8(states + i, valid, s);
      CountStates8(s, valid, &t);
    }
  } else {
    for (; i + 8 <= n; i += 8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(states + i), round8(i, 0xff));
    }
    if (i < n) {
      const __mmask8 valid = TailMask(n - i);
      _mm_mask_storeu_epi8(states + i, valid, round8(i, valid));
    }
    for (int64_t j = 0; j < n; j += 64) CountStates64(states + j, std::min<int64_t>(64, n - j), &t);
  }
  AddRoundCounts(t, steerable + SumLanes(lane_steerable), max_r, bad_m, tally);
}

VT_AVX512 void ReplayBounded(const KernelParams& params, const double* x, const uint8_t* states,
                             double* out, int64_t n, ReplayTally* tally, double bound,
                             const MagnitudeFiller& f) {
  const KernelParams p = params;  // a local copy: the output stores cannot alias it
  __m512i max_r = _mm512_setzero_si512();
  __mmask8 bad_m = 0;
  ReplayCounts c;
  ReplayLaneCounts lanes;
  const BitsWindow bits = MakeBitsWindow<Shape::kAbsolute>(p);
  const BoundedWindow bw = BoundedWindowOf(p, bits, bound);
  alignas(64) double m[8];
  auto replay8 = [&](int64_t j, __mmask8 valid) __attribute__((always_inline)) {
    // Only a group without entries can skip its magnitudes (an entry's legitimacy needs them).
    if (bits.usable && NoEntries8(states + j, valid) &&
        RoundFarFromWindow8(bits, x + j, valid, bw, out + j)) {
      return;
    }
    f.fill(f.ctx, f.offset + j, std::min<int64_t>(8, n - j), m);
    if (bits.usable &&
        ReplayBits8<Shape::kAbsolute, Mag::kArray>(bits, p, x + j, m, states + j, out + j, valid,
                                                   &c, &lanes, &max_r, &bad_m)) {
      return;
    }
    Replay8<Shape::kAbsolute, Mag::kArray>(p, x + j, m, states + j, out + j, valid, &c, &max_r,
                                           &bad_m);
  };
  int64_t i = 0;
  if (bits.usable && p.k == 0) {
    const FarFp32 far = FarFp32Of(bits, bw);
    const int64_t full = n - n % 8;
    while ((i = FarRunFp32<true>(far, x, out, states, i, full)) < full) {
      replay8(i, 0xff);
      i += 8;
    }
  } else {
    for (; i + 64 <= n; i += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(states + i + kStatesAhead), _MM_HINT_T0);
      for (int64_t j = i; j < i + 64; j += 8) replay8(j, 0xff);
    }
    for (; i + 8 <= n; i += 8) replay8(i, 0xff);
  }
  if (i < n) replay8(i, TailMask(n - i));
  AddLaneCounts(lanes, &c);
  AddReplayCounts(c, max_r, bad_m, tally);
}

// 8 lanes of RoundZeroWindow at b = 32 by the hardware's conversion to FP32 and back: false,
// writing nothing, when some valid lane comes back infinite or NaN (out of range, or NaN in:
// the checked path reports it). Round to nearest, ties to even, on FP32's grid with its
// subnormals: rnd_b's grid at b = 32 (spacing 2^-149 at zero), sign of zero kept. Needs
// flush-to-zero and denormals-are-zero clear (which would flush the FP32 subnormals rnd_b
// keeps): the callers' KernelFpEnv sees to that.
VT_AVX512 inline bool RoundZeroFp32x8(const double* x, double* out, __mmask8 valid) {
  const __m512d v = valid == 0xff ? _mm512_loadu_pd(x) : _mm512_maskz_loadu_pd(valid, x);
  const __m512d r =
      _mm512_cvtps_pd(_mm512_cvt_roundpd_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  // fpclass 0x99: QNaN (0x01), +inf (0x08), -inf (0x10), SNaN (0x80).
  if (_mm512_mask_fpclass_pd_mask(valid, r, 0x99) != 0) return false;
  Store8(out, valid, _mm512_castpd_si512(r));
  return true;
}

VT_AVX512 void RoundZeroWindow(const KernelParams& params, const double* x, double* out, int64_t n,
                               RoundTally* tally) {
  const KernelParams p = params;  // a local copy: the output stores cannot alias it
  __m512i max_r = _mm512_setzero_si512();
  __mmask8 bad_m = 0;
  int64_t steerable = 0;  // stays 0: nothing is steerable under the zero window
  const BitsWindow bits = MakeBitsWindow<Shape::kAbsolute>(p);
  // At b = 32 rnd_b is the hardware's FP32 conversion: about half the integer path's vector
  // instructions.
  const bool fp32 = p.k == 0;
  auto round8 = [&](int64_t i, __mmask8 valid) __attribute__((always_inline)) {
    if (fp32 ? RoundZeroFp32x8(x + i, out + i, valid) : RoundZeroBits8(bits, x + i, out + i, valid))
      return;
    RoundLog8<Shape::kAbsolute, Mag::kScale>(p, x + i, nullptr, out + i, valid, &max_r, &steerable,
                                             &bad_m);
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) round8(i, 0xff);
  if (i < n) round8(i, TailMask(n - i));
  AddRoundCounts(RoundTally{}, steerable, max_r, bad_m, tally);
}

VT_AVX512 void RoundLog(const KernelParams& p, const double* x, double* out, uint8_t* states,
                        int64_t n, RoundTally* tally) {
  if (p.band == 0.0) {
    RoundLogShaped<Shape::kAbsolute>(p, x, out, states, n, tally);
  } else if (p.alpha_scale == 0.0 && p.band <= 0.25) {
    RoundLogShaped<Shape::kRelative>(p, x, out, states, n, tally);
  } else {
    RoundLogShaped<Shape::kGeneral>(p, x, out, states, n, tally);
  }
}

VT_AVX512 void ReplayNoneZeroWindow(const KernelParams& params, const double* x, double* out,
                                    int64_t n, ReplayTally* tally) {
  const KernelParams p = params;  // a local copy: the output stores cannot alias it
  static const uint8_t kNone[8] = {};
  __m512i max_r = _mm512_setzero_si512();
  __mmask8 bad_m = 0;
  ReplayCounts c;
  const BitsWindow bits = MakeBitsWindow<Shape::kAbsolute>(p);
  auto replay8 = [&](int64_t i, __mmask8 valid) __attribute__((always_inline)) {
    if (ReplayNoneZeroBits8(bits, x + i, out + i, valid, &c)) return;
    Replay8<Shape::kAbsolute, Mag::kScale>(p, x + i, nullptr, kNone, out + i, valid, &c, &max_r,
                                           &bad_m);
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) replay8(i, 0xff);
  if (i < n) replay8(i, TailMask(n - i));
  AddReplayCounts(c, max_r, bad_m, tally);
}

VT_AVX512 void Replay(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                      int64_t n, ReplayTally* tally) {
  if (p.band == 0.0) {
    ReplayShaped<Shape::kAbsolute>(p, x, states, out, n, tally);
  } else if (p.alpha_scale == 0.0) {
    ReplayShaped<Shape::kRelative>(p, x, states, out, n, tally);
  } else {
    ReplayShaped<Shape::kGeneral>(p, x, states, out, n, tally);
  }
}

namespace {

// Per-element absolute terms: the shapes that skip work assume one alpha_scale, so only the
// band = 0 shape (w is the absolute term itself) is kept apart from the general one. Calls
// run(shape, mag) with both as std::integral_constant for the variant `p` and `magnitude` need.
template <class Run>
VT_AVX512 inline void ForMagnitudeVariant(const KernelParams& p, const double* magnitude,
                                          Run&& run) {
  using Absolute = std::integral_constant<Shape, Shape::kAbsolute>;
  using General = std::integral_constant<Shape, Shape::kGeneral>;
  using Array = std::integral_constant<Mag, Mag::kArray>;
  using Own = std::integral_constant<Mag, Mag::kOwn>;
  if (magnitude != nullptr) {
    p.band == 0.0 ? run(Absolute{}, Array{}) : run(General{}, Array{});
  } else {
    p.band == 0.0 ? run(Absolute{}, Own{}) : run(General{}, Own{});
  }
}

}  // namespace

VT_AVX512 void RoundLogMagnitude(const KernelParams& p, const double* x, double* out,
                                 uint8_t* states, int64_t n, RoundTally* tally,
                                 const double* magnitude) {
  ForMagnitudeVariant(p, magnitude, [&](auto shape, auto mag) {
    RoundLogShaped<decltype(shape)::value, decltype(mag)::value>(p, x, out, states, n, tally,
                                                                 magnitude);
  });
}

VT_AVX512 void ReplayMagnitude(const KernelParams& p, const double* x, const uint8_t* states,
                               double* out, int64_t n, ReplayTally* tally,
                               const double* magnitude) {
  ForMagnitudeVariant(p, magnitude, [&](auto shape, auto mag) {
    ReplayShaped<decltype(shape)::value, decltype(mag)::value>(p, x, states, out, n, tally,
                                                               magnitude);
  });
}

}  // namespace vt::precision::avx512
