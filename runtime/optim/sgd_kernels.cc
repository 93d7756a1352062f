#include "runtime/optim/sgd_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "runtime/tensor/layout.h"

namespace vt::optim {
namespace {

// Elementwise passes are split into chunks this long over LibTorch's threads.
constexpr int64_t kGrain = int64_t{1} << 15;

// Compiled for AVX-512, AVX2 and plain x86-64, picked at load time; -ffp-contract=off keeps
// every product and sum separate, so each variant gives the same bits.
#define VT_ELEMENTWISE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// In place: each element is read, then written.
template <bool kDecay>
VT_ELEMENTWISE_CLONES void MomentumLoop(double* buf, const double* g, const double* x,
                                        double momentum, double weight_decay, int64_t begin,
                                        int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const double d = kDecay ? g[i] + weight_decay * x[i] : g[i];
    buf[i] = buf[i] * momentum + d;
  }
}

// kStep: 0 = d, 1 = buf, 2 = d + momentum * buf (Nesterov).
template <bool kDecay, int kStep>
VT_ELEMENTWISE_CLONES void UpdateLoop(double* x, const double* g, const double* buf, double lr,
                                      double momentum, double weight_decay, int64_t begin,
                                      int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    double e;
    if (kStep == 1) {
      e = buf[i];
    } else {
      const double d = kDecay ? g[i] + weight_decay * x[i] : g[i];
      e = kStep == 0 ? d : d + momentum * buf[i];
    }
    x[i] = x[i] - lr * e;
  }
}

template <int kStep>
void Update(double* x, const double* g, const double* buf, double lr, double momentum,
            double weight_decay, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    if (weight_decay > 0) {
      UpdateLoop<true, kStep>(x, g, buf, lr, momentum, weight_decay, begin, end);
    } else {
      UpdateLoop<false, kStep>(x, g, buf, lr, momentum, weight_decay, begin, end);
    }
  });
}

}  // namespace

void SgdMomentumInPlace(at::Tensor& buf, const at::Tensor& grad, const at::Tensor& value,
                        double momentum, double weight_decay) {
  if (!ContiguousCpuDoubles({&buf, &grad, &value})) {
    const at::Tensor d = weight_decay > 0 ? grad + weight_decay * value : grad;
    buf.mul_(momentum).add_(d);
    return;
  }
  double* pb = buf.data_ptr<double>();
  const double *pg = grad.data_ptr<double>(), *px = value.data_ptr<double>();
  at::parallel_for(0, buf.numel(), kGrain, [&](int64_t begin, int64_t end) {
    if (weight_decay > 0) {
      MomentumLoop<true>(pb, pg, px, momentum, weight_decay, begin, end);
    } else {
      MomentumLoop<false>(pb, pg, px, momentum, weight_decay, begin, end);
    }
  });
}

void SgdUpdateInPlace(at::Tensor& value, const at::Tensor& grad, const at::Tensor& buf, double lr,
                      double momentum, double weight_decay, bool nesterov) {
  const bool has_buf = buf.defined();
  if (!(has_buf ? ContiguousCpuDoubles({&value, &grad, &buf})
                : ContiguousCpuDoubles({&value, &grad}))) {
    const at::Tensor d = weight_decay > 0 ? grad + weight_decay * value : grad;
    const at::Tensor e = !has_buf ? d : nesterov ? d + momentum * buf : buf;
    value.sub_(lr * e);
    return;
  }
  double* px = value.data_ptr<double>();
  const double* pg = grad.data_ptr<double>();
  const double* pb = has_buf ? buf.data_ptr<double>() : nullptr;
  const int64_t n = value.numel();
  if (!has_buf) {
    Update<0>(px, pg, pb, lr, momentum, weight_decay, n);
  } else if (nesterov) {
    Update<2>(px, pg, pb, lr, momentum, weight_decay, n);
  } else {
    Update<1>(px, pg, pb, lr, momentum, weight_decay, n);
  }
}

}  // namespace vt::optim
