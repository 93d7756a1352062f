// Computed magnitudes (precision/magnitude_source.h): a product's magnitude handed to the
// kernels as its two factors, and an activation's as |a| (times a factor), give the same bits
// as the tensor expressions they replace (row * col, + add, * factor, in ATen's broadcasting;
// a.abs() * mul), and rounding or replaying with them gives the same outputs, records and
// counts as with the magnitudes written out, on every kernel variant and thread count, across
// block and row boundaries; bad factors are errors that name what is wrong, and a bad
// magnitude inside a computed one names its index.
#include "runtime/precision/magnitude_source.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/precision/round.h"
#include "tests/precision/helpers.h"

namespace {

namespace prec = vt::precision;
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
      for (int threads : {1, 2}) {
        at::set_num_threads(threads);
        INFO(c.name << ", variant " << prec::KernelIsaName(isa) << ", " << threads << " threads");
        prec::RoundOptions o;
        o.band = 0.0625;
        o.alpha = 0x1p-40;
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
