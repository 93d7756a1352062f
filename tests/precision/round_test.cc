// rnd_b, the window classification and the grid (runtime/precision/round.h) against known
// answers, exhaustive edge cases and the independent oracle (oracle.h), under every kernel
// variant the CPU supports.
#include "runtime/precision/round.h"

#include <ATen/ATen.h>
#include <xmmintrin.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/random/philox.h"
#include "store/crc32c.h"
#include "tests/precision/helpers.h"
#include "tests/precision/oracle.h"

namespace {

using vt::precision::BoundaryContext;
using vt::precision::Grid;
using vt::precision::KernelIsa;
using vt::precision::LogRecord;
using vt::precision::Round;
using vt::precision::RoundInto;
using vt::precision::RoundOptions;
using vt::precision::RoundValue;
using vt::precision::StateCounts;
using vt::precision::testing::Bits;
using vt::precision::testing::IsaGuard;
using vt::precision::testing::ThreadGuard;
using vt::precision::testing::ToTensor;
using vt::precision::testing::ToVector;
namespace oracle = vt::precision::oracle;

double P2(int e) { return std::ldexp(1.0, e); }

std::string Hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

RoundOptions Options(int bits, double band = 0.25, double alpha = 0.0) {
  RoundOptions o;
  o.bits = bits;
  o.band = band;
  o.alpha = alpha;
  return o;
}

// Runs fn once per kernel variant this CPU supports, naming it in failure messages.
void ForEachIsa(const std::function<void()>& fn) {
  IsaGuard guard;
  for (KernelIsa isa : vt::precision::SupportedKernelIsas()) {
    vt::precision::SetKernelIsa(isa);
    INFO("kernel variant " << vt::precision::KernelIsaName(isa));
    fn();
  }
}

// The oracle's expectations for xs under `options` (scale computed independently).
struct Expected {
  std::vector<double> rnd;
  std::vector<uint8_t> states;
  StateCounts counts;
  int64_t steerable = 0;
};

Expected Expect(const std::vector<double>& xs, const RoundOptions& options) {
  double scale = 0.0;
  if (options.alpha > 0) {
    for (double v : xs) scale = std::max(scale, std::fabs(v));
  }
  const double alpha_scale = options.alpha * scale;
  Expected e;
  for (double v : xs) {
    const oracle::Grid g = oracle::GridOf(v, options.bits);
    REQUIRE_FALSE(g.out_of_range);
    e.rnd.push_back(g.rnd);
    const int s = oracle::StateOf(v, options.bits, options.band, alpha_scale);
    e.states.push_back(static_cast<uint8_t>(s));
    (s == 0 ? e.counts.none : s == 1 ? e.counts.down : s == 2 ? e.counts.up : e.counts.exact) += 1;
    e.steerable += oracle::SteerableAt(v, options.bits, options.band, alpha_scale);
  }
  return e;
}

// Round(xs) must equal the oracle in every output bit, state and EXACT value.
void CheckRound(const std::vector<double>& xs, const RoundOptions& options, const Expected& e) {
  LogRecord record;
  const auto result = Round(ToTensor(xs), options, &record);
  const std::vector<double> out = ToVector(result.rounded);
  std::string failures;
  int shown = 0;
  size_t next_exact = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const bool value_ok = Bits(out[i]) == Bits(e.rnd[i]);
    const bool state_ok = record.states()[i] == e.states[i];
    bool exact_ok = true;
    if (e.states[i] == 3) {
      exact_ok =
          next_exact < record.exact().size() &&
          record.exact()[next_exact].position == static_cast<int64_t>(i) &&
          record.exact()[next_exact].fp32_bits == oracle::F32Bits(static_cast<float>(e.rnd[i]));
      ++next_exact;
    }
    if ((!value_ok || !state_ok || !exact_ok) && shown++ < 5) {
      failures += "x=" + Hex(xs[i]) + " b=" + std::to_string(options.bits) +
                  " band=" + std::to_string(options.band) + " alpha=" + Hex(options.alpha) +
                  ": rnd " + Hex(out[i]) + " expected " + Hex(e.rnd[i]) + ", state " +
                  std::to_string(record.states()[i]) + " expected " + std::to_string(e.states[i]) +
                  (exact_ok ? "" : ", EXACT entry wrong") + "\n";
    }
  }
  INFO(failures);
  CHECK(shown == 0);
  CHECK(record.counts() == e.counts);
  CHECK(record.exact().size() == static_cast<size_t>(e.counts.exact));
  CHECK(result.stats.counts == e.counts);
  CHECK(result.stats.steerable == e.steerable);
}

// Grid points and their neighbourhoods for every interesting part of the FP32 range.
std::vector<double> EdgeValues(int bits) {
  const uint64_t unit = uint64_t{1} << (32 - bits);
  std::vector<uint64_t> anchors = {0,
                                   unit,
                                   2 * unit,
                                   3 * unit,
                                   0x00800000u - unit,  // largest subnormal grid point
                                   0x00800000u,         // smallest normal
                                   0x00800000u + unit,
                                   0x01000000u - unit,  // top of the smallest normal binade
                                   0x01000000u,
                                   0x3f800000u - unit,  // just below 1
                                   0x3f800000u,         // 1
                                   0x3f800000u + unit,
                                   0x40000000u - unit,  // just below 2
                                   0x40000000u,
                                   0x4b800000u - unit,
                                   0x7f000000u - unit,
                                   0x7f000000u,
                                   (0x7f7fffffu & ~(unit - 1)) - unit};        // below the largest
  for (uint64_t e = 1; e < 254; e += 23) anchors.push_back((e << 23) - unit);  // binade tops
  std::vector<double> values;
  for (uint64_t p : anchors) {
    const double lo = oracle::PatternValue(p);
    const double hi = oracle::PatternValue(p + unit);
    const double mid = (lo + hi) / 2;
    const double q1 = lo + (hi - lo) / 4;  // band-0.25 window edges
    const double q3 = lo + 3 * (hi - lo) / 4;
    for (double base : {lo, mid, q1, q3, hi}) {
      for (double v : {base, std::nextafter(base, 0.0), std::nextafter(base, INFINITY)}) {
        if (v >= P2(128) || !std::isfinite(v)) continue;
        if (oracle::GridOf(v, bits).out_of_range) continue;
        values.push_back(v);
        values.push_back(-v);
      }
    }
  }
  // Values below half the smallest grid spacing, and the signed zeros.
  for (double v : {0.0, P2(-1074), P2(-600), P2(-150), P2(-149)}) {
    values.push_back(v);
    values.push_back(-v);
  }
  return values;
}

}  // namespace

TEST_CASE("round: known answers at b = 32, 26 and 10 (ties to even, carries, subnormals)") {
  // b = 32: exactly (double)(float)x.
  CHECK(RoundValue(1 + P2(-24), 32) == 1.0);                    // tie -> even (1)
  CHECK(RoundValue(1 + 3 * P2(-24), 32) == 1 + P2(-22));        // tie -> even (1 + 2^-22)
  CHECK(RoundValue(1 + P2(-24) + P2(-52), 32) == 1 + P2(-23));  // just above the tie
  CHECK(RoundValue(2 - P2(-24), 32) == 2.0);                    // tie at the binade top: carry
  CHECK(RoundValue(2 - P2(-24) - P2(-52), 32) == 2 - P2(-23));  // just below it
  CHECK(RoundValue(1 - P2(-25), 32) == 1.0);                    // tie below 1 (spacing 2^-24)
  CHECK(RoundValue(P2(-150), 32) == 0.0);                       // half the smallest subnormal
  CHECK(RoundValue(P2(-150) + P2(-200), 32) == P2(-149));
  CHECK(RoundValue(3 * P2(-150), 32) == P2(-148));  // tie -> even multiple
  CHECK(RoundValue(FLT_MAX + P2(102), 32) == FLT_MAX);
  CHECK(RoundValue(-(1 + P2(-24)), 32) == -1.0);
  CHECK(std::signbit(RoundValue(-P2(-160), 32)));  // -tiny -> -0
  CHECK(std::signbit(RoundValue(-0.0, 32)));
  // b = 26: 17 explicit mantissa bits, grid spacing 2^-17 at 1, 2^-143 at the bottom.
  CHECK(RoundValue(1 + P2(-18), 26) == 1.0);
  CHECK(RoundValue(1 + 3 * P2(-18), 26) == 1 + P2(-16));
  CHECK(RoundValue(P2(-144), 26) == 0.0);
  CHECK(RoundValue(1.5 * P2(-143), 26) == P2(-142));
  CHECK(RoundValue(2 - P2(-18), 26) == 2.0);
  // b = 10: one explicit mantissa bit; {1, 1.5, 2} in [1, 2].
  CHECK(RoundValue(1.25, 10) == 1.0);
  CHECK(RoundValue(1.75, 10) == 2.0);
  CHECK(RoundValue(-1.75, 10) == -2.0);
  CHECK(RoundValue(1.3, 10) == 1.5);
  CHECK(vt::precision::LargestGridValue(32) == FLT_MAX);
  CHECK(oracle::F32Bits(static_cast<float>(vt::precision::LargestGridValue(26))) == 0x7f7fffc0u);
}

TEST_CASE("round: b = 32 equals (double)(float)x") {
  const uint64_t seed = oracle::TestSeed("round: b = 32 equals (double)(float)x");
  oracle::ValueGenerator gen(seed);
  std::vector<double> xs;
  for (int i = 0; i < 1000000; ++i) {
    double v = gen.Any(32);
    if (std::fabs(v) >= FLT_MAX) continue;
    xs.push_back(v);
  }
  ForEachIsa([&] {
    const std::vector<double> out = ToVector(Round(ToTensor(xs), Options(32), nullptr).rounded);
    int bad = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (Bits(out[i]) != Bits(static_cast<double>(static_cast<float>(xs[i])))) {
        if (bad++ < 5) UNSCOPED_INFO("x=" << Hex(xs[i]) << " got " << Hex(out[i]));
      }
    }
    CHECK(bad == 0);
  });
}

TEST_CASE("round: exhaustive edge cases for every b, band 0, 0.25 and 0.5") {
  for (int bits = 10; bits <= 32; ++bits) {
    const std::vector<double> xs = EdgeValues(bits);
    for (double band : {0.0, 0.25, 0.5}) {
      const RoundOptions options = Options(bits, band);
      const Expected e = Expect(xs, options);
      ForEachIsa([&] { CheckRound(xs, options, e); });
    }
  }
}

TEST_CASE("round: band 0.5 logs every off-grid value as EXACT, band 0.25 never needs EXACT") {
  const std::vector<double> xs = {1 + P2(-30), 1.0, -3.3, 1e-40, 0.0, 7.25};
  LogRecord record;
  Round(ToTensor(xs), Options(32, 0.5), &record);
  // Every off-grid value, and 1.0: on the grid, but the midpoint below a power of two is a
  // quarter spacing away, inside w = spacing/2. 0.0 and 7.25 have their nearest midpoints
  // exactly w = spacing/2 away, which no divergence d < w reaches: NONE.
  CHECK(record.counts().exact == 4);
  CHECK(record.counts().none == 2);
  CHECK(record.state(1) == vt::precision::LogState::kExact);
  Round(ToTensor(xs), Options(32, 0.25), &record);
  CHECK(record.counts().exact == 0);
}

TEST_CASE("round: alpha large enough forces EXACT entries with the FP32 bits of rnd_b(x)") {
  // scale = 1000; alpha * scale = 1000 * 2^-40 ~ 9e-10, far above spacing/4 for tiny values.
  std::vector<double> xs = {1000.0, 3.3e-7, -2.7e-9, 1.0e-30, -4.4e-41, 0.0, 1.0 + P2(-23) / 2};
  const RoundOptions options = Options(32, 0.0, P2(-40));
  LogRecord record;
  const auto result = Round(ToTensor(xs), options, &record);
  CHECK(result.stats.scale == 1000.0);
  CHECK(record.counts().exact == 4);  // 3.3e-7, -2.7e-9, 1e-30, -4.4e-41
  const std::vector<double> out = ToVector(result.rounded);
  for (const auto& e : record.exact()) {
    CHECK(e.fp32_bits == oracle::F32Bits(static_cast<float>(out[static_cast<size_t>(e.position)])));
    CHECK(e.value() == out[static_cast<size_t>(e.position)]);
  }
  // 0 is on the grid and its midpoints (+-2^-150) are far inside the window, but exact
  // zeros are NONE: at boundaries they are structural (docs/ROUNDING.md, "Zeros").
  CHECK(record.state(5) == vt::precision::LogState::kNone);
  CHECK(record.state(0) == vt::precision::LogState::kNone);
  const Expected expected = Expect(xs, options);
  ForEachIsa([&] { CheckRound(xs, options, expected); });
}

TEST_CASE("round: window boundaries are inclusive, also for values below a quarter spacing") {
  // b = 32 near zero: g = 2^-149, mid(2^-152) = 2^-150, |x - mid| = 3 * 2^-152. With scale 1
  // and alpha = 3 * 2^-152 the window is exactly that distance: logged (EXACT, w > g/4).
  const double a = P2(-152);
  const RoundOptions options = Options(32, 0.0, 3 * P2(-152));
  LogRecord record;
  Round(ToTensor({1.0, a, -a, std::nextafter(a, 0.0), 0.0}), options, &record);
  CHECK(record.states()[1] == 3);
  CHECK(record.states()[2] == 3);
  CHECK(record.states()[3] == 0);  // a hair further from the midpoint
  CHECK(record.states()[4] == 0);  // on the grid
  // Above a quarter spacing: x = lo + g/4 at band 0.25 is exactly on the window edge.
  Round(ToTensor({1 + P2(-25), 1 + P2(-25) - P2(-52)}), Options(32, 0.25), &record);
  CHECK(record.states()[0] == 1);
  CHECK(record.states()[1] == 0);
}

TEST_CASE("round: matches the oracle on millions of random and adversarial values") {
  const uint64_t seed = oracle::TestSeed("round: matches the oracle");
  oracle::ValueGenerator gen(seed);
  int64_t total = 0;
  for (int bits = 10; bits <= 32; ++bits) {
    std::vector<double> xs;
    for (int i = 0; i < 60000; ++i) {
      const double v = gen.Any(bits);
      if (oracle::GridOf(v, bits).out_of_range) continue;
      xs.push_back(v);
    }
    // Windows: paper mode, a narrow band, a wide band, and an absolute term relative to the
    // scale that makes small values EXACT and others DOWN/UP.
    const RoundOptions configs[] = {Options(bits, 0.25), Options(bits, 0.01), Options(bits, 0.5),
                                    Options(bits, 0.0, P2(-50)), Options(bits, 0.1, P2(-200))};
    for (const RoundOptions& options : configs) {
      const Expected e = Expect(xs, options);
      ForEachIsa([&] { CheckRound(xs, options, e); });
      total += static_cast<int64_t>(xs.size());
    }
  }
  CHECK(total > 6000000);
}

TEST_CASE("round: values with a common scale exercise the absolute window term") {
  const uint64_t seed = oracle::TestSeed("round: absolute window term");
  oracle::ValueGenerator gen(seed);
  std::vector<double> xs;
  for (int i = 0; i < 200000; ++i) {
    // Gaussian-like values, some cancelled to tiny magnitudes.
    double v = gen.Any(32);
    if (std::fabs(v) > 8 || oracle::GridOf(v, 26).out_of_range) v = gen.Unit() - 0.5;
    xs.push_back(v);
  }
  xs.push_back(8.0);  // the scale
  for (int bits : {32, 26, 12}) {
    for (double alpha : {P2(-44), P2(-30), P2(-20)}) {
      for (double band : {0.0, 0.1}) {
        const RoundOptions options = Options(bits, band, alpha);
        const Expected e = Expect(xs, options);
        ForEachIsa([&] { CheckRound(xs, options, e); });
      }
    }
  }
}

TEST_CASE("round: errors name the boundary, step and first index") {
  const BoundaryContext context{"block3.attn.proj:fwd", 41};
  const RoundOptions options = Options(32);
  auto round = [&](std::vector<double> xs, const RoundOptions& o = Options(32)) {
    return Round(ToTensor(xs), o, nullptr, context);
  };
  CHECK_THROWS_WITH(round({1.0, 2.0, FLT_MAX + P2(103), std::nan("")}),
                    Catch::Contains("overflow at 'block3.attn.proj:fwd', step 41, index 2: ") &&
                        Catch::Contains("rounds beyond the FP32 range") &&
                        Catch::Contains("3.4028235e+38"));
  CHECK_THROWS_WITH(round({1.0, std::nan(""), INFINITY}),
                    Catch::Equals("NaN at 'block3.attn.proj:fwd', step 41, index 1"));
  CHECK_THROWS_WITH(
      round({1.0, -INFINITY}),
      Catch::Equals("infinite value at 'block3.attn.proj:fwd', step 41, index 1: -inf"));
  CHECK_THROWS_WITH(round({-5e38}),
                    Catch::Contains("overflow") && Catch::Contains("index 0: -5e+38"));
  CHECK_THROWS_WITH(round({1e300}), Catch::Contains("index 0: 1e+300"));
  // b = 26: the largest grid value is 0x7f7fffc0; its midpoint to 2^128 rounds to 2^128.
  const double top26 = vt::precision::LargestGridValue(26);
  CHECK(RoundValue(top26 + P2(109) - P2(75), 26) == top26);  // 2^75: one FP64 ulp here
  CHECK_THROWS_WITH(round({top26 + P2(109)}, Options(26)),
                    Catch::Contains("index 0") && Catch::Contains("b = 26 grid"));
  // No context: the message starts at the index.
  CHECK_THROWS_WITH(Round(ToTensor({0.0, 0.0, NAN}), options), Catch::Equals("NaN at index 2"));
  CHECK_THROWS_WITH(RoundValue(NAN, 32), Catch::Equals("NaN at index 0"));
  // The first offender wins across parallel chunks, with and without the scale pass, and
  // in place.
  std::vector<double> big(300000, 0.5);
  big[250000] = NAN;
  big[100000] = -INFINITY;
  big[200000] = 1e39;
  ThreadGuard threads;
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    ForEachIsa([&] {
      CHECK_THROWS_WITH(round(big),
                        Catch::Contains("infinite value") && Catch::Contains("index 100000"));
      CHECK_THROWS_WITH(round(big, Options(32, 0.0, 1e-9)),
                        Catch::Contains("infinite value") && Catch::Contains("index 100000"));
      at::Tensor x = ToTensor(big);
      CHECK_THROWS_WITH(RoundInto(x, x, options, nullptr, context),
                        Catch::Contains("index 100000"));
    });
  }
}

TEST_CASE("round: in place, into a preallocated output, non-contiguous and bad arguments") {
  const uint64_t seed = oracle::TestSeed("round: in place");
  oracle::ValueGenerator gen(seed);
  std::vector<double> xs;
  for (int i = 0; i < 100000; ++i) xs.push_back(gen.Any(26) * 0.001);
  const RoundOptions options = Options(26, 0.1, P2(-24));
  LogRecord expected_record;
  const at::Tensor expected = Round(ToTensor(xs), options, &expected_record).rounded;
  // In place.
  at::Tensor x = ToTensor(xs);
  LogRecord record;
  RoundInto(x, x, options, &record);
  CHECK(x.equal(expected));
  CHECK(record == expected_record);
  // Into a preallocated output of another shape, reusing the record.
  at::Tensor out = at::empty({1000, 100}, at::TensorOptions().dtype(at::kDouble));
  RoundInto(ToTensor(xs), out, options, &record);
  CHECK(out.reshape({-1}).equal(expected));
  CHECK(record == expected_record);
  // A non-contiguous input is copied first.
  at::Tensor wide = ToTensor(xs).reshape({1000, 100});
  at::Tensor t = wide.t();
  REQUIRE_FALSE(t.is_contiguous());
  at::Tensor r = Round(t, options, nullptr).rounded;
  CHECK(r.equal(Round(t.contiguous(), options, nullptr).rounded));
  CHECK(r.sizes() == t.sizes());
  // Bad arguments.
  CHECK_THROWS_WITH(Round(ToTensor(xs).to(at::kFloat), options),
                    Catch::Equals("input must be a float64 tensor, got float32"));
  CHECK_THROWS_WITH(RoundInto(ToTensor({1, 2, 3, 4}), at::empty({3}, at::kDouble), options),
                    Catch::Equals("output has 3 elements but the input has 4"));
  at::Tensor storage = at::zeros({200}, at::kDouble);
  CHECK_THROWS_WITH(RoundInto(storage.slice(0, 0, 100), storage.slice(0, 50, 150), options),
                    Catch::Contains("partially overlaps"));
  CHECK_THROWS_WITH(RoundInto(t, at::empty({100000}, at::kDouble), options),
                    Catch::Contains("input must be contiguous"));
  CHECK_THROWS_WITH(RoundInto(ToTensor(xs), at::empty({100, 1000}, at::kDouble).t(), options),
                    Catch::Equals("output must be contiguous"));
  CHECK_THROWS_WITH(Round(ToTensor({1.0}), Options(9)),
                    Catch::Equals("bits must be an integer in [10, 32], got 9"));
  CHECK_THROWS_WITH(Round(ToTensor({1.0}), Options(33)), Catch::Contains("[10, 32], got 33"));
  CHECK_THROWS_WITH(Round(ToTensor({1.0}), Options(32, 0.7)),
                    Catch::Equals("band must be in [0, 0.5], got 0.7"));
  CHECK_THROWS_WITH(Round(ToTensor({1.0}), Options(32, -0.1)), Catch::Contains("band must be in"));
  CHECK_THROWS_WITH(Round(ToTensor({1.0}), Options(32, NAN)), Catch::Contains("band must be in"));
  CHECK_THROWS_WITH(Round(ToTensor({1.0}), Options(32, 0.25, -1)),
                    Catch::Equals("alpha must be finite and >= 0, got -1"));
  CHECK_THROWS_WITH(Round(ToTensor({1.0}), Options(32, 0.25, INFINITY)),
                    Catch::Contains("alpha must be finite"));
  // Empty tensors are fine.
  LogRecord empty;
  CHECK(Round(at::empty({0}, at::kDouble), options, &empty).rounded.numel() == 0);
  CHECK(empty.size() == 0);
}

TEST_CASE("round: results and records do not depend on the thread count") {
  const uint64_t seed = oracle::TestSeed("round: threads");
  oracle::ValueGenerator gen(seed);
  std::vector<double> xs;
  for (int i = 0; i < 1000003; ++i) xs.push_back(gen.Any(28) * 1e-3);
  const RoundOptions options = Options(28, 0.05, P2(-36));
  ThreadGuard guard;
  at::set_num_threads(1);
  LogRecord one, two;
  const at::Tensor a = Round(ToTensor(xs), options, &one).rounded;
  at::set_num_threads(2);
  const at::Tensor b = Round(ToTensor(xs), options, &two).rounded;
  CHECK(a.equal(b));
  CHECK(one == two);
  CHECK(one.counts().exact > 0);
  CHECK(one.counts().down > 0);
}

TEST_CASE("round and replay: the output's CRC-32C computed as it is written is its CRC") {
  // Block by block (store::kCrc32cBlock bytes), each block checksummed as soon as it is
  // written, joined in order; a replay's EXACT values change blocks after that.
  constexpr int64_t kBlock = static_cast<int64_t>(vt::store::kCrc32cBlock / sizeof(double));
  const uint64_t seed = oracle::TestSeed("round: output crc");
  oracle::ValueGenerator gen(seed);
  auto crc_of = [](const at::Tensor& t) {
    return vt::store::Crc32cExtend(0, static_cast<const uint8_t*>(t.data_ptr()),
                                   static_cast<size_t>(t.numel()) * sizeof(double));
  };
  // Values, and a wide window (band 0.5) so that some entries are EXACT.
  const RoundOptions options = Options(32, 0.5, 0.0);
  ThreadGuard threads;
  for (int nthreads : {1, 2}) {
    at::set_num_threads(nthreads);
    // 9 blocks and a part: two parallel tasks of whole blocks (round.cc's grain is 8 blocks).
    for (int64_t n :
         {int64_t{0}, int64_t{1}, kBlock - 1, kBlock, kBlock + 1, 3 * kBlock + 5, 9 * kBlock + 7}) {
      INFO("n=" << n << " threads=" << nthreads);
      std::vector<double> xs;
      for (int64_t i = 0; i < n; ++i) xs.push_back(gen.Any(32) * 1e-3);
      const at::Tensor x = ToTensor(xs);
      LogRecord record;
      uint32_t crc = 0xdeadbeef;
      const at::Tensor rounded = Round(x, options, &record, {}, {}, &crc).rounded;
      CHECK(crc == crc_of(rounded));
      at::Tensor in_place = x.clone();
      crc = 0xdeadbeef;
      RoundInto(in_place, in_place, RoundOptions{}, nullptr, {}, {}, &crc);
      CHECK(crc == crc_of(in_place));
      if (n > kBlock) REQUIRE(record.counts().exact > 0);
      // The auditor's values: the trainer's, perturbed, so its EXACT entries change values.
      const at::Tensor mine = x * (1.0 + 1e-12);
      crc = 0xdeadbeef;
      const int64_t before = vt::precision::ChecksummedBlocks();
      const at::Tensor replayed =
          vt::precision::Replay(mine, record, options, {}, {}, &crc).rounded;
      CHECK(crc == crc_of(replayed));
      // Each full block once as it is written, and at most once more for its EXACT values
      // (once per EXACT value, a log of many EXACT entries cost entries x 256 KiB).
      const int64_t full = n / kBlock;
      CHECK(vt::precision::ChecksummedBlocks() - before <= 2 * full);
      if (n > kBlock) REQUIRE(record.counts().exact > 2 * full);
      at::Tensor replayed_in_place = mine.clone();
      crc = 0xdeadbeef;
      vt::precision::ReplayInto(replayed_in_place, record, replayed_in_place, options, {}, {},
                                &crc);
      CHECK(crc == crc_of(replayed_in_place));
    }
  }
}

TEST_CASE("round: grid lo and hi match the oracle for every b") {
  const uint64_t seed = oracle::TestSeed("round: grid");
  oracle::ValueGenerator gen(seed);
  for (int bits = 10; bits <= 32; ++bits) {
    std::vector<double> xs = EdgeValues(bits);
    for (int i = 0; i < 20000; ++i) {
      const double v = gen.Any(bits);
      if (std::fabs(v) < P2(128)) xs.push_back(v);
    }
    // Above the largest grid value: hi is the virtual grid point 2^128.
    xs.push_back(vt::precision::LargestGridValue(bits) * (1 + P2(-40)));
    xs.push_back(-std::nextafter(P2(128), 0.0));
    ForEachIsa([&] {
      const auto g = Grid(ToTensor(xs), bits);
      const std::vector<double> lo = ToVector(g.lo), hi = ToVector(g.hi);
      int bad = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const oracle::Grid o = oracle::GridOf(xs[i], bits);
        if (Bits(lo[i]) != Bits(o.lo) || Bits(hi[i]) != Bits(o.hi)) {
          if (bad++ < 5) {
            UNSCOPED_INFO("b=" << bits << " x=" << Hex(xs[i]) << " lo " << Hex(lo[i]) << " hi "
                               << Hex(hi[i]) << " expected " << Hex(o.lo) << " " << Hex(o.hi));
          }
        }
        CHECK(lo[i] <= xs[i]);
        CHECK(xs[i] <= hi[i]);
      }
      CHECK(bad == 0);
    });
  }
  CHECK_THROWS_WITH(Grid(ToTensor({1.0, P2(128)}), 32), Catch::Contains("index 1"));
  CHECK_THROWS_WITH(Grid(ToTensor({NAN}), 32), Catch::Equals("NaN at index 0"));
  CHECK_THROWS_WITH(Grid(ToTensor({1.0}), 33), Catch::Contains("[10, 32]"));
}

TEST_CASE("round: every kernel variant gives identical bits on Gaussian data") {
  // The oracle tests above already run per variant; this one compares the variants with each
  // other on a large tensor, records included.
  const at::Tensor x = vt::NormalTensor({1 << 20}, at::kDouble, 7, 0);
  const RoundOptions options = Options(27, 0.2, P2(-34));
  IsaGuard guard;
  at::Tensor first;
  LogRecord first_record;
  for (KernelIsa isa : vt::precision::SupportedKernelIsas()) {
    vt::precision::SetKernelIsa(isa);
    LogRecord record;
    const at::Tensor r = Round(x, options, &record).rounded;
    if (!first.defined()) {
      first = r;
      first_record = record;
      continue;
    }
    INFO("variant " << vt::precision::KernelIsaName(isa));
    CHECK(r.equal(first));
    CHECK(record == first_record);
  }
}

TEST_CASE("round: any split into chunks gives the same outputs, states and tallies") {
  // What parallel execution does: the kernels on arbitrary sub-ranges must agree with one
  // pass over everything (at::parallel_for may or may not split, depending on the build).
  const uint64_t seed = oracle::TestSeed("round: chunks");
  oracle::ValueGenerator gen(seed);
  std::vector<double> xs;
  for (int i = 0; i < 100000; ++i) xs.push_back(gen.Any(29) * 1e-3);
  vt::precision::KernelParams p;
  p.k = 3;
  p.band = 0.1;
  p.alpha_scale = P2(-40);
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<double> whole(xs.size()), parts(xs.size()), replay_whole(xs.size()),
      replay_parts(xs.size());
  std::vector<uint8_t> s_whole(xs.size()), s_parts(xs.size());
  vt::precision::RoundTally t_whole, t_parts;
  vt::precision::RoundSpan(p, xs.data(), whole.data(), s_whole.data(), n, &t_whole);
  vt::precision::ReplayTally r_whole, r_parts;
  vt::precision::ReplaySpan(p, xs.data(), s_whole.data(), replay_whole.data(), n, &r_whole);
  for (int64_t begin = 0; begin < n;) {
    const int64_t end = std::min<int64_t>(n, begin + 1 + gen.Int(0, 5000));
    vt::precision::RoundSpan(p, xs.data() + begin, parts.data() + begin, s_parts.data() + begin,
                             end - begin, &t_parts);
    vt::precision::ReplaySpan(p, xs.data() + begin, s_whole.data() + begin,
                              replay_parts.data() + begin, end - begin, &r_parts);
    begin = end;
  }
  auto same_bits = [](const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
  };
  CHECK(same_bits(whole, parts));
  CHECK(s_whole == s_parts);
  CHECK(same_bits(replay_whole, replay_parts));
  CHECK(t_whole.down == t_parts.down);
  CHECK(t_whole.up == t_parts.up);
  CHECK(t_whole.exact == t_parts.exact);
  CHECK(r_whole.corrections == r_parts.corrections);
  CHECK(r_whole.near_misses == r_parts.near_misses);
  CHECK(r_whole.illegitimate == r_parts.illegitimate);
  CHECK(t_whole.down + t_whole.up + t_whole.exact > 1000);
  // In place through one pointer equals out of place.
  std::vector<double> io = xs;
  vt::precision::RoundTally t_io;
  std::vector<uint8_t> s_io(xs.size());
  vt::precision::RoundSpan(p, io.data(), io.data(), s_io.data(), n, &t_io);
  CHECK(same_bits(io, whole));
  CHECK(s_io == s_whole);
}

TEST_CASE("replay: an exact boundary's record (zero window, all NONE) replays as ReplaySpan does") {
  // ReplayNoneZeroWindowSpan skips the states and the window's arithmetic; its results and
  // counts must be ReplaySpan's with all-NONE states, on every variant: near misses are the
  // exact ties (d = 0 <= w = 0), so the data holds ties, zeros, values on the grid, values
  // below a quarter spacing (the subnormal grid's ties too) and, sometimes, an overflow.
  const uint64_t seed = oracle::TestSeed("replay: none zero window");
  oracle::ValueGenerator gen(seed);
  IsaGuard guard;
  int64_t ties_seen = 0;
  for (uint64_t k : {uint64_t{0}, uint64_t{3}, uint64_t{9}, uint64_t{22}}) {
    vt::precision::KernelParams p;
    p.k = k;
    p.band = 0.0;
    p.alpha_scale = 0.0;
    for (int64_t n : {0, 1, 7, 8, 9, 63, 64, 65, 130, 4099}) {
      std::vector<double> xs;
      for (int64_t i = 0; i < n; ++i) {
        const int kind = gen.Int(0, 6);
        double v = gen.Any(32 - static_cast<int>(k));
        if (!(std::fabs(v) < 0x1p100)) v = 1.5;
        if (kind == 0) v = 0.0;
        if (kind == 1) v = static_cast<double>(static_cast<float>(v));  // on the FP32 grid
        if (kind == 2) v = std::ldexp(gen.Any(32), -160);               // below g/4
        if (kind == 3 || kind == 4) {
          // A tie: a point r of the b-bit grid plus half its spacing.
          if (kind == 4) v = std::ldexp(1.0, gen.Int(-149, -127)) * (gen.Int(1, 7) | 1);
          int e = 0;
          std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
          const double g = std::ldexp(1.0, std::max(e - 1, -126) - 23 + static_cast<int>(k));
          v = std::floor(v / g) * g + g / 2;
        }
        xs.push_back(v);
      }
      if (n > 0 && n % 9 == 0)
        xs[static_cast<size_t>(gen.Int(0, static_cast<int>(n) - 1))] = 0x1p200;
      const std::vector<uint8_t> none(static_cast<size_t>(n), 0);
      for (KernelIsa isa : vt::precision::SupportedKernelIsas()) {
        vt::precision::SetKernelIsa(isa);
        INFO("k=" << k << " n=" << n << " variant " << vt::precision::KernelIsaName(isa));
        std::vector<double> general(static_cast<size_t>(n)), fast(static_cast<size_t>(n));
        vt::precision::ReplayTally tg, tf;
        vt::precision::ReplaySpan(p, xs.data(), none.data(), general.data(), n, &tg);
        vt::precision::ReplayNoneZeroWindowSpan(p, xs.data(), none.data(), fast.data(), n, &tf);
        REQUIRE(tg.out_of_range == tf.out_of_range);
        if (tg.out_of_range) continue;  // outputs are unspecified then
        CHECK((n == 0 || std::memcmp(general.data(), fast.data(), general.size() * 8) == 0));
        CHECK(tg.corrections == tf.corrections);
        CHECK(tg.illegitimate == tf.illegitimate);
        CHECK(tg.near_misses == tf.near_misses);
        CHECK(tg.steerable == tf.steerable);
        CHECK(tg.bad_magnitude == tf.bad_magnitude);
        // In place through one pointer, as exact boundaries replay.
        std::vector<double> io = xs;
        vt::precision::ReplayTally ti;
        vt::precision::ReplayNoneZeroWindowSpan(p, io.data(), none.data(), io.data(), n, &ti);
        CHECK((n == 0 || std::memcmp(io.data(), general.data(), io.size() * 8) == 0));
        CHECK(ti.near_misses == tg.near_misses);
        ties_seen += tg.near_misses;
        // The trainer's side of an exact boundary: rounding without a log (RoundZeroWindow on
        // AVX-512) gives the same values, nothing steerable, out of place and in place.
        std::vector<double> rounded(static_cast<size_t>(n));
        vt::precision::RoundTally tr;
        vt::precision::RoundSpan(p, xs.data(), rounded.data(), nullptr, n, &tr);
        CHECK_FALSE(tr.out_of_range);
        CHECK((n == 0 || std::memcmp(rounded.data(), general.data(), rounded.size() * 8) == 0));
        CHECK(tr.steerable == 0);
        std::vector<double> rio = xs;
        vt::precision::RoundTally tri;
        vt::precision::RoundSpan(p, rio.data(), rio.data(), nullptr, n, &tri);
        CHECK((n == 0 || std::memcmp(rio.data(), general.data(), rio.size() * 8) == 0));
      }
      // Through Replay: the record of an exact boundary takes this path; its report is the same.
      if (n > 0 && n % 9 != 0) {
        const LogRecord none_record = LogRecord::FromStates(none, {});
        RoundOptions options = Options(32 - static_cast<int>(k), 0.0, 0.0);
        uint32_t crc = 0;
        const auto r = vt::precision::Replay(ToTensor(xs), none_record, options, {}, {}, &crc);
        std::vector<double> general(static_cast<size_t>(n));
        vt::precision::ReplayTally tg;
        vt::precision::ReplaySpan(p, xs.data(), none.data(), general.data(), n, &tg);
        CHECK(r.report.near_misses == tg.near_misses);
        CHECK(r.report.corrections == 0);
        CHECK(std::memcmp(r.rounded.data_ptr<double>(), general.data(), general.size() * 8) == 0);
      }
    }
  }
  CHECK(ties_seen > 100);  // the ties are there, so a kernel that misses them fails
}

TEST_CASE("round: an exact boundary at b = 32 keeps FP32 subnormals under flush-to-zero") {
  // RoundZeroWindow converts to FP32 in hardware at b = 32. A library may leave MXCSR's
  // flush-to-zero (FTZ) and denormals-are-zero (DAZ) set; the conversion would then flush the
  // FP32 subnormals that rnd_b keeps. The kernel must see that and take its integer path.
  IsaGuard guard;
  const std::vector<double> xs = {3e-40,           -3e-40, 1.4e-45,  0x1p-140 + 0x1p-160,
                                  -0x1p-149 * 3.5, 1.0,    0x1p-126, 0x1p-127,
                                  5e-324,          -5e-324};
  const int64_t n = static_cast<int64_t>(xs.size());
  vt::precision::KernelParams p;  // k = 0: b = 32; band 0, alpha_scale 0: the zero window
  p.band = 0.0;
  p.alpha_scale = 0.0;
  std::vector<double> want(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) want[i] = vt::precision::RoundValue(xs[i], 32);
  REQUIRE(want[0] != 0.0);  // an FP32 subnormal, not flushed
  const unsigned int saved = _mm_getcsr();
  for (unsigned int flags : {0x0u, 0x8000u, 0x0040u, 0x8040u}) {
    for (KernelIsa isa : vt::precision::SupportedKernelIsas()) {
      vt::precision::SetKernelIsa(isa);
      INFO("MXCSR flags " << flags << ", variant " << vt::precision::KernelIsaName(isa));
      std::vector<double> out(xs.size());
      vt::precision::RoundTally t;
      _mm_setcsr((saved & ~0x8040u) | flags);
      vt::precision::RoundSpan(p, xs.data(), out.data(), nullptr, n, &t);
      _mm_setcsr(saved);
      CHECK_FALSE(t.out_of_range);
      CHECK(std::memcmp(out.data(), want.data(), out.size() * sizeof(double)) == 0);
      // What the conversion turns into an infinity or NaN is reported, not stored.
      for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL, 0x1p128, -0x1p200,
                         0x1p128 - 0x1p103 /* ties up to 2^128 */}) {
        std::vector<double> in = xs;
        in[3] = bad;
        vt::precision::RoundTally tb;
        vt::precision::RoundSpan(p, in.data(), out.data(), nullptr, n, &tb);
        CHECK(tb.out_of_range);
      }
    }
  }
}

TEST_CASE("round: kernel variants agree on every span length, window shape and value class") {
  // The AVX-512 kernels are written by hand with a masked tail and fast paths per window
  // shape (band 0; alpha 0 with band <= 1/4; general) and for values below a quarter
  // spacing or on the grid: each must give the generic kernel's bits, states and tallies.
  const uint64_t seed = oracle::TestSeed("round: variants per span");
  oracle::ValueGenerator gen(seed);
  IsaGuard guard;
  struct Shape {
    uint64_t k;
    double band, alpha_scale;
  };
  // Band 0 with an absolute term between a quarter and half the spacing at zero (2^(k-149)):
  // zeros are steerable there but not too wide for a direction.
  // Relative windows narrower than g/4 too, and an absolute one under a quarter of the
  // spacing at zero: there an entry on a value on the grid (a zero) can be illegitimate (its
  // nearest midpoint farther than 2w), which the integer path must see.
  const Shape shapes[] = {
      {0, 0.25, 0.0}, {0, 0.0, P2(-30)},  {3, 0.1, P2(-40)},        {0, 0.5, 0.0},
      {9, 0.0, 0.0},  {0, 0.2, P2(-140)}, {0, 0.0, 1.5 * P2(-151)}, {4, 0.0, 1.5 * P2(-147)},
      {0, 0.1, 0.0},  {5, 0.125, 0.0},    {0, 0.0, P2(-152)},       {0, 0.0, 0.0}};
  for (const Shape& shape : shapes) {
    vt::precision::KernelParams p;
    p.k = shape.k;
    p.band = shape.band;
    p.alpha_scale = shape.alpha_scale;
    for (int64_t n = 0; n <= 140; ++n) {
      std::vector<double> xs;
      std::vector<uint8_t> given;
      for (int64_t i = 0; i < n; ++i) {
        const int kind = gen.Int(0, 5);
        double v = gen.Any(32 - static_cast<int>(shape.k));
        if (kind == 0) v = 0.0;
        if (kind == 1) v = static_cast<double>(static_cast<float>(v));  // on the grid
        if (kind == 2) v = std::ldexp(gen.Any(32), -160);               // below g/4
        if (!(std::fabs(v) < 0x1p100)) v = 1.5;
        xs.push_back(v);
        given.push_back(static_cast<uint8_t>(gen.Int(0, 3)));
      }
      if (n > 0 && n % 7 == 0)
        xs[static_cast<size_t>(gen.Int(0, static_cast<int>(n) - 1))] = 0x1p200;
      // The trainer's own states replayed (the honest log: whole groups of 8 take the replay's
      // agreed-entries path), and the same with about one state in 16 replaced (groups fall
      // back to the paths that move values and count illegitimate entries).
      std::vector<int> replaced(static_cast<size_t>(n), -1);
      for (int& state : replaced) {
        if (gen.Int(0, 15) == 0) state = gen.Int(0, 3);
      }
      struct Result {
        std::vector<double> rounded, replayed, honest, mixed;
        std::vector<uint8_t> states;
        vt::precision::RoundTally round;
        vt::precision::ReplayTally replay, honest_replay, mixed_replay;
        std::vector<double> unlogged;  // RoundSpan without states
        vt::precision::RoundTally unlogged_round;
      };
      std::vector<Result> results;
      for (KernelIsa isa : vt::precision::SupportedKernelIsas()) {
        vt::precision::SetKernelIsa(isa);
        Result r;
        r.rounded.resize(static_cast<size_t>(n));
        r.replayed.resize(static_cast<size_t>(n));
        r.states.resize(static_cast<size_t>(n));
        vt::precision::RoundSpan(p, xs.data(), r.rounded.data(), r.states.data(), n, &r.round);
        vt::precision::ReplaySpan(p, xs.data(), given.data(), r.replayed.data(), n, &r.replay);
        r.honest.resize(static_cast<size_t>(n));
        vt::precision::ReplaySpan(p, xs.data(), r.states.data(), r.honest.data(), n,
                                  &r.honest_replay);
        std::vector<uint8_t> mixed = r.states;
        for (size_t i = 0; i < mixed.size(); ++i) {
          if (replaced[i] >= 0) mixed[i] = static_cast<uint8_t>(replaced[i]);
        }
        r.mixed.resize(static_cast<size_t>(n));
        vt::precision::ReplaySpan(p, xs.data(), mixed.data(), r.mixed.data(), n, &r.mixed_replay);
        r.unlogged.resize(static_cast<size_t>(n));
        vt::precision::RoundSpan(p, xs.data(), r.unlogged.data(), nullptr, n, &r.unlogged_round);
        results.push_back(std::move(r));
      }
      for (size_t v = 1; v < results.size(); ++v) {
        INFO("n=" << n << " k=" << shape.k << " band=" << shape.band
                  << " alpha_scale=" << shape.alpha_scale << " variant "
                  << vt::precision::KernelIsaName(vt::precision::SupportedKernelIsas()[v]));
        const Result& a = results[0];
        const Result& b = results[v];
        REQUIRE(a.round.out_of_range == b.round.out_of_range);
        REQUIRE(a.replay.out_of_range == b.replay.out_of_range);
        if (a.round.out_of_range) continue;  // outputs are unspecified then
        auto same_bits = [](const std::vector<double>& x, const std::vector<double>& y) {
          return x.size() == y.size() &&
                 (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0);
        };
        CHECK(same_bits(a.rounded, b.rounded));
        CHECK(a.states == b.states);
        CHECK(a.round.down == b.round.down);
        CHECK(a.round.up == b.round.up);
        CHECK(a.round.exact == b.round.exact);
        CHECK(a.round.steerable == b.round.steerable);
        CHECK(same_bits(a.replayed, b.replayed));
        CHECK(a.replay.corrections == b.replay.corrections);
        CHECK(a.replay.illegitimate == b.replay.illegitimate);
        CHECK(a.replay.near_misses == b.replay.near_misses);
        CHECK(a.replay.steerable == b.replay.steerable);
        for (auto [x, y] : {std::pair{&a.honest_replay, &b.honest_replay},
                            std::pair{&a.mixed_replay, &b.mixed_replay}}) {
          CHECK(x->out_of_range == y->out_of_range);
          CHECK(x->corrections == y->corrections);
          CHECK(x->illegitimate == y->illegitimate);
          CHECK(x->near_misses == y->near_misses);
          CHECK(x->steerable == y->steerable);
        }
        CHECK(same_bits(a.honest, b.honest));
        CHECK(same_bits(a.mixed, b.mixed));
        // An honest log replays to the trainer's values and finds nothing wrong.
        CHECK(same_bits(a.honest, a.rounded));
        CHECK(a.honest_replay.corrections == 0);
        CHECK(a.honest_replay.illegitimate == 0);
        REQUIRE(a.unlogged_round.out_of_range == b.unlogged_round.out_of_range);
        CHECK(same_bits(a.unlogged, b.unlogged));
        CHECK(same_bits(a.unlogged, a.rounded));
        CHECK(a.unlogged_round.steerable == b.unlogged_round.steerable);
      }
    }
  }
}

TEST_CASE(
    "round and replay: the top of the FP32 range on every kernel variant and group position") {
  // The paper window's fast paths take a lane only when rnd_b(|x|) stays below 2^128, and
  // skip the range check there: the value half a spacing below the midpoint under 2^128 must
  // round to the largest grid value, the midpoint itself (a tie to the even 2^128) must be an
  // overflow error, in any lane of a full group of 8 and in a tail, rounding and replaying.
  for (int bits : {32, 26, 10}) {
    for (double band : {0.25, 0.1}) {
      const double top = vt::precision::LargestGridValue(bits);
      const double half = std::ldexp(1.0, 135 - bits);  // half the spacing at the top
      const double below = top + half - P2(75);         // one FP64 ulp below the tie
      const double tie = top + half;
      const RoundOptions o = Options(bits, band);
      for (size_t n : {size_t{5}, size_t{8}, size_t{16}, size_t{64}, size_t{70}}) {
        for (size_t at = 0; at < n; at += 3) {
          std::vector<double> xs(n, 1.0 + P2(-20));
          xs[at] = at % 2 == 0 ? below : -below;
          ForEachIsa([&] {
            INFO("b = " << bits << ", band " << band << ", " << n << " values, at " << at);
            LogRecord record;
            const auto r = Round(ToTensor(xs), o, &record);
            CHECK(std::fabs(ToVector(r.rounded)[at]) == top);
            const auto replayed = vt::precision::Replay(ToTensor(xs), record, o);
            CHECK(replayed.rounded.equal(r.rounded));
            std::vector<double> over = xs;
            over[at] = at % 2 == 0 ? tie : -tie;
            LogRecord unused;
            CHECK_THROWS_WITH(
                Round(ToTensor(over), o, &unused),
                Catch::Contains("overflow") && Catch::Contains("index " + std::to_string(at)));
            // The entry rounding the tie would write (UP for +, DOWN for -: away from zero),
            // so that the replay's group agrees with its log.
            std::vector<uint8_t> states(record.states(), record.states() + n);
            states[at] = at % 2 == 0 ? 2 : 1;
            const LogRecord agreeing = LogRecord::FromStates(states, {});
            CHECK_THROWS_WITH(
                vt::precision::Replay(ToTensor(over), agreeing, o),
                Catch::Contains("overflow") && Catch::Contains("index " + std::to_string(at)));
          });
        }
      }
    }
  }
}

TEST_CASE("kernels: the absolute window's fast paths at the top of the FP32 range") {
  // The zero window's rounding and replay and the bounded kernels (an outer magnitude under
  // band 0) skip the range check on the lanes they take: the midpoint under 2^128 must still
  // be flagged out of range in any lane, and the value one FP64 ulp below it must not.
  using vt::precision::KernelParams;
  using vt::precision::MagnitudeFiller;
  using vt::precision::ReplayTally;
  using vt::precision::RoundTally;
  const double tiny_magnitude = 0.0;
  const MagnitudeFiller filler{
      [](const void*, int64_t, int64_t count, double* out) { std::fill(out, out + count, 0.0); },
      &tiny_magnitude, 0};
  for (int bits : {32, 26}) {
    KernelParams p;
    p.k = static_cast<uint64_t>(32 - bits);
    p.band = 0.0;
    p.alpha = P2(-40);
    const double top = vt::precision::LargestGridValue(bits);
    const double half = std::ldexp(1.0, 135 - bits);
    for (size_t n : {size_t{8}, size_t{24}, size_t{13}}) {
      for (size_t at = 0; at < n; at += 5) {
        for (bool over : {false, true}) {
          std::vector<double> xs(n, 3.0 + P2(-30));
          xs[at] = (over ? top + half : top + half - P2(75)) * (at % 2 == 0 ? 1 : -1);
          ForEachIsa([&] {
            INFO("b = " << bits << ", " << n << " values, at " << at << (over ? ", tie" : ""));
            std::vector<double> out(n);
            std::vector<uint8_t> states(n, 0);
            KernelParams zero = p;
            zero.alpha = 0.0;
            RoundTally rt;
            vt::precision::RoundSpan(zero, xs.data(), out.data(), nullptr, static_cast<int64_t>(n),
                                     &rt, nullptr);
            CHECK(rt.out_of_range == over);
            if (!over) CHECK(std::fabs(out[at]) == top);
            ReplayTally zt;
            vt::precision::ReplayNoneZeroWindowSpan(zero, xs.data(), states.data(), out.data(),
                                                    static_cast<int64_t>(n), &zt);
            CHECK(zt.out_of_range == over);
            RoundTally bt;
            vt::precision::RoundLogBoundedSpan(p, xs.data(), out.data(), states.data(),
                                               static_cast<int64_t>(n), &bt, 0.0, filler);
            CHECK(bt.out_of_range == over);
            if (!over) CHECK(std::fabs(out[at]) == top);
            std::fill(states.begin(), states.end(), 0);
            ReplayTally bz;
            vt::precision::ReplayBoundedSpan(p, xs.data(), states.data(), out.data(),
                                             static_cast<int64_t>(n), &bz, 0.0, filler);
            CHECK(bz.out_of_range == over);
          });
        }
      }
    }
  }
}
