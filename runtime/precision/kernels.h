// The raw CPU kernels of the precision core: rnd_b, window classification, replay and the
// grid over contiguous spans of FP64 values, with no ATen and no allocation. round.h wraps
// them for tensors (validation, parallelism, errors); use that unless you hold raw spans.
//
// Each kernel is one pass, branch-free per element (window.h), compiled three times: for
// plain x86-64, AVX2 and AVX-512 (the compiler vectorizes the loops; on AVX-512 the
// classifying RoundSpan and ReplaySpan are hand-written, kernels_avx512.h). The variant is picked
// once from the CPU, or from the environment variable VTRUN_PRECISION_ISA
// (generic|avx2|avx512); every variant gives bit-identical results, which the tests check.
// Thread safety: kernels are pure functions of their inputs; concurrent calls on disjoint
// outputs are safe. SetKernelIsa is not meant to race with running kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace vt::precision {

// The floating-point environment the kernels and window.h's rules assume: IEEE-754 round to
// nearest, ties to even, subnormals kept, exceptions masked (x86 MXCSR 0x1F80, its status
// flags aside). MXCSR is each thread's own, and a library may change it on a thread
// (LibTorch's set_flush_denormal sets flush-to-zero and denormals-are-zero): an FP64-subnormal
// value then looked like a zero on the grid and lost its EXACT entry, a window of an FP64-
// subnormal width looked shut, and another rounding mode changed what the generic kernels
// round to, so results depended on which thread rounded a block. Every entry point (the span
// functions here, round.h's, and each parallel task of a pass) holds one of these: it sets
// that environment for its lifetime where the thread's differs (one read of MXCSR where it
// does not) and gives the thread its own back after.
class KernelFpEnv {
 public:
#if defined(__x86_64__) || defined(__i386__)
  KernelFpEnv() : saved_(_mm_getcsr()), changed_((saved_ & ~0x3Fu) != kWanted) {
    if (changed_) _mm_setcsr(kWanted);
  }
  ~KernelFpEnv() {
    if (changed_) _mm_setcsr(saved_);
  }
#else
  KernelFpEnv() = default;  // (assumed: the platform's default environment)
#endif
  KernelFpEnv(const KernelFpEnv&) = delete;
  KernelFpEnv& operator=(const KernelFpEnv&) = delete;

 private:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr unsigned int kWanted = 0x1F80u;
  unsigned int saved_;
  bool changed_;
#endif
};

// Smallest and largest rounding amount b (bits of the FP32 word that are kept).
constexpr int kMinBits = 10;
constexpr int kMaxBits = 32;

// Per-call constants of the window. Built by MakeKernelParams (round.cc) or by hand.
struct KernelParams {
  uint64_t k = 0;            // 32 - b, in [0, 22]. Default: 0 (b = 32).
  double band = 0.25;        // Relative window term, in [0, 0.5]. Default: 0.25.
  double alpha_scale = 0.0;  // fl(alpha * scale), >= 0. Default: 0.
  // With a per-element magnitude m (RoundSpan/ReplaySpan `magnitude`), the absolute term is
  // fl(alpha * m[i]) instead of alpha_scale. Default: 0.
  double alpha = 0.0;
  // Without a magnitude array: the absolute term is fl(alpha * |x[i]|), each value its own
  // magnitude, instead of alpha_scale. Default: false.
  bool own_magnitude = false;
};

// The auditor's slack on its own magnitudes m' (round.cc): two parties' magnitudes of one
// value differ by rounding only (relative 2^-30 or less for sums of fewer than 2^22 terms),
// far inside it.
constexpr double kMagnitudeSlack = 1.0 + 0x1p-16;

// What a RoundSpan call saw. Counts add up over calls (callers zero them first).
struct RoundTally {
  int64_t down = 0;
  int64_t up = 0;
  int64_t exact = 0;
  // Values whose rounding the trainer could choose either way and pass an auditor whose
  // values were these (window.h Steerable): the trainer's own estimate of its freedom.
  int64_t steerable = 0;
  // Some element was NaN or infinite, or rounded to 2^128 or beyond. The outputs of that
  // span are then meaningless; the caller finds the first offender with the scalar helpers.
  bool out_of_range = false;
  // A per-element magnitude was NaN, infinite or negative.
  bool bad_magnitude = false;

  // Adds another span's counts (spans of one tensor, in any order).
  RoundTally& operator+=(const RoundTally& o) {
    down += o.down;
    up += o.up;
    exact += o.exact;
    steerable += o.steerable;
    out_of_range |= o.out_of_range;
    bad_magnitude |= o.bad_magnitude;
    return *this;
  }
};

// What a ReplaySpan call saw (ROUNDING.md "Log entries and replay").
struct ReplayTally {
  int64_t corrections = 0;     // DOWN/UP entries whose result differs from rnd_b(x').
  int64_t illegitimate = 0;    // DOWN/UP entries on the grid, or with |x' - mid(x')| >
                               // 2 w'(x'), or on a window wider than g/2 (where only EXACT
                               // is honest).
  int64_t near_misses = 0;     // NONE entries with |x' - mid(x')| <= w'(x') off the grid, or
                               // < w'(x') on it (mid: the nearest, half the step below x').
  int64_t steerable = 0;       // Values the trainer could have rounded either way and
                               // still passed these checks (window.h Steerable).
  bool out_of_range = false;   // As in RoundTally (also when a replayed hi(x') is 2^128).
  bool bad_magnitude = false;  // As in RoundTally.
  int64_t near_limit = 0;      // ReplayReport::near_limit (counted by round.cc, not the kernels)

  // Adds another span's counts (spans of one tensor, in any order).
  ReplayTally& operator+=(const ReplayTally& o) {
    corrections += o.corrections;
    illegitimate += o.illegitimate;
    near_limit += o.near_limit;
    near_misses += o.near_misses;
    steerable += o.steerable;
    out_of_range |= o.out_of_range;
    bad_magnitude |= o.bad_magnitude;
    return *this;
  }
};

// out[i] = rnd_b(x[i]) for i in [0, n). If `states` is not null, also states[i] = the
// classification (0 NONE, 1 DOWN, 2 UP, 3 EXACT) and the DOWN/UP/EXACT counts are added to
// `tally`. `out` may equal `x` exactly (in place); other overlaps are not allowed. `states`
// must not overlap `x` or `out`. With `magnitude` (n values, see KernelParams::alpha) the
// window's absolute term is per element, and bad magnitudes are reported in the tally;
// without one, p.own_magnitude makes each value its own magnitude.
void RoundSpan(const KernelParams& p, const double* x, double* out, uint8_t* states, int64_t n,
               RoundTally* tally, const double* magnitude = nullptr);

// Applies states[i] (0 NONE, 1 DOWN, 2 UP; 3 EXACT is treated as NONE, the caller writes the
// stored value afterwards) to the auditor's x[i]: out[i] = rnd_b(x), lo(x) or hi(x) (signed
// directions). `p.alpha_scale` must come from the auditor's own scale. Adds to `tally`.
// `out` may equal `x` exactly.
void ReplaySpan(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                int64_t n, ReplayTally* tally, const double* magnitude = nullptr);

// Per-element magnitudes given by a source that computes them on request, with `bound` >= every
// one of them over the span (precision/magnitude_source.h OuterBound): fill(ctx, offset + i,
// count, out) writes the magnitudes of elements [i, i + count) of the span. The source must
// give magnitudes in [0, bound] (OuterBound is valid only for finite factors >= 0): the
// AVX-512 variant does not read those of a group it rounds without them, so a bad one there
// is not reported as it is with the magnitudes written out.
struct MagnitudeFiller {
  void (*fill)(const void* ctx, int64_t begin, int64_t count, double* out);
  const void* ctx;
  int64_t offset;
};

// RoundSpan with states and ReplaySpan, with those magnitudes: the same results, states and
// counts as with the magnitudes written out. Under the absolute window (p.band 0) on AVX-512,
// a group of 8 values that the window fl(alpha * bound) leaves far from every entry (NONE, not
// steerable, no near miss, all states NONE in a replay) is rounded without them; the others
// fill their 8 magnitudes. Otherwise the span's magnitudes are filled (n <= 2048).
void RoundLogBoundedSpan(const KernelParams& p, const double* x, double* out, uint8_t* states,
                         int64_t n, RoundTally* tally, double bound, const MagnitudeFiller& f);
void ReplayBoundedSpan(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                       int64_t n, ReplayTally* tally, double bound, const MagnitudeFiller& f);

// ReplaySpan for a record without entries (every states[i] NONE) under the zero window
// (p.band 0, p.alpha_scale 0, no magnitudes: an exact boundary's): the same results and
// counts (only near_misses, the exact ties, can be nonzero). The AVX-512 variant reads no
// states and skips the window's arithmetic, which the optimizer's exact boundaries (AdamW's
// moments and updates, every parameter's every step) otherwise pay in the auditor.
void ReplayNoneZeroWindowSpan(const KernelParams& p, const double* x, const uint8_t* states,
                              double* out, int64_t n, ReplayTally* tally);

// lo[i] = lo_b(x[i]), hi[i] = hi_b(x[i]) (signed: lo <= x <= hi). For |x| above the
// largest grid value, hi is +-2^128 (the FP32 overflow threshold). Sets `*out_of_range` if
// some x is NaN, infinite or >= 2^128 in magnitude.
void GridSpan(uint64_t k, const double* x, double* lo, double* hi, int64_t n, bool* out_of_range);

// The largest |x[i]| as an FP64 bit pattern (0 for n = 0). A pattern above that of +Inf
// means a NaN was present. Vectorized integer max.
uint64_t MaxAbsBits(const double* x, int64_t n);

// Number of bytes equal to `value` in states[0, n) (a vectorized byte count).
int64_t CountStates(const uint8_t* states, int64_t n, uint8_t value);

// Instruction-set variants of the kernels.
enum class KernelIsa { kGeneric, kAvx2, kAvx512 };

// The variant in use.
KernelIsa ActiveKernelIsa();

// The variants this CPU can run (kGeneric always).
std::vector<KernelIsa> SupportedKernelIsas();

// Selects a variant (tests compare them). Throws vt::Error if the CPU lacks it.
void SetKernelIsa(KernelIsa isa);

// "generic", "avx2", "avx512".
std::string KernelIsaName(KernelIsa isa);

}  // namespace vt::precision
