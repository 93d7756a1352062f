// Per-element magnitudes (round.h, ROUNDING.md "The window"): the window's absolute term is
// alpha * m[i]. With m = max|x| everywhere the results equal the per-tensor window's; every
// kernel variant agrees; a small value computed from large terms gets a window wide enough
// for its divergence (the cancellation an alpha * |x| window misses) while a value whose m is
// its own size logs nothing; negative or non-finite magnitudes are errors naming the place; a
// zero magnitude (values both parties compute alike) gives a zero window; and the legitimacy
// rule follows the auditor's own m (a forged EXACT entry is flagged where m is small and
// accepted only where an honest trainer could have written it).
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/precision/round.h"
#include "runtime/precision/window.h"
#include "tests/precision/helpers.h"

namespace {

namespace prec = vt::precision;
using prec::LogRecord;
using prec::RoundOptions;
using prec::testing::Bits;
using prec::testing::IsaGuard;
using prec::testing::ToTensor;
using prec::testing::ToVector;

RoundOptions Options(double band, double alpha) {
  RoundOptions o;
  o.bits = 32;
  o.band = band;
  o.alpha = alpha;
  return o;
}

// Values of many sizes, signs and grid positions (midpoints and near-midpoints included).
std::vector<double> MixedValues(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-30, 10);
  std::vector<double> xs(n);
  for (size_t i = 0; i < n; ++i) {
    double v = std::ldexp(mant(rng), ex(rng));
    if (i % 7 == 0) v = static_cast<double>(static_cast<float>(v));  // on the grid
    if (i % 11 == 0) {                                               // a midpoint, nudged
      const float f = static_cast<float>(v);
      const double mid = (static_cast<double>(f) + std::nextafter(f, 1e30f)) / 2.0;
      v = mid + (i % 3 == 0 ? 0.0 : std::ldexp(1.0, -70));
    }
    if (i % 5 == 0) v = -v;
    if (i % 97 == 0) v = 0.0;
    xs[i] = v;
  }
  return xs;
}

std::vector<uint8_t> States(const LogRecord& r) {
  return std::vector<uint8_t>(r.states(), r.states() + r.size());
}

}  // namespace

TEST_CASE("a magnitude equal to the scale everywhere gives the per-tensor window",
          "[precision][magnitude]") {
  const std::vector<double> xs = MixedValues(5000, 1);
  double scale = 0.0;
  for (double v : xs) scale = std::max(scale, std::fabs(v));
  const at::Tensor x = ToTensor(xs);
  const at::Tensor m = at::full({static_cast<int64_t>(xs.size())}, scale, at::kDouble);
  for (double alpha : {0.0, 0x1p-40, 0x1p-30, 0x1p-20}) {
    for (double band : {0.0, 0.0625, 0.25}) {
      const RoundOptions o = Options(band, alpha);
      LogRecord a, b;
      const auto ra = prec::Round(x, o, &a);
      const auto rb = prec::Round(x, o, &b, {}, m);
      CHECK(ra.rounded.equal(rb.rounded));
      CHECK(States(a) == States(b));
      CHECK(a.counts().exact == b.counts().exact);
      CHECK(ra.stats.steerable == rb.stats.steerable);
      // The replay of the same values with the same magnitudes: the same results and counts
      // (the auditor's slack only widens the checks, never the result).
      const auto pa = prec::Replay(x, a, o);
      const auto pb = prec::Replay(x, b, o, {}, m);
      CHECK(pa.rounded.equal(pb.rounded));
      CHECK(pb.report.illegitimate == 0);
      CHECK(pa.report.corrections == pb.report.corrections);
    }
  }
}

TEST_CASE("every kernel variant agrees on per-element windows", "[precision][magnitude]") {
  const std::vector<double> xs = MixedValues(3001, 2);
  std::vector<double> ms(xs.size());
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> f(1.0, 1e6);
  for (size_t i = 0; i < xs.size(); ++i) ms[i] = std::fabs(xs[i]) * f(rng);
  const at::Tensor x = ToTensor(xs), m = ToTensor(ms);
  // The auditor's values: the trainer's, nudged by a relative 2^-40 (some of its entries become
  // corrections, near misses or illegitimate ones under a narrow window).
  const at::Tensor x_auditor = x * (1.0 + 0x1p-40);
  // Narrow, absolute-only (band 0), paper-like and wide (EXACT entries) windows; the magnitude
  // as an array and as each value's own |x|.
  const std::vector<std::pair<double, double>> windows = {
      {0.0625, 0x1p-45}, {0.0, 0x1p-30}, {0.25, 0x1p-20}, {0.0, 0x1p-12}, {0.125, 0x1p-8}};
  IsaGuard guard;
  for (const auto& [band, alpha] : windows) {
    for (bool own : {false, true}) {
      RoundOptions o = Options(band, alpha);
      o.own_magnitude = own;
      const at::Tensor mag = own ? at::Tensor() : m;
      INFO("band " << band << ", alpha " << alpha << (own ? ", own magnitudes" : ", array"));
      std::vector<double> ref_out, ref_replay;
      std::vector<uint8_t> ref_states;
      int64_t ref_steer = -1;
      prec::ReplayReport ref_report;
      for (prec::KernelIsa isa : prec::SupportedKernelIsas()) {
        prec::SetKernelIsa(isa);
        LogRecord r;
        const auto res = prec::Round(x, o, &r, {}, mag);
        const auto rep = prec::Replay(x_auditor, r, o, {}, mag);
        at::Tensor in_place = x_auditor.clone();
        prec::ReplayInto(in_place, r, in_place, o, {}, mag);
        CHECK(in_place.equal(rep.rounded));
        if (ref_steer < 0) {
          ref_out = ToVector(res.rounded);
          ref_states = States(r);
          ref_steer = res.stats.steerable;
          ref_replay = ToVector(rep.rounded);
          ref_report = rep.report;
          continue;
        }
        INFO("variant " << prec::KernelIsaName(isa));
        CHECK(ToVector(res.rounded) == ref_out);
        CHECK(States(r) == ref_states);
        CHECK(res.stats.steerable == ref_steer);
        CHECK(ToVector(rep.rounded) == ref_replay);
        CHECK(rep.report.steerable == ref_report.steerable);
        CHECK(rep.report.corrections == ref_report.corrections);
        CHECK(rep.report.illegitimate == ref_report.illegitimate);
        CHECK(rep.report.near_misses == ref_report.near_misses);
      }
    }
  }
}

TEST_CASE("each value its own magnitude equals the array of |x|, on every kernel variant",
          "[precision][magnitude]") {
  const std::vector<double> xs = MixedValues(4001, 5);
  const at::Tensor x = ToTensor(xs);
  const at::Tensor own = x.abs();
  IsaGuard guard;
  for (prec::KernelIsa isa : prec::SupportedKernelIsas()) {
    prec::SetKernelIsa(isa);
    INFO("variant " << prec::KernelIsaName(isa));
    for (double alpha : {0x1p-40, 0x1p-22, 0x1p-10}) {
      RoundOptions by_array = Options(0.0625, alpha);
      RoundOptions by_value = by_array;
      by_value.own_magnitude = true;
      LogRecord a, b;
      const auto ra = prec::Round(x, by_array, &a, {}, own);
      const auto rb = prec::Round(x, by_value, &b);
      CHECK(ra.rounded.equal(rb.rounded));
      CHECK(States(a) == States(b));
      CHECK(ra.stats.steerable == rb.stats.steerable);
      CHECK(rb.stats.scale == 0.0);  // no scale is computed
      const auto pa = prec::Replay(x, a, by_array, {}, own);
      at::Tensor in_place = x.clone();
      const auto pb = prec::ReplayInto(in_place, b, in_place, by_value);
      CHECK(pa.rounded.equal(in_place));
      CHECK(pa.report.steerable == pb.steerable);
      CHECK(pb.illegitimate == 0);
    }
  }
}

TEST_CASE("a value's window follows its own magnitude", "[precision][magnitude]") {
  // x near 1e-6 made by cancelling terms of size 1 (m = 1), against the same value made from
  // terms of its own size (m = |x|). The auditor's x' lies across the midpoint from x, a
  // quarter of x's spacing (about 2.8e-14) away: noise the size of 1e-13 * m for m = 1.
  const double x0 = 1e-6;
  const float f = static_cast<float>(x0);
  const double lo = f, hi = std::nextafter(f, 1.0f);
  const double mid = (lo + hi) / 2.0;
  const double g = hi - lo;
  const double x = mid - g / 8;
  const double x_aud = mid + g / 8;
  const RoundOptions o = Options(0.0, 0x1p-40);  // alpha * 1 = 9.1e-13, more than x' - x
  SECTION("m of the terms (1): the trainer logs it, the auditor replays the trainer's bits") {
    LogRecord r;
    const auto t = prec::Round(ToTensor({x}), o, &r, {}, ToTensor({1.0}));
    REQUIRE(r.counts().logged() == 1);
    const auto a = prec::Replay(ToTensor({x_aud}), r, o, {}, ToTensor({1.0}));
    CHECK(Bits(ToVector(a.rounded)[0]) == Bits(ToVector(t.rounded)[0]));
    CHECK(a.report.illegitimate == 0);
  }
  SECTION("m = |x|: nothing is logged, and the control shows the parties round apart") {
    LogRecord r;
    const auto t = prec::Round(ToTensor({x}), o, &r, {}, ToTensor({std::fabs(x)}));
    CHECK(r.counts().logged() == 0);
    const auto a = prec::Replay(ToTensor({x_aud}), r, o, {}, ToTensor({std::fabs(x_aud)}));
    CHECK(Bits(ToVector(a.rounded)[0]) != Bits(ToVector(t.rounded)[0]));
  }
  SECTION("the per-tensor scale logs small values of a large tensor that m leaves alone") {
    // Probabilities near 2e-5 next to one value of 1: alpha * max|x| is wide against their
    // spacing, alpha * |x| is not.
    std::vector<double> p(1000, 2e-5);
    for (size_t i = 0; i < p.size(); ++i) p[i] *= 1.0 + 1e-3 * static_cast<double>(i);
    p[0] = 1.0;
    const RoundOptions wide = Options(0.0, 0x1p-30);
    LogRecord by_scale, by_value;
    prec::Round(ToTensor(p), wide, &by_scale);
    std::vector<double> own(p.size());
    for (size_t i = 0; i < p.size(); ++i) own[i] = std::fabs(p[i]);
    prec::Round(ToTensor(p), wide, &by_value, {}, ToTensor(own));
    CHECK(by_scale.counts().logged() > 900);
    CHECK(by_value.counts().logged() < 50);  // 2w/g of 1-2%: values near their midpoint
  }
}

TEST_CASE("a zero magnitude rounds to nearest, logs nothing and accepts no entry",
          "[precision][magnitude]") {
  // Ties of sums of two FP32 values, exactly on a midpoint: any window wider than zero logs
  // them; a zero one (band 0, m = 0) rounds them to even and logs nothing, and the auditor
  // flags a direction or EXACT entry there (no room to steer).
  const double a = 1.0,
               b = std::ldexp(1.0, -24);  // a + b is the midpoint between 1 and its successor
  const at::Tensor x = ToTensor({a + b, -(a + b), 3.0 + 0x1p-22});
  const at::Tensor zero = at::zeros({3}, at::kDouble);
  const RoundOptions o = Options(0.0, 0x1p-40);
  LogRecord own, none;
  prec::Round(x, o, &own, {}, x.abs());
  const auto r = prec::Round(x, o, &none, {}, zero);
  CHECK(own.counts().logged() >= 2);
  CHECK(none.counts().logged() == 0);
  CHECK(r.stats.steerable == 0);
  CHECK(ToVector(r.rounded)[0] == 1.0);  // ties to even
  const auto honest = prec::Replay(x, none, o, {}, zero);
  CHECK(honest.report.illegitimate == 0);
  CHECK(honest.rounded.equal(r.rounded));
  LogRecord forged = LogRecord::FromStates(
      {static_cast<uint8_t>(prec::LogState::kUp), 0, static_cast<uint8_t>(prec::LogState::kExact)},
      {prec::ExactEntry{2, prec::FloatBits(3.0f)}});
  CHECK(prec::Replay(x, forged, o, {}, zero).report.illegitimate == 2);
}

TEST_CASE("bad magnitudes are errors naming the boundary and index", "[precision][magnitude]") {
  const at::Tensor x = ToTensor({1.0, -2.0, 3.0});
  const RoundOptions o = Options(0.0625, 0x1p-40);
  const prec::BoundaryContext where{"fc:fwd", 4};
  LogRecord r;
  auto fails = [&](const at::Tensor& m, const std::string& needle) {
    try {
      prec::Round(x, o, &r, where, m);
      FAIL("accepted");
    } catch (const vt::Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  fails(ToTensor({1.0, -1.0, 3.0}), "'fc:fwd', step 4, index 1");   // negative
  fails(ToTensor({1.0, std::nan(""), 3.0}), "index 1");             // NaN
  fails(ToTensor({1.0, 2.0, INFINITY}), "index 2");                 // infinite
  fails(ToTensor({1.0, 2.0}), "magnitude has 2 elements");          // size
  fails(at::ones({3}, at::kFloat), "magnitude must be a float64");  // dtype
  // The auditor's replay checks its own magnitudes the same way.
  prec::Round(x, o, &r, where, ToTensor({1.0, 2.0, 3.0}));
  CHECK_THROWS_WITH(prec::Replay(x, r, o, where, ToTensor({1.0, 2.0, -2.0})),
                    Catch::Contains("index 2"));
  // With band 0 (calibrated windows) on whole groups of normal values, where the AVX-512
  // kernels take their integer path, every kernel variant checks the magnitudes too.
  IsaGuard guard;
  const at::Tensor many = at::linspace(1.0, 2.0, 64, at::kDouble);
  const at::Tensor good = at::full({64}, 0x1p-30, at::kDouble);
  at::Tensor bad = good.clone();
  bad[37] = -0x1p-30;
  const RoundOptions calibrated = Options(0.0, 1.0);
  for (auto isa : prec::SupportedKernelIsas()) {
    prec::SetKernelIsa(isa);
    INFO(prec::KernelIsaName(isa));
    CHECK_THROWS_WITH(prec::Round(many, calibrated, &r, where, bad), Catch::Contains("index 37"));
    prec::Round(many, calibrated, &r, where, good);
    CHECK_THROWS_WITH(prec::Replay(many, r, calibrated, where, bad), Catch::Contains("index 37"));
  }
  // A magnitude below |x| is allowed: it bounds the terms whose computation can differ
  // between machines, which for a sum of a rounded value and a small computed one is the
  // small one's, and 0 for values every party computes alike.
  CHECK_NOTHROW(prec::Round(x, o, &r, where, ToTensor({0.0, 1e-3, 3.0})));
}

TEST_CASE("the legitimacy of an EXACT entry follows the auditor's own magnitude",
          "[precision][magnitude]") {
  // The forgery: an EXACT entry holding the grid neighbour rnd_b did not pick, for a value
  // a quarter spacing from its midpoint. Where m is the value's own size the window is far
  // below a spacing: no honest trainer writes EXACT there and the entry is flagged. Where m
  // is 2^24 times larger (terms that cancelled) the window spans the cell and an honest
  // trainer could have written either neighbour: accepted, and counted as steerable.
  const double x0 = 1.5;
  const float f = static_cast<float>(x0);
  const double lo = f, hi = std::nextafter(f, 2.0f), g = hi - lo;
  const double x = lo + g / 4;  // rounds to lo
  const RoundOptions o = Options(0.0, 0x1p-30);
  LogRecord forged =
      LogRecord::FromStates({static_cast<uint8_t>(prec::LogState::kExact)},
                            {prec::ExactEntry{0, prec::FloatBits(static_cast<float>(hi))}});
  const auto narrow = prec::Replay(ToTensor({x}), forged, o, {}, ToTensor({x}));
  CHECK(narrow.report.illegitimate == 1);
  CHECK(narrow.report.steerable == 0);
  const auto wide = prec::Replay(ToTensor({x}), forged, o, {}, ToTensor({0x1p24 * x}));
  CHECK(wide.report.illegitimate == 0);
  CHECK(wide.report.steerable == 1);
  // Without the magnitude (per-tensor scale = |x| here) it is flagged as before.
  CHECK(prec::Replay(ToTensor({x}), forged, o).report.illegitimate == 1);
}

TEST_CASE("honest entries pass when the parties' magnitudes differ by rounding",
          "[precision][magnitude]") {
  // Trainer values x, auditor values x' within a quarter of the trainer's window, and the
  // auditor's m' smaller than the trainer's m by 2^-30 relative (both summed in another order).
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const std::vector<double> xs = MixedValues(20000, 9);
  std::vector<double> ms(xs.size()), xa(xs.size()), ma(xs.size());
  const RoundOptions o = Options(0.0, 0x1p-36);
  for (size_t i = 0; i < xs.size(); ++i) {
    ms[i] = std::fabs(xs[i]) * std::ldexp(1.0, static_cast<int>(i % 20));
    const double w = o.alpha * ms[i];
    xa[i] = xs[i] == 0.0 ? 0.0 : xs[i] + 0.25 * w * u(rng);
    ma[i] = std::max(ms[i] * (1.0 - 0x1p-30), std::fabs(xa[i]));
  }
  LogRecord r;
  const auto t = prec::Round(ToTensor(xs), o, &r, {}, ToTensor(ms));
  REQUIRE(r.counts().logged() > 1000);
  const auto a = prec::Replay(ToTensor(xa), r, o, {}, ToTensor(ma));
  CHECK(a.report.illegitimate == 0);
  CHECK(a.rounded.equal(t.rounded));
}
