// Small helpers shared by the precision tests: vectors <-> tensors, running a check under
// every kernel variant the CPU supports, and thread-count guards.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/precision/kernels.h"
#include "runtime/precision/round.h"

namespace vt::precision::testing {

inline at::Tensor ToTensor(const std::vector<double>& v) {
  at::Tensor t =
      at::empty({static_cast<int64_t>(v.size())}, at::TensorOptions().dtype(at::kDouble));
  if (!v.empty()) std::memcpy(t.data_ptr<double>(), v.data(), v.size() * sizeof(double));
  return t;
}

inline std::vector<double> ToVector(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  std::vector<double> v(static_cast<size_t>(c.numel()));
  if (!v.empty()) std::memcpy(v.data(), c.data_ptr<double>(), v.size() * sizeof(double));
  return v;
}

// Whether two float64 tensors hold the same values bit for bit, in row-major order (NaN
// payloads and signed zeros included; shapes must match).
inline bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  if (!a.sizes().equals(b.sizes())) return false;
  if (a.numel() == 0) return true;  // (an empty tensor's data pointer may be null)
  return std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                     static_cast<size_t>(a.numel()) * sizeof(double)) == 0;
}

// Rounding options of `bits` bits, band and absolute term (the rest at their defaults).
inline RoundOptions Options(int bits, double band, double alpha) {
  RoundOptions o;
  o.bits = bits;
  o.band = band;
  o.alpha = alpha;
  return o;
}

inline uint64_t Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

// Restores the kernel variant on scope exit.
class IsaGuard {
 public:
  IsaGuard() : saved_(ActiveKernelIsa()) {}
  ~IsaGuard() { SetKernelIsa(saved_); }

 private:
  KernelIsa saved_;
};

// Restores LibTorch's thread count on scope exit.
class ThreadGuard {
 public:
  ThreadGuard() : saved_(at::get_num_threads()) {}
  ~ThreadGuard() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

}  // namespace vt::precision::testing
