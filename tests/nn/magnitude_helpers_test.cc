// The fused magnitude helpers (runtime/nn/magnitude.h) against the ATen expressions they
// replace, up to the order of the sums (relative 1e-14): the row and column norms of product
// magnitudes, alone or several in one pass (NormsOf, with sums of absolute values), for
// contiguous, transposed, sliced, expanded and batched tensors, empty
// dimensions and float32 (through ATen), the same bits whatever the thread count; and the
// batch-norm magnitudes on contiguous maps and on the layouts that fall back to ATen.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <catch2/catch.hpp>

#include "runtime/nn/magnitude.h"
#include "tests/precision/helpers.h"

namespace {

void CheckAgainstAten(const at::Tensor& t) {
  const at::Tensor rows = vt::nn::RowNorms(t), cols = vt::nn::ColNorms(t);
  const at::Tensor want_rows = at::linalg_vector_norm(t, 2, {-1}, true);
  const at::Tensor want_cols = at::linalg_vector_norm(t, 2, {-2}, true);
  REQUIRE(rows.sizes() == want_rows.sizes());
  REQUIRE(cols.sizes() == want_cols.sizes());
  CHECK(at::allclose(rows, want_rows, 1e-14, 0.0));
  CHECK(at::allclose(cols, want_cols, 1e-14, 0.0));
}

}  // namespace

TEST_CASE("magnitude norms equal ATen's vector norms on every layout", "[nn][magnitude]") {
  at::manual_seed(7);
  const at::Tensor a = at::randn({37, 53}, at::kDouble);
  CheckAgainstAten(a);
  CheckAgainstAten(a.t());                                          // transposed, contiguous under
  CheckAgainstAten(a.slice(1, 3, 40, 2));                           // strided
  CheckAgainstAten(at::randn({5, 1}, at::kDouble).expand({5, 9}));  // stride 0
  const at::Tensor b = at::randn({3, 4, 17, 6}, at::kDouble);
  CheckAgainstAten(b);                    // batched
  CheckAgainstAten(b.transpose(-1, -2));  // batched, transposed
  CheckAgainstAten(b.transpose(1, 2));    // batched, permuted
  CheckAgainstAten(at::randn({1, 1}, at::kDouble));
  CheckAgainstAten(at::randn({8, 33}, at::kFloat));  // not float64: ATen's path
  for (const auto& shape : std::vector<std::vector<int64_t>>{{0, 4}, {4, 0}, {2, 0, 3}}) {
    CheckAgainstAten(at::zeros(shape, at::kDouble));
  }
}

TEST_CASE("magnitude norms are the same bits on any thread count", "[nn][magnitude]") {
  at::manual_seed(8);
  const at::Tensor a = at::randn({300, 700}, at::kDouble);
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor r1 = vt::nn::RowNorms(a), c1 = vt::nn::ColNorms(a);
  at::set_num_threads(2);
  const at::Tensor r2 = vt::nn::RowNorms(a), c2 = vt::nn::ColNorms(a);
  at::set_num_threads(before);
  CHECK(at::equal(r1, r2));
  CHECK(at::equal(c1, c2));
}

TEST_CASE("one pass of NormsOf gives every sum its ATen expression gives", "[nn][magnitude]") {
  at::manual_seed(11);
  const unsigned all =
      vt::nn::kRowNorms | vt::nn::kColNorms | vt::nn::kRowAbsSums | vt::nn::kColAbsSums;
  // Tiles of 128 rows by 512 columns: shapes across their edges, with tails of fewer than 8
  // columns; transposed, batched and strided layouts; float32 through ATen.
  const at::Tensor big = at::randn({300, 1100}, at::kDouble);
  const at::Tensor batched = at::randn({3, 130, 515}, at::kDouble);
  std::vector<at::Tensor> cases = {big,
                                   big.t(),
                                   at::randn({128, 512}, at::kDouble),
                                   at::randn({129, 7}, at::kDouble),
                                   at::randn({1, 513}, at::kDouble),
                                   batched,
                                   batched.transpose(-1, -2),
                                   big.slice(1, 5, 900, 3),
                                   at::randn({40, 33}, at::kFloat),
                                   at::zeros({0, 5}, at::kDouble)};
  for (const at::Tensor& t : cases) {
    INFO("shape " << t.sizes() << (t.is_contiguous() ? "" : ", not contiguous"));
    for (unsigned wanted = 1; wanted <= all; ++wanted) {
      INFO("wanted " << wanted);
      const vt::nn::MatrixNorms n = vt::nn::NormsOf(t, wanted);
      CHECK(n.rows.defined() == ((wanted & vt::nn::kRowNorms) != 0));
      CHECK(n.cols.defined() == ((wanted & vt::nn::kColNorms) != 0));
      CHECK(n.row_abs.defined() == ((wanted & vt::nn::kRowAbsSums) != 0));
      CHECK(n.col_abs.defined() == ((wanted & vt::nn::kColAbsSums) != 0));
      const double tol = t.scalar_type() == at::kFloat ? 1e-6 : 1e-14;
      auto same = [&](const at::Tensor& got, const at::Tensor& want) {
        REQUIRE(got.sizes() == want.sizes());
        CHECK(at::allclose(got, want, tol, 0.0));
      };
      if (n.rows.defined()) same(n.rows, at::linalg_vector_norm(t, 2, {-1}, true));
      if (n.cols.defined()) same(n.cols, at::linalg_vector_norm(t, 2, {-2}, true));
      if (n.row_abs.defined()) same(n.row_abs, t.abs().sum(-1));
      if (n.col_abs.defined()) same(n.col_abs, t.abs().sum(-2));
    }
  }
}

TEST_CASE("NormsOf is the same bits on any thread count", "[nn][magnitude]") {
  at::manual_seed(12);
  const unsigned all =
      vt::nn::kRowNorms | vt::nn::kColNorms | vt::nn::kRowAbsSums | vt::nn::kColAbsSums;
  for (const at::Tensor& t :
       {at::randn({300, 1100}, at::kDouble), at::randn({2, 260, 600}, at::kDouble)}) {
    const int before = at::get_num_threads();
    at::set_num_threads(1);
    const vt::nn::MatrixNorms one = vt::nn::NormsOf(t, all);
    at::set_num_threads(2);
    const vt::nn::MatrixNorms two = vt::nn::NormsOf(t, all);
    at::set_num_threads(before);
    CHECK(at::equal(one.rows, two.rows));
    CHECK(at::equal(one.cols, two.cols));
    CHECK(at::equal(one.row_abs, two.row_abs));
    CHECK(at::equal(one.col_abs, two.col_abs));
    // Asked alone or together, a sum is the same bits.
    CHECK(at::equal(vt::nn::NormsOf(t, vt::nn::kColNorms).cols, one.cols));
    CHECK(at::equal(vt::nn::RowNorms(t), one.rows));
  }
}

TEST_CASE("batch-norm magnitudes equal their ATen expressions", "[nn][magnitude]") {
  at::manual_seed(9);
  const at::Tensor g = at::randn({3, 5, 4, 6}, at::kDouble);
  const at::Tensor xhat = at::randn({3, 5, 4, 6}, at::kDouble);
  const at::Tensor w = at::randn({5}, at::kDouble), rstd = at::rand({5}, at::kDouble);
  const at::Tensor mean_g = at::randn({5}, at::kDouble), mean_gx = at::randn({5}, at::kDouble);
  auto ch = [](const at::Tensor& t) { return t.view({1, -1, 1, 1}); };
  // Contiguous, then channels-last (not contiguous: ATen's path).
  for (bool channels_last : {false, true}) {
    const at::Tensor gg = channels_last ? g.contiguous(at::MemoryFormat::ChannelsLast) : g;
    const at::Tensor xx = channels_last ? xhat.contiguous(at::MemoryFormat::ChannelsLast) : xhat;
    INFO((channels_last ? "channels last" : "contiguous"));
    CHECK(at::allclose(vt::nn::ChannelAbsSum(gg), g.abs().sum({0, 2, 3}), 1e-14, 0.0));
    CHECK(at::allclose(vt::nn::ChannelAbsSum(gg, xx), (g * xhat).abs().sum({0, 2, 3}), 1e-14, 0.0));
    CHECK(at::equal(vt::nn::AbsPlusChannel(gg, w), g.abs() + ch(w).abs()));
    const at::Tensor want =
        ch(rstd) * ((g * ch(w)).abs() + ch(mean_g).abs() + (xhat * ch(mean_gx)).abs());
    // The backward magnitudes: the input gradient's is the expression's bits, the channel sums
    // (one pass) ChannelAbsSum's.
    const vt::precision::Magnitude gx =
        vt::nn::BatchNormInputGradMagnitude(gg, xx, w, rstd, mean_g, mean_gx);
    CHECK(at::equal(gx.Materialize(g), want));
    const vt::nn::ParamMagnitudes params = vt::nn::BatchNormParamMagnitudes(gg, xx);
    CHECK(at::equal(params.w, vt::nn::ChannelAbsSum(gg, xx)));
    CHECK(at::equal(params.b, vt::nn::ChannelAbsSum(gg)));
  }
}

TEST_CASE("a batch norm's backward magnitudes equal their expressions, any plane size",
          "[nn][magnitude]") {
  at::manual_seed(13);
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{2, 3, 5, 3}, {1, 2, 1, 1}, {4, 3, 7, 9}}) {
    INFO("shape " << at::IntArrayRef(shape));
    const at::Tensor g = at::randn(shape, at::kDouble), xhat = at::randn(shape, at::kDouble);
    const int64_t c = shape[1];
    const at::Tensor w = at::randn({c}, at::kDouble), rstd = at::rand({c}, at::kDouble);
    const at::Tensor mean_g = at::randn({c}, at::kDouble), mean_gx = at::randn({c}, at::kDouble);
    const vt::precision::Magnitude gx =
        vt::nn::BatchNormInputGradMagnitude(g, xhat, w, rstd, mean_g, mean_gx);
    auto ch = [](const at::Tensor& t) { return t.view({1, -1, 1, 1}); };
    CHECK(at::equal(gx.Materialize(g), ch(rstd) * ((g * ch(w)).abs() + ch(mean_g).abs() +
                                                   (xhat * ch(mean_gx)).abs())));
    CHECK(gx.computed());
    const vt::nn::ParamMagnitudes params = vt::nn::BatchNormParamMagnitudes(g, xhat);
    CHECK(at::equal(params.w, vt::nn::ChannelAbsSum(g, xhat)));
    CHECK(at::equal(params.b, vt::nn::ChannelAbsSum(g)));
    CHECK(at::allclose(params.w, (g * xhat).abs().sum({0, 2, 3}), 1e-14, 0.0));
    CHECK(at::allclose(params.b, g.abs().sum({0, 2, 3}), 1e-14, 0.0));
    // The backward statistics' magnitudes taken from them, |w| sum |g| and |w| sum |g xhat|,
    // are the sums of their terms' sizes.
    CHECK(at::allclose(w.abs() * params.b, (g * ch(w)).abs().sum({0, 2, 3}), 1e-14, 0.0));
    CHECK(at::allclose(w.abs() * params.w, (g * ch(w) * xhat).abs().sum({0, 2, 3}), 1e-14, 0.0));
  }
}

TEST_CASE("layer-norm magnitudes equal their ATen expressions, on any layout and thread count",
          "[nn][magnitude]") {
  at::manual_seed(12);
  const at::Tensor x = at::randn({3, 70, 33}, at::kDouble);
  const at::Tensor y = at::randn({3, 70, 33}, at::kDouble);
  const at::Tensor col = at::randn({33}, at::kDouble);
  const at::Tensor r = at::rand({3, 70, 1}, at::kDouble), q = at::randn({3, 70, 1}, at::kDouble);
  for (const at::Tensor& t : {x, x.transpose(0, 1), x[1], x.to(at::kFloat)}) {
    const at::Tensor want_mean = t.abs().sum(-1, true) / static_cast<double>(t.size(-1));
    CHECK(at::allclose(vt::nn::RowAbsMean(t), want_mean, 1e-14, 0.0));
    CHECK(vt::nn::RowAbsMean(t).sizes() == want_mean.sizes());
    const at::Tensor want_cols = t.abs().reshape({-1, t.size(-1)}).sum(0);
    CHECK(at::allclose(vt::nn::ColumnAbsSum(t), want_cols, 1e-14, 0.0));
    CHECK(vt::nn::ColumnAbsSum(t).sizes() == want_cols.sizes());
  }
  // The elementwise ones bit for bit, fused or through ATen (transposed, float32).
  CHECK(at::equal(vt::nn::AbsPlusColumn(x, col), x.abs() + col.abs()));
  CHECK(at::equal(vt::nn::AbsPlusColumn(x.transpose(0, 1), col),
                  x.transpose(0, 1).abs() + col.abs()));
  CHECK(at::equal(vt::nn::RowAbsSum3(r, x, q, y), r * ((x.abs() + q.abs()) + y.abs())));
  const at::Tensor xf = x.to(at::kFloat), yf = y.to(at::kFloat);
  CHECK(at::equal(vt::nn::RowAbsSum3(r.to(at::kFloat), xf, q.to(at::kFloat), yf),
                  r.to(at::kFloat) * ((xf.abs() + q.to(at::kFloat).abs()) + yf.abs())));
  // Factors of the wrong size fall back to the broadcasting expression.
  const at::Tensor r1 = at::rand({1, 70, 1}, at::kDouble);
  CHECK(at::equal(vt::nn::RowAbsSum3(r1, x, q, y), r1 * ((x.abs() + q.abs()) + y.abs())));
  // Empty tensors.
  const at::Tensor e = at::zeros({0, 33}, at::kDouble);
  CHECK(vt::nn::AbsPlusColumn(e, col).numel() == 0);
  CHECK(vt::nn::RowAbsSum3(at::zeros({0, 1}, at::kDouble), e, at::zeros({0, 1}, at::kDouble), e)
            .numel() == 0);
  CHECK(at::equal(vt::nn::ColumnAbsSum(e), at::zeros({33}, at::kDouble)));
  // The same bits on one thread and on three.
  const at::Tensor big = at::randn({64, 512, 40}, at::kDouble);
  vt::precision::testing::ThreadGuard restore_threads;
  at::Tensor means[2], sums[2];
  for (int k = 0; k < 2; ++k) {
    at::set_num_threads(k == 0 ? 1 : 3);
    means[k] = vt::nn::RowAbsMean(big);
    sums[k] = vt::nn::ColumnAbsSum(big);
  }
  CHECK(at::equal(means[0], means[1]));
  CHECK(at::equal(sums[0], sums[1]));
}
