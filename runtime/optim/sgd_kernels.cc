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

// The loop bodies are templates inlined into one non-template clone per case: clang (14)
// refuses target_clones on function templates.
#define VT_ALWAYS_INLINE inline __attribute__((always_inline))

// In place: each element is read, then written.
template <bool kDecay>
VT_ALWAYS_INLINE void MomentumBody(double* buf, const double* g, const double* x, double momentum,
                                   double weight_decay, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const double d = kDecay ? g[i] + weight_decay * x[i] : g[i];
    buf[i] = buf[i] * momentum + d;
  }
}

// kStep: 0 = d, 1 = buf, 2 = d + momentum * buf (Nesterov).
template <bool kDecay, int kStep>
VT_ALWAYS_INLINE void UpdateBody(double* x, const double* g, const double* buf, double lr,
                                 double momentum, double weight_decay, int64_t begin, int64_t end) {
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

#define VT_MOMENTUM_LOOP(name, decay)                                                             \
  VT_ELEMENTWISE_CLONES void name(double* buf, const double* g, const double* x, double momentum, \
                                  double weight_decay, int64_t begin, int64_t end) {              \
    MomentumBody<decay>(buf, g, x, momentum, weight_decay, begin, end);                           \
  }
VT_MOMENTUM_LOOP(MomentumLoopDecay, true)
VT_MOMENTUM_LOOP(MomentumLoopPlain, false)

#define VT_UPDATE_LOOP(name, decay, step)                                                   \
  VT_ELEMENTWISE_CLONES void name(double* x, const double* g, const double* buf, double lr, \
                                  double momentum, double weight_decay, int64_t begin,      \
                                  int64_t end) {                                            \
    UpdateBody<decay, step>(x, g, buf, lr, momentum, weight_decay, begin, end);             \
  }
VT_UPDATE_LOOP(UpdateLoopDecay0, true, 0)
VT_UPDATE_LOOP(UpdateLoopPlain0, false, 0)
VT_UPDATE_LOOP(UpdateLoopBuffer, false, 1)
VT_UPDATE_LOOP(UpdateLoopDecay2, true, 2)
VT_UPDATE_LOOP(UpdateLoopPlain2, false, 2)

using UpdateLoop = void (*)(double*, const double*, const double*, double, double, double, int64_t,
                            int64_t);

UpdateLoop PickUpdateLoop(bool has_buf, bool nesterov, bool decay) {
  return !has_buf   ? (decay ? UpdateLoopDecay0 : UpdateLoopPlain0)
         : nesterov ? (decay ? UpdateLoopDecay2 : UpdateLoopPlain2)
                    : UpdateLoopBuffer;
}

void Update(UpdateLoop loop, double* x, const double* g, const double* buf, double lr,
            double momentum, double weight_decay, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    loop(x, g, buf, lr, momentum, weight_decay, begin, end);
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
    SgdMomentumRange(pb, pg, px, momentum, weight_decay, begin, end);
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
  Update(PickUpdateLoop(has_buf, nesterov, weight_decay > 0), px, pg, pb, lr, momentum,
         weight_decay, n);
}

void SgdMomentumRange(double* buf, const double* grad, const double* value, double momentum,
                      double weight_decay, int64_t begin, int64_t end) {
  if (weight_decay > 0) {
    MomentumLoopDecay(buf, grad, value, momentum, weight_decay, begin, end);
  } else {
    MomentumLoopPlain(buf, grad, value, momentum, weight_decay, begin, end);
  }
}

void SgdUpdateRange(double* value, const double* grad, const double* buf, double lr,
                    double momentum, double weight_decay, bool nesterov, int64_t begin,
                    int64_t end) {
  PickUpdateLoop(buf != nullptr, nesterov, weight_decay > 0)(value, grad, buf, lr, momentum,
                                                             weight_decay, begin, end);
}

}  // namespace vt::optim
