// The kernels' results do not depend on the calling thread's floating-point environment
// (kernels.h KernelFpEnv): a thread whose MXCSR flushes subnormals (FTZ), reads them as zero
// (DAZ) or rounds another way gets the results of the default environment, on every kernel
// variant, through the span functions and round.h alike, and keeps its own environment.
// (An exactness review of 2026-12-05 found each case below giving other results before.)
#include <ATen/ATen.h>
#include <xmmintrin.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "runtime/precision/kernels.h"
#include "runtime/precision/log_record.h"
#include "runtime/precision/round.h"
#include "tests/precision/helpers.h"

namespace {

namespace prec = vt::precision;
using prec::testing::IsaGuard;

// MXCSR's flush-to-zero (0x8000), denormals-are-zero (0x0040) and rounding-control (0x6000)
// bits set to `flags` for its lifetime.
struct Mxcsr {
  unsigned int saved = _mm_getcsr();
  explicit Mxcsr(unsigned int flags) { _mm_setcsr((saved & ~0xE040u) | flags); }
  ~Mxcsr() { _mm_setcsr(saved); }
};

// FTZ, DAZ, both, and the three other rounding modes.
const unsigned int kEnvironments[] = {0x8000u, 0x0040u, 0x8040u, 0x2000u, 0x4000u, 0x6000u};

struct Rounded {
  std::vector<double> out;
  std::vector<uint8_t> states;
  prec::RoundTally t;
};

Rounded RoundBounded(const prec::KernelParams& p, const std::vector<double>& xs,
                     const std::vector<double>& ms) {
  Rounded r;
  r.out.resize(xs.size());
  r.states.resize(xs.size());
  const prec::MagnitudeFiller filler{
      [](const void* ctx, int64_t begin, int64_t count, double* out) {
        const double* m = static_cast<const double*>(ctx);
        std::memcpy(out, m + begin, static_cast<size_t>(count) * sizeof(double));
      },
      ms.data(), 0};
  double bound = 0.0;
  for (double m : ms) bound = std::max(bound, m);
  prec::RoundLogBoundedSpan(p, xs.data(), r.out.data(), r.states.data(),
                            static_cast<int64_t>(xs.size()), &r.t, bound, filler);
  return r;
}

Rounded RoundArray(const prec::KernelParams& p, const std::vector<double>& xs,
                   const std::vector<double>& ms) {
  Rounded r;
  r.out.resize(xs.size());
  r.states.resize(xs.size());
  prec::RoundSpan(p, xs.data(), r.out.data(), r.states.data(), static_cast<int64_t>(xs.size()),
                  &r.t, ms.data());
  return r;
}

void CheckSame(const Rounded& want, const Rounded& got) {
  CHECK(std::memcmp(want.out.data(), got.out.data(), want.out.size() * sizeof(double)) == 0);
  CHECK(want.states == got.states);
  CHECK(want.t.down == got.t.down);
  CHECK(want.t.up == got.t.up);
  CHECK(want.t.exact == got.t.exact);
  CHECK(want.t.steerable == got.t.steerable);
}

}  // namespace

TEST_CASE("fp environment: an FP64-subnormal value keeps its EXACT entry under DAZ",
          "[precision][fpenv]") {
  // x = 2^-1074, m = 2^-100, alpha = 2^-40: w = 2^-140 reaches the midpoint 2^-150, so the
  // honest log holds EXACT (+0). Under DAZ the value read as 0 (a zero on the grid): NONE.
  prec::KernelParams p;
  p.band = 0.0;
  p.alpha = 0x1p-40;
  const std::vector<double> xs = {0x1p-1074, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25};
  const std::vector<double> ms(xs.size(), 0x1p-100);
  IsaGuard guard;
  for (prec::KernelIsa isa : prec::SupportedKernelIsas()) {
    prec::SetKernelIsa(isa);
    const Rounded want = RoundArray(p, xs, ms);
    REQUIRE(want.states[0] == 3);
    for (unsigned int env : kEnvironments) {
      INFO("variant " << prec::KernelIsaName(isa) << ", MXCSR bits " << env);
      const Mxcsr set(env);
      CheckSame(want, RoundArray(p, xs, ms));
      CheckSame(want, RoundBounded(p, xs, ms));
      CHECK((_mm_getcsr() & 0xE040u) == env);  // the thread's own, given back
    }
  }
}

TEST_CASE("fp environment: a window of FP64-subnormal width stays open under FTZ and DAZ",
          "[precision][fpenv]") {
  // A tie (1 + 2^-24) under w = alpha * m = 2^-1040: logged (d = 0 <= w, w > 0), and an UP
  // entry there is legitimate. FTZ flushed the product to 0, DAZ read it as 0: a shut window.
  prec::KernelParams p;
  p.band = 0.0;
  p.alpha = 0x1p-1040;
  const std::vector<double> xs = {1.0 + 0x1p-24, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25};
  const std::vector<double> ms(xs.size(), 1.0);
  std::vector<uint8_t> up(xs.size(), 0);
  up[0] = 2;
  IsaGuard guard;
  for (prec::KernelIsa isa : prec::SupportedKernelIsas()) {
    prec::SetKernelIsa(isa);
    const Rounded want = RoundArray(p, xs, ms);
    REQUIRE(want.states[0] == 1);
    std::vector<double> replayed(xs.size());
    prec::ReplayTally want_r;
    prec::ReplaySpan(p, xs.data(), up.data(), replayed.data(), 8, &want_r, ms.data());
    REQUIRE(replayed[0] == 1.0 + 0x1p-23);
    REQUIRE(want_r.illegitimate == 0);
    for (unsigned int env : kEnvironments) {
      INFO("variant " << prec::KernelIsaName(isa) << ", MXCSR bits " << env);
      const Mxcsr set(env);
      CheckSame(want, RoundBounded(p, xs, ms));
      std::vector<double> got(xs.size());
      prec::ReplayTally t;
      prec::ReplaySpan(p, xs.data(), up.data(), got.data(), 8, &t, ms.data());
      CHECK(std::memcmp(got.data(), replayed.data(), got.size() * sizeof(double)) == 0);
      CHECK(t.corrections == want_r.corrections);
      CHECK(t.illegitimate == want_r.illegitimate);
    }
  }
}

TEST_CASE("fp environment: every kernel variant rounds to nearest under another rounding mode",
          "[precision][fpenv]") {
  // 1 + 0.75 * 2^-23 rounds up to 1 + 2^-23. The generic kernels' (a + c) - c followed
  // MXCSR's rounding (toward zero: 1), while the AVX-512 conversion names its own.
  const std::vector<double> xs(16, 1.0 + 0.75 * 0x1p-23);
  IsaGuard guard;
  for (prec::KernelIsa isa : prec::SupportedKernelIsas()) {
    prec::SetKernelIsa(isa);
    for (unsigned int env : kEnvironments) {
      INFO("variant " << prec::KernelIsaName(isa) << ", MXCSR bits " << env);
      const Mxcsr set(env);
      for (double band : {0.0, 0.25}) {
        prec::KernelParams p;
        p.band = band;
        std::vector<double> out(xs.size());
        std::vector<uint8_t> states(xs.size());
        prec::RoundTally t;
        prec::RoundSpan(p, xs.data(), out.data(), nullptr, 16, &t);
        CHECK(out[0] == 1.0 + 0x1p-23);
        prec::RoundSpan(p, xs.data(), out.data(), states.data(), 16, &t);
        CHECK(out[15] == 1.0 + 0x1p-23);
      }
      // Through round.h, on the pass's threads.
      const at::Tensor x = at::full({70000}, 1.0 + 0.75 * 0x1p-23, at::kDouble);
      prec::LogRecord record;
      const at::Tensor r = prec::Round(x, prec::RoundOptions{}, &record).rounded;
      CHECK(r.eq(1.0 + 0x1p-23).all().item<bool>());
      CHECK(prec::RoundValue(1.0 + 0.75 * 0x1p-23, 32) == 1.0 + 0x1p-23);
    }
  }
}
