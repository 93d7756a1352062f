// Shared by the nn tests.
#pragma once

#include "runtime/nn/context.h"

namespace vt::nn::testing {

// Calibrated-like windows: no band, the absolute term alpha for every kind of boundary.
inline WindowTable AbsoluteWindows(double alpha = 0x1p-40) {
  WindowTable windows;
  for (Window& w : windows.by_kind) w = {0.0, alpha};
  return windows;
}

}  // namespace vt::nn::testing
