// vtrun's GELU kernels (runtime/nn/gelu.h): its tanh against the C library's (within 4 ulp,
// NaN, infinities, signed zeros, subnormals), the vectorized loops against the same function
// on one value bit for bit, whatever the thread count; GELU's forward and backward against
// ATen's (which evaluates tanh with SLEEF) up to tanh's last bits, the derivative's term sizes
// against gelu'(|x|), other layouts and float32.
#include "runtime/nn/gelu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/nn/autograd.h"
#include "runtime/nn/context.h"
#include "runtime/nn/magnitude.h"
#include "tests/nn/helpers.h"
#include "tests/precision/helpers.h"

namespace {

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Distance in units in the last place between two finite doubles of the same sign.
uint64_t UlpDistance(double a, double b) {
  const uint64_t x = Bits(a) & ~(uint64_t{1} << 63), y = Bits(b) & ~(uint64_t{1} << 63);
  return x > y ? x - y : y - x;
}

// Both signs of: every power of two from 2^-1074 to 2^5 with 64 steps between each, then
// dense steps through [0, 25] and the values where tanh reaches 1 in FP64.
std::vector<double> Sweep() {
  std::vector<double> v;
  for (int e = -1074; e < 5; ++e) {
    for (int s = 0; s < 64; ++s) v.push_back(std::ldexp(1.0 + s / 64.0, e));
  }
  for (int i = 0; i <= 250000; ++i) v.push_back(i * 1e-4);
  for (double z = 18.0; z < 23.0; z += 1.0 / 1024) v.push_back(z);
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

}  // namespace

TEST_CASE("vtrun's tanh is within 4 ulp of the C library's, with its special values",
          "[nn][gelu]") {
  const std::vector<double> x = Sweep();
  std::vector<double> got(x.size());
  vt::nn::TanhSpan(x.data(), got.data(), static_cast<int64_t>(x.size()));
  uint64_t worst = 0;
  double worst_at = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::tanh(x[i]);
    REQUIRE(std::signbit(got[i]) == std::signbit(want));
    const uint64_t d = UlpDistance(got[i], want);
    if (d > worst) {
      worst = d;
      worst_at = x[i];
    }
  }
  INFO("largest error " << worst << " ulp at " << worst_at);
  CHECK(worst <= 4);
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(vt::nn::TanhOne(inf) == 1.0);
  CHECK(vt::nn::TanhOne(-inf) == -1.0);
  CHECK(vt::nn::TanhOne(1e300) == 1.0);
  CHECK(std::isnan(vt::nn::TanhOne(std::numeric_limits<double>::quiet_NaN())));
  CHECK(Bits(vt::nn::TanhOne(0.0)) == Bits(0.0));
  CHECK(Bits(vt::nn::TanhOne(-0.0)) == Bits(-0.0));
  CHECK(vt::nn::TanhOne(4.9e-324) == 4.9e-324);  // the smallest subnormal
  // The same special values through the vector loop (16 lanes: two AVX-512 vectors).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> special = {inf,  -inf,  nan,  -nan,     0.0, -0.0, 1e300,  -1e300,
                                       20.0, -20.0, 19.5, 4.9e-324, 0.5, -0.5, 1e-300, 25.0};
  std::vector<double> out(special.size());
  vt::nn::TanhSpan(special.data(), out.data(), static_cast<int64_t>(special.size()));
  for (size_t i = 0; i < special.size(); ++i) {
    INFO("tanh(" << special[i] << ")");
    if (std::isnan(special[i])) {
      CHECK(std::isnan(out[i]));
    } else {
      CHECK(Bits(out[i]) == Bits(vt::nn::TanhOne(special[i])));
      CHECK(UlpDistance(out[i], std::tanh(special[i])) <= 4);
      CHECK(std::signbit(out[i]) == std::signbit(special[i]));
    }
  }
}

TEST_CASE("vtrun's tanh gives the same bits vectorized, on one value and on any thread count",
          "[nn][gelu]") {
  at::manual_seed(3);
  // Every length up to 40 (all vector tails), then a long one split across threads.
  for (int64_t n : {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 40, 200003}) {
    const at::Tensor x = at::cat(
        {4.0 * at::randn({n - n / 2}, at::kDouble), at::randn({n / 2}, at::kDouble).mul_(1e-3)});
    const double* px = x.data_ptr<double>();
    for (int threads : {1, 2, 3}) {
      std::vector<double> out(n);
      {
        vt::precision::testing::ThreadGuard restore_threads;
        at::set_num_threads(threads);
        vt::nn::TanhSpan(px, out.data(), n);
      }
      for (int64_t i = 0; i < n; ++i) {
        INFO("n " << n << ", threads " << threads << ", element " << i << " = " << px[i]);
        REQUIRE(Bits(out[i]) == Bits(vt::nn::TanhOne(px[i])));
      }
    }
  }
}

TEST_CASE("GELU's forward, backward and derivative terms agree with ATen's up to tanh's last bits",
          "[nn][gelu]") {
  at::manual_seed(10);
  // Standard normal values, wide ones, zeros and tiny (but normal) ones of both signs.
  const at::Tensor x =
      at::cat({at::randn({5000}, at::kDouble), 12.0 * at::randn({2000}, at::kDouble),
               at::zeros({3}, at::kDouble),
               at::tensor({1e-300, -1e-300, 1e-20, -1e-20, 40.0, -40.0, -0.75}, at::kDouble)});
  const at::Tensor g = at::randn_like(x);
  const vt::nn::GeluForwardResult r = vt::nn::GeluTanhForward(x);
  // 1 + t cancels for x << 0, so both y's differ there relative to |x| (their magnitude).
  CHECK(((r.y - at::gelu(x, "tanh")).abs() <= 1e-15 * x.abs()).all().item<bool>());
  const at::Tensor inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  CHECK(at::allclose(r.t, at::tanh(inner), 4e-16, 0.0));
  at::Tensor terms;
  const at::Tensor gx = vt::nn::GeluTanhBackward(g, x, r.t, &terms);
  // Near x = -0.75 the derivative cancels: compare against the size of its terms.
  CHECK(
      ((gx - at::gelu_backward(g, x, "tanh")).abs() <= 1e-14 * g.abs() * terms).all().item<bool>());
  CHECK(at::equal(vt::nn::GeluTanhBackward(g, x, r.t), gx));  // with or without the terms
  CHECK(at::allclose(terms, at::gelu_backward(at::ones_like(x), x.abs(), "tanh"), 1e-13, 0.0));
  CHECK(terms.min().item<double>() >= 0.5);
}

TEST_CASE("GELU takes any layout with the same bits, and float32 or no t through ATen",
          "[nn][gelu]") {
  at::manual_seed(11);
  const at::Tensor x = at::randn({30, 20}, at::kDouble).t();  // not contiguous
  const at::Tensor g = at::randn({20, 30}, at::kDouble);
  const vt::nn::GeluForwardResult r = vt::nn::GeluTanhForward(x);
  const vt::nn::GeluForwardResult c = vt::nn::GeluTanhForward(x.contiguous());
  CHECK(at::equal(r.y, c.y));
  CHECK(at::equal(r.t, c.t));
  CHECK(at::equal(vt::nn::GeluTanhBackward(g.t().contiguous().t(), x, r.t),
                  vt::nn::GeluTanhBackward(g, x.contiguous(), c.t)));
  const at::Tensor xf = x.to(at::kFloat);
  const vt::nn::GeluForwardResult f = vt::nn::GeluTanhForward(xf);
  CHECK(!f.t.defined());
  CHECK(at::equal(f.y, at::gelu(xf, "tanh")));
  const at::Tensor gf = g.to(at::kFloat);
  at::Tensor terms;
  CHECK(
      at::equal(vt::nn::GeluTanhBackward(gf, xf, f.t, &terms), at::gelu_backward(gf, xf, "tanh")));
  CHECK(at::equal(terms, at::gelu_backward(at::ones_like(xf), xf.abs(), "tanh")));
  // A wrong-sized t is not read: ATen's backward.
  CHECK(at::equal(vt::nn::GeluTanhBackward(g, x.contiguous(), at::zeros({3}, at::kDouble)),
                  at::gelu_backward(g, x.contiguous(), "tanh")));
}

TEST_CASE("GELU of a boundary's output is alike everywhere: zero window, nothing logged",
          "[nn][gelu]") {
  at::manual_seed(31);
  for (bool from_boundary : {true, false}) {
    INFO((from_boundary ? "input from a boundary" : "input from elsewhere"));
    vt::nn::testing::LoggedStep step;
    const vt::nn::StepLog& log = step.log;
    at::Tensor x0 = at::randn({64, 48}, at::kDouble).set_requires_grad(true);
    at::Tensor x = vt::nn::testing::AlikeOrNot(x0, from_boundary, "fc");
    const at::Tensor y0 = vt::nn::GeluOp(x);
    CHECK(vt::nn::IsAgreed(y0) == from_boundary);
    const at::Tensor y = vt::nn::Boundary(y0, "gelu");
    const vt::precision::LogRecord& fwd = log.at({"gelu:fwd", 0});
    if (from_boundary) CHECK(fwd.counts().none == y.numel());
    if (!from_boundary) CHECK(fwd.counts().logged() > 0);
    auto grads = torch::autograd::grad({y}, {x}, {at::randn(y.sizes(), at::kDouble)});
    CHECK(vt::nn::IsAgreed(grads[0]) == from_boundary);
  }
}
