// Layer norm's fused passes (runtime/nn/layer_norm.h): the sums against their order written
// out value by value on three profiles (which still differ: the control), on 1 and 3 threads
// and row lengths that do and do not fill the eight lanes; the elementwise passes against the
// expressions they replace, bit for bit; the layer against ATen's layer_norm, fused and not.
#include "runtime/nn/layer_norm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <catch2/catch.hpp>
#include <vector>

#include "runtime/nn/magnitude.h"
#include "runtime/nn/reduce.h"
#include "runtime/profile/profile.h"
#include "tests/nn/helpers.h"
#include "tests/precision/helpers.h"

namespace {

using vt::nn::testing::CombineInOrder;
using vt::nn::testing::NativeProfileAfter;
using vt::nn::testing::SameBits;

// Values with zeros, a signed zero and magnitudes far apart, where a reordered sum shows.
at::Tensor Rows(at::IntArrayRef shape) {
  at::Tensor t = at::randn(shape, at::kDouble) * at::exp(4.0 * at::randn(shape, at::kDouble));
  t.view(-1).slice(0, 0, t.numel(), 7).zero_();
  if (t.numel() > 3) t.view(-1)[3] = -0.0;
  return t;
}

// A row sum's order: the columns in the profile's ranges, eight lanes per range (column j of
// the range in lane j mod 8), the lanes as a tree. term(r, j) is the value at row r, column j.
template <class Term>
std::vector<double> OrderedRowSums(int64_t rows, int64_t d, Term term) {
  const vt::SumSplit split = *vt::FusedSumSplit(d);
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> parts;
    for (const auto& [first, count] : split.ranges) {
      double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t j = 0; j < count; ++j) lane[j % 8] += term(r, first + j);
      parts.push_back(((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                      ((lane[4] + lane[5]) + (lane[6] + lane[7])));
    }
    out.push_back(CombineInOrder(parts, split.pairwise));
  }
  return out;
}

// A column sum's order: the rows in the profile's ranges, row after row from zero.
template <class Term>
std::vector<double> OrderedColumnSums(int64_t rows, int64_t d, Term term) {
  const vt::SumSplit split = *vt::FusedSumSplit(rows);
  std::vector<double> out;
  for (int64_t j = 0; j < d; ++j) {
    std::vector<double> parts;
    for (const auto& [first, count] : split.ranges) {
      double s = 0.0;
      for (int64_t r = first; r < first + count; ++r) s += term(r, j);
      parts.push_back(s);
    }
    out.push_back(CombineInOrder(parts, split.pairwise));
  }
  return out;
}

const std::vector<std::vector<int64_t>> kShapes = {{5, 13}, {2, 3, 8}, {7, 1},   {4, 35},
                                                   {0, 5},  {3, 0},    {33, 64}, {3, 300}};

}  // namespace

TEST_CASE("layer norm's fused sums take the profile's ranges and eight lanes each",
          "[nn][layer norm]") {
  vt::precision::testing::ThreadGuard threads;
  NativeProfileAfter native;
  at::manual_seed(31);
  for (const char* profile : {"native", "splitk4", "blocked"}) {
    vt::ActivateProfile(vt::FindProfile(profile));
    for (int n_threads : {1, 3}) {
      at::set_num_threads(n_threads);
      for (const std::vector<int64_t>& shape : kShapes) {
        INFO(profile << ", shape " << at::IntArrayRef(shape) << ", " << n_threads << " threads");
        const int64_t d = shape.back(),
                      rows = at::IntArrayRef(shape).size() == 3 ? shape[0] * shape[1] : shape[0];
        std::vector<int64_t> row_shape = shape;
        row_shape.back() = 1;
        const at::Tensor x = Rows(shape), g = Rows(shape), xhat = Rows(shape);
        const at::Tensor w = at::randn({d}, at::kDouble), mean = at::randn(row_shape, at::kDouble);
        REQUIRE(vt::nn::LayerNormFused(x, {&w}));
        const double *px = x.data_ptr<double>(), *pg = g.data_ptr<double>();
        const double *ph = xhat.data_ptr<double>(), *pw = w.data_ptr<double>();
        const double* pm = mean.data_ptr<double>();
        auto at_rc = [&](const double* p, int64_t r, int64_t j) { return p[r * d + j]; };

        const at::Tensor sum = vt::nn::LayerNormRowSum(x);
        CHECK(sum.sizes() == at::IntArrayRef(row_shape));
        CHECK(SameBits(
            sum, OrderedRowSums(rows, d, [&](int64_t r, int64_t j) { return at_rc(px, r, j); })));
        CHECK(SameBits(vt::nn::LayerNormCenteredSquareSum(x, mean),
                       OrderedRowSums(rows, d, [&](int64_t r, int64_t j) {
                         const double v = at_rc(px, r, j) - pm[r];
                         return v * v;
                       })));
        const vt::nn::LayerNormRowSums s = vt::nn::LayerNormGradRowSums(g, xhat, w);
        auto gh = [&](int64_t r, int64_t j) { return at_rc(pg, r, j) * pw[j]; };
        CHECK(SameBits(s.gxhat, OrderedRowSums(rows, d, gh)));
        CHECK(SameBits(s.gxx, OrderedRowSums(rows, d, [&](int64_t r, int64_t j) {
                         return gh(r, j) * at_rc(ph, r, j);
                       })));
        const vt::nn::LayerNormColumnSums c = vt::nn::LayerNormGradColumnSums(g, xhat);
        CHECK(SameBits(c.gy_xhat, OrderedColumnSums(rows, d, [&](int64_t r, int64_t j) {
                         return at_rc(pg, r, j) * at_rc(ph, r, j);
                       })));
        CHECK(SameBits(c.g, OrderedColumnSums(
                                rows, d, [&](int64_t r, int64_t j) { return at_rc(pg, r, j); })));
        // Close to ATen's sums, whatever their order.
        CHECK(at::allclose(sum, x.sum(-1, true), 1e-12, 1e-12 * x.abs().sum().item<double>()));
      }
    }
  }
}

TEST_CASE("layer norm's passes from the input and from g are the expressions' bits",
          "[nn][layer norm]") {
  vt::precision::testing::ThreadGuard threads;
  at::manual_seed(32);
  for (int n_threads : {1, 3}) {
    at::set_num_threads(n_threads);
    for (const std::vector<int64_t>& shape : kShapes) {
      INFO("shape " << at::IntArrayRef(shape) << ", " << n_threads << " threads");
      std::vector<int64_t> row_shape = shape;
      row_shape.back() = 1;
      const int64_t d = shape.back();
      const at::Tensor x = Rows(shape), g = Rows(shape), xhat = Rows(shape);
      const at::Tensor w = at::randn({d}, at::kDouble), b = at::randn({d}, at::kDouble);
      const at::Tensor mean = at::randn(row_shape, at::kDouble);
      const at::Tensor rstd = at::rand(row_shape, at::kDouble) + 0.5;
      const at::Tensor mean_g = at::randn(row_shape, at::kDouble);
      const at::Tensor mean_gx = at::randn(row_shape, at::kDouble);
      const vt::nn::LayerNormOutput out = vt::nn::LayerNormOutputFromInput(x, mean, rstd, w, b);
      const at::Tensor want_xhat = (x - mean) * rstd;
      CHECK(at::equal(out.xhat, want_xhat));
      CHECK(at::equal(out.y, want_xhat * w + b));
      CHECK(at::equal(vt::nn::LayerNormInputGrad(g, xhat, w, rstd, mean_g, mean_gx),
                      rstd * (g * w - mean_g - xhat * mean_gx)));
    }
  }
}

TEST_CASE("layer norm's sums still differ between profiles (control)", "[nn][layer norm]") {
  NativeProfileAfter native;
  at::manual_seed(33);
  const at::Tensor x = Rows({64, 256});
  vt::ActivateProfile(vt::FindProfile("native"));
  const at::Tensor rows = vt::nn::LayerNormRowSum(x);
  const at::Tensor cols = vt::nn::LayerNormGradColumnSums(x, x).g;
  for (const char* profile : {"splitk4", "blocked"}) {
    INFO(profile);
    vt::ActivateProfile(vt::FindProfile(profile));
    CHECK_FALSE(at::equal(vt::nn::LayerNormRowSum(x), rows));
    CHECK_FALSE(at::equal(vt::nn::LayerNormGradColumnSums(x, x).g, cols));
  }
}

TEST_CASE("layer norm's layer matches ATen's layer_norm, fused or not", "[nn][layer norm]") {
  NativeProfileAfter native;
  at::manual_seed(34);
  for (const char* profile : {"native", "splitk4", "blocked"}) {
    vt::ActivateProfile(vt::FindProfile(profile));
    for (bool strided : {false, true}) {
      INFO(profile << (strided ? ", strided input (not fused)" : ", fused"));
      at::Tensor x0 = at::randn({6, 5, 40}, at::kDouble);
      if (strided) x0 = x0.transpose(0, 1);
      REQUIRE(vt::nn::LayerNormFused(x0, {}) != strided);
      const at::Tensor x = x0.set_requires_grad(true);
      const at::Tensor w = at::rand({40}, at::kDouble).add_(0.5).set_requires_grad(true);
      const at::Tensor b = at::randn({40}, at::kDouble).set_requires_grad(true);
      const at::Tensor y = vt::nn::LayerNormOp(x, w, b, 1e-5, "ln");
      const at::Tensor gy = at::randn(y.sizes(), at::kDouble);
      const auto ours = torch::autograd::grad({y}, {x, w, b}, {gy});
      const at::Tensor yr = at::layer_norm(x, {40}, w, b, 1e-5);
      const auto ref = torch::autograd::grad({yr}, {x, w, b}, {gy});
      CHECK(at::allclose(y, yr, 1e-12, 1e-12));
      for (int i = 0; i < 3; ++i) CHECK(at::allclose(ours[i], ref[i], 1e-10, 1e-10));
    }
  }
}

TEST_CASE("layer norm's magnitude sums are RowAbsMean's and ColumnAbsSum's bits in one pass",
          "[nn][layer norm]") {
  // The backward's magnitudes (ROUNDING.md: the statistics' sums of |g w| and |g w xhat|, the
  // parameters' sums of |g xhat| and |g|) and the forward's mean's (sum |x|) were the
  // products in memory and NormsOf's passes over them; the fused pass must give the same
  // bits on every profile and thread count: rows over several column tiles and with a tail
  // past the last group of eight, columns over several row tiles.
  vt::precision::testing::ThreadGuard threads;
  NativeProfileAfter native;
  at::manual_seed(34);
  const std::vector<std::vector<int64_t>> shapes = {{5, 13},  {2, 3, 8},  {7, 1},         {33, 64},
                                                    {3, 300}, {130, 700}, {2, 129, 1030}, {129, 3}};
  for (const char* profile : {"native", "splitk4", "blocked"}) {
    vt::ActivateProfile(vt::FindProfile(profile));
    for (int n_threads : {1, 3}) {
      at::set_num_threads(n_threads);
      for (const std::vector<int64_t>& shape : shapes) {
        INFO(profile << ", shape " << at::IntArrayRef(shape) << ", " << n_threads << " threads");
        const int64_t d = shape.back();
        const at::Tensor g = Rows(shape), xhat = Rows(shape), x = Rows(shape);
        const at::Tensor w = at::randn({d}, at::kDouble);
        const vt::nn::LayerNormGradAbsSums s = vt::nn::LayerNormGradAbsSumsOf(g, xhat, w);
        std::vector<int64_t> row_shape = shape;
        row_shape.back() = 1;
        const at::Tensor gw = g * w;
        CHECK(vt::precision::testing::SameBits(s.row_gxhat.view(row_shape) / static_cast<double>(d),
                                               vt::nn::RowAbsMean(gw)));
        CHECK(vt::precision::testing::SameBits(s.row_gxx.view(row_shape) / static_cast<double>(d),
                                               vt::nn::RowAbsMean(gw * xhat)));
        CHECK(vt::precision::testing::SameBits(s.col_gy_xhat, vt::nn::ColumnAbsSum(g * xhat)));
        CHECK(vt::precision::testing::SameBits(s.col_g, vt::nn::ColumnAbsSum(g)));
        const vt::nn::LayerNormRowSumAndAbs f = vt::nn::LayerNormRowSumAndAbsOf(x);
        CHECK(vt::precision::testing::SameBits(f.sum, vt::nn::LayerNormRowSum(x)));
        CHECK(vt::precision::testing::SameBits(f.abs / static_cast<double>(d),
                                               vt::nn::RowAbsMean(x)));
      }
    }
  }
  // Control: ATen's own sums of the same terms take another order, and other bits.
  const at::Tensor g = Rows({130, 1030}), xhat = Rows({130, 1030});
  const at::Tensor w = at::randn({1030}, at::kDouble);
  const vt::nn::LayerNormGradAbsSums s = vt::nn::LayerNormGradAbsSumsOf(g, xhat, w);
  CHECK_FALSE(vt::precision::testing::SameBits(s.row_gxx, (g * w * xhat).abs().sum(-1)));
  CHECK_FALSE(vt::precision::testing::SameBits(s.col_g, g.abs().sum(0)));
}
