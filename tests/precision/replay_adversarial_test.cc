// The replay's legitimacy checks (docs/ROUNDING.md "Legitimate entries", "Steerable values")
// on adversarial inputs: every kernel variant and path against the oracle, entry by entry, on
// auditor values at every class of grid point (zeros, subnormals, powers of two, the top of
// the FP32 range) and at fractions of the spacing and of the window from them, each +-1 ulp,
// with NONE, DOWN, UP and EXACT entries holding rnd_b(x'), its neighbours, +-0 and +-g0.
// (Written by a red-team review on 2026-12-05, which found only the over-count at the top of
// the range tested last.)
#include <ATen/ATen.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/precision/codec.h"
#include "runtime/precision/kernels.h"
#include "runtime/precision/round.h"
#include "runtime/precision/window.h"
#include "tests/precision/helpers.h"
#include "tests/precision/oracle.h"

namespace {

using vt::precision::ExactEntry;
using vt::precision::LogRecord;
using vt::precision::Replay;
using vt::precision::ReplayReport;
using vt::precision::RoundOptions;
using vt::precision::testing::Bits;
using vt::precision::testing::IsaGuard;
using vt::precision::testing::Options;
using vt::precision::testing::ToTensor;
using vt::precision::testing::ToVector;
namespace oracle = vt::precision::oracle;

// FP32 grid neighbours of a grid value (signed), one b-step up and down in value.
double StepUp(double v, int bits) {
  const uint32_t unit = 1u << (32 - bits);
  const float f = static_cast<float>(v);
  uint32_t p = oracle::F32Bits(f);
  if (v == 0) return std::signbit(v) ? 0.0 : oracle::PatternValue(unit);  // -0 -> +0; +0 -> g0
  if (v > 0) return oracle::PatternValue(p + unit);
  p &= 0x7fffffffu;
  return p == unit ? -0.0 : -oracle::PatternValue(p - unit);
}
double StepDown(double v, int bits) { return -StepUp(-v, bits); }

struct Case {
  double x;   // auditor's value
  double m;   // auditor's magnitude
  int state;  // 0..3
  float v;    // EXACT value
};

struct Expect {
  std::vector<double> result;
  int64_t corrections = 0, illegitimate = 0, near_misses = 0, steerable = 0;
};

Expect OracleOf(const std::vector<Case>& cs, const RoundOptions& o) {
  Expect e;
  const double alpha = o.alpha * vt::precision::kMagnitudeSlack;
  for (const Case& c : cs) {
    const double as = alpha * c.m;
    const oracle::ReplayOutcome r = oracle::ReplayOne(c.x, c.state, c.v, o.bits, o.band, as);
    e.result.push_back(r.result);
    e.corrections += r.correction;
    e.illegitimate += r.illegitimate;
    e.near_misses += r.near_miss;
    e.steerable += r.steerable;
  }
  return e;
}

LogRecord RecordOf(const std::vector<Case>& cs) {
  std::vector<uint8_t> st;
  std::vector<ExactEntry> ex;
  for (size_t i = 0; i < cs.size(); ++i) {
    st.push_back(static_cast<uint8_t>(cs[i].state));
    if (cs[i].state == 3)
      ex.push_back(ExactEntry{static_cast<int64_t>(i), oracle::F32Bits(cs[i].v)});
  }
  return LogRecord::FromStates(st, ex);
}

// Adversarial auditor values for one grid: grid points of every class, plus offsets from
// them in fractions of the spacing and of the window.
std::vector<double> Values(int bits, double w_over_g, oracle::ValueGenerator& gen) {
  const int k = 32 - bits;
  const uint32_t unit = 1u << k;
  std::vector<uint32_t> pats = {0u,
                                unit,
                                2 * unit,
                                3 * unit,
                                0x00800000u,
                                0x00800000u - unit,
                                0x3f800000u,
                                0x3f800000u - unit,
                                0x3f800000u + unit,
                                (0x7f7fffffu & ~(unit - 1)),
                                (0x7f7fffffu & ~(unit - 1)) - unit,
                                0x7f000000u};
  for (int i = 0; i < 6; ++i)
    pats.push_back(static_cast<uint32_t>(gen.Bits() % 0x7f7fffffu) & ~(unit - 1));
  std::vector<double> xs;
  const double fr[] = {0.0, 0.25, 0.5, 0.75, -0.25, -0.5, 0.125, 0.375, 0.625};
  for (uint32_t p : pats) {
    const double base = oracle::PatternValue(p);
    const double g = oracle::SpacingOf(base, bits);
    const double w = w_over_g * g;
    for (double f : fr) {
      for (double dw : {0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0}) {
        double x = base + f * g + dw * w;
        for (int ulp = -1; ulp <= 1; ++ulp) {
          double y = ulp == 0 ? x : std::nextafter(x, ulp > 0 ? INFINITY : -INFINITY);
          if (!(std::fabs(y) < oracle::PatternValue((0x7f7fffffu & ~(unit - 1))) + g / 2)) continue;
          if (oracle::GridOf(y, bits).out_of_range) continue;
          xs.push_back(y);
          xs.push_back(-y);
        }
      }
    }
  }
  return xs;
}

// For each auditor value: NONE, DOWN, UP and EXACT entries holding rnd_b(x'), its two
// neighbours, +-0 and +-g0.
std::vector<Case> CasesFor(const std::vector<double>& xs, const std::vector<double>& ms, int bits) {
  std::vector<Case> cs;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], m = ms[i];
    const double r = oracle::GridOf(x, bits).rnd;
    const double g0 = std::ldexp(1.0, (32 - bits) - 149);
    std::vector<double> vs = {r, 0.0, -0.0, g0, -g0};
    if (std::fabs(r) < oracle::PatternValue(0x7f7fffffu & ~((1u << (32 - bits)) - 1)) || r < 0)
      vs.push_back(StepUp(r, bits));
    if (std::fabs(r) < oracle::PatternValue(0x7f7fffffu & ~((1u << (32 - bits)) - 1)) || r > 0)
      vs.push_back(StepDown(r, bits));
    cs.push_back({x, m, 0, 0.0f});
    // (A direction to 2^128 is among them: illegitimate, counted and not applied.)
    cs.push_back({x, m, 1, 0.0f});
    cs.push_back({x, m, 2, 0.0f});
    for (double v : vs) cs.push_back({x, m, 3, static_cast<float>(v)});
  }
  return cs;
}

std::string Describe(const Case& c, const RoundOptions& o, double got, double want) {
  std::ostringstream s;
  s.precision(17);
  s << "x'=" << c.x << " m=" << c.m << " state=" << c.state << " v=" << c.v << " bits=" << o.bits
    << " band=" << o.band << " alpha=" << o.alpha << " got=" << got << " want=" << want;
  return s.str();
}

// The replay's values and counts against the oracle's, warning about the first mismatches.
void CheckReplay(const std::vector<Case>& cs, const RoundOptions& o, const Expect& e,
                 const vt::precision::ReplayResult& r, int* reported) {
  const std::vector<double> got = ToVector(r.rounded);
  int bad = 0;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (Bits(got[i]) != Bits(e.result[i])) {
      if ((*reported)++ < 10) WARN(Describe(cs[i], o, got[i], e.result[i]));
      ++bad;
    }
  }
  CHECK(bad == 0);
  CHECK(r.report.corrections == e.corrections);
  CHECK(r.report.illegitimate == e.illegitimate);
  CHECK(r.report.near_misses == e.near_misses);
  CHECK(r.report.steerable == e.steerable);
}

}  // namespace

TEST_CASE(
    "replay: every kernel variant agrees with the oracle entry by entry on adversarial values",
    "[precision]") {
  oracle::ValueGenerator gen(12345);
  IsaGuard guard;
  const double alpha = 0x1p-20;
  int reported = 0;
  for (int bits : {32, 24, 10}) {
    for (double band : {0.0, 1.0 / 16, 0.25, 0.3, 0.5}) {
      for (double ratio : {0.0, 1.0 / 64, 1.0 / 16, 0.2, 0.25, 0.3, 0.5, 1.0, 5.0}) {
        const RoundOptions o = Options(bits, band, ratio == 0 ? 0.0 : alpha);
        const std::vector<double> xs = Values(bits, ratio + band, gen);
        std::vector<double> ms;
        for (double x : xs) {
          const double g = oracle::SpacingOf(std::fabs(x), bits);
          ms.push_back(ratio == 0 ? 0.0 : ratio * g / alpha);
        }
        const std::vector<Case> cs = CasesFor(xs, ms, bits);
        const LogRecord rec = RecordOf(cs);
        std::vector<double> xv, mv;
        for (const Case& c : cs) {
          xv.push_back(c.x);
          mv.push_back(c.m);
        }
        const Expect e = OracleOf(cs, o);
        for (auto isa : vt::precision::SupportedKernelIsas()) {
          vt::precision::SetKernelIsa(isa);
          INFO("isa " << vt::precision::KernelIsaName(isa) << " bits " << bits << " band " << band
                      << " ratio " << ratio);
          CheckReplay(cs, o, e, Replay(ToTensor(xv), rec, o, {}, ToTensor(mv)), &reported);
        }
      }
    }
  }
}

// Contract-level consistency: a value is steerable iff at least two results are accepted
// (ROUNDING.md "Steerable values"). Checked against the oracle's acceptance.
TEST_CASE("replay: the oracle counts a value steerable iff two results are accepted",
          "[precision]") {
  oracle::ValueGenerator gen(777);
  const double alpha = 0x1p-20;
  int reported = 0;
  int64_t mismatches = 0;
  for (int bits : {32, 24, 10}) {
    for (double band : {0.0, 1.0 / 16, 0.25, 0.3, 0.5}) {
      for (double ratio : {0.0, 1.0 / 64, 1.0 / 16, 0.2, 0.25, 0.3, 0.5, 1.0, 5.0}) {
        const double a_s = ratio == 0 ? 0.0 : alpha;
        const std::vector<double> xs = Values(bits, ratio + band, gen);
        for (double x : xs) {
          const double g = oracle::SpacingOf(std::fabs(x), bits);
          const double m = ratio == 0 ? 0.0 : ratio * g / alpha;
          const double as = a_s * vt::precision::kMagnitudeSlack * m;
          const std::vector<Case> cs = CasesFor({x}, {m}, bits);
          std::set<uint64_t> accepted;
          for (const Case& c : cs) {
            const auto r = oracle::ReplayOne(c.x, c.state, c.v, bits, band, as);
            if (!r.illegitimate) accepted.insert(Bits(r.result));
          }
          const bool steer = oracle::SteerableAt(x, bits, band, as);
          const bool two = accepted.size() >= 2;
          const bool top =
              std::fabs(oracle::GridOf(x, bits).rnd) == vt::precision::LargestGridValue(bits);
          if (steer != two && !(top && steer)) {
            ++mismatches;
            if (reported++ < 10) {
              std::ostringstream s;
              s.precision(17);
              s << "x'=" << x << " bits=" << bits << " band=" << band << " as=" << as
                << " steerable=" << steer << " accepted=" << accepted.size();
              WARN(s.str());
            }
          }
        }
      }
    }
  }
  CHECK(mismatches == 0);
}

// The same adversarial cases through the bounded kernels (band 0; AVX-512 skips far groups)
// and with each value its own magnitude, against the oracle.
TEST_CASE("replay: bounded and own-magnitude replays agree with the oracle on adversarial values",
          "[precision]") {
  namespace prec = vt::precision;
  oracle::ValueGenerator gen(4242);
  IsaGuard guard;
  const double alpha = 0x1p-20;
  int reported = 0;
  for (int bits : {32, 24, 10}) {
    for (double ratio : {1.0 / 64, 1.0 / 16, 0.2, 0.25, 0.3, 0.5, 1.0, 5.0}) {
      const RoundOptions o = Options(bits, 0.0, alpha);
      const std::vector<double> xs = Values(bits, ratio, gen);
      std::vector<double> ms;
      for (double x : xs) ms.push_back(ratio * oracle::SpacingOf(std::fabs(x), bits) / alpha);
      std::vector<Case> cs = CasesFor(xs, ms, bits);
      // pad with NONE groups of far values to let the bounded kernel skip
      for (int i = 0; i < 64; ++i) cs.push_back({1.0 + 0x1p-30, 1e-30, 0, 0.0f});
      const LogRecord rec = RecordOf(cs);
      std::vector<double> xv, mv;
      for (const Case& c : cs) {
        xv.push_back(c.x);
        mv.push_back(c.m);
      }
      const Expect e = OracleOf(cs, o);
      prec::KernelParams p = prec::MakeKernelParams(o, 0.0);
      p.alpha = alpha * prec::kMagnitudeSlack;
      const double bound = *std::max_element(mv.begin(), mv.end());
      for (auto isa : prec::SupportedKernelIsas()) {
        prec::SetKernelIsa(isa);
        INFO("isa " << prec::KernelIsaName(isa) << " bits " << bits << " ratio " << ratio);
        for (int64_t from = 0; from < static_cast<int64_t>(cs.size()); from += 2048) {
          const int64_t n = std::min<int64_t>(2048, static_cast<int64_t>(cs.size()) - from);
          const prec::MagnitudeFiller filler{
              [](const void* ctx, int64_t begin, int64_t count, double* out) {
                const double* m = static_cast<const double*>(ctx);
                std::copy(m + begin, m + begin + count, out);
              },
              mv.data() + from, 0};
          std::vector<double> out(static_cast<size_t>(n));
          prec::ReplayTally t;
          prec::ReplayBoundedSpan(p, xv.data() + from, rec.states() + from, out.data(), n, &t,
                                  bound, filler);
          prec::ReplayTally t2;
          std::vector<double> out2(static_cast<size_t>(n));
          prec::ReplaySpan(p, xv.data() + from, rec.states() + from, out2.data(), n, &t2,
                           mv.data() + from);
          CHECK(std::memcmp(out.data(), out2.data(), out.size() * 8) == 0);
          CHECK(t.corrections == t2.corrections);
          CHECK(t.illegitimate == t2.illegitimate);
          CHECK(t.near_misses == t2.near_misses);
          CHECK(t.steerable == t2.steerable);
        }
        // own magnitude: m = |x|
        RoundOptions oo = o;
        oo.own_magnitude = true;
        std::vector<Case> co = cs;
        for (Case& c : co) c.m = std::fabs(c.x);
        const Expect eo = OracleOf(co, oo);
        CheckReplay(co, oo, eo, Replay(ToTensor(xv), rec, oo), &reported);
      }
    }
  }
}

// ROUNDING.md "Steerable values": the count errs upward at one place only. Just below the
// midpoint between the largest grid value M and 2^128, under a narrow window (w = g/64: no
// EXACT is eligible), the only move is to 2^128, which is refused, so M is the one accepted
// result; the value is counted steerable (on every kernel variant alike), as documented.
TEST_CASE("replay: below the midpoint to 2^128 the steerable count errs upward, as documented",
          "[precision]") {
  IsaGuard guard;
  const double M = static_cast<double>(FLT_MAX);       // b = 32
  const double g = 0x1p104;                            // its spacing
  const double xp = std::nextafter(M + 0.5 * g, 0.0);  // rounds to M, 1 ulp below the midpoint
  const double m = 1.0;                                // magnitude
  const RoundOptions o = Options(32, 0.0, g / 64);     // w' = g/64 (times the slack)
  for (auto isa : vt::precision::SupportedKernelIsas()) {
    vt::precision::SetKernelIsa(isa);
    INFO("variant " << vt::precision::KernelIsaName(isa));
    std::set<uint64_t> accepted;
    auto run = [&](uint8_t state, float v) {
      std::vector<ExactEntry> ex;
      if (state == 3) ex.push_back(ExactEntry{0, oracle::F32Bits(v)});
      const auto r =
          Replay(ToTensor({xp}), LogRecord::FromStates({state}, ex), o, {}, ToTensor({m}));
      if (r.report.illegitimate == 0) accepted.insert(Bits(ToVector(r.rounded)[0]));
      return r.report;
    };
    const ReplayReport none = run(0, 0.0f);
    run(1, 0.0f);                           // DOWN (names M: no move)
    run(2, 0.0f);                           // UP (names 2^128: illegitimate)
    run(3, FLT_MAX);                        // EXACT M
    run(3, std::nextafter(FLT_MAX, 0.0f));  // EXACT below M
    CHECK(accepted.size() == 1);            // only M is ever accepted ...
    CHECK(accepted.count(Bits(M)) == 1);
    CHECK(none.steerable == 1);  // ... and the value is counted: the safe side
  }
}
