// Shared by the nn tests.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "runtime/nn/autograd.h"
#include "runtime/nn/context.h"

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

}  // namespace vt::nn::testing
