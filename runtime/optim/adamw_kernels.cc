#include "runtime/optim/adamw_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "runtime/tensor/layout.h"

namespace vt::optim {
namespace {

// Elementwise passes are split into chunks this long over LibTorch's threads.
constexpr int64_t kGrain = int64_t{1} << 15;

// The loops, compiled for AVX-512, AVX2 and plain x86-64 and picked for the CPU at load time:
// division and square root are correctly rounded at every vector width, and -ffp-contract=off
// keeps every product and sum separate, so each variant gives the same bits.
#define VT_ELEMENTWISE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

VT_ELEMENTWISE_CLONES void MomentsLoop(const double* pm, const double* pv, const double* pg,
                                       double* om, double* ov, double beta1, double beta2,
                                       int64_t begin, int64_t end) {
  const double a1 = 1.0 - beta1, a2 = 1.0 - beta2;
  for (int64_t i = begin; i < end; ++i) {
    const double gi = pg[i];
    om[i] = beta1 * pm[i] + a1 * gi;
    ov[i] = beta2 * pv[i] + (a2 * gi) * gi;
  }
}

VT_ELEMENTWISE_CLONES void UpdateLoop(const double* px, const double* pm, const double* pv,
                                      double* o, double lr, double c1, double c2, double eps,
                                      double decay, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    o[i] = px[i] * decay - lr * (pm[i] / c1) / (std::sqrt(pv[i] / c2) + eps);
  }
}

}  // namespace

std::pair<at::Tensor, at::Tensor> AdamWMoments(const at::Tensor& m, const at::Tensor& v,
                                               const at::Tensor& g, double beta1, double beta2) {
  if (!ContiguousCpuDoubles({&m, &v, &g})) {
    return {beta1 * m + (1.0 - beta1) * g, beta2 * v + (1.0 - beta2) * g * g};
  }
  at::Tensor m_out = at::empty_like(m), v_out = at::empty_like(v);
  const double *pm = m.data_ptr<double>(), *pv = v.data_ptr<double>(), *pg = g.data_ptr<double>();
  double *om = m_out.data_ptr<double>(), *ov = v_out.data_ptr<double>();
  at::parallel_for(0, m.numel(), kGrain, [&](int64_t begin, int64_t end) {
    MomentsLoop(pm, pv, pg, om, ov, beta1, beta2, begin, end);
  });
  return {m_out, v_out};
}

at::Tensor AdamWUpdate(const at::Tensor& value, const at::Tensor& m, const at::Tensor& v, double lr,
                       double c1, double c2, double eps, double decay) {
  if (!ContiguousCpuDoubles({&value, &m, &v})) {
    return value * decay - lr * (m / c1) / (at::sqrt(v / c2) + eps);
  }
  at::Tensor out = at::empty_like(value);
  const double *px = value.data_ptr<double>(), *pm = m.data_ptr<double>();
  const double* pv = v.data_ptr<double>();
  double* o = out.data_ptr<double>();
  at::parallel_for(0, value.numel(), kGrain, [&](int64_t begin, int64_t end) {
    UpdateLoop(px, pm, pv, o, lr, c1, c2, eps, decay, begin, end);
  });
  return out;
}

}  // namespace vt::optim
