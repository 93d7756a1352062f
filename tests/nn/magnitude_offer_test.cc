// How ops hand magnitudes to boundaries (nn/magnitude.h, StepContext offers): a product's
// magnitude offered as factors stays factored when the output spans them (the boundary's
// kernels compute it), and is written out from the same expression when it does not
// (broadcast batch dimensions the factors do not cover); either way an op that asks for it
// as a tensor, a scaled copy of it (attention's scores) and the boundary's rounding and log
// see the same bits as the tensor expression.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "runtime/nn/context.h"
#include "runtime/nn/magnitude.h"

namespace {

using vt::nn::Mode;
using vt::nn::StepContext;

vt::nn::WindowTable CalibratedLike() {
  vt::nn::WindowTable windows;
  for (vt::nn::Window& w : windows.by_kind) w = {0.0625, 0x1p-40};
  return windows;
}

bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.numel() == y.numel() &&
         std::memcmp(x.data_ptr<double>(), y.data_ptr<double>(), x.numel() * sizeof(double)) == 0;
}

at::Tensor Positive(at::IntArrayRef shape) {
  return at::rand(shape, at::kDouble).add_(0.25) *
         at::pow(2.0, at::randint(-8, 9, shape, at::kDouble));
}

}  // namespace

TEST_CASE("product magnitudes stay factored where the output spans them, else are written out",
          "[nn][magnitude]") {
  at::manual_seed(41);
  const vt::nn::WindowTable windows = CalibratedLike();
  vt::nn::StepLog log;
  StepContext c(Mode::kLog, &windows, 1, &log);
  StepContext::Scope scope(&c);
  REQUIRE(c.magnitudes_wanted());

  // A batched product: factors [B, m, 1] and [B, 1, n] span y [B, m, n].
  const at::Tensor row = Positive({6, 40, 1}), col = Positive({6, 1, 30});
  const at::Tensor y = at::randn({6, 40, 30}, at::kDouble) * (row * col);
  vt::nn::OfferProductMagnitude(y, 40, 30, row, col);
  CHECK(c.OfferedMagnitudeFor(y).computed());
  CHECK(SameBits(c.OfferedFor(y), row * col));

  // With a bias per column.
  const at::Tensor bias = Positive({30});
  const at::Tensor y2 = y.clone();
  vt::nn::OfferProductMagnitude(y2, 40, 30, row, col, bias);
  CHECK(c.OfferedMagnitudeFor(y2).computed());
  CHECK(SameBits(c.OfferedFor(y2), row * col + bias));

  // Factors over two different batch dimensions, [2, 1, m, 1] and [1, 3, 1, n]: y [2, 3, m, n]
  // is not [batch, m, n] of either, so the expression is written out.
  const at::Tensor row4 = Positive({2, 1, 40, 1}), col4 = Positive({1, 3, 1, 30});
  const at::Tensor y4 = at::randn({2, 3, 40, 30}, at::kDouble);
  vt::nn::OfferProductMagnitude(y4, 40, 30, row4, col4);
  CHECK_FALSE(c.OfferedMagnitudeFor(y4).computed());
  CHECK(SameBits(c.OfferedFor(y4), (row4 * col4).expand({2, 3, 40, 30})));

  // A scaled copy (attention's scores): fl(m * s), then a second scaling written out.
  const double s = 1.0 / std::sqrt(48.0);
  const at::Tensor scores = y * s;
  vt::nn::MoveOffer(y, scores, s);
  CHECK(c.OfferedMagnitudeFor(scores).computed());
  CHECK(SameBits(c.OfferedFor(scores), (row * col) * s));
  const at::Tensor twice = scores * 3.0;
  vt::nn::MoveOffer(scores, twice, 3.0);
  CHECK_FALSE(c.OfferedMagnitudeFor(twice).computed());
  CHECK(SameBits(c.OfferedFor(twice), ((row * col) * s) * 3.0));
}

TEST_CASE("a boundary rounds with an offered factored magnitude as with the written-out one",
          "[nn][magnitude]") {
  at::manual_seed(42);
  const vt::nn::WindowTable windows = CalibratedLike();
  const at::Tensor row = Positive({4, 64, 1}), col = Positive({4, 1, 48});
  const at::Tensor m = row * col;
  at::Tensor y = at::randn({4, 64, 48}, at::kDouble) * m;
  y.view({-1}).narrow(0, 0, 2000).mul_(0x1p-26);  // cancelled values: wide windows, EXACT

  vt::nn::StepLog factored_log, array_log;
  at::Tensor factored, array;
  {
    StepContext c(Mode::kLog, &windows, 1, &factored_log);
    StepContext::Scope scope(&c);
    const at::Tensor x = y.clone();
    vt::nn::OfferProductMagnitude(x, 64, 48, row, col);
    factored = c.Apply("p:fwd", x, 0);
  }
  {
    StepContext c(Mode::kLog, &windows, 1, &array_log);
    StepContext::Scope scope(&c);
    array = c.Apply("p:fwd", y.clone(), 0, m);
  }
  CHECK(SameBits(factored, array));
  const auto& a = factored_log.at({"p:fwd", 0});
  const auto& b = array_log.at({"p:fwd", 0});
  CHECK(a.counts().logged() == b.counts().logged());
  CHECK(a.counts().exact == b.counts().exact);
  CHECK(a.counts().logged() > 0);
  CHECK(std::memcmp(a.states(), b.states(), static_cast<size_t>(a.size())) == 0);
}

TEST_CASE("a weight gradient's outer-product magnitude stays factored until a second one adds",
          "[nn][magnitude]") {
  at::manual_seed(43);
  const vt::nn::WindowTable windows = CalibratedLike();
  vt::nn::StepLog log;
  StepContext c(Mode::kLog, &windows, 1, &log);
  StepContext::Scope scope(&c);
  const at::Tensor w = at::zeros({12, 5, 3, 3}, at::kDouble);
  const at::Tensor row = Positive({12, 1}), col = Positive({45, 1});
  const at::Tensor outer = row.reshape({-1, 1}) * col.reshape({1, -1});

  // One contribution: computed, and its bits are the product's.
  vt::nn::AddGradOuterMagnitude(w, row, col);
  const vt::precision::Magnitude one = c.TakeGradMagnitudeAsIs(w);
  REQUIRE(one.defined());
  CHECK(one.computed());
  CHECK(SameBits(one.Materialize(w), outer));
  CHECK_FALSE(c.TakeGradMagnitudeAsIs(w).defined());  // taken

  // A second contribution (a tied weight) makes a written-out sum, in either order.
  const at::Tensor other = Positive({12, 5, 3, 3});
  vt::nn::AddGradOuterMagnitude(w, row, col);
  vt::nn::AddGradMagnitude(w, other);
  CHECK(SameBits(c.TakeGradMagnitude(w), outer.reshape(w.sizes()) + other));
  vt::nn::AddGradMagnitude(w, other);
  vt::nn::AddGradOuterMagnitude(w, row, col);
  CHECK(SameBits(c.TakeGradMagnitude(w), other + outer.reshape(w.sizes())));
  vt::nn::AddGradOuterMagnitude(w, row, col);
  vt::nn::AddGradOuterMagnitude(w, row, col);
  CHECK(SameBits(c.TakeGradMagnitude(w), outer + outer));

  // Factors that do not cover the parameter are refused; ones that are not flat float64 are
  // multiplied out.
  CHECK_THROWS_WITH(vt::nn::AddGradOuterMagnitude(w, row, Positive({44, 1})),
                    Catch::Contains("540") && Catch::Contains("528"));
  vt::nn::AddGradOuterMagnitude(w, at::stack({row.view(-1), row.view(-1)}, 1).select(1, 0), col);
  CHECK_FALSE(c.OfferedMagnitudeFor(w).defined());
  const vt::precision::Magnitude strided = c.TakeGradMagnitudeAsIs(w);
  CHECK_FALSE(strided.computed());
  CHECK(SameBits(strided.values(), outer.reshape(w.sizes())));

  // The ":grad" boundary rounds and logs with the computed one as with the written-out one.
  at::Tensor g = at::randn({12, 5, 3, 3}, at::kDouble) * outer.reshape(w.sizes());
  g.view({-1}).narrow(0, 0, 100).mul_(0x1p-26);  // cancelled values: wide windows
  at::Tensor g1 = g.clone(), g2 = g.clone();
  c.ApplyInPlace(
      "w:grad", &g1,
      vt::precision::Magnitude(vt::precision::OuterMagnitude{row, col, {}, false, 1.0, 1, 12, 45}));
  c.ApplyInPlace("v:grad", &g2, outer.reshape(w.sizes()).contiguous());
  CHECK(SameBits(g1, g2));
  const auto& a = log.at({"w:grad", 0});
  const auto& b = log.at({"v:grad", 0});
  CHECK(a.counts().logged() == b.counts().logged());
  CHECK(a.counts().logged() > 0);
  CHECK(std::memcmp(a.states(), b.states(), static_cast<size_t>(a.size())) == 0);
}
