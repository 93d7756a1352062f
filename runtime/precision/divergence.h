// How far two machines' FP64 values of one boundary call are apart: the measurement behind
// calibration (ROUNDING.md, "Calibration") and the divergence experiments.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vt::precision {

struct Divergence {
  int64_t elements = 0;
  int64_t differ = 0;     // elements whose values differ at all
  int64_t straddles = 0;  // elements that round to different b-grid values
  double max_abs = 0.0;   // max |x - y|
  double scale = 0.0;     // max |x| (x is the reference)
  double max_rel() const { return scale > 0 ? max_abs / scale : 0.0; }
};

// x: the reference's values, y: another machine's, same shape, float64. Throws vt::Error on
// a shape mismatch, bad bits or values rnd_b cannot take (NaN, infinities, overflow).
Divergence MeasureDivergence(const at::Tensor& x, const at::Tensor& y, int bits);

}  // namespace vt::precision
