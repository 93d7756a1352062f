// Computed magnitudes (precision/magnitude_source.h): a product's magnitude handed to the
// kernels as its two factors, and an activation's as |a| (times a factor), give the same bits
// as the tensor expressions they replace (row * col, + add, * factor, in ATen's broadcasting;
// a.abs() * mul), and rounding or replaying with them gives the same outputs, records and
// counts as with the magnitudes written out, on every kernel variant and thread count, across
// block and row boundaries; bad factors are errors that name what is wrong, and a bad
// magnitude inside a computed one names its index.
#include "runtime/precision/magnitude_source.h"

#include <ATen/ATen.h>
#include <xmmintrin.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/precision/kernels.h"
#include "runtime/precision/round.h"
#include "tests/precision/helpers.h"
#include "tests/precision/oracle.h"

namespace {

namespace prec = vt::precision;
namespace oracle = vt::precision::oracle;
using prec::testing::IsaGuard;
using prec::testing::ThreadGuard;

// Positive values spread over many binades, so that products and sums round.
at::Tensor Spread(at::IntArrayRef shape) {
  const at::Tensor e = at::randint(-20, 21, shape, at::kDouble);
  return at::rand(shape, at::kDouble).add_(0.5) * at::pow(2.0, e);
}

struct Case {
  const char* name;
  int64_t batch, rows, cols;
  bool row_batched, col_batched;
  int add;  // 0 none, 1 per row, 2 per column
  double factor;
};

// The factors in their broadcasting shapes and the expression they stand for.
struct Factors {
  at::Tensor row, col, add, expected;
  prec::OuterMagnitude outer;
};

Factors Make(const Case& c) {
  Factors f;
  f.row = Spread({c.row_batched ? c.batch : 1, c.rows, 1});
  f.col = Spread({c.col_batched ? c.batch : 1, 1, c.cols});
  at::Tensor m = f.row * f.col;
  if (c.add != 0) {
    f.add = c.add == 1 ? Spread({1, c.rows, 1}) : Spread({1, 1, c.cols});
    m.add_(f.add);
  }
  if (c.factor != 1.0) m = m * c.factor;
  f.expected = m.expand({c.batch, c.rows, c.cols}).contiguous();
  f.outer.row = f.row;
  f.outer.col = f.col;
  f.outer.add = f.add;
  f.outer.add_per_row = c.add == 1;
  f.outer.factor = c.factor;
  f.outer.batch = c.batch;
  f.outer.rows = c.rows;
  f.outer.cols = c.cols;
  return f;
}

const Case kCases[] = {
    {"linear with bias", 1, 300, 37, false, false, 2, 1.0},
    {"batched attention product", 6, 64, 64, true, true, 0, 1.0},
    {"scaled scores (factor 1/sqrt(48))", 3, 50, 41, true, true, 0, 1.0 / std::sqrt(48.0)},
    {"convolution (rows shared, bias per row)", 5, 16, 49, false, true, 1, 1.0},
    {"single column", 2, 1000, 1, true, true, 2, 3.0},
    {"long rows across blocks", 1, 3, 5000, false, false, 0, 1.0},
};

uint64_t BitsOf(double d) { return prec::testing::Bits(d); }

bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() != b.numel()) return false;
  const double *pa = a.data_ptr<double>(), *pb = b.data_ptr<double>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (BitsOf(pa[i]) != BitsOf(pb[i])) return false;
  }
  return true;
}

// On every kernel variant, rounding x against the computed magnitude `m` equals rounding it
// against the array `want` (values, states), and replaying against either agrees.
void CheckRoundsAsArray(const at::Tensor& x, const at::Tensor& want, const prec::Magnitude& m) {
  for (prec::KernelIsa isa : prec::SupportedKernelIsas()) {
    prec::SetKernelIsa(isa);
    INFO("variant " << prec::KernelIsaName(isa));
    prec::RoundOptions o;
    o.band = 0.0625;
    o.alpha = 0x1p-38;
    prec::LogRecord by_array, by_computed;
    const prec::RoundResult r1 = prec::Round(x, o, &by_array, {}, want);
    const prec::RoundResult r2 = prec::Round(x, o, &by_computed, {}, m);
    CHECK(SameBits(r1.rounded, r2.rounded));
    CHECK(by_array.counts().exact == by_computed.counts().exact);
    CHECK(by_array.counts().logged() > 0);
    CHECK(std::equal(by_array.states(), by_array.states() + x.numel(), by_computed.states()));
    const prec::ReplayResult p1 = prec::Replay(x, by_array, o, {}, want);
    const prec::ReplayResult p2 = prec::Replay(x, by_array, o, {}, m);
    CHECK(SameBits(p1.rounded, p2.rounded));
    CHECK(p1.report.steerable == p2.report.steerable);
    CHECK(p1.report.near_misses == p2.report.near_misses);
    CHECK(p2.report.illegitimate == 0);
  }
}

}  // namespace

TEST_CASE("outer magnitudes equal the tensor expression bit for bit", "[precision][magnitude]") {
  at::manual_seed(31);
  for (const Case& c : kCases) {
    INFO(c.name);
    const Factors f = Make(c);
    const prec::Magnitude m(f.outer);
    CHECK(m.numel() == f.expected.numel());
    CHECK(SameBits(m.Materialize(f.expected), f.expected));
    // Any sub-range, starting anywhere in a row.
    const int64_t n = f.expected.numel();
    for (int64_t begin : {int64_t{0}, int64_t{1}, c.cols - 1, n / 2 + 3, n - 1}) {
      if (begin < 0 || begin >= n) continue;
      const int64_t count = std::min<int64_t>(n - begin, 2 * c.cols + 7);
      std::vector<double> out(static_cast<size_t>(count));
      m.Fill(begin, count, out.data());
      const double* want = f.expected.data_ptr<double>() + begin;
      bool same = true;
      for (int64_t i = 0; i < count; ++i) same &= BitsOf(out[i]) == BitsOf(want[i]);
      CHECK(same);
      CHECK(BitsOf(m.At(begin)) == BitsOf(want[0]));
    }
  }
}

TEST_CASE("rounding and replay with an outer magnitude equal those with the array",
          "[precision][magnitude]") {
  at::manual_seed(32);
  IsaGuard isa_guard;
  ThreadGuard thread_guard;
  for (const Case& c : kCases) {
    const Factors f = Make(c);
    const int64_t n = f.expected.numel();
    // Values near their magnitudes' scale, some cancelled far below it (wide windows, EXACT).
    at::Tensor x = at::randn({n}, at::kDouble) * f.expected.view({-1});
    x.narrow(0, 0, n / 5).mul_(0x1p-24);
    // The auditor's values: the trainer's moved by a little divergence.
    const at::Tensor x2 = x + at::randn({n}, at::kDouble) * f.expected.view({-1}) * 0x1p-44;
    for (prec::KernelIsa isa : prec::SupportedKernelIsas()) {
      prec::SetKernelIsa(isa);
      // A band (the array's path for computed magnitudes) and two absolute windows, where the
      // AVX-512 kernels skip the magnitudes of groups the block's bound leaves far from their
      // windows (OuterBound, RoundLogBoundedSpan): the same values, states and counts.
      for (const auto& [band, alpha] :
           {std::pair<double, double>{0.0625, 0x1p-40}, std::pair<double, double>{0.0, 0x1p-40},
            std::pair<double, double>{0.0, 0x1p-30}}) {
        for (int threads : {1, 2}) {
          at::set_num_threads(threads);
          INFO(c.name << ", variant " << prec::KernelIsaName(isa) << ", " << threads
                      << " threads, band " << band << ", alpha " << alpha);
          prec::RoundOptions o;
          o.band = band;
          o.alpha = alpha;
          prec::LogRecord by_array, by_outer;
          const prec::RoundResult a = prec::Round(x, o, &by_array, {}, f.expected.view({-1}));
          const prec::RoundResult b = prec::Round(x, o, &by_outer, {}, prec::Magnitude(f.outer));
          CHECK(SameBits(a.rounded, b.rounded));
          CHECK(by_array.counts().logged() == by_outer.counts().logged());
          CHECK(by_array.counts().exact == by_outer.counts().exact);
          CHECK(by_array.counts().logged() > 0);
          CHECK(a.stats.steerable == b.stats.steerable);
          CHECK(std::equal(by_array.states(), by_array.states() + n, by_outer.states()));
          // In place, as boundaries round their own tensors.
          at::Tensor in_place = x.clone();
          prec::LogRecord in_place_log;
          prec::RoundInto(in_place, in_place, o, &in_place_log, {}, prec::Magnitude(f.outer));
          CHECK(SameBits(in_place, a.rounded));

          const prec::ReplayResult ra = prec::Replay(x2, by_array, o, {}, f.expected.view({-1}));
          const prec::ReplayResult rb = prec::Replay(x2, by_array, o, {}, prec::Magnitude(f.outer));
          CHECK(SameBits(ra.rounded, rb.rounded));
          CHECK(ra.report.corrections == rb.report.corrections);
          CHECK(ra.report.illegitimate == rb.report.illegitimate);
          CHECK(ra.report.near_misses == rb.report.near_misses);
          CHECK(ra.report.steerable == rb.report.steerable);
          CHECK(rb.report.illegitimate == 0);
          CHECK(SameBits(rb.rounded, a.rounded));  // the replay reproduces the trainer's values

          // A forged log: one value in 97 gets a direction it was not given. Groups holding an
          // entry take their magnitudes, so both replays count the same illegitimate entries.
          std::vector<uint8_t> forged(by_array.states(), by_array.states() + n);
          int64_t forgeries = 0;
          for (int64_t i = 0; i < n; i += 97) {
            if (forged[static_cast<size_t>(i)] != 0) continue;
            forged[static_cast<size_t>(i)] = static_cast<uint8_t>(1 + (i / 97) % 2);
            ++forgeries;
          }
          const prec::LogRecord forged_log = prec::LogRecord::FromStates(forged, by_array.exact());
          const prec::ReplayResult fa = prec::Replay(x2, forged_log, o, {}, f.expected.view({-1}));
          const prec::ReplayResult fb =
              prec::Replay(x2, forged_log, o, {}, prec::Magnitude(f.outer));
          CHECK(SameBits(fa.rounded, fb.rounded));
          CHECK(fa.report.illegitimate == fb.report.illegitimate);
          CHECK(fa.report.corrections == fb.report.corrections);
          CHECK(fa.report.near_misses == fb.report.near_misses);
          CHECK(fa.report.steerable == fb.report.steerable);
          if (forgeries > 10) CHECK(fb.report.illegitimate > 0);
        }
      }
    }
  }
}

TEST_CASE("absolute magnitudes equal a.abs() * mul and round as the array does",
          "[precision][magnitude]") {
  at::manual_seed(34);
  IsaGuard isa_guard;
  const int64_t n = 10007;  // several blocks and a partial one
  const at::Tensor a = at::randn({n}, at::kDouble) * Spread({n});
  const at::Tensor mul = Spread({n});
  at::Tensor x = at::randn({n}, at::kDouble) * a.abs();
  x.narrow(0, 0, n / 4).mul_(0x1p-26);
  for (bool with_mul : {false, true}) {
    INFO((with_mul ? "|a| * mul" : "|a|"));
    const at::Tensor want = with_mul ? a.abs() * mul : a.abs();
    const prec::Magnitude m(prec::AbsMagnitude{a, with_mul ? mul : at::Tensor()});
    CHECK(m.computed());
    CHECK(SameBits(m.Materialize(want), want));
    CheckRoundsAsArray(x, want, m);
  }
  CHECK_THROWS_WITH(
      prec::Magnitude(prec::AbsMagnitude{a, mul.narrow(0, 0, n - 1)}),
      Catch::StartsWith("absolute magnitude: factor has 10006 elements, expected 10007"));
  CHECK_THROWS_WITH(
      prec::Magnitude(prec::AbsMagnitude{a.to(at::kFloat), {}}),
      Catch::StartsWith("absolute magnitude: tensor must be a contiguous CPU float64"));
}

TEST_CASE("channel magnitudes equal batch norm's expressions and round as the array does",
          "[precision][magnitude]") {
  at::manual_seed(35);
  IsaGuard isa_guard;
  // Planes of 7 x 9 = 63 values (not a multiple of a vector or a block), 5 channels, 11 images:
  // the kernels' blocks start and end inside planes, channels and images.
  const int64_t n = 11, c = 5, h = 7, w = 9;
  const at::Tensor g = at::randn({n, c, h, w}, at::kDouble) * Spread({n, c, h, w});
  const at::Tensor xhat = at::randn({n, c, h, w}, at::kDouble);
  const at::Tensor wt = at::randn({c}, at::kDouble), rstd = Spread({c});
  const at::Tensor mean_g = at::randn({c}, at::kDouble), mean_gx = at::randn({c}, at::kDouble);
  auto ch = [](const at::Tensor& t) { return t.view({1, -1, 1, 1}); };
  struct Form {
    const char* name;
    prec::ChannelMagnitude m;
    at::Tensor want;
  };
  const Form forms[] = {
      {"batch norm's input gradient",
       {g, xhat, rstd, wt, mean_g, mean_gx, c, h * w},
       ch(rstd) * ((g * ch(wt)).abs() + ch(mean_g).abs() + (xhat * ch(mean_gx)).abs())},
      {"batch norm's output, |a| + |q|",
       {g, {}, {}, {}, mean_g, {}, c, h * w},
       g.abs() + ch(mean_g).abs()},
  };
  at::Tensor x = at::randn({n, c, h, w}, at::kDouble) * g.abs();
  x.narrow(0, 0, 3).mul_(0x1p-26);
  for (const Form& f : forms) {
    INFO(f.name);
    const prec::Magnitude m(f.m);
    CHECK(m.computed());
    CHECK(m.numel() == g.numel());
    CHECK(SameBits(m.Materialize(f.want), f.want.contiguous()));
    // Any range, as the kernels' blocks and an EXACT entry's single value ask for it.
    const at::Tensor flat = f.want.contiguous().view({-1});
    for (int64_t begin : {int64_t{0}, int64_t{62}, int64_t{63}, int64_t{314}, g.numel() - 1}) {
      const int64_t count = std::min<int64_t>(200, g.numel() - begin);
      std::vector<double> got(static_cast<size_t>(count));
      m.Fill(begin, count, got.data());
      for (int64_t k = 0; k < count; ++k) {
        REQUIRE(BitsOf(got[static_cast<size_t>(k)]) == BitsOf(flat[begin + k].item<double>()));
      }
      CHECK(BitsOf(m.At(begin)) == BitsOf(flat[begin].item<double>()));
    }
    CheckRoundsAsArray(x, f.want.contiguous(), m);
  }
  // Sizes that do not fit say what is wrong.
  CHECK_THROWS_WITH(prec::Magnitude(prec::ChannelMagnitude{g, {}, {}, {}, mean_g, {}, c, 64}),
                    Catch::Contains("3465 elements are not images of 5 channels of 64 values"));
  CHECK_THROWS_WITH(
      prec::Magnitude(prec::ChannelMagnitude{g, {}, {}, {}, mean_g.narrow(0, 0, 4), {}, c, h * w}),
      Catch::StartsWith("channel magnitude: added term has 4 elements, expected 5"));
  CHECK_THROWS_WITH(
      prec::Magnitude(prec::ChannelMagnitude{g, xhat, rstd, wt, mean_g, {}, c, h * w}),
      Catch::StartsWith("channel magnitude: second factor is undefined"));
}

TEST_CASE("bad outer magnitudes are errors that say what is wrong", "[precision][magnitude]") {
  at::manual_seed(33);
  const Factors f = Make(kCases[0]);  // 300 x 37
  prec::OuterMagnitude wrong_rows = f.outer;
  wrong_rows.rows = 299;
  CHECK_THROWS_WITH(
      prec::Magnitude(wrong_rows),
      Catch::StartsWith("outer magnitude: row factor has 300 elements, expected 299"));
  prec::OuterMagnitude float_col = f.outer;
  float_col.col = f.col.to(at::kFloat);
  CHECK_THROWS_WITH(
      prec::Magnitude(float_col),
      Catch::StartsWith("outer magnitude: column factor must be a contiguous CPU float64"));
  prec::OuterMagnitude zero_factor = f.outer;
  zero_factor.factor = 0.0;
  CHECK_THROWS_WITH(prec::Magnitude(zero_factor), Catch::Contains("factor must be finite and > 0"));

  // A magnitude that covers another number of elements than the tensor has.
  prec::RoundOptions o;
  o.alpha = 0x1p-40;
  const at::Tensor x = at::randn({300 * 37 + 1}, at::kDouble);
  CHECK_THROWS_WITH(prec::Round(x, o, nullptr, {}, prec::Magnitude(f.outer)),
                    Catch::Contains("magnitude covers 11100 elements but the tensor has 11101"));

  // An infinite factor makes one row's magnitudes infinite: the error names the first index.
  prec::OuterMagnitude inf_row = f.outer;
  inf_row.row = f.row.clone();
  inf_row.row.view({-1})[7] = INFINITY;
  const at::Tensor y = at::randn({300 * 37}, at::kDouble);
  prec::LogRecord log;
  CHECK_THROWS_WITH(prec::Round(y, o, &log, {"fc:fwd", 3}, prec::Magnitude(inf_row)),
                    Catch::Contains("bad magnitude at 'fc:fwd', step 3, index 259: inf"));
}

TEST_CASE("the bounded kernels equal the array's on every value class, span length and bound",
          "[precision][magnitude]") {
  // RoundLogBoundedSpan and ReplayBoundedSpan skip an element's magnitude only in groups of 8
  // that the span's bound leaves far from their windows: zeros, values on the grid, FP32
  // subnormals, values far below their magnitude (wide windows), ties and entries must all
  // come out as RoundSpan and ReplaySpan give them with the magnitudes written out.
  const uint64_t seed = oracle::TestSeed("bounded kernels");
  oracle::ValueGenerator gen(seed);
  IsaGuard guard;
  int64_t fast_kinds = 0, steerable_only = 0;
  for (uint64_t k : {uint64_t{0}, uint64_t{3}, uint64_t{9}}) {
    for (double alpha : {0x1p-40, 0x1p-24, 0x1p-8}) {
      prec::KernelParams p;
      p.k = k;
      p.band = 0.0;
      p.alpha = alpha;
      for (int64_t n : {0, 1, 7, 8, 9, 63, 64, 65, 131, 2048}) {
        // Magnitudes spread over 60 binades, or all equal (the bound is then every element's
        // own, and a value at 1.5 w from its midpoint is steerable but not logged).
        for (bool uniform : {false, true}) {
          std::vector<double> xs, ms;
          std::vector<uint8_t> given;
          for (int64_t i = 0; i < n; ++i) {
            const double m = uniform              ? 1.0
                             : gen.Int(0, 9) == 0 ? 0.0
                                                  : std::ldexp(0.5 + gen.Unit(), gen.Int(-30, 30));
            double v = (gen.Unit() - 0.5) * m * 2.0;
            switch (gen.Int(0, 8)) {
              case 0:
                v = 0.0;
                break;
              case 1:
                v = static_cast<double>(static_cast<float>(v));
                break;  // on the grid
              case 2:
                v = v * 0x1p-30;
                break;  // far below m
              case 3:
                v = std::ldexp(gen.Unit(), -135);
                break;  // FP32 subnormal
              case 4:
                v = gen.NearGridOrMid(32 - static_cast<int>(k));
                break;
              case 5:
              case 6: {
                // At t w from a midpoint, t in {0.5, 1.5, 1.99}: logged, steerable, steerable.
                int e = 0;
                std::frexp(v, &e);
                const double g = std::ldexp(1.0, std::max(e - 1, -126) - 23 + static_cast<int>(k));
                const double t = gen.Int(0, 2) == 0 ? 0.5 : gen.Int(0, 1) == 0 ? 1.5 : 1.99;
                const double mid = std::floor(std::fabs(v) / g) * g + g / 2;
                v = std::copysign(mid + (gen.Int(0, 1) == 0 ? 1 : -1) * t * alpha * m, v);
                break;
              }
              default:
                break;
            }
            if (!(std::fabs(v) < 0x1p100)) v = 1.5;
            xs.push_back(v);
            ms.push_back(m);
            given.push_back(static_cast<uint8_t>(gen.Int(0, 15) < 13 ? 0 : gen.Int(1, 3)));
          }
          const double largest = ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end());
          for (double bound : {largest, largest * 3.0}) {
            const prec::MagnitudeFiller filler{
                [](const void* ctx, int64_t begin, int64_t count, double* out) {
                  const double* m = static_cast<const double*>(ctx);
                  std::copy(m + begin, m + begin + count, out);
                },
                ms.data(), 0};
            for (prec::KernelIsa isa : prec::SupportedKernelIsas()) {
              prec::SetKernelIsa(isa);
              INFO("k=" << k << " alpha=" << alpha << " n=" << n << " bound=" << bound
                        << " variant " << prec::KernelIsaName(isa));
              std::vector<double> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
              std::vector<uint8_t> sa(static_cast<size_t>(n)), sb(static_cast<size_t>(n));
              prec::RoundTally ta, tb;
              prec::RoundSpan(p, xs.data(), a.data(), sa.data(), n, &ta, ms.data());
              prec::RoundLogBoundedSpan(p, xs.data(), b.data(), sb.data(), n, &tb, bound, filler);
              REQUIRE(ta.out_of_range == tb.out_of_range);
              CHECK(ta.bad_magnitude == tb.bad_magnitude);
              CHECK((n == 0 || std::memcmp(a.data(), b.data(), a.size() * 8) == 0));
              CHECK(sa == sb);
              CHECK(ta.down == tb.down);
              CHECK(ta.up == tb.up);
              CHECK(ta.exact == tb.exact);
              CHECK(ta.steerable == tb.steerable);
              prec::ReplayTally ra, rb;
              prec::ReplaySpan(p, xs.data(), given.data(), a.data(), n, &ra, ms.data());
              prec::ReplayBoundedSpan(p, xs.data(), given.data(), b.data(), n, &rb, bound, filler);
              REQUIRE(ra.out_of_range == rb.out_of_range);
              CHECK((n == 0 || std::memcmp(a.data(), b.data(), a.size() * 8) == 0));
              CHECK(ra.corrections == rb.corrections);
              CHECK(ra.illegitimate == rb.illegitimate);
              CHECK(ra.near_misses == rb.near_misses);
              CHECK(ra.steerable == rb.steerable);
              fast_kinds += ta.down + ta.up + ta.exact > 0;
              steerable_only += ta.steerable - (ta.down + ta.up + ta.exact);
            }
          }
        }
      }
    }
  }
  CHECK(fast_kinds > 10);       // entries were made, so the slow groups were exercised
  CHECK(steerable_only > 100);  // and values steerable without an entry (w < d <= 2 w)
}

// Sets MXCSR's flush-to-zero and denormals-are-zero bits (0x8040) to `flags` for its
// lifetime, from `saved`.
struct McsrFlags {
  unsigned int saved;
  McsrFlags(unsigned int s, unsigned int flags) : saved(s) { _mm_setcsr((s & ~0x8040u) | flags); }
  ~McsrFlags() { _mm_setcsr(saved); }
};

// Every kernel variant with each of MXCSR's four settings of those bits.
std::vector<std::pair<prec::KernelIsa, unsigned int>> IsasAndFlags() {
  std::vector<std::pair<prec::KernelIsa, unsigned int>> out;
  for (prec::KernelIsa isa : prec::SupportedKernelIsas()) {
    for (unsigned int flags : {0x0u, 0x8000u, 0x0040u, 0x8040u}) out.emplace_back(isa, flags);
  }
  return out;
}

TEST_CASE("the bounded kernels' runs of far groups stop where the array's results differ",
          "[precision][magnitude]") {
  // At b = 32 the bounded kernels round runs of groups far from their windows by the
  // hardware's FP32 conversion and stop at the first group that is not, whatever MXCSR's
  // flush-to-zero and denormals-are-zero flags (the array's results are taken without). Here
  // most groups are far, and one value in 48 sits where that test must stop the run: within
  // 8 w of its midpoint (inside w: logged; the rest: the test's margin), at the edge of a binade
  // (the spacing halves below a power of two), at the ends of FP32's normal range (2^-126, the
  // largest value below 2^128), a zero or an FP32 subnormal.
  const uint64_t seed = oracle::TestSeed("bounded kernels' far runs");
  oracle::ValueGenerator gen(seed);
  IsaGuard guard;
  int64_t entries = 0;
  for (uint64_t k : {uint64_t{0}, uint64_t{5}}) {
    const int significand = 24 - static_cast<int>(k);  // bits, with the implicit one
    for (double alpha : {0x1p-44, 0x1p-34, 0x1p-26}) {
      prec::KernelParams p;
      p.k = k;
      p.band = 0.0;
      p.alpha = alpha;
      for (int64_t n : {8, 64, 2045, 2048}) {
        for (bool uniform : {false, true}) {
          std::vector<double> xs, ms;
          std::vector<uint8_t> given;
          for (int64_t i = 0; i < n; ++i) {
            const double m = uniform ? 4.0 : std::ldexp(0.5 + gen.Unit(), gen.Int(-3, 3));
            double v = (gen.Unit() - 0.5) * m;
            if (gen.Int(0, 47) == 0) {
              int e = 0;
              std::frexp(v, &e);
              const double g = std::ldexp(1.0, e - significand);  // v's spacing
              const double w = alpha * m;
              switch (gen.Int(0, 6)) {
                case 0: {  // t w from the midpoint, t around 1, 2, 4 and 8
                  const double ts[] = {0.5, 1.5, 1.99, 2.01, 3.9, 4.1, 7.9, 8.1, 9.0};
                  const double t = ts[gen.Int(0, 8)];
                  const double mid = std::floor(std::fabs(v) / g) * g + g / 2;
                  v = std::copysign(mid + (gen.Int(0, 1) == 0 ? 1 : -1) * t * w, v);
                  break;
                }
                case 1: {  // just above or below a power of two, off the grid
                  const double edge = std::ldexp(1.0, gen.Int(-4, 4));
                  v = edge + (gen.Int(0, 1) == 0 ? 1 : -1) * edge * 0x1p-26 * gen.Int(1, 9);
                  break;
                }
                case 2:
                  v = gen.Int(0, 1) == 0 ? 0.0 : -0.0;
                  break;
                case 3:
                  v = std::ldexp(gen.Unit(), -130);  // FP32 subnormal
                  break;
                case 4:  // around the smallest normal
                  v = 0x1p-126 * (1.0 + (gen.Unit() - 0.5) * 0x1p-20);
                  break;
                case 5:  // the largest values below 2^128, 1.5 to 3.5 spacings from it
                  v = 0x1p128 - std::ldexp(1.5 + 2.0 * gen.Unit(), 128 - significand);
                  break;
                default:
                  v = static_cast<double>(static_cast<float>(v));  // on the grid
                  break;
              }
            }
            xs.push_back(v);
            ms.push_back(m);
            given.push_back(static_cast<uint8_t>(gen.Int(0, 63) == 0 ? gen.Int(1, 3) : 0));
          }
          const double largest = *std::max_element(ms.begin(), ms.end());
          const prec::MagnitudeFiller filler{
              [](const void* ctx, int64_t begin, int64_t count, double* out) {
                const double* m = static_cast<const double*>(ctx);
                std::copy(m + begin, m + begin + count, out);
              },
              ms.data(), 0};
          const unsigned int saved = _mm_getcsr();
          for (auto [isa, flags] : IsasAndFlags()) {
            prec::SetKernelIsa(isa);
            INFO("k=" << k << " alpha=" << alpha << " n=" << n << " uniform=" << uniform
                      << " variant " << prec::KernelIsaName(isa) << " MXCSR flags " << flags);
            std::vector<double> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
            std::vector<uint8_t> sa(static_cast<size_t>(n)), sb(static_cast<size_t>(n));
            prec::RoundTally ta, tb;
            prec::RoundSpan(p, xs.data(), a.data(), sa.data(), n, &ta, ms.data());
            const McsrFlags set(saved, flags);  // the bounded kernels' calls only
            prec::RoundLogBoundedSpan(p, xs.data(), b.data(), sb.data(), n, &tb, largest, filler);
            REQUIRE_FALSE(ta.out_of_range);
            REQUIRE_FALSE(tb.out_of_range);
            CHECK(std::memcmp(a.data(), b.data(), a.size() * 8) == 0);
            CHECK(sa == sb);
            CHECK(ta.down == tb.down);
            CHECK(ta.up == tb.up);
            CHECK(ta.exact == tb.exact);
            CHECK(ta.steerable == tb.steerable);
            // In place, as the boundaries round.
            std::vector<double> c = xs;
            std::vector<uint8_t> sc(static_cast<size_t>(n));
            prec::RoundTally tc;
            prec::RoundLogBoundedSpan(p, c.data(), c.data(), sc.data(), n, &tc, largest, filler);
            CHECK(std::memcmp(a.data(), c.data(), a.size() * 8) == 0);
            CHECK(sa == sc);
            for (const std::vector<uint8_t>* states : {&sa, &given}) {
              prec::ReplayTally ra, rb;
              {
                const McsrFlags clear(saved, 0);
                prec::ReplaySpan(p, xs.data(), states->data(), a.data(), n, &ra, ms.data());
              }
              std::vector<double> d = xs;  // in place
              prec::ReplayBoundedSpan(p, d.data(), states->data(), d.data(), n, &rb, largest,
                                      filler);
              CHECK(std::memcmp(a.data(), d.data(), a.size() * 8) == 0);
              CHECK(ra.corrections == rb.corrections);
              CHECK(ra.illegitimate == rb.illegitimate);
              CHECK(ra.near_misses == rb.near_misses);
              CHECK(ra.steerable == rb.steerable);
            }
            entries += ta.down + ta.up + ta.exact;
          }
        }
      }
    }
  }
  CHECK(entries > 20);  // values inside w were logged: the runs stopped there
}

TEST_CASE("an outer magnitude's bound covers every element of a run, and needs good factors",
          "[precision][magnitude]") {
  at::manual_seed(33);
  for (const Case& c : kCases) {
    INFO(c.name);
    const Factors f = Make(c);
    const prec::OuterBound bound(f.outer);
    REQUIRE(bound.valid());
    const double* m = f.expected.data_ptr<double>();
    const int64_t n = f.expected.numel();
    for (int64_t begin : {int64_t{0}, int64_t{1}, n / 3, n - 1}) {
      for (int64_t count : {int64_t{1}, int64_t{8}, int64_t{2048}}) {
        const int64_t len = std::min(count, n - begin);
        const double b = bound.Over(begin, len);
        const double largest = *std::max_element(m + begin, m + begin + len);
        CHECK(b >= largest);
        CHECK(std::isfinite(b));
      }
    }
  }
  // A negative, NaN or infinite factor: no bound (the kernels then fill every magnitude, and
  // their check reports the bad one).
  Factors f = Make(kCases[0]);
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    prec::OuterMagnitude o = f.outer;
    o.col = f.col.clone();
    o.col.view({-1})[3] = bad;
    CHECK_FALSE(prec::OuterBound(o).valid());
    o = f.outer;
    o.add = f.add.clone();
    o.add.view({-1})[0] = bad;
    CHECK_FALSE(prec::OuterBound(o).valid());
  }
}
