// The in-place SGD passes (runtime/optim/sgd_kernels.h) give the same bits as the tensor
// expressions they replace (the optimizer's before them), with and without weight decay,
// momentum and Nesterov, on any thread count, and on layouts and dtypes that take the
// expressions instead.
#include "runtime/optim/sgd_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <catch2/catch.hpp>

namespace {

// Gaussian values scaled by 2^k for k spread over [-60, 60]: sums and products meet every
// rounding situation.
at::Tensor Spread(int64_t n, at::ScalarType dtype = at::kDouble) {
  const at::Tensor e = at::randint(-60, 61, {n}, at::kDouble);
  return (at::randn({n}, at::kDouble) * at::pow(2.0, e)).to(dtype);
}

// The optimizer's SGD step as tensor expressions: the new (buf, value).
std::pair<at::Tensor, at::Tensor> Expected(const at::Tensor& buf, const at::Tensor& grad,
                                           const at::Tensor& value, double lr, double momentum,
                                           double weight_decay, bool nesterov) {
  at::Tensor d = weight_decay > 0 ? grad + weight_decay * value : grad;
  at::Tensor b;
  if (momentum > 0) {
    b = buf.clone();
    b.mul_(momentum).add_(d);
    d = nesterov ? d + momentum * b : b;
  }
  return {b, value - lr * d};
}

void CheckStep(const at::Tensor& buf, const at::Tensor& grad, const at::Tensor& value) {
  const double lr = 0.05;
  for (double momentum : {0.0, 0.9}) {
    for (double weight_decay : {0.0, 5e-4}) {
      for (bool nesterov : {false, true}) {
        if (nesterov && momentum == 0) continue;
        INFO("momentum " << momentum << " weight_decay " << weight_decay << " nesterov "
                         << nesterov);
        auto [want_buf, want_value] =
            Expected(buf, grad, value, lr, momentum, weight_decay, nesterov);
        at::Tensor b = momentum > 0 ? buf.clone() : at::Tensor();
        at::Tensor x = value.clone();
        const void* const x_memory = x.data_ptr();
        if (momentum > 0) {
          vt::optim::SgdMomentumInPlace(b, grad, x, momentum, weight_decay);
          CHECK(at::equal(b, want_buf));
        }
        vt::optim::SgdUpdateInPlace(x, grad, b, lr, momentum, weight_decay, nesterov);
        CHECK(x.data_ptr() == x_memory);  // in place
        CHECK(at::equal(x, want_value));
        // The range functions a rounding boundary runs block by block: the same bits, over
        // any split of the elements (contiguous float64 only).
        if (!value.is_contiguous() || value.scalar_type() != at::kDouble || !buf.is_contiguous())
          continue;
        at::Tensor rb = momentum > 0 ? buf.clone() : at::Tensor();
        at::Tensor rx = value.clone();
        const int64_t n = rx.numel();
        for (int64_t begin = 0; begin < n; begin += 2048 + begin % 7) {
          const int64_t end = std::min(n, begin + 2048 + begin % 7);
          if (momentum > 0) {
            vt::optim::SgdMomentumRange(rb.data_ptr<double>(), grad.data_ptr<double>(),
                                        rx.data_ptr<double>(), momentum, weight_decay, begin, end);
          }
        }
        for (int64_t begin = 0; begin < n; begin += 1000) {
          vt::optim::SgdUpdateRange(rx.data_ptr<double>(), grad.data_ptr<double>(),
                                    momentum > 0 ? rb.data_ptr<double>() : nullptr, lr, momentum,
                                    weight_decay, nesterov, begin, std::min(n, begin + 1000));
        }
        if (momentum > 0) CHECK(at::equal(rb, want_buf));
        CHECK(at::equal(rx, want_value));
      }
    }
  }
}

}  // namespace

TEST_CASE("in-place SGD passes equal the tensor expressions bit for bit", "[train][optim]") {
  at::manual_seed(31);
  const int64_t n = 100003;
  const at::Tensor buf = Spread(n), grad = Spread(n), value = Spread(n);
  const int before = at::get_num_threads();
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    INFO("threads " << threads);
    CheckStep(buf, grad, value);
  }
  at::set_num_threads(before);
}

TEST_CASE("SGD passes on other layouts and dtypes take the tensor expressions", "[train][optim]") {
  at::manual_seed(32);
  CheckStep(at::randn({40, 30}, at::kDouble).t(), at::randn({30, 40}, at::kDouble),
            at::randn({30, 40}, at::kDouble));  // a buffer that is not contiguous
  CheckStep(Spread(64, at::kFloat), Spread(64, at::kFloat), Spread(64, at::kFloat));
}
