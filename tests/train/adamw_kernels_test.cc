// The fused, in-place AdamW passes (runtime/optim/adamw_kernels.h) give the same bits as the
// tensor expressions they replace, on values of many sizes (including tiny and huge moments),
// on any thread count, and on the layouts and dtypes that take the expressions instead.
#include "runtime/optim/adamw_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <catch2/catch.hpp>

namespace {

// Gaussian values scaled by 2^k for k spread over [-60, 60], so that the sums and quotients
// meet every rounding situation (and exp_avg_sq values far apart in size).
at::Tensor Spread(int64_t n, at::ScalarType dtype = at::kDouble) {
  const at::Tensor e = at::randint(-60, 61, {n}, at::kDouble);
  return (at::randn({n}, at::kDouble) * at::pow(2.0, e)).to(dtype);
}

}  // namespace

TEST_CASE("fused AdamW passes equal the tensor expressions bit for bit", "[train][optim]") {
  at::manual_seed(21);
  const int64_t n = 100003;
  const at::Tensor m = Spread(n), g = Spread(n), value = Spread(n);
  const at::Tensor v = Spread(n).abs();
  const double b1 = 0.9, b2 = 0.999, lr = 3e-4, eps = 1e-8, c1 = 1.0 - 0.9 * 0.9,
               c2 = 1.0 - 0.999 * 0.999;
  const int before = at::get_num_threads();
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    INFO("threads " << threads);
    at::Tensor m2 = m.clone(), v2 = v.clone();
    const void* const m_memory = m2.data_ptr();
    vt::optim::AdamWMomentsInPlace(m2, v2, g, b1, b2);
    CHECK(m2.data_ptr() == m_memory);  // in place: the same memory
    CHECK(at::equal(m2, b1 * m + (1.0 - b1) * g));
    CHECK(at::equal(v2, b2 * v + (1.0 - b2) * g * g));
    // The range functions a rounding boundary runs block by block (one output each).
    at::Tensor m3 = m.clone(), v3 = v.clone();
    for (int64_t begin = 0; begin < n; begin += 2048) {
      const int64_t end = std::min(n, begin + 2048);
      vt::optim::AdamWFirstMomentRange(m3.data_ptr<double>(), g.data_ptr<double>(), b1, begin, end);
      vt::optim::AdamWSecondMomentRange(v3.data_ptr<double>(), g.data_ptr<double>(), b2, begin,
                                        end);
    }
    CHECK(at::equal(m3, m2));
    CHECK(at::equal(v3, v2));
    for (double decay : {1.0, 1.0 - lr * 0.01}) {
      const at::Tensor want =
          (decay == 1.0 ? value : value * decay) - lr * (m2 / c1) / (at::sqrt(v2 / c2) + eps);
      at::Tensor x = value.clone();
      vt::optim::AdamWUpdateInPlace(x, m2, v2, lr, c1, c2, eps, decay);
      CHECK(at::equal(x, want));
      at::Tensor y = value.clone();
      for (int64_t begin = 0; begin < n; begin += 3001) {
        vt::optim::AdamWUpdateRange(y.data_ptr<double>(), m2.data_ptr<double>(),
                                    v2.data_ptr<double>(), lr, c1, c2, eps, decay, begin,
                                    std::min(n, begin + 3001));
      }
      CHECK(at::equal(y, want));
    }
  }
  at::set_num_threads(before);
}

TEST_CASE("AdamW passes on other layouts and dtypes take the tensor expressions",
          "[train][optim]") {
  at::manual_seed(22);
  const at::Tensor m = at::randn({40, 30}, at::kDouble).t();  // not contiguous
  const at::Tensor v = at::rand({30, 40}, at::kDouble), g = at::randn({30, 40}, at::kDouble);
  at::Tensor m2 = m.clone(), v2 = v.clone();
  vt::optim::AdamWMomentsInPlace(m2, v2, g, 0.8, 0.99);
  CHECK(at::equal(m2, 0.8 * m + (1.0 - 0.8) * g));
  CHECK(at::equal(v2, 0.99 * v + (1.0 - 0.99) * g * g));
  const at::Tensor mf = at::randn({64}, at::kFloat), vf = at::rand({64}, at::kFloat);
  const at::Tensor gf = at::randn({64}, at::kFloat);
  at::Tensor mf2 = mf.clone(), vf2 = vf.clone();
  vt::optim::AdamWMomentsInPlace(mf2, vf2, gf, 0.9, 0.999);
  CHECK(mf2.scalar_type() == at::kFloat);
  CHECK(at::equal(mf2, 0.9 * mf + (1.0 - 0.9) * gf));
  at::Tensor xf = mf.clone();
  vt::optim::AdamWUpdateInPlace(xf, mf2, vf2, 1e-3, 0.1, 0.001, 1e-8, 1.0);
  CHECK(at::equal(xf, mf - 1e-3 * (mf2 / 0.1) / (at::sqrt(vf2 / 0.001) + 1e-8)));
}
