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
  // With a per-element magnitude m: max |x - y| / m over the elements (infinite where values
  // differ and m = 0); -1 without one.
  double max_ratio = -1.0;
  // The divergence in units of the window's absolute term: per element against the
  // magnitude when one was given, else against the scale.
  double max_rel() const {
    if (max_ratio >= 0.0) return max_ratio;
    return scale > 0 ? max_abs / scale : 0.0;
  }
};

// x: the reference's values, y: another machine's, same shape, float64; `magnitude` (float64,
// y's shape, optional): y's per-element magnitude. Throws vt::Error on a shape mismatch, bad
// bits or values rnd_b cannot take (NaN, infinities, overflow).
Divergence MeasureDivergence(const at::Tensor& x, const at::Tensor& y, int bits,
                             const at::Tensor& magnitude = {});

}  // namespace vt::precision
