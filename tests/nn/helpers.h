// Shared by the nn tests.
#pragma once

#include <ATen/ATen.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/nn/autograd.h"
#include "runtime/nn/context.h"
#include "runtime/profile/profile.h"

namespace vt::nn::testing {

// Calibrated-like windows: no band, the absolute term alpha for every kind of boundary.
inline WindowTable AbsoluteWindows(double alpha = 0x1p-40) {
  WindowTable windows;
  for (Window& w : windows.by_kind) w = {0.0, alpha};
  return windows;
}

// A trainer's step (Mode::kLog) under AbsoluteWindows, current while this object lives.
struct LoggedStep {
  WindowTable windows = AbsoluteWindows();
  StepLog log;
  StepContext context{Mode::kLog, &windows, 1, &log};
  StepContext::Scope scope{&context};
};

// x0 through a boundary named `boundary` (its output is offered the zero magnitude: a value
// every party holds alike), or x0 * 1.5 (an op of ours that offers nothing: its value is its
// own magnitude).
inline at::Tensor AlikeOrNot(const at::Tensor& x0, bool alike, const std::string& boundary) {
  return alike ? Boundary(x0, boundary) : x0 * 1.5;
}

// Activates the native profile when it goes out of scope (also when a check throws), for tests
// that switch profiles.
struct NativeProfileAfter {
  ~NativeProfileAfter() { ActivateProfile(FindProfile("native")); }
};

// Partial sums added left to right or as a balanced tree (vt::CombinePartialSums, value by value).
inline double CombineInOrder(std::vector<double> parts, bool pairwise) {
  if (!pairwise) {
    for (size_t i = 1; i < parts.size(); ++i) parts[0] += parts[i];
    return parts[0];
  }
  while (parts.size() > 1) {
    std::vector<double> next;
    for (size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(parts[i] + parts[i + 1]);
    if (parts.size() % 2 == 1) next.push_back(parts.back());
    parts = next;
  }
  return parts[0];
}

// Whether a float64 tensor holds exactly these values, bit for bit, in row-major order.
inline bool SameBits(const at::Tensor& got, const std::vector<double>& want) {
  const at::Tensor g = got.contiguous();
  if (g.numel() != static_cast<int64_t>(want.size())) return false;
  return want.empty() ||
         std::memcmp(g.data_ptr<double>(), want.data(), want.size() * sizeof(double)) == 0;
}

}  // namespace vt::nn::testing
