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

// In place: each element is read, then written (one pointer per array, so the compiler's
// overlap checks pass and the vector loop runs).
VT_ELEMENTWISE_CLONES void MomentsLoop(double* m, double* v, const double* g, double beta1,
                                       double beta2, int64_t begin, int64_t end) {
  const double a1 = 1.0 - beta1, a2 = 1.0 - beta2;
  for (int64_t i = begin; i < end; ++i) {
    const double gi = g[i];
    m[i] = beta1 * m[i] + a1 * gi;
    v[i] = beta2 * v[i] + (a2 * gi) * gi;
  }
}

VT_ELEMENTWISE_CLONES void FirstMomentLoop(double* m, const double* g, double beta1, int64_t begin,
                                           int64_t end) {
  const double a1 = 1.0 - beta1;
  for (int64_t i = begin; i < end; ++i) m[i] = beta1 * m[i] + a1 * g[i];
}

VT_ELEMENTWISE_CLONES void SecondMomentLoop(double* v, const double* g, double beta2, int64_t begin,
                                            int64_t end) {
  const double a2 = 1.0 - beta2;
  for (int64_t i = begin; i < end; ++i) {
    const double gi = g[i];
    v[i] = beta2 * v[i] + (a2 * gi) * gi;
  }
}

VT_ELEMENTWISE_CLONES void UpdateLoop(double* x, const double* m, const double* v, double lr,
                                      double c1, double c2, double eps, double decay, int64_t begin,
                                      int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    x[i] = x[i] * decay - lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
  }
}

}  // namespace

void AdamWMomentsInPlace(at::Tensor& m, at::Tensor& v, const at::Tensor& g, double beta1,
                         double beta2) {
  if (!ContiguousCpuDoubles({&m, &v, &g})) {
    const at::Tensor m_new = beta1 * m + (1.0 - beta1) * g;
    const at::Tensor v_new = beta2 * v + (1.0 - beta2) * g * g;
    m.copy_(m_new);
    v.copy_(v_new);
    return;
  }
  const double* pg = g.data_ptr<double>();
  double *pm = m.data_ptr<double>(), *pv = v.data_ptr<double>();
  at::parallel_for(0, m.numel(), kGrain, [&](int64_t begin, int64_t end) {
    MomentsLoop(pm, pv, pg, beta1, beta2, begin, end);
  });
}

void AdamWUpdateInPlace(at::Tensor& value, const at::Tensor& m, const at::Tensor& v, double lr,
                        double c1, double c2, double eps, double decay) {
  if (!ContiguousCpuDoubles({&value, &m, &v})) {
    value.copy_(value * decay - lr * (m / c1) / (at::sqrt(v / c2) + eps));
    return;
  }
  double* px = value.data_ptr<double>();
  const double *pm = m.data_ptr<double>(), *pv = v.data_ptr<double>();
  at::parallel_for(0, value.numel(), kGrain, [&](int64_t begin, int64_t end) {
    UpdateLoop(px, pm, pv, lr, c1, c2, eps, decay, begin, end);
  });
}

void AdamWFirstMomentRange(double* m, const double* g, double beta1, int64_t begin, int64_t end) {
  FirstMomentLoop(m, g, beta1, begin, end);
}

void AdamWSecondMomentRange(double* v, const double* g, double beta2, int64_t begin, int64_t end) {
  SecondMomentLoop(v, g, beta2, begin, end);
}

void AdamWUpdateRange(double* value, const double* m, const double* v, double lr, double c1,
                      double c2, double eps, double decay, int64_t begin, int64_t end) {
  UpdateLoop(value, m, v, lr, c1, c2, eps, decay, begin, end);
}

}  // namespace vt::optim
