// Batch norm's fused elementwise passes (runtime/nn/batch_norm.h) against the ATen expressions
// they replace, bit for bit, on plane sizes that do and do not fill the four-lane sums, on 1
// and 3 threads; the layouts that fall back to ATen give the same bits; the magnitudes from the
// backward's pass are BatchNormParamMagnitudes' bits. The fused statistics against their order
// written out value by value, on three profiles (which still differ: the control), and the
// layer against ATen's batch_norm, fused and not.
#include "runtime/nn/batch_norm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <catch2/catch.hpp>
#include <vector>

#include "runtime/nn/autograd.h"
#include "runtime/nn/context.h"
#include "runtime/nn/reduce.h"
#include "runtime/profile/profile.h"
#include "tests/nn/helpers.h"
#include "tests/precision/helpers.h"

namespace {

at::Tensor Ch(const at::Tensor& t) { return t.view({1, -1, 1, 1}); }

// Values with zeros, signed zeros and magnitudes far apart, where a reordered operation shows.
at::Tensor Map(at::IntArrayRef shape) {
  at::Tensor t = at::randn(shape, at::kDouble) * at::exp(4.0 * at::randn(shape, at::kDouble));
  t.view(-1).slice(0, 0, t.numel(), 7).zero_();
  if (t.numel() > 3) t.view(-1)[3] = -0.0;
  return t;
}

const std::vector<std::vector<int64_t>> kShapes = {
    {2, 3, 5, 3}, {1, 2, 1, 1}, {4, 3, 7, 9}, {3, 5, 4, 4}, {2, 4, 0, 3}};

}  // namespace

TEST_CASE("batch norm's fused passes are the ATen expressions' bits", "[nn][batch norm]") {
  vt::precision::testing::ThreadGuard threads;
  at::manual_seed(21);
  for (int n_threads : {1, 3}) {
    at::set_num_threads(n_threads);
    for (const std::vector<int64_t>& shape : kShapes) {
      INFO("shape " << at::IntArrayRef(shape) << ", " << n_threads << " threads");
      const int64_t c = shape[1];
      const at::Tensor g = Map(shape), xhat = Map(shape), centered = Map(shape);
      const at::Tensor w = at::randn({c}, at::kDouble), b = at::randn({c}, at::kDouble);
      const at::Tensor rstd = at::rand({c}, at::kDouble) + 0.5;
      const at::Tensor mean_g = at::randn({c}, at::kDouble);
      const at::Tensor mean_gx = at::randn({c}, at::kDouble);

      const vt::nn::BatchNormOutput out = vt::nn::BatchNormOutputOf(centered, rstd, w, b);
      const at::Tensor want_xhat = centered * Ch(rstd);
      CHECK(at::equal(out.xhat, want_xhat));
      CHECK(at::equal(out.y, want_xhat * Ch(w) + Ch(b)));

      for (bool magnitudes : {false, true}) {
        const vt::nn::BatchNormBackwardTerms t =
            vt::nn::BatchNormBackwardTermsOf(g, xhat, w, magnitudes);
        const at::Tensor gxhat = g * Ch(w);
        CHECK(at::equal(t.gxhat, gxhat));
        CHECK(at::equal(t.gxx, gxhat * xhat));
        CHECK(at::equal(t.gy_xhat, g * xhat));
        CHECK(t.magnitudes.w.defined() == magnitudes);
        if (magnitudes) {
          const vt::nn::ParamMagnitudes want = vt::nn::BatchNormParamMagnitudes(g, xhat);
          CHECK(at::equal(t.magnitudes.w, want.w));
          CHECK(at::equal(t.magnitudes.b, want.b));
        }
      }
      CHECK(at::equal(vt::nn::BatchNormInputGrad(g, xhat, rstd, mean_g, mean_gx),
                      Ch(rstd) * (g - Ch(mean_g) - xhat * Ch(mean_gx))));
    }
  }
}

TEST_CASE("batch norm's fused passes fall back to ATen on other layouts", "[nn][batch norm]") {
  at::manual_seed(22);
  const at::Tensor g = Map({3, 4, 5, 6}), xhat = Map({3, 4, 5, 6});
  const at::Tensor w = at::randn({4}, at::kDouble), b = at::randn({4}, at::kDouble);
  const at::Tensor rstd = at::rand({4}, at::kDouble) + 0.5;
  const at::Tensor mean_g = at::randn({4}, at::kDouble), mean_gx = at::randn({4}, at::kDouble);
  const at::Tensor g_cl = g.contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor x_cl = xhat.contiguous(at::MemoryFormat::ChannelsLast);
  // A strided [C] factor (every other value of a longer tensor).
  const at::Tensor w_strided = at::stack({w, w}, 1).select(1, 0);
  REQUIRE_FALSE(w_strided.is_contiguous());

  const vt::nn::BatchNormOutput out = vt::nn::BatchNormOutputOf(g_cl, rstd, w_strided, b);
  CHECK(at::equal(out.xhat, g * Ch(rstd)));
  CHECK(at::equal(out.y, g * Ch(rstd) * Ch(w) + Ch(b)));
  const vt::nn::BatchNormBackwardTerms t = vt::nn::BatchNormBackwardTermsOf(g_cl, x_cl, w, true);
  CHECK(at::equal(t.gxhat, g * Ch(w)));
  CHECK(at::equal(t.gxx, g * Ch(w) * xhat));
  CHECK(at::equal(t.gy_xhat, g * xhat));
  CHECK(at::allclose(t.magnitudes.w, (g * xhat).abs().sum({0, 2, 3}), 1e-14, 0.0));
  CHECK(at::allclose(t.magnitudes.b, g.abs().sum({0, 2, 3}), 1e-14, 0.0));
  CHECK(at::equal(vt::nn::BatchNormInputGrad(g_cl, x_cl, rstd, mean_g, mean_gx),
                  Ch(rstd) * (g - Ch(mean_g) - xhat * Ch(mean_gx))));
  // float32 maps take ATen too.
  const at::Tensor gf = g.to(at::kFloat), xf = xhat.to(at::kFloat);
  const vt::nn::BatchNormBackwardTerms tf =
      vt::nn::BatchNormBackwardTermsOf(gf, xf, w.to(at::kFloat), false);
  CHECK(at::equal(tf.gy_xhat, gf * xf));
}

TEST_CASE("batch norm of a boundary's output is alike everywhere: zero window, nothing logged",
          "[nn][batch norm]") {
  at::manual_seed(23);
  for (bool from_boundary : {true, false}) {
    INFO((from_boundary ? "input from a boundary" : "input from elsewhere"));
    vt::nn::testing::LoggedStep step;
    const vt::nn::StepLog& log = step.log;
    at::Tensor x0 = at::randn({4, 3, 5, 5}, at::kDouble).set_requires_grad(true);
    at::Tensor x = vt::nn::testing::AlikeOrNot(x0, from_boundary, "conv");
    const at::Tensor w = at::rand({3}, at::kDouble).add_(0.5).set_requires_grad(true);
    const at::Tensor b = at::randn({3}, at::kDouble).set_requires_grad(true);
    const vt::nn::BatchNormResult bn = vt::nn::BatchNormTrainOp(x, w, b, 1e-5, "bn");
    CHECK(vt::nn::IsAgreed(bn.y) == from_boundary);
    const at::Tensor y = vt::nn::Boundary(bn.y, "bn");
    // The output's boundary: an exact one (no entry at all) from a boundary's input; otherwise
    // a window that logs the values near a midpoint.
    const vt::precision::LogRecord& fwd = log.at({"bn:fwd", 0});
    if (from_boundary) {
      CHECK(fwd.counts().logged() == 0);
      CHECK(fwd.counts().none == y.numel());
    }
    // Backward from a gradient every party holds alike (the next boundary's): the input
    // gradient is alike too when the input was.
    at::Tensor gx;
    {
      // Capture gx where the conv boundary's backward receives it.
      const at::Tensor gy = at::randn(y.sizes(), at::kDouble);
      auto grads = torch::autograd::grad({y}, {x}, {gy}, /*retain_graph=*/true);
      gx = grads[0];
    }
    CHECK(vt::nn::IsAgreed(gx) == from_boundary);
    if (!from_boundary) {
      const vt::precision::Magnitude m = step.context.OfferedMagnitudeFor(gx);
      CHECK((m.defined() && m.computed()));
    }
  }
}

namespace {

using vt::nn::testing::CombineInOrder;
using vt::nn::testing::NativeProfileAfter;
using vt::nn::testing::SameBits;

// The fused statistics' order (batch_norm.h), written out one value at a time: per image range
// of the profile, per channel, eight lanes (element j of a plane in lane j mod 8), images in
// order, the lanes added as a tree; the ranges' sums left to right or as a balanced tree.
// term(i) is the value of flat element i.
template <class Term>
std::vector<double> OrderedChannelSums(at::IntArrayRef shape, const vt::SumSplit& split,
                                       Term term) {
  const int64_t c = shape[1], plane = shape[2] * shape[3];
  std::vector<double> out(static_cast<size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) {
    std::vector<double> ranges;
    for (const auto& [first, count] : split.ranges) {
      double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t img = first; img < first + count; ++img) {
        for (int64_t j = 0; j < plane; ++j) lane[j % 8] += term((img * c + ch) * plane + j);
      }
      ranges.push_back(((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                       ((lane[4] + lane[5]) + (lane[6] + lane[7])));
    }
    out[static_cast<size_t>(ch)] = CombineInOrder(ranges, split.pairwise);
  }
  return out;
}

}  // namespace

TEST_CASE("batch norm's fused statistics take the profile's image ranges and eight lanes each",
          "[nn][batch norm]") {
  vt::precision::testing::ThreadGuard threads;
  NativeProfileAfter native;
  at::manual_seed(24);
  const std::vector<std::vector<int64_t>> shapes = {{2, 3, 5, 3}, {1, 2, 1, 1}, {6, 3, 7, 9},
                                                    {9, 5, 4, 4}, {2, 4, 0, 3}, {5, 2, 4, 5}};
  for (const char* profile : {"native", "splitk4", "blocked"}) {
    vt::ActivateProfile(vt::FindProfile(profile));
    for (int n_threads : {1, 3}) {
      at::set_num_threads(n_threads);
      for (const std::vector<int64_t>& shape : shapes) {
        INFO(profile << ", shape " << at::IntArrayRef(shape) << ", " << n_threads << " threads");
        const int64_t c = shape[1];
        const at::Tensor x = Map(shape), g = Map(shape), xhat = Map(shape);
        const at::Tensor w = at::randn({c}, at::kDouble), mean = at::randn({c}, at::kDouble);
        REQUIRE(vt::nn::BatchNormStatisticsFused(x, {&w}));
        const vt::SumSplit split = *vt::FusedSumSplit(shape[0]);
        const double *px = x.data_ptr<double>(), *pg = g.data_ptr<double>();
        const double *ph = xhat.data_ptr<double>(), *pw = w.data_ptr<double>();
        const double* pm = mean.data_ptr<double>();
        const int64_t plane = shape[2] * shape[3];
        auto channel = [&](int64_t i) { return plane == 0 ? 0 : (i / plane) % c; };

        CHECK(SameBits(vt::nn::BatchNormChannelSum(x),
                       OrderedChannelSums(shape, split, [&](int64_t i) { return px[i]; })));
        CHECK(SameBits(vt::nn::BatchNormCenteredSquareSum(x, mean),
                       OrderedChannelSums(shape, split, [&](int64_t i) {
                         const double d = px[i] - pm[channel(i)];
                         return d * d;
                       })));
        for (bool magnitudes : {false, true}) {
          const vt::nn::BatchNormGradSums s = vt::nn::BatchNormGradSumsOf(g, xhat, w, magnitudes);
          auto gh = [&](int64_t i) { return pg[i] * pw[channel(i)]; };
          CHECK(SameBits(s.gxhat, OrderedChannelSums(shape, split, gh)));
          CHECK(SameBits(
              s.gxx, OrderedChannelSums(shape, split, [&](int64_t i) { return gh(i) * ph[i]; })));
          CHECK(SameBits(s.gy_xhat, OrderedChannelSums(shape, split,
                                                       [&](int64_t i) { return pg[i] * ph[i]; })));
          CHECK(SameBits(s.g, OrderedChannelSums(shape, split, [&](int64_t i) { return pg[i]; })));
          // Close to ATen's sums, whatever their order.
          CHECK(at::allclose(s.gy_xhat, (g * xhat).sum({0, 2, 3}), 1e-12,
                             1e-12 * (g * xhat).abs().sum().item<double>()));
          CHECK(s.magnitudes.w.defined() == magnitudes);
          if (magnitudes) {
            const vt::nn::ParamMagnitudes want = vt::nn::BatchNormParamMagnitudes(g, xhat);
            CHECK(at::equal(s.magnitudes.w, want.w));
            CHECK(at::equal(s.magnitudes.b, want.b));
          }
        }
      }
    }
  }
}

TEST_CASE("batch norm's passes from the input and from g are the unfused passes' bits",
          "[nn][batch norm]") {
  vt::precision::testing::ThreadGuard threads;
  at::manual_seed(25);
  for (int n_threads : {1, 3}) {
    at::set_num_threads(n_threads);
    for (const std::vector<int64_t>& shape : kShapes) {
      INFO("shape " << at::IntArrayRef(shape) << ", " << n_threads << " threads");
      const int64_t c = shape[1];
      const at::Tensor x = Map(shape), g = Map(shape), xhat = Map(shape);
      const at::Tensor w = at::randn({c}, at::kDouble), b = at::randn({c}, at::kDouble);
      const at::Tensor mean = at::randn({c}, at::kDouble);
      const at::Tensor rstd = at::rand({c}, at::kDouble) + 0.5;
      const at::Tensor mean_g = at::randn({c}, at::kDouble);
      const at::Tensor mean_gx = at::randn({c}, at::kDouble);
      const vt::nn::BatchNormOutput fused = vt::nn::BatchNormOutputFromInput(x, mean, rstd, w, b);
      const vt::nn::BatchNormOutput want = vt::nn::BatchNormOutputOf(x - Ch(mean), rstd, w, b);
      CHECK(at::equal(fused.xhat, want.xhat));
      CHECK(at::equal(fused.y, want.y));
      CHECK(at::equal(vt::nn::BatchNormInputGradFromG(g, xhat, w, rstd, mean_g, mean_gx),
                      vt::nn::BatchNormInputGrad(g * Ch(w), xhat, rstd, mean_g, mean_gx)));
    }
  }
}

TEST_CASE("batch norm's statistics still differ between profiles (control)", "[nn][batch norm]") {
  NativeProfileAfter native;
  at::manual_seed(26);
  const at::Tensor x = Map({16, 4, 8, 8});
  vt::ActivateProfile(vt::FindProfile("native"));
  const at::Tensor native_sum = vt::nn::BatchNormChannelSum(x);
  for (const char* profile : {"splitk4", "blocked"}) {
    INFO(profile);
    vt::ActivateProfile(vt::FindProfile(profile));
    const at::Tensor sum = vt::nn::BatchNormChannelSum(x);
    CHECK_FALSE(at::equal(sum, native_sum));
    CHECK(at::allclose(sum, native_sum, 1e-12, 1e-12 * x.abs().sum().item<double>()));
  }
}

TEST_CASE("batch norm's layer matches ATen's batch_norm, fused or on other layouts",
          "[nn][batch norm]") {
  NativeProfileAfter native;
  at::manual_seed(27);
  for (const char* profile : {"native", "splitk4", "blocked"}) {
    vt::ActivateProfile(vt::FindProfile(profile));
    for (bool channels_last : {false, true}) {
      INFO(profile << (channels_last ? ", channels last (not fused)" : ", fused"));
      at::Tensor x0 = at::randn({6, 3, 5, 7}, at::kDouble);
      if (channels_last) x0 = x0.contiguous(at::MemoryFormat::ChannelsLast);
      const at::Tensor x = x0.set_requires_grad(true);
      const at::Tensor w = at::rand({3}, at::kDouble).add_(0.5).set_requires_grad(true);
      const at::Tensor b = at::randn({3}, at::kDouble).set_requires_grad(true);
      const vt::nn::BatchNormResult bn = vt::nn::BatchNormTrainOp(x, w, b, 1e-5, "bn");
      const at::Tensor gy = at::randn(bn.y.sizes(), at::kDouble);
      const auto ours = torch::autograd::grad({bn.y}, {x, w, b}, {gy});
      const at::Tensor yr = at::batch_norm(x, w, b, {}, {}, /*training=*/true, 0.1, 1e-5, false);
      const auto ref = torch::autograd::grad({yr}, {x, w, b}, {gy});
      CHECK(at::allclose(bn.y, yr, 1e-12, 1e-12));
      for (int i = 0; i < 3; ++i) CHECK(at::allclose(ours[i], ref[i], 1e-10, 1e-10));
    }
  }
}
