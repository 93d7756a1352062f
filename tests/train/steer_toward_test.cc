// The greedy steering trainer (nn::Tamper kToward, deviation "steer_toward", E10): it moves
// values only the way it wants, and only with entries an auditor accepts. A control shows the
// direction decides which values move.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "runtime/nn/context.h"

namespace {

using vt::nn::Mode;
using vt::nn::StepContext;

// Values of many magnitudes, some on the grid, some exact zeros (a ReLU's backward).
at::Tensor Values(int64_t n) {
  at::manual_seed(7);
  at::Tensor x = at::randn({n}, at::kDouble) * at::pow(2.0, at::randint(-6, 6, {n}, at::kDouble));
  x.narrow(0, 0, n / 8).zero_();
  x.narrow(0, n / 8, n / 8).copy_(x.narrow(0, n / 8, n / 8).to(at::kFloat).to(at::kDouble));
  return x;
}

struct Logged {
  at::Tensor rounded;
  vt::nn::StepLog log;
  int64_t steered = 0;
};

Logged Log(const vt::nn::WindowTable& windows, const std::string& boundary, const at::Tensor& x,
           const at::Tensor* direction) {
  Logged out;
  StepContext c(Mode::kLog, &windows, 1, &out.log);
  if (direction != nullptr) {
    vt::nn::Tamper t;
    t.kind = vt::nn::Tamper::Kind::kToward;
    t.directions[boundary] = *direction;
    c.set_tamper(t);
  }
  out.rounded = c.Apply(boundary, x, 0);
  out.steered = c.stats().at(boundary).steered;
  return out;
}

}  // namespace

TEST_CASE("a greedy steering trainer moves values only its way, with entries the auditor accepts",
          "[train][steer]") {
  const int64_t n = 1 << 14;
  const at::Tensor x = Values(n);
  at::manual_seed(11);
  const at::Tensor want = at::randint(0, 2, {n}, at::kDouble) * 2 - 1;
  for (const auto& [band, alpha] :
       {std::pair<double, double>{0.25, 0.0}, {1.0 / 16, 0.0}, {1.0 / 16, 1e-7}}) {
    INFO("band " << band << " alpha " << alpha);
    vt::nn::WindowTable windows;
    windows.by_kind[static_cast<int>(vt::nn::BoundaryKind::kUpdate)] = {band, alpha};
    const std::string boundary = "w:update";
    const Logged honest = Log(windows, boundary, x, nullptr);
    const Logged steered = Log(windows, boundary, x, &want);

    const at::Tensor moved = steered.rounded.ne(honest.rounded);
    const int64_t count = moved.sum().item<int64_t>();
    CHECK(count > 0);
    CHECK(count == steered.steered);
    // Every moved value went the way the trainer wanted.
    const at::Tensor way = (steered.rounded - honest.rounded) * want;
    CHECK(way.masked_select(moved).gt(0).all().item<bool>());

    // The auditor's own values differ slightly (another machine): every entry is legitimate,
    // the replay gives the steered values bit for bit, and the steered count is within the
    // auditor's steerable count.
    const at::Tensor auditor_x = x + x.abs() * 1e-13 * at::randn_like(x);
    vt::nn::StepLog log = steered.log;
    StepContext a(Mode::kReplay, &windows, 1, &log);
    const at::Tensor replayed = a.Apply(boundary, auditor_x, 0);
    const vt::nn::BoundaryStats& s = a.stats().at(boundary);
    CHECK(s.illegitimate == 0);
    CHECK(at::equal(replayed, steered.rounded));
    CHECK(steered.steered <= s.steerable);

    // Control: the opposite direction moves other values (the direction decides).
    const at::Tensor against = -want;
    const Logged other = Log(windows, boundary, x, &against);
    CHECK_FALSE(at::equal(other.rounded, steered.rounded));
    CHECK((other.rounded - honest.rounded).mul(want).le(0).all().item<bool>());
  }
}

TEST_CASE("a greedy steering trainer has no room at an exact boundary", "[train][steer]") {
  const int64_t n = 4096;
  const at::Tensor x = Values(n);
  const at::Tensor want = at::ones({n}, at::kDouble);
  vt::nn::WindowTable windows;
  windows.by_kind[static_cast<int>(vt::nn::BoundaryKind::kUpdate)] = {0.0, 0.0};
  const Logged honest = Log(windows, "w:update", x, nullptr);
  const Logged steered = Log(windows, "w:update", x, &want);
  CHECK(steered.steered == 0);
  CHECK(at::equal(honest.rounded, steered.rounded));
}
