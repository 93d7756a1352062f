// The precision kernels (kernels.h): one always-inline body per kernel, instantiated for
// plain x86-64, AVX2 and AVX-512 through target attributes, and a dispatch table.
//
// The loop bodies are written for the auto-vectorizer: no branches (bitwise & and | on
// booleans, sign flips by XOR), 64-bit integer accumulators that share the lanes of the
// FP64 values, and __restrict on every pointer that cannot alias. In-place calls use a
// separate instantiation that reads and writes through one pointer.
#include "runtime/precision/kernels.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "runtime/common/error.h"
#include "runtime/precision/kernels_avx512.h"
#include "runtime/precision/window.h"

namespace vt::precision {
namespace {

// One element of RoundSpan: returns the output bits and (if kLog) the state. kWide: the
// wide-window terms (window.h WideAt) are computed; without it they must not matter here.
template <bool kLog, bool kWide>
VT_PRECISION_INLINE uint64_t RoundOne(double xi, uint64_t k, double band, double alpha_scale,
                                      uint64_t* state, int64_t* steerable, uint64_t* bad) {
  const uint64_t ux = DoubleBits(xi);
  const uint64_t sign = ux & kSignBit;
  const double a = BitsDouble(ux ^ sign);
  const Cell c = CellOf(a, k);
  *bad |= static_cast<uint64_t>(!(c.r < kFp32Overflow));
  if (kLog) {
    const double w = Window(band, c.g, alpha_scale);
    const bool exact_window = w > 0.25 * c.g;
    // Logged when some midpoint is within w. Only a window wider than g/4 reaches one other
    // than mid (the midpoint below lo, or the nearest one of a value on the grid); then
    // the entry is EXACT. Exact zeros are exempt: at a boundary they come from masks,
    // padding and empty sums, which every honest party computes as zero too
    // (docs/ROUNDING.md, "Zeros").
    const bool other = kWide && (exact_window & (LowerMidDistance(a, c, k) < w) & (a != 0.0));
    // A zero window (an exact boundary) logs nothing: ties go to even.
    const uint64_t logged =
        static_cast<uint64_t>(((!c.on_grid & InWindow(a, c.mid, c.g, w)) | other) & (w > 0.0));
    const uint64_t exact = static_cast<uint64_t>(exact_window);
    *steerable += static_cast<int64_t>(kWide ? Steerable(a, c, w, k, band, alpha_scale)
                                             : SteerableNarrow(a, c, w));
    // Signed direction: for x < 0 rounding the magnitude up is rounding toward -inf (DOWN).
    const uint64_t dir_up = static_cast<uint64_t>(c.up) ^ (sign >> 63);
    // NONE 0, DOWN 1, UP 2, EXACT 3: (1 + dir_up) | 3 = 3 when the window needs EXACT.
    *state = logged * ((1 + dir_up) | (3 * exact));
  }
  return DoubleBits(c.r) | sign;
}

// Whether any of x[0, n) needs the wide-window terms (window.h WideAt). Branch-free.
// Where a window's absolute term comes from: alpha_scale for every element (kScale), alpha
// times a magnitude array (kArray), or alpha times the element's own |x| (kOwn).
enum MagnitudeMode { kScale = 0, kArray = 1, kOwn = 2 };

// The absolute term of one element of magnitude a (= |x|), for mode kMag.
template <int kMag>
VT_PRECISION_INLINE double AbsoluteTerm(double a, const double* __restrict mag, int64_t i,
                                        double alpha, double alpha_scale) {
  return kMag == kArray ? alpha * mag[i] : kMag == kOwn ? alpha * a : alpha_scale;
}

template <int kMag>
VT_PRECISION_INLINE bool AnyWide(const double* __restrict x, const double* __restrict mag,
                                 int64_t n, uint64_t k, double band, double alpha,
                                 double alpha_scale) {
  uint64_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = BitsDouble(DoubleBits(x[i]) & ~kSignBit);
    const double g = SpacingAt(a, k);
    const double as = AbsoluteTerm<kMag>(a, mag, i, alpha, alpha_scale);
    any |= static_cast<uint64_t>(WideAt(a, g, Window(band, g, as)));
  }
  return any != 0;
}

// Whether a magnitude m (per element) fails its contract: finite and >= 0. Branch-free.
VT_PRECISION_INLINE uint64_t BadMagnitude(double m) {
  return static_cast<uint64_t>(!(m >= 0.0) | !(m < kInfinity));
}

// Values per block whose wide-window check decides which loop runs: 512 bytes, still in L1
// when the loop reads them again.
constexpr int64_t kWideBlock = 64;

// Runs body<false>(begin, end) over [0, n), or body<true> on the blocks where some value
// needs the wide-window terms; with a window that is never wide, no check at all.
template <int kMag, class Body>
VT_PRECISION_INLINE void ByWidth(const double* x, const double* mag, int64_t n, uint64_t k,
                                 double band, double alpha, double alpha_scale, Body&& body) {
  if (!MayBeWide(band, kMag == kScale ? alpha_scale : alpha)) {
    body(std::false_type{}, 0, n);
    return;
  }
  for (int64_t begin = 0; begin < n; begin += kWideBlock) {
    const int64_t end = begin + kWideBlock < n ? begin + kWideBlock : n;
    if (AnyWide<kMag>(x + begin, kMag == kArray ? mag + begin : nullptr, end - begin, k, band,
                      alpha, alpha_scale)) {
      body(std::true_type{}, begin, end);
    } else {
      body(std::false_type{}, begin, end);
    }
  }
}

// kMag: where the window's absolute term comes from (MagnitudeMode; ROUNDING.md "The
// window"); only an array of magnitudes is checked against |x|.
template <bool kLog, bool kInPlace, int kMag = kScale>
VT_PRECISION_INLINE void RoundBody(const KernelParams& p, const double* __restrict x,
                                   double* __restrict out, uint8_t* __restrict states, int64_t n,
                                   RoundTally* tally, const double* __restrict mag = nullptr) {
  const uint64_t k = p.k;
  const double band = p.band;
  const double alpha = p.alpha;
  const double alpha_scale = p.alpha_scale;
  int64_t down = 0, up = 0, exact = 0, steerable = 0;
  uint64_t bad = 0, bad_m = 0;
  // always_inline: the lambda is compiled inside each target-specific kernel, with its ISA.
  auto range = [&](auto wide, int64_t begin, int64_t end) __attribute__((always_inline)) {
    constexpr bool kWide = decltype(wide)::value;
    int64_t d = 0, u = 0, e = 0, st = 0;
    uint64_t b = 0, bm = 0;
    // In place through one pointer: two __restrict pointers must not name the same values.
    double* __restrict io = out;
    for (int64_t i = begin; i < end; ++i) {
      uint64_t s = 0;
      const double xi = kInPlace ? io[i] : x[i];
      const double ai = BitsDouble(DoubleBits(xi) & ~kSignBit);
      const double as = AbsoluteTerm<kMag>(ai, mag, i, alpha, alpha_scale);
      if (kMag == kArray) bm |= BadMagnitude(mag[i]);
      io[i] = BitsDouble(RoundOne<kLog, kWide>(xi, k, band, as, &s, &st, &b));
      if (kLog) {
        d += s == 1;
        u += s == 2;
        e += s == 3;
        states[i] = static_cast<uint8_t>(s);
      }
    }
    down += d;
    up += u;
    exact += e;
    steerable += st;
    bad |= b;
    bad_m |= bm;
  };
  if (kLog) {
    ByWidth<kMag>(kInPlace ? out : x, mag, n, k, band, alpha, alpha_scale, range);
  } else {
    range(std::false_type{}, 0, n);
  }
  tally->down += down;
  tally->up += up;
  tally->exact += exact;
  tally->steerable += steerable;
  tally->out_of_range |= bad != 0;
  tally->bad_magnitude |= bad_m != 0;
}

// One element of ReplaySpan: returns the output bits; adds to the per-lane counters. kWide
// as for RoundOne.
template <bool kWide>
VT_PRECISION_INLINE uint64_t ReplayOne(double xi, uint64_t st, uint64_t k, double band,
                                       double alpha_scale, int64_t* corrections,
                                       int64_t* illegitimate, int64_t* near_misses,
                                       int64_t* steerable, uint64_t* bad) {
  const uint64_t ux = DoubleBits(xi);
  const uint64_t sign = ux & kSignBit;
  const double a = BitsDouble(ux ^ sign);
  const Cell c = CellOf(a, k);
  const double w = Window(band, c.g, alpha_scale);
  const bool off = !c.on_grid;
  const bool is_dir = (st == 1) | (st == 2);
  // The entry asks for hi(|x'|) when (UP and x' >= 0) or (DOWN and x' < 0).
  const bool want_hi = (st == 2) ^ (sign != 0);
  // lo(|x'|) = r - g when rounded up, hi(|x'|) = r + g when rounded down (off the grid).
  const bool asks_up = is_dir & want_hi & !c.up & off;
  const bool asks_down = is_dir & !want_hi & c.up;
  // A DOWN/UP entry an honest trainer could not have written (window.h DirectionLegitimate)
  // is illegitimate and not applied: the replay keeps rnd_b(x'), as for EXACT. On the grid
  // no direction is honest (ROUNDING.md, "Legitimate entries": the trainer's x would lie in
  // a cell that ends at x', so its midpoint is g(x)/2 from x', and with |x - mid| <= w(x) <=
  // g(x)/4 and d < w(x) it would be nearer); nor is one under a zero window (which logs
  // nothing) or one wider than g/2 (where an honest trainer writes EXACT; w > g/2 needs
  // WideAt), nor one that moves x' although it is more than w from the midpoint (the honest x
  // would lie across the midpoint, more than w from x'), nor one that rounds to 2^128.
  // (w > g/2 arises only where WideAt holds: elsewhere the check is always true.)
  const bool legit = DirectionLegitimate(a, c, w, asks_up | asks_down);
  const bool illegit = is_dir & !legit;
  const bool move_up = asks_up & legit;
  const bool move_down = asks_down & legit;
  const uint64_t move = static_cast<uint64_t>(move_up | move_down);
  const uint64_t delta_bits =
      (DoubleBits(c.g) ^ (static_cast<uint64_t>(move_down) << 63)) & (0 - move);
  const double result = c.r + BitsDouble(delta_bits);
  *corrections += static_cast<int64_t>(move);
  // A NONE value on the grid is at risk when the nearest midpoint (half a spacing below) is
  // nearer than the window.
  const double on_grid_mid = OnGridMidDistance(a, k, c.g);
  const bool near = (off & InWindow(a, c.mid, c.g, w)) | (!off & (on_grid_mid < w));
  *illegitimate += static_cast<int64_t>(illegit);
  *near_misses += static_cast<int64_t>((st == 0) & near);
  *steerable += static_cast<int64_t>(kWide ? Steerable(a, c, w, k, band, alpha_scale)
                                           : SteerableNarrow(a, c, w));
  *bad |= static_cast<uint64_t>(!(c.r < kFp32Overflow) | !(result < kFp32Overflow));
  return DoubleBits(result) | sign;
}

template <bool kInPlace, int kMag = kScale>
VT_PRECISION_INLINE void ReplayBody(const KernelParams& p, const double* __restrict x,
                                    const uint8_t* __restrict states, double* __restrict out,
                                    int64_t n, ReplayTally* tally,
                                    const double* __restrict mag = nullptr) {
  const uint64_t k = p.k;
  const double band = p.band;
  const double alpha = p.alpha;
  const double alpha_scale = p.alpha_scale;
  int64_t corrections = 0, illegitimate = 0, near_misses = 0, steerable = 0;
  uint64_t bad = 0, bad_m = 0;
  // always_inline: the lambda is compiled inside each target-specific kernel, with its ISA.
  auto range = [&](auto wide, int64_t begin, int64_t end) __attribute__((always_inline)) {
    constexpr bool kWide = decltype(wide)::value;
    int64_t c = 0, il = 0, nm = 0, st = 0;
    uint64_t b = 0, bm = 0;
    double* __restrict io = out;  // in place through one pointer, as in RoundBody
    for (int64_t i = begin; i < end; ++i) {
      const double xi = kInPlace ? io[i] : x[i];
      const double ai = BitsDouble(DoubleBits(xi) & ~kSignBit);
      const double as = AbsoluteTerm<kMag>(ai, mag, i, alpha, alpha_scale);
      if (kMag == kArray) bm |= BadMagnitude(mag[i]);
      io[i] = BitsDouble(ReplayOne<kWide>(xi, states[i], k, band, as, &c, &il, &nm, &st, &b));
    }
    corrections += c;
    illegitimate += il;
    near_misses += nm;
    steerable += st;
    bad |= b;
    bad_m |= bm;
  };
  ByWidth<kMag>(kInPlace ? out : x, mag, n, k, band, alpha, alpha_scale, range);
  tally->corrections += corrections;
  tally->illegitimate += illegitimate;
  tally->near_misses += near_misses;
  tally->steerable += steerable;
  tally->out_of_range |= bad != 0;
  tally->bad_magnitude |= bad_m != 0;
}

VT_PRECISION_INLINE void GridBody(uint64_t k, const double* __restrict x, double* __restrict lo,
                                  double* __restrict hi, int64_t n, bool* out_of_range) {
  uint64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t ux = DoubleBits(x[i]);
    const uint64_t sign = ux & kSignBit;
    const double a = BitsDouble(ux ^ sign);
    const Cell c = CellOf(a, k);
    bad |= static_cast<uint64_t>(!(a < kFp32Overflow));
    const uint64_t g_bits = DoubleBits(c.g);
    // Magnitudes: lo = r - g if rounded up, hi = r + g if rounded down and off the grid.
    const double lo_mag = c.r - BitsDouble(g_bits & (0 - static_cast<uint64_t>(c.up)));
    const double hi_mag =
        c.r + BitsDouble(g_bits & (0 - static_cast<uint64_t>(!c.up & !c.on_grid)));
    // For x < 0 the signed lo is -hi(|x|) and the signed hi is -lo(|x|).
    const uint64_t neg = 0 - (sign >> 63);
    const uint64_t lo_bits = (DoubleBits(lo_mag) & ~neg) | (DoubleBits(hi_mag) & neg);
    const uint64_t hi_bits = (DoubleBits(hi_mag) & ~neg) | (DoubleBits(lo_mag) & neg);
    lo[i] = BitsDouble(lo_bits | sign);
    hi[i] = BitsDouble(hi_bits | sign);
  }
  *out_of_range |= bad != 0;
}

VT_PRECISION_INLINE uint64_t MaxAbsBody(const double* __restrict x, int64_t n) {
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(DoubleBits(x[i]) & ~kSignBit);
    m = v > m ? v : m;
  }
  return static_cast<uint64_t>(m);
}

VT_PRECISION_INLINE int64_t CountBody(const uint8_t* __restrict s, int64_t n, uint8_t value) {
  int64_t total = 0;
  constexpr int64_t kBlock = int64_t{1} << 20;  // keeps the 32-bit partial sums exact
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = start + kBlock < n ? start + kBlock : n;
    uint32_t c = 0;
    for (int64_t i = start; i < end; ++i) c += s[i] == value;
    total += c;
  }
  return total;
}

// The dispatch table of one instruction-set variant.
struct KernelTable {
  void (*round[2][2])(const KernelParams&, const double*, double*, uint8_t*, int64_t,
                      RoundTally*);  // [log][in_place]
  void (*replay[2])(const KernelParams&, const double*, const uint8_t*, double*, int64_t,
                    ReplayTally*);  // [in_place]
  // Per-element magnitudes: an array, or each value's own |x| when the array is null (always
  // the auto-vectorized bodies).
  void (*round_m[2][2])(const KernelParams&, const double*, double*, uint8_t*, int64_t, RoundTally*,
                        const double*);  // [log][in_place]
  void (*replay_m[2])(const KernelParams&, const double*, const uint8_t*, double*, int64_t,
                      ReplayTally*, const double*);  // [in_place]
  void (*grid)(uint64_t, const double*, double*, double*, int64_t, bool*);
  uint64_t (*max_abs)(const double*, int64_t);
  int64_t (*count)(const uint8_t*, int64_t, uint8_t);
};

// Instantiates the kernels under a target attribute. The bodies above (default target) are
// always inlined into these, and so compiled and vectorized for the variant's ISA. (The
// AVX-512 table replaces two of them by hand-written kernels; `unused` lets the compiler
// drop those without a warning.)
#define VT_DEFINE_KERNELS(NAME, TARGET)                                                           \
  TARGET void NAME##RoundNoLog(const KernelParams& p, const double* x, double* out, uint8_t* s,   \
                               int64_t n, RoundTally* t) {                                        \
    RoundBody<false, false>(p, x, out, s, n, t);                                                  \
  }                                                                                               \
  TARGET void NAME##RoundNoLogInPlace(const KernelParams& p, const double* x, double* out,        \
                                      uint8_t* s, int64_t n, RoundTally* t) {                     \
    RoundBody<false, true>(p, x, out, s, n, t);                                                   \
  }                                                                                               \
  TARGET void NAME##RoundLog(const KernelParams& p, const double* x, double* out, uint8_t* s,     \
                             int64_t n, RoundTally* t) {                                          \
    RoundBody<true, false>(p, x, out, s, n, t);                                                   \
  }                                                                                               \
  TARGET void NAME##RoundLogInPlace(const KernelParams& p, const double* x, double* out,          \
                                    uint8_t* s, int64_t n, RoundTally* t) {                       \
    RoundBody<true, true>(p, x, out, s, n, t);                                                    \
  }                                                                                               \
  TARGET void NAME##Replay(const KernelParams& p, const double* x, const uint8_t* s, double* out, \
                           int64_t n, ReplayTally* t) {                                           \
    ReplayBody<false>(p, x, s, out, n, t);                                                        \
  }                                                                                               \
  TARGET void NAME##ReplayInPlace(const KernelParams& p, const double* x, const uint8_t* s,       \
                                  double* out, int64_t n, ReplayTally* t) {                       \
    ReplayBody<true>(p, x, s, out, n, t);                                                         \
  }                                                                                               \
  TARGET void NAME##RoundM00(const KernelParams& p, const double* x, double* out, uint8_t* s,     \
                             int64_t n, RoundTally* t, const double* m) {                         \
    m != nullptr ? RoundBody<false, false, kArray>(p, x, out, s, n, t, m)                         \
                 : RoundBody<false, false, kOwn>(p, x, out, s, n, t, m);                          \
  }                                                                                               \
  TARGET void NAME##RoundM01(const KernelParams& p, const double* x, double* out, uint8_t* s,     \
                             int64_t n, RoundTally* t, const double* m) {                         \
    m != nullptr ? RoundBody<false, true, kArray>(p, x, out, s, n, t, m)                          \
                 : RoundBody<false, true, kOwn>(p, x, out, s, n, t, m);                           \
  }                                                                                               \
  TARGET void NAME##RoundM10(const KernelParams& p, const double* x, double* out, uint8_t* s,     \
                             int64_t n, RoundTally* t, const double* m) {                         \
    m != nullptr ? RoundBody<true, false, kArray>(p, x, out, s, n, t, m)                          \
                 : RoundBody<true, false, kOwn>(p, x, out, s, n, t, m);                           \
  }                                                                                               \
  TARGET void NAME##RoundM11(const KernelParams& p, const double* x, double* out, uint8_t* s,     \
                             int64_t n, RoundTally* t, const double* m) {                         \
    m != nullptr ? RoundBody<true, true, kArray>(p, x, out, s, n, t, m)                           \
                 : RoundBody<true, true, kOwn>(p, x, out, s, n, t, m);                            \
  }                                                                                               \
  TARGET void NAME##ReplayM0(const KernelParams& p, const double* x, const uint8_t* s,            \
                             double* out, int64_t n, ReplayTally* t, const double* m) {           \
    m != nullptr ? ReplayBody<false, kArray>(p, x, s, out, n, t, m)                               \
                 : ReplayBody<false, kOwn>(p, x, s, out, n, t, m);                                \
  }                                                                                               \
  TARGET void NAME##ReplayM1(const KernelParams& p, const double* x, const uint8_t* s,            \
                             double* out, int64_t n, ReplayTally* t, const double* m) {           \
    m != nullptr ? ReplayBody<true, kArray>(p, x, s, out, n, t, m)                                \
                 : ReplayBody<true, kOwn>(p, x, s, out, n, t, m);                                 \
  }                                                                                               \
  TARGET void NAME##Grid(uint64_t k, const double* x, double* lo, double* hi, int64_t n,          \
                         bool* bad) {                                                             \
    GridBody(k, x, lo, hi, n, bad);                                                               \
  }                                                                                               \
  TARGET uint64_t NAME##MaxAbs(const double* x, int64_t n) { return MaxAbsBody(x, n); }           \
  TARGET int64_t NAME##Count(const uint8_t* s, int64_t n, uint8_t v) { return CountBody(s, n, v); }

#define VT_TARGET_GENERIC __attribute__((unused))
#define VT_TARGET_AVX2 __attribute__((target("avx2"), unused))
#define VT_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"), unused))

VT_DEFINE_KERNELS(Generic, VT_TARGET_GENERIC)
VT_DEFINE_KERNELS(Avx2, VT_TARGET_AVX2)
VT_DEFINE_KERNELS(Avx512, VT_TARGET_AVX512)

// ROUND_LOG..REPLAY_IN_PLACE: the logging round and the replay, out of place and in place;
// ROUND_M_LOG.. : the same with per-element magnitudes.
#define VT_KERNEL_TABLE(NAME, ROUND_LOG, ROUND_LOG_IN_PLACE, REPLAY, REPLAY_IN_PLACE, ROUND_M_LOG, \
                        ROUND_M_LOG_IN_PLACE, REPLAY_M, REPLAY_M_IN_PLACE)                         \
  {                                                                                                \
    {{NAME##RoundNoLog, NAME##RoundNoLogInPlace}, {ROUND_LOG, ROUND_LOG_IN_PLACE}},                \
        {REPLAY, REPLAY_IN_PLACE},                                                                 \
        {{NAME##RoundM00, NAME##RoundM01}, {ROUND_M_LOG, ROUND_M_LOG_IN_PLACE}},                   \
        {REPLAY_M, REPLAY_M_IN_PLACE}, NAME##Grid, NAME##MaxAbs, NAME##Count,                      \
  }
#define VT_AUTO_KERNEL_TABLE(NAME)                                                                \
  VT_KERNEL_TABLE(NAME, NAME##RoundLog, NAME##RoundLogInPlace, NAME##Replay, NAME##ReplayInPlace, \
                  NAME##RoundM10, NAME##RoundM11, NAME##ReplayM0, NAME##ReplayM1)

const KernelTable kGenericTable = VT_AUTO_KERNEL_TABLE(Generic);
const KernelTable kAvx2Table = VT_AUTO_KERNEL_TABLE(Avx2);
// AVX-512 classifies and replays with the hand-written kernels (kernels_avx512.h); the
// auto-vectorized ones stay as the reference the tests compare them with.
const KernelTable kAvx512Table =
    VT_KERNEL_TABLE(Avx512, avx512::RoundLog, avx512::RoundLog, avx512::Replay, avx512::Replay,
                    avx512::RoundLogMagnitude, avx512::RoundLogMagnitude, avx512::ReplayMagnitude,
                    avx512::ReplayMagnitude);

bool CpuHas(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kGeneric:
      return true;
    case KernelIsa::kAvx2:
      return __builtin_cpu_supports("avx2");
    case KernelIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }
  return false;
}

const KernelTable* TableFor(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kGeneric:
      return &kGenericTable;
    case KernelIsa::kAvx2:
      return &kAvx2Table;
    case KernelIsa::kAvx512:
      return &kAvx512Table;
  }
  return &kGenericTable;
}

KernelIsa IsaFromName(const std::string& name) {
  if (name == "generic") return KernelIsa::kGeneric;
  if (name == "avx2") return KernelIsa::kAvx2;
  if (name == "avx512") return KernelIsa::kAvx512;
  throw Error("VTRUN_PRECISION_ISA must be one of generic, avx2, avx512; got '" + name + "'");
}

KernelIsa DefaultIsa() {
  if (const char* env = std::getenv("VTRUN_PRECISION_ISA"); env != nullptr && *env != '\0') {
    KernelIsa isa = IsaFromName(env);
    if (!CpuHas(isa))
      throw Error("VTRUN_PRECISION_ISA=" + std::string(env) + ": this CPU lacks it");
    return isa;
  }
  if (CpuHas(KernelIsa::kAvx512)) return KernelIsa::kAvx512;
  if (CpuHas(KernelIsa::kAvx2)) return KernelIsa::kAvx2;
  return KernelIsa::kGeneric;
}

struct Dispatch {
  KernelIsa isa;
  const KernelTable* table;
};

Dispatch& ActiveDispatch() {
  static Dispatch dispatch = [] {
    KernelIsa isa = DefaultIsa();
    return Dispatch{isa, TableFor(isa)};
  }();
  return dispatch;
}

}  // namespace

void RoundSpan(const KernelParams& p, const double* x, double* out, uint8_t* states, int64_t n,
               RoundTally* tally, const double* magnitude) {
  const KernelFpEnv env;
  const bool log = states != nullptr;
  const bool in_place = x == out;
  // A value's own magnitude only matters through alpha: without one (the paper's window) the
  // scale kernels compute the same window.
  if (magnitude != nullptr || (p.own_magnitude && p.alpha > 0.0)) {
    ActiveDispatch().table->round_m[log][in_place](p, x, out, states, n, tally, magnitude);
    return;
  }
  if (!log && p.band == 0.0 && p.alpha_scale == 0.0 && ActiveDispatch().isa == KernelIsa::kAvx512) {
    avx512::RoundZeroWindow(p, x, out, n, tally);  // an exact boundary: rounding only
    return;
  }
  ActiveDispatch().table->round[log][in_place](p, x, out, states, n, tally);
}

void ReplaySpan(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                int64_t n, ReplayTally* tally, const double* magnitude) {
  const KernelFpEnv env;
  if (magnitude != nullptr || (p.own_magnitude && p.alpha > 0.0)) {
    ActiveDispatch().table->replay_m[x == out](p, x, states, out, n, tally, magnitude);
    return;
  }
  ActiveDispatch().table->replay[x == out](p, x, states, out, n, tally);
}

namespace {

// The most values of a bounded span, whose magnitudes the paths that read them all fill into
// a buffer on the stack.
constexpr int64_t kBoundedSpanMax = 2048;

// A bounded span's size checked (on every variant alike).
void CheckBoundedSpan(int64_t n) {
  if (n > kBoundedSpanMax) {
    throw Error("a bounded span holds at most 2048 values, got " + std::to_string(n));
  }
}

// Fills a bounded span's n magnitudes into buf (kBoundedSpanMax values).
const double* FilledSpan(const MagnitudeFiller& f, int64_t n, double* buf) {
  f.fill(f.ctx, f.offset, n, buf);
  return buf;
}

}  // namespace

void RoundLogBoundedSpan(const KernelParams& p, const double* x, double* out, uint8_t* states,
                         int64_t n, RoundTally* tally, double bound, const MagnitudeFiller& f) {
  CheckBoundedSpan(n);
  const KernelFpEnv env;
  if (p.band == 0.0 && ActiveDispatch().isa == KernelIsa::kAvx512) {
    avx512::RoundLogBounded(p, x, out, states, n, tally, bound, f);
    return;
  }
  alignas(64) double m[kBoundedSpanMax];
  RoundSpan(p, x, out, states, n, tally, FilledSpan(f, n, m));
}

void ReplayBoundedSpan(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                       int64_t n, ReplayTally* tally, double bound, const MagnitudeFiller& f) {
  CheckBoundedSpan(n);
  const KernelFpEnv env;
  if (p.band == 0.0 && ActiveDispatch().isa == KernelIsa::kAvx512) {
    avx512::ReplayBounded(p, x, states, out, n, tally, bound, f);
    return;
  }
  alignas(64) double m[kBoundedSpanMax];
  ReplaySpan(p, x, states, out, n, tally, FilledSpan(f, n, m));
}

void ReplayNoneZeroWindowSpan(const KernelParams& p, const double* x, const uint8_t* states,
                              double* out, int64_t n, ReplayTally* tally) {
  const KernelFpEnv env;
  if (ActiveDispatch().isa == KernelIsa::kAvx512) {
    avx512::ReplayNoneZeroWindow(p, x, out, n, tally);
    return;
  }
  ReplaySpan(p, x, states, out, n, tally);
}

void GridSpan(uint64_t k, const double* x, double* lo, double* hi, int64_t n, bool* out_of_range) {
  const KernelFpEnv env;
  ActiveDispatch().table->grid(k, x, lo, hi, n, out_of_range);
}

uint64_t MaxAbsBits(const double* x, int64_t n) { return ActiveDispatch().table->max_abs(x, n); }

int64_t CountStates(const uint8_t* states, int64_t n, uint8_t value) {
  return ActiveDispatch().table->count(states, n, value);
}

KernelIsa ActiveKernelIsa() { return ActiveDispatch().isa; }

std::vector<KernelIsa> SupportedKernelIsas() {
  std::vector<KernelIsa> isas;
  for (KernelIsa isa : {KernelIsa::kGeneric, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (CpuHas(isa)) isas.push_back(isa);
  }
  return isas;
}

void SetKernelIsa(KernelIsa isa) {
  if (!CpuHas(isa)) throw Error("this CPU cannot run the " + KernelIsaName(isa) + " kernels");
  ActiveDispatch() = Dispatch{isa, TableFor(isa)};
}

std::string KernelIsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kGeneric:
      return "generic";
    case KernelIsa::kAvx2:
      return "avx2";
    case KernelIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

}  // namespace vt::precision
