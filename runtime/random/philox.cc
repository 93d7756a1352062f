#include "runtime/random/philox.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <Random123/philox.h>

#include <cmath>
#include <cstring>

#include "runtime/common/error.h"

namespace vt {
namespace {

constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
// ln 2 split so that e * kLn2Hi is exact for |e| < 2^11.
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kSqrtHalf = 0.70710678118654752440;

// Two 53-bit uniforms from one Philox block.
void UniformPair(uint64_t seed, uint32_t stream, uint64_t index, uint32_t attempt, double* u,
                 double* v) {
  const uint32_t counter[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                               stream, attempt};
  uint32_t out[4];
  Philox4x32(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), counter, out);
  uint64_t a = (uint64_t(out[0]) << 32) | out[1];
  uint64_t b = (uint64_t(out[2]) << 32) | out[3];
  *u = static_cast<double>(a >> 11) * kTwoPowMinus53;
  *v = static_cast<double>(b >> 11) * kTwoPowMinus53;
}

template <typename Fn>
at::Tensor FillTensor(at::IntArrayRef sizes, at::ScalarType dtype, Fn draw) {
  if (dtype != at::kDouble && dtype != at::kFloat) {
    throw Error(std::string("random tensors must be float32 or float64, got ") +
                c10::toString(dtype));
  }
  at::Tensor out = at::empty(sizes, at::TensorOptions().dtype(dtype));
  const int64_t n = out.numel();
  if (dtype == at::kDouble) {
    double* p = out.data_ptr<double>();
    at::parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = draw(static_cast<uint64_t>(i));
    });
  } else {
    float* p = out.data_ptr<float>();
    at::parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = static_cast<float>(draw(static_cast<uint64_t>(i)));
    });
  }
  return out;
}

}  // namespace

void Philox4x32(uint32_t k0, uint32_t k1, const uint32_t counter[4], uint32_t out[4]) {
  r123::Philox4x32 rng;
  r123::Philox4x32::ctr_type c = {{counter[0], counter[1], counter[2], counter[3]}};
  r123::Philox4x32::key_type k = {{k0, k1}};
  r123::Philox4x32::ctr_type r = rng(c, k);
  for (int i = 0; i < 4; ++i) out[i] = r.v[i];
}

double UniformAt(uint64_t seed, uint32_t stream, uint64_t index) {
  double u, v;
  UniformPair(seed, stream, index, 0, &u, &v);
  return u;
}

double PortableLog(double x) {
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(f), f = (m - 1) / (m + 1).
  int e = 0;
  double m = std::frexp(x, &e);  // exact; m in [0.5, 1)
  if (m < kSqrtHalf) {
    m *= 2.0;
    e -= 1;
  }
  const double f = (m - 1.0) / (m + 1.0);
  const double f2 = f * f;
  // |f| <= 0.1716, so f^2 <= 0.0295 and the series converges fast: terms up to f^23.
  double s = 1.0 / 23.0;
  for (int k = 21; k >= 1; k -= 2) s = 1.0 / k + f2 * s;
  const double log_m = 2.0 * f * s;
  return (e * kLn2Hi + (e * kLn2Lo + log_m));
}

double NormalAt(uint64_t seed, uint32_t stream, uint64_t index) {
  for (uint32_t attempt = 0;; ++attempt) {
    double u, v;
    UniformPair(seed, stream, index, attempt, &u, &v);
    u = 2.0 * u - 1.0;
    v = 2.0 * v - 1.0;
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * PortableLog(s) / s);
    // Rejected with probability 1 - pi/4; 2^32 attempts never run out in practice.
  }
}

at::Tensor UniformTensor(at::IntArrayRef sizes, at::ScalarType dtype, uint64_t seed,
                         uint32_t stream) {
  return FillTensor(sizes, dtype, [&](uint64_t i) { return UniformAt(seed, stream, i); });
}

at::Tensor NormalTensor(at::IntArrayRef sizes, at::ScalarType dtype, uint64_t seed,
                        uint32_t stream) {
  return FillTensor(sizes, dtype, [&](uint64_t i) { return NormalAt(seed, stream, i); });
}

}  // namespace vt
