// Replay (runtime/precision/round.h): a trainer's own log reproduces its result; values
// perturbed by less than the window reproduce it too (cancelled values near zero included);
// larger perturbations and tampered logs are caught; counts agree with the oracle.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/precision/codec.h"
#include "runtime/precision/round.h"
#include "tests/precision/helpers.h"
#include "tests/precision/oracle.h"

namespace {

using vt::precision::BoundaryContext;
using vt::precision::ExactEntry;
using vt::precision::LogRecord;
using vt::precision::Replay;
using vt::precision::ReplayInto;
using vt::precision::ReplayReport;
using vt::precision::Round;
using vt::precision::RoundOptions;
using vt::precision::testing::Bits;
using vt::precision::testing::IsaGuard;
using vt::precision::testing::Options;
using vt::precision::testing::ToTensor;
using vt::precision::testing::ToVector;
namespace oracle = vt::precision::oracle;

double P2(int e) { return std::ldexp(1.0, e); }

double MaxAbs(const std::vector<double>& xs) {
  double m = 0;
  for (double v : xs) m = std::max(m, std::fabs(v));
  return m;
}

// The trainer's window w(x) and spacing at x (spacing: the step above |x| on the grid).
struct WindowAt {
  double w;
  double spacing;
};

WindowAt TrainerWindow(double x, const RoundOptions& o, double scale) {
  const oracle::Grid g = oracle::GridOf(x, o.bits);
  return WindowAt{o.band * g.step + o.alpha * scale, g.step};
}

// Trainer data: the scale 8.0 first, then Gaussian-like values in [-4, 4], values near grid
// points and midpoints, cancelled values near zero of both signs, and exact zeros.
std::vector<double> TrainerValues(oracle::ValueGenerator& gen, int bits, int n) {
  std::vector<double> xs = {8.0};
  while (static_cast<int>(xs.size()) < n) {
    double v;
    switch (gen.Int(0, 3)) {
      case 0: {
        v = 0;
        for (int i = 0; i < 4; ++i) v += gen.Unit() - 0.5;
        v *= 2.5;
        break;
      }
      case 1:
        v = gen.NearGridOrMid(bits);
        if (!(std::fabs(v) < 4)) v = gen.Unit() - 0.5;
        break;
      case 2:
        v = std::ldexp(gen.Unit() - 0.5, -gen.Int(10, 160));
        break;
      default:
        v = gen.Int(0, 7) == 0 ? 0.0 : std::ldexp(gen.Unit() - 0.5, -gen.Int(20, 60));
        break;
    }
    xs.push_back(v);
  }
  return xs;
}

// The report and results the oracle expects for replaying `record` on xs.
struct OracleReplay {
  std::vector<double> result;
  int64_t corrections = 0, illegitimate = 0, near_misses = 0, steerable = 0;
};

OracleReplay ExpectReplay(const std::vector<double>& xs, const LogRecord& record,
                          const RoundOptions& o) {
  const double alpha_scale = o.alpha > 0 ? o.alpha * MaxAbs(xs) : 0.0;
  OracleReplay r;
  size_t next_exact = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const int state = record.states()[i];
    double stored = 0;
    if (state == 3) stored = record.exact()[next_exact++].value();
    const oracle::ReplayOutcome out =
        oracle::ReplayOne(xs[i], state, stored, o.bits, o.band, alpha_scale);
    REQUIRE_FALSE(out.out_of_range);
    r.result.push_back(out.result);
    r.corrections += out.correction;
    r.illegitimate += out.illegitimate;
    r.near_misses += out.near_miss;
    r.steerable += out.steerable;
  }
  return r;
}

void CheckAgainstOracle(const std::vector<double>& xs, const LogRecord& record,
                        const RoundOptions& o, const ReplayReport& report, const at::Tensor& out) {
  const OracleReplay e = ExpectReplay(xs, record, o);
  const std::vector<double> got = ToVector(out);
  int bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) bad += Bits(got[i]) != Bits(e.result[i]);
  CHECK(bad == 0);
  CHECK(report.corrections == e.corrections);
  CHECK(report.illegitimate == e.illegitimate);
  CHECK(report.near_misses == e.near_misses);
  CHECK(report.steerable == e.steerable);
  CHECK(report.elements == static_cast<int64_t>(xs.size()));
  CHECK(report.logged == record.counts().logged());
}

const RoundOptions kConfigs[] = {
    Options(32, 0.25, 0.0),     // paper mode
    Options(26, 0.25, 0.0),     // paper mode, b = 26
    Options(32, 0.0, P2(-44)),  // calibrated-like
    Options(26, 0.05, P2(-40)), Options(12, 0.2, P2(-30)),
};

}  // namespace

TEST_CASE("replay: a trainer's own log reproduces its result exactly") {
  const uint64_t seed = oracle::TestSeed("replay: own log");
  oracle::ValueGenerator gen(seed);
  IsaGuard guard;
  for (const RoundOptions& o : kConfigs) {
    const std::vector<double> xs = TrainerValues(gen, o.bits, 200000);
    LogRecord record;
    const at::Tensor trained = Round(ToTensor(xs), o, &record).rounded;
    for (auto isa : vt::precision::SupportedKernelIsas()) {
      vt::precision::SetKernelIsa(isa);
      INFO("b=" << o.bits << " band=" << o.band << " alpha=" << o.alpha << " variant "
                << vt::precision::KernelIsaName(isa));
      const auto r = Replay(ToTensor(xs), record, o);
      CHECK(r.rounded.equal(trained));
      CHECK(r.report.corrections == 0);
      CHECK(r.report.illegitimate == 0);
      // Paper mode: no NONE value is at risk. With an absolute window term, values on the
      // grid (exact zeros, for one) whose nearest midpoint is nearer than w are near misses.
      if (o.alpha == 0) CHECK(r.report.near_misses == 0);
      CheckAgainstOracle(xs, record, o, r.report, r.rounded);
      CHECK(r.report.logged == record.counts().logged());
      // Through every encoding too.
      for (auto enc : {vt::precision::LogEncoding::kDense, vt::precision::LogEncoding::kSparse}) {
        const LogRecord decoded = vt::precision::DecodeLog(vt::precision::EncodeLog(record, enc));
        CHECK(Replay(ToTensor(xs), decoded, o).rounded.equal(trained));
      }
    }
    CHECK(record.counts().logged() > 0);
  }
}

TEST_CASE("replay: values perturbed by less than the window reproduce the trainer's result") {
  const uint64_t seed = oracle::TestSeed("replay: perturbed below the window");
  oracle::ValueGenerator gen(seed);
  for (const RoundOptions& o : kConfigs) {
    INFO("b=" << o.bits << " band=" << o.band << " alpha=" << o.alpha);
    const std::vector<double> xs = TrainerValues(gen, o.bits, 200000);
    LogRecord record;
    const at::Tensor trained = Round(ToTensor(xs), o, &record).rounded;
    const double scale = MaxAbs(xs);
    std::vector<double> xp = xs;
    int64_t crossed_zero = 0, perturbed = 0;
    for (size_t i = 1; i < xs.size(); ++i) {  // xs[0] = 8 is the scale: keep it
      const WindowAt win = TrainerWindow(xs[i], o, scale);
      // ROUNDING.md guarantees exact replay for d < w(x) for DOWN/UP/EXACT entries and for
      // NONE entries whose window is at most spacing/4 (see the "spec gap" test below).
      const bool covered = record.states()[i] != 0 || win.w <= win.spacing / 4;
      if (!covered || win.w == 0) continue;
      const double delta = (2 * gen.Unit() - 1) * 0.9 * win.w;
      const double v = xs[i] + delta;
      if (!(std::fabs(v - xs[i]) < win.w)) continue;
      xp[i] = v;
      ++perturbed;
      crossed_zero += record.states()[i] == 3 && std::signbit(v) != std::signbit(xs[i]);
    }
    REQUIRE(MaxAbs(xp) == scale);
    CHECK(perturbed > 100000);
    const auto r = Replay(ToTensor(xp), record, o);
    CHECK(r.rounded.equal(trained));
    CHECK(r.report.illegitimate == 0);
    CHECK(r.report.corrections > 0);           // some perturbed values did cross a midpoint
    if (o.alpha > 0) CHECK(crossed_zero > 0);  // cancelled values moved across zero
    CheckAgainstOracle(xp, record, o, r.report, r.rounded);
  }
}

TEST_CASE("replay: perturbations larger than the window are caught") {
  const uint64_t seed = oracle::TestSeed("replay: perturbed beyond the window");
  oracle::ValueGenerator gen(seed);
  for (const RoundOptions& o : kConfigs) {
    INFO("b=" << o.bits << " band=" << o.band << " alpha=" << o.alpha);
    const std::vector<double> xs = TrainerValues(gen, o.bits, 100000);
    LogRecord record;
    Round(ToTensor(xs), o, &record);
    const double scale = MaxAbs(xs);
    // Random large perturbations: the kernel must agree with the oracle element by element.
    std::vector<double> xp = xs;
    for (size_t i = 1; i < xs.size(); ++i) {
      const WindowAt win = TrainerWindow(xs[i], o, scale);
      const double size = std::max(win.w, win.spacing / 8) * (1 + 40 * gen.Unit());
      xp[i] = xs[i] + (gen.Int(0, 1) ? size : -size);
      if (std::fabs(xp[i]) > 7) xp[i] = xs[i];
    }
    const auto r = Replay(ToTensor(xp), record, o);
    CheckAgainstOracle(xp, record, o, r.report, r.rounded);
    // With band 0.25 and alpha 0, 2w' is half a spacing: no DOWN/UP entry can be flagged.
    if (o.band < 0.25) CHECK(r.report.illegitimate > 0);
  }
  // Directed, band 0.1 (2w = 0.2 spacing): DOWN/UP values pushed to 0.3 spacing from their
  // midpoint (same cell, so the result is unchanged) are all illegitimate; NONE values
  // mirrored across their midpoint replay to a different value (a mismatch the game detects).
  const RoundOptions o = Options(32, 0.1, 0.0);
  std::vector<double> xs = {8.0};
  for (int i = 0; i < 50000; ++i)
    xs.push_back(1.0 + (i + 0.5) * P2(-23) / 50000 + P2(-23) * (i % 7));
  LogRecord record;
  const at::Tensor trained = Round(ToTensor(xs), o, &record).rounded;
  std::vector<double> xp = xs;
  int64_t pushed = 0, crossed = 0;
  for (size_t i = 1; i < xs.size(); ++i) {
    const oracle::Grid g = oracle::GridOf(xs[i], 32);
    const double mid = (g.lo + g.hi) / 2, sp = g.hi - g.lo;
    if (record.states()[i] == 1 || record.states()[i] == 2) {
      xp[i] = (i % 2) ? mid + 0.3 * sp : mid - 0.3 * sp;
      ++pushed;
    } else if (record.states()[i] == 0 && !g.on_grid) {
      xp[i] = 2 * mid - xs[i];  // mirror across the midpoint
      ++crossed;
    }
  }
  const auto r = Replay(ToTensor(xp), record, o);
  CHECK(r.report.illegitimate == pushed);
  CHECK(pushed > 1000);
  CHECK(crossed > 1000);
  const std::vector<double> got = ToVector(r.rounded), want = ToVector(trained);
  int64_t differ = 0;
  for (size_t i = 0; i < xs.size(); ++i) differ += Bits(got[i]) != Bits(want[i]);
  CHECK(differ >= crossed);
  CheckAgainstOracle(xp, record, o, r.report, r.rounded);
}

TEST_CASE("replay: tampered logs are counted as corrections and illegitimate entries") {
  const RoundOptions o = Options(32, 0.1, 0.0);
  std::vector<double> xs;
  for (int i = 0; i < 4000; ++i) xs.push_back(1.0 + i * 0.37 * P2(-23));
  LogRecord record;
  const at::Tensor trained = Round(ToTensor(xs), o, &record).rounded;
  std::vector<uint8_t> states(record.states(), record.states() + record.size());
  // Flip the direction of every tenth logged entry.
  int64_t flipped = 0;
  for (size_t i = 0; i < states.size(); i += 10) {
    if (states[i] == 1 || states[i] == 2) {
      states[i] = static_cast<uint8_t>(3 - states[i]);
      ++flipped;
    }
  }
  // Claim a direction for NONE values far from their midpoint (more than 2w away).
  int64_t claimed = 0;
  for (size_t i = 5; i < states.size(); i += 10) {
    const oracle::Grid g = oracle::GridOf(xs[i], 32);
    const double mid = (g.lo + g.hi) / 2;
    if (states[i] == 0 && !g.on_grid && std::fabs(xs[i] - mid) > 0.3 * (g.hi - g.lo)) {
      states[i] = g.rnd == g.lo ? 2 : 1;  // the other neighbour
      ++claimed;
    }
  }
  REQUIRE(flipped > 100);
  REQUIRE(claimed > 10);
  const LogRecord tampered = LogRecord::FromStates(states, {});
  const auto r = Replay(ToTensor(xs), tampered, o);
  // The flips are within w of their midpoints (the trainer logged them): accepted, the
  // trainer's room. The claims are not: flagged, and not applied.
  CHECK(r.report.corrections == flipped);
  CHECK(r.report.illegitimate == claimed);
  const std::vector<double> got = ToVector(r.rounded), want = ToVector(trained);
  int64_t differ = 0;
  for (size_t i = 0; i < xs.size(); ++i) differ += Bits(got[i]) != Bits(want[i]);
  CHECK(differ == flipped);

  // A tampered EXACT value far from x is illegitimate and not applied: x' rounds to nearest
  // there (no correction), so a forged value never enters the replay.
  const RoundOptions cal = Options(32, 0.0, P2(-40));
  const std::vector<double> ys = {1000.0, 3.3e-7, 1.0};
  LogRecord exact_record;
  Round(ToTensor(ys), cal, &exact_record);
  REQUIRE(exact_record.counts().exact == 1);
  std::vector<uint8_t> s2(exact_record.states(), exact_record.states() + 3);
  ExactEntry e = exact_record.exact()[0];
  e.fp32_bits = oracle::F32Bits(1.0e-3f);
  const auto r2 = Replay(ToTensor(ys), LogRecord::FromStates(s2, {e}), cal);
  CHECK(r2.report.illegitimate == 1);
  CHECK(r2.report.corrections == 0);
  CHECK(ToVector(r2.rounded)[1] == static_cast<double>(static_cast<float>(3.3e-7)));
}

TEST_CASE("replay: near misses count NONE entries the auditor would have logged") {
  const RoundOptions o = Options(32, 0.25, 0.0);
  std::vector<double> xs;
  for (int i = 0; i < 1000; ++i) xs.push_back(1.0 + (i % 97) * P2(-23) + (i % 13) * P2(-27));
  const LogRecord none = LogRecord::FromStates(std::vector<uint8_t>(xs.size(), 0), {});
  const auto r = Replay(ToTensor(xs), none, o);
  CHECK(r.report.near_misses > 100);
  CHECK(r.report.corrections == 0);
  CheckAgainstOracle(xs, none, o, r.report, r.rounded);
}

TEST_CASE("replay: a judge counts the applied entries in the outer part of its window") {
  // Around 1 + 2^-24, the midpoint of [1, 1 + g] (g = 2^-23): under the paper's window
  // w = g/4. Below the midpoint rnd_b gives 1, so UP moves the value and DOWN does not; above
  // it the other way. The outer part: (w/2, w] for an entry that moves the value, (1.5w, 2w]
  // for one that does not; entries beyond w (moving) or 2w are illegitimate, not counted.
  const double g = P2(-23), w = g / 4, mid = 1.0 + g / 2;
  struct Case {
    double offset;  // x' - mid, in units of w
    uint8_t state;  // 1 DOWN, 2 UP
    int near;       // counted
    int illegitimate;
  };
  const Case cases[] = {
      {-0.3, 2, 0, 0}, {-0.7, 2, 1, 0}, {-1.0, 2, 1, 0}, {-1.2, 2, 0, 1},  // UP moves
      {0.3, 1, 0, 0},  {0.7, 1, 1, 0},  {-1.2, 1, 0, 0}, {-1.7, 1, 1, 0},  // DOWN moves above
      {-1.9, 1, 1, 0}, {-2.2, 1, 0, 1}, {1.7, 2, 1, 0},  {1.2, 2, 0, 0},   // and not below
  };
  std::vector<double> xs;
  std::vector<uint8_t> states;
  int want_near = 0, want_illegitimate = 0;
  for (const Case& c : cases) {
    xs.push_back(mid + c.offset * w);
    states.push_back(c.state);
    want_near += c.near;
    want_illegitimate += c.illegitimate;
  }
  const LogRecord record = LogRecord::FromStates(states, {});
  RoundOptions o = Options(32, 0.25, 0.0);
  const auto plain = Replay(ToTensor(xs), record, o);
  CHECK(plain.report.near_limit == 0);  // only when asked
  CHECK(plain.report.illegitimate == want_illegitimate);
  o.count_near_limit = true;
  const auto judged = Replay(ToTensor(xs), record, o);
  CHECK(judged.report.near_limit == want_near);
  CHECK(judged.report.illegitimate == want_illegitimate);
  CHECK(judged.rounded.equal(plain.rounded));  // counting changes nothing else
  // In place, and with the window's absolute term from a per-element magnitude (w = alpha m).
  at::Tensor io = ToTensor(xs);
  CHECK(ReplayInto(io, record, io, o).near_limit == want_near);
  RoundOptions absolute = Options(32, 0.0, 1.0);
  absolute.count_near_limit = true;
  const at::Tensor m = at::full({static_cast<int64_t>(xs.size())}, w, at::kDouble);
  CHECK(Replay(ToTensor(xs), record, absolute, {}, vt::precision::Magnitude(m)).report.near_limit ==
        want_near);
}

TEST_CASE("replay: a judge counts EXACT entries in the outer part of their tolerance") {
  // Band 1/2 at b = 32: every value is eligible for EXACT and the tolerance t is the spacing
  // g = 2^-23 above 1. x' = mid - d below the midpoint of [1, 1 + g] rounds to 1; EXACT 1 + g
  // (the other neighbour) is legitimate with its facing end (the midpoint) within t/2 and in
  // the outer part beyond t/4; EXACT 1 (rnd_b) has an adjacent midpoint within 3t/4 here.
  const double g = P2(-23), mid = 1.0 + g / 2;
  struct Case {
    double d;  // mid - x', in units of g
    float v;
    int near;
  };
  const Case cases[] = {{0.1, static_cast<float>(1.0 + g), 0},
                        {0.4, static_cast<float>(1.0 + g), 1},
                        {0.45, static_cast<float>(1.0 + g), 1},
                        {0.2, 1.0f, 0},
                        {0.4, 1.0f, 0}};
  std::vector<double> xs;
  std::vector<ExactEntry> exact;
  int want = 0;
  for (const Case& c : cases) {
    exact.push_back(ExactEntry{static_cast<int64_t>(xs.size()), oracle::F32Bits(c.v)});
    xs.push_back(mid - c.d * g);
    want += c.near;
  }
  const LogRecord record =
      LogRecord::FromStates(std::vector<uint8_t>(xs.size(), 3), std::move(exact));
  RoundOptions o = Options(32, 0.5, 0.0);
  const auto plain = Replay(ToTensor(xs), record, o);
  CHECK(plain.report.illegitimate == 0);
  CHECK(plain.report.near_limit == 0);
  o.count_near_limit = true;
  const auto judged = Replay(ToTensor(xs), record, o);
  CHECK(judged.report.illegitimate == 0);
  CHECK(judged.report.near_limit == want);
  CHECK(judged.rounded.equal(plain.rounded));
}

TEST_CASE("replay: values on the grid use the nearest midpoint (half the step below)") {
  // 1.0: the midpoint below is 2^-25 away (spacing 2^-24 below 1), the one above 2^-24.
  // 1.5: both midpoints are 2^-24 away. 0: the midpoints are +-2^-150 away.
  const std::vector<double> xs = {1.0, 1.5, 0.0};
  const LogRecord directions = LogRecord::FromStates({1, 2, 1}, {});
  const LogRecord none = LogRecord::FromStates({0, 0, 0}, {});
  // A direction on the grid changes nothing (lo = hi = x') and no honest trainer writes one
  // (the test below): illegitimate under every window, also the paper's, where 2w = spacing/2
  // reaches the nearest midpoint of each of these values (before 2026-11-29 it was accepted).
  // No NONE value is at risk there (the test is strict).
  IsaGuard guard;
  for (auto isa : vt::precision::SupportedKernelIsas()) {
    vt::precision::SetKernelIsa(isa);
    INFO("variant " << vt::precision::KernelIsaName(isa));
    auto paper = Replay(ToTensor(xs), directions, Options(32, 0.25, 0.0));
    CHECK(paper.report.illegitimate == 3);
    CHECK(paper.report.corrections == 0);
    CHECK(paper.rounded.equal(ToTensor(xs)));
    CHECK(Replay(ToTensor(xs), none, Options(32, 0.25, 0.0)).report.near_misses == 0);
    CHECK(Replay(ToTensor(xs), directions, Options(32, 0.1, 0.0)).report.illegitimate == 3);
    CHECK(Replay(ToTensor(xs), directions, Options(32, 0.0, P2(-26))).report.illegitimate == 3);
  }
  // An absolute term of 2^-24 (scale 1.5): 0 and 1.0 have a midpoint nearer than w, 1.5
  // does not (2^-24 is not nearer than w = 2^-24 + 0).
  const auto wide = Replay(ToTensor(xs), none, Options(32, 0.0, P2(-24) / 1.5));
  CHECK(wide.report.near_misses == 2);
  CheckAgainstOracle(xs, none, Options(32, 0.0, P2(-24) / 1.5), wide.report, wide.rounded);
}

TEST_CASE("replay: in place, sizes, errors") {
  const RoundOptions cal = Options(26, 0.1, P2(-30));
  oracle::ValueGenerator gen(11);
  const std::vector<double> xs = TrainerValues(gen, 26, 100000);
  LogRecord record;
  Round(ToTensor(xs), cal, &record);
  REQUIRE(record.counts().exact > 0);
  const auto expected = Replay(ToTensor(xs), record, cal);
  at::Tensor x = ToTensor(xs);
  const ReplayReport report = ReplayInto(x, record, x, cal);
  CHECK(x.equal(expected.rounded));
  CHECK(report.corrections == expected.report.corrections);
  CHECK(report.near_misses == expected.report.near_misses);
  CHECK(report.scale == 8.0);
  // Element-count mismatch names both sizes.
  CHECK_THROWS_WITH(
      Replay(ToTensor({1.0, 2.0, 3.0, 4.0}), LogRecord::FromStates({0, 0, 0, 0, 0}, {}), cal),
      Catch::Equals("log record has 5 elements but the tensor has 4"));
  // Range errors name the boundary, step and index.
  const BoundaryContext context{"layer2.0.conv1:bwd", 7};
  CHECK_THROWS_WITH(
      Replay(ToTensor({1.0, INFINITY}), LogRecord::FromStates({0, 0}, {}), cal, context),
      Catch::Equals("infinite value at 'layer2.0.conv1:bwd', step 7, index 1: inf"));
  const double above = vt::precision::LargestGridValue(32) * (1 + P2(-30));
  CHECK(vt::precision::RoundValue(above, 32) == FLT_MAX);
  // A direction to 2^128 is no honest entry (the trainer's own rounding would have failed):
  // flagged and not applied, so it cannot fail the auditor's step before its entries are
  // counted (it did before 2026-12-04, and left the judge without a verdict).
  {
    const auto up = Replay(ToTensor({1.0, above}), LogRecord::FromStates({0, 2}, {}),
                           Options(32, 0.25, 0), context);
    CHECK(up.report.illegitimate == 1);
    CHECK(up.report.corrections == 0);
    CHECK(ToVector(up.rounded)[1] == FLT_MAX);
    const auto down =
        Replay(ToTensor({-above}), LogRecord::FromStates({1}, {}), Options(32, 0.25, 0));
    CHECK(down.report.illegitimate == 1);
    CHECK(ToVector(down.rounded)[0] == -FLT_MAX);
    at::Tensor inplace = ToTensor({1.0, above});
    const ReplayReport in =
        ReplayInto(inplace, LogRecord::FromStates({0, 2}, {}), inplace, Options(32, 0.25, 0));
    CHECK(in.illegitimate == 1);
    CHECK(ToVector(inplace)[1] == FLT_MAX);
  }
  CHECK_THROWS_WITH(Replay(ToTensor({1.0}), LogRecord::FromStates({0}, {}), Options(40, 0.25, 0)),
                    Catch::Contains("bits must be"));
}

TEST_CASE("replay: values on the grid under a wide window are logged EXACT and replay exactly") {
  // A window wider than a quarter spacing (alpha * scale = 2^-26 * 8 = spacing(1)) reaches
  // the midpoint below 1.0 (1 - 2^-25): an honest auditor value within d < w of the
  // trainer's 1.0 can cross it. The trainer therefore logs 1.0 as EXACT, and the replay
  // gives 1.0 back. (An earlier contract logged every on-grid value NONE, and this replay
  // came out as 1 - 2^-24 with no correction counted.)
  const RoundOptions wide = Options(32, 0.0, P2(-26));
  const double scale = 8.0;
  const double w = wide.alpha * scale;
  REQUIRE(w > P2(-23) / 4);
  LogRecord record;
  const at::Tensor trained = Round(ToTensor({scale, 1.0}), wide, &record).rounded;
  CHECK(record.states()[1] == 3);
  REQUIRE(record.exact().size() == 1);
  CHECK(record.exact()[0].value() == 1.0);
  const double xp = 1.0 - 0.5 * w;  // d = 2^-24 < w
  const auto r = Replay(ToTensor({scale, xp}), record, wide);
  CHECK(ToVector(trained)[1] == 1.0);
  CHECK(ToVector(r.rounded)[1] == 1.0);
  CHECK(r.report.corrections == 1);
  CHECK(r.report.illegitimate == 0);
  // The control: without the entry (a NONE in its place) the replay differs.
  const LogRecord none = LogRecord::FromStates({0, 0}, {});
  CHECK(ToVector(Replay(ToTensor({scale, xp}), none, wide).rounded)[1] == 1 - P2(-24));
  // The same wide window also reaches the midpoint below a power of two from a value just
  // above it (not its own cell's midpoint): 1 + 2^-23 / 16 is logged EXACT too.
  LogRecord above;
  Round(ToTensor({scale, 1.0 + P2(-27)}), wide, &above);
  CHECK(above.states()[1] == 3);
}

TEST_CASE("replay: an honest trainer near an auditor value on the grid is never flagged") {
  // Trainer values x within the window of auditor values x' on the grid (zeros, powers of
  // two, random grid values; every b; band-only windows up to the paper's). Near an on-grid
  // x' an honest trainer logs nothing: x lies in a cell ending at x', whose midpoint is half
  // that cell's step from x', beyond w + d. So a direction on the grid is never an honest
  // entry (the rule above).
  const uint64_t seed = oracle::TestSeed("replay: honest near the grid");
  oracle::ValueGenerator gen(seed);
  IsaGuard guard;
  for (int bits : {32, 26, 17, 10}) {
    std::vector<double> grid;
    for (double v : {0.0, 1.0, -1.0, 2.0, 0.5, P2(-100), -P2(100), 1.5, -3.0}) grid.push_back(v);
    while (grid.size() < 4000) {
      const double any = gen.Any(bits);
      if (!(std::fabs(any) < 0.5 * vt::precision::LargestGridValue(bits))) continue;
      const double v = vt::precision::RoundValue(any, bits);
      if (std::fabs(v) > P2(-120)) grid.push_back(v);
    }
    for (double band : {1.0 / 16, 0.1, 0.25}) {
      std::vector<double> auditor, trainer;
      for (double xp : grid) {
        const oracle::Grid g = oracle::GridOf(xp, bits);
        // Below every cell next to x' the trainer's window is at least band * the smaller
        // step: stay strictly inside it (the run's correctness condition d < w(x)).
        const double w = band * std::min(g.step, g.step_below);
        for (double f : {-0.99, -0.5, 0.25, 0.99, 2 * gen.Unit() - 1}) {
          auditor.push_back(xp);
          trainer.push_back(xp + 0.99 * f * w);
        }
      }
      const RoundOptions o = Options(bits, band, 0.0);
      LogRecord record;
      const at::Tensor trained = Round(ToTensor(trainer), o, &record).rounded;
      CHECK(record.counts().logged() == 0);
      for (auto isa : vt::precision::SupportedKernelIsas()) {
        vt::precision::SetKernelIsa(isa);
        INFO("b=" << bits << " band=" << band << " variant " << vt::precision::KernelIsaName(isa));
        const auto r = Replay(ToTensor(auditor), record, o);
        CHECK(r.report.illegitimate == 0);
        CHECK(r.report.corrections == 0);
        CHECK(r.rounded.equal(trained));
      }
    }
  }
}

TEST_CASE("replay: random states on random values agree with the oracle") {
  // Arbitrary (also dishonest) records on arbitrary values, on and off the grid, every b.
  const uint64_t seed = oracle::TestSeed("replay: random states");
  oracle::ValueGenerator gen(seed);
  IsaGuard guard;
  for (int bits = 10; bits <= 32; ++bits) {
    std::vector<double> xs;
    std::vector<uint8_t> states;
    std::vector<ExactEntry> exact;
    for (int i = 0; i < 20000; ++i) {
      double v = gen.Any(bits);
      // Keep hi(x) finite in FP32 so that UP entries never ask for 2^128.
      if (!(std::fabs(v) < vt::precision::LargestGridValue(bits))) v = 1.0;
      xs.push_back(v);
      const uint8_t s = static_cast<uint8_t>(gen.Int(0, 3));
      states.push_back(s);
      if (s == 3) {
        const float f = static_cast<float>(gen.Any(32));
        exact.push_back(ExactEntry{i, oracle::F32Bits(std::isfinite(f) ? f : 0.0f)});
      }
    }
    const LogRecord record = LogRecord::FromStates(states, exact);
    for (const RoundOptions& o :
         {Options(bits, 0.25, 0.0), Options(bits, 0.05, P2(-30)), Options(bits, 0.0, P2(-60))}) {
      for (auto isa : vt::precision::SupportedKernelIsas()) {
        vt::precision::SetKernelIsa(isa);
        INFO("b=" << bits << " band=" << o.band << " variant "
                  << vt::precision::KernelIsaName(isa));
        const auto r = Replay(ToTensor(xs), record, o);
        CheckAgainstOracle(xs, record, o, r.report, r.rounded);
      }
    }
  }
}

// The issue-13 probes: a trainer who has read the replay code forges entries that move an
// auditor value to its other neighbour. Each must be flagged unless the window really
// leaves the trainer that choice, and then it must be counted in `steerable`.
TEST_CASE("replay: forged EXACT entries holding the other neighbour are illegitimate") {
  // 1000 auditor values 0.1 spacing above lo (so rnd_b = lo, 0.4 spacing from the
  // midpoint); the forged record marks each EXACT with hi. Under the old rule
  // (|x' - v| <= 2w' + spacing) every one of them passed.
  oracle::ValueGenerator gen(13);
  std::vector<double> xs;
  std::vector<ExactEntry> forged;
  for (int i = 0; i < 1000; ++i) {
    // Magnitudes in [1, 32): with alpha = 2^-40 the window stays far below a spacing.
    const double lo = std::ldexp(1.0 + gen.Unit(), gen.Int(0, 4));
    const oracle::Grid g = oracle::GridOf(lo, 32);
    const double on = g.rnd;  // lo on the b = 32 grid
    const double spacing = oracle::SpacingOf(on, 32);
    xs.push_back(on + 0.1 * spacing);
    forged.push_back(ExactEntry{i, oracle::F32Bits(static_cast<float>(on + spacing))});
  }
  const LogRecord record = LogRecord::FromStates(std::vector<uint8_t>(1000, 3), forged);
  for (const RoundOptions& o :
       {Options(32, 1.0 / 16, 0.0), Options(32, 0.0, P2(-40)), Options(32, 0.25, 0.0)}) {
    INFO("band " << o.band << " alpha " << o.alpha);
    IsaGuard guard;
    for (auto isa : vt::precision::SupportedKernelIsas()) {
      vt::precision::SetKernelIsa(isa);
      const auto r = Replay(ToTensor(xs), record, o);
      CHECK(r.report.illegitimate == 1000);  // every entry flagged ...
      CHECK(r.report.corrections == 0);      // ... and none applied: every value rounds to lo
      // None is left to the trainer: |x' - mid| = 0.4 spacing is beyond every window here
      // (a quarter spacing at most), so no honest trainer's value rounds the other way. (Up
      // to 2026-12-04 the paper's window left every one through a direction entry, 2w.)
      CHECK(r.report.steerable == 0);
      CheckAgainstOracle(xs, record, o, r.report, r.rounded);
    }
  }
}

TEST_CASE("replay: an EXACT value is legitimate only within the tolerance of a midpoint") {
  // A wide absolute window (alpha * scale = 2^-40 * 1 on values near 2^-30, where the
  // spacing is 2^-53): an honest trainer's value lies within w = t/2 of x', so the grid
  // values there are legitimate and x' is steerable; a value farther away (up to t was
  // accepted before 2026-12-04: twice the room any honest trainer has), or one off the
  // b-grid, is not.
  const RoundOptions o = Options(32, 0.0, P2(-40));
  const double xp = P2(-30) * 1.2345;
  const double t = 2 * P2(-40);  // the tolerance: 2 (band g+ + alpha scale)
  auto replay_exact = [&](double v) {
    const LogRecord rec =
        LogRecord::FromStates({0, 3}, {ExactEntry{1, oracle::F32Bits(static_cast<float>(v))}});
    return Replay(ToTensor({1.0, xp}), rec, o).report;
  };
  CHECK(replay_exact(static_cast<float>(xp)).illegitimate == 0);             // rnd_b(x') itself
  CHECK(replay_exact(static_cast<float>(xp + 0.45 * t)).illegitimate == 0);  // within reach
  CHECK(replay_exact(static_cast<float>(xp - 0.45 * t)).illegitimate == 0);
  CHECK(replay_exact(static_cast<float>(xp + 0.9 * t)).illegitimate == 1);  // beyond w
  CHECK(replay_exact(static_cast<float>(xp - 0.9 * t)).illegitimate == 1);
  CHECK(replay_exact(static_cast<float>(xp + 1.5 * t)).illegitimate == 1);  // too far
  CHECK(replay_exact(static_cast<float>(-xp)).illegitimate == 1);           // other sign
  const auto r = Replay(ToTensor({1.0, xp}), LogRecord::FromStates({0, 0}, {}), o).report;
  CHECK(r.steerable == 1);  // x' (the 1.0 is on the grid, far from any midpoint: not)
  // Off the b-grid: b = 24 keeps 15 explicit bits, so an FP32 value with low bits set is
  // no rounding result at all.
  const RoundOptions o24 = Options(24, 0.0, P2(-14));  // w = 2^-14 > spacing(1)/4 = 2^-17
  const LogRecord off_grid =
      LogRecord::FromStates({0, 3}, {ExactEntry{1, oracle::F32Bits(1.0f) | 1u}});
  CHECK(Replay(ToTensor({1.0, 1.0}), off_grid, o24).report.illegitimate == 1);
}

TEST_CASE("replay: an EXACT entry's reach ends exactly at the window on every kernel variant") {
  // Band 0, alpha 2^-40 and a scale of 1 (the 1.0 first): w' = 2^-40 = 2^13 spacings of the
  // values near 2^-30 (spacing 2^-53). Each v lies 2^13 cells from x', so it moves the value;
  // x' sits exactly w' beyond the end of v's cell that faces it (legitimate: an honest x in
  // v's cell is within w' of x'), or one FP64 ulp farther (illegitimate), below and above v.
  // 40 values take the AVX-512 kernel's full groups and its tail; every variant must agree.
  const double g = P2(-53), w = P2(-40);
  std::vector<double> xs = {1.0};
  std::vector<ExactEntry> entries;
  std::vector<double> legit_value;  // the value a legitimate entry replays to, else NaN
  for (int j = 0; j < 40; ++j) {
    const double v = P2(-30) + (1000 + 977 * j) * g;
    double x;
    switch (j % 4) {
      case 0:
        x = v - 0.5 * g - w;
        break;
      case 1:
        x = std::nextafter(v - 0.5 * g - w, 0.0);
        break;
      case 2:
        x = v + 0.5 * g + w;
        break;
      default:
        x = std::nextafter(v + 0.5 * g + w, 1.0);
        break;
    }
    xs.push_back(x);
    entries.push_back(ExactEntry{j + 1, oracle::F32Bits(static_cast<float>(v))});
    legit_value.push_back(j % 2 == 0 ? v : NAN);
  }
  std::vector<uint8_t> states(xs.size(), 3);
  states[0] = 0;
  const LogRecord record = LogRecord::FromStates(states, entries);
  const RoundOptions o = Options(32, 0.0, w);
  IsaGuard guard;
  for (auto isa : vt::precision::SupportedKernelIsas()) {
    vt::precision::SetKernelIsa(isa);
    INFO("variant " << vt::precision::KernelIsaName(isa));
    const auto r = Replay(ToTensor(xs), record, o);
    CHECK(r.report.illegitimate == 20);
    CHECK(r.report.corrections == 20);
    const std::vector<double> got = ToVector(r.rounded);
    int wrong = 0;
    for (size_t j = 0; j < legit_value.size(); ++j) {
      const double expect =
          std::isnan(legit_value[j]) ? oracle::GridOf(xs[j + 1], 32).rnd : legit_value[j];
      wrong += got[j + 1] != expect;
    }
    CHECK(wrong == 0);
    CheckAgainstOracle(xs, record, o, r.report, r.rounded);
  }
}

TEST_CASE("replay: an EXACT zero is legitimate only with the sign of the values near it") {
  // x' = +-5e-46, under FP32's smallest spacing g0 = 2^-149 (1.4e-45), with a window of
  // 4e-46: an honest trainer's value lies within that of x' (the correctness condition), so
  // it has x''s sign, and rounds to the zero of that sign, whose cell ends at the midpoint
  // +-g0/2 on the same side. The zero of the other sign needs a value of the other sign.
  const RoundOptions o = Options(32, 0.0, 4e-46);
  for (double sign : {1.0, -1.0}) {
    const double xp = sign * 5e-46;
    auto illegitimate = [&](float v) {
      const LogRecord rec = LogRecord::FromStates({0, 3}, {ExactEntry{1, oracle::F32Bits(v)}});
      return Replay(ToTensor({1.0, xp}), rec, o).report.illegitimate;
    };
    INFO("x' = " << xp);
    CHECK(illegitimate(sign > 0 ? 0.0f : -0.0f) == 0);
    CHECK(illegitimate(sign > 0 ? -0.0f : 0.0f) == 1);
    CHECK(illegitimate(static_cast<float>(sign * P2(-149))) == 0);  // the g0 of its sign
    CHECK(illegitimate(static_cast<float>(-sign * P2(-149))) == 1);
  }
}

TEST_CASE("replay: EXACT entries under a narrow window are illegitimate, also for rnd_b(x')") {
  // band <= 1/4 and alpha = 0 (the paper's and the tight window): w <= spacing/4 everywhere,
  // so an honest trainer never writes EXACT; a forged one is flagged even when it holds
  // the value the auditor would have computed anyway.
  const std::vector<double> xs = {1.0 + P2(-25), 3.0 + P2(-24), -7.5};
  std::vector<ExactEntry> same;
  for (int i = 0; i < 3; ++i) {
    same.push_back(ExactEntry{i, oracle::F32Bits(static_cast<float>(
                                     oracle::GridOf(xs[static_cast<size_t>(i)], 32).rnd))});
  }
  const LogRecord record = LogRecord::FromStates({3, 3, 3}, same);
  for (double band : {0.25, 1.0 / 16, 0.0}) {
    const auto r = Replay(ToTensor(xs), record, Options(32, band, 0.0));
    CHECK(r.report.corrections == 0);
    CHECK(r.report.illegitimate == 3);
  }
}

TEST_CASE("replay: direction flips of unlogged values are flagged beyond w and counted within") {
  // Auditor values at distance delta from the midpoint of their cell, every one given the
  // direction that is *not* rnd_b(x') (a flip). Flagged (and not applied) iff delta > w':
  // an honest trainer's value across the midpoint is more than w from x' there (before
  // 2026-12-04 flips up to 2w' were accepted). The others are the trainer's legitimate room
  // and appear in `steerable` whatever the record says.
  const double g = P2(-23);  // spacing in [1, 2)
  const double mid = 1.5 + 0.5 * g;
  std::vector<double> xs;
  std::vector<uint8_t> flips;
  for (int i = 1; i <= 96; ++i) {
    const double delta = (i / 200.0) * g;  // 0.005 g .. 0.48 g
    const double x = (i % 2) ? mid + delta : mid - delta;
    xs.push_back(x);
    flips.push_back(x > mid ? 1 : 2);  // rounds up -> DOWN, rounds down -> UP
  }
  const LogRecord record = LogRecord::FromStates(flips, {});
  // Every kernel variant must draw the line at the same value (delta = 0.05 g, 0.1 g, 0.25 g
  // lie exactly on the window's edge for those bands): an auditor and a judge on different
  // CPUs must flag the same entries.
  IsaGuard guard;
  for (auto isa : vt::precision::SupportedKernelIsas()) {
    vt::precision::SetKernelIsa(isa);
    for (double band : {1.0 / 16, 0.05, 0.1, 0.25}) {
      const auto r = Replay(ToTensor(xs), record, Options(32, band, 0.0));
      int64_t within = 0;
      // (|x' - mid| as stored: mid + 0.05 g rounds in FP64, so compare the stored distance.)
      auto inside = [&](int i) {
        return std::fabs(xs[static_cast<size_t>(i - 1)] - mid) <= band * g;
      };
      for (int i = 1; i <= 96; ++i) within += inside(i);
      INFO("band " << band << ", variant " << vt::precision::KernelIsaName(isa));
      CHECK(r.report.corrections == within);
      CHECK(r.report.illegitimate == 96 - within);
      CHECK(r.report.steerable == within);
      // Applied exactly where legitimate: a flip moves x' to the neighbour it does not round to.
      const std::vector<double> got = ToVector(r.rounded);
      int wrong = 0;
      for (int i = 1; i <= 96; ++i) {
        const bool flipped = inside(i);
        const bool above = i % 2 == 1;
        const double expect = (above != flipped) ? 1.5 + g : 1.5;
        wrong += got[static_cast<size_t>(i - 1)] != expect;
      }
      CHECK(wrong == 0);
      // An honest NONE record on the same values reports the same room.
      CHECK(Replay(ToTensor(xs), LogRecord::FromStates(std::vector<uint8_t>(96, 0), {}),
                   Options(32, band, 0.0))
                .report.steerable == within);
    }
  }
}

TEST_CASE(
    "replay: a zero window (an exact boundary) logs nothing and accepts no entry, ties included") {
  // x exactly on a midpoint: |x - mid| <= 0 holds, but an honest trainer rounds a tie to even
  // under a zero window and logs nothing, so a direction there is a forgery (the flip of a
  // tie was accepted before, and counted steerable by the auditor only).
  const double tie = 1.0 + P2(-24);  // midpoint of [1, 1 + 2^-23]
  const RoundOptions zero = Options(32, 0.0, 0.0);
  LogRecord honest;
  Round(ToTensor({tie}), zero, &honest);
  CHECK(honest.states()[0] == 0);
  const auto r = Replay(ToTensor({tie}), LogRecord::FromStates({2}, {}), zero);
  CHECK(r.report.corrections == 0);  // (flagged, and not applied)
  CHECK(r.report.illegitimate == 1);
  CHECK(r.report.steerable == 0);
}
