// The eight-lane sums that batch norm's and layer norm's fused passes share (batch_norm.h,
// layer_norm.h): lane l of `acc` (eight values) takes the span's elements j = l mod 8, in
// order; LaneTree adds the lanes as ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)). Compiled for
// AVX-512, AVX2 and the baseline, the same IEEE operations at every width (no FMA).
#pragma once

#include <cstdint>

namespace vt::nn {

// acc[j mod 8] += x[j] for j in [0, n).
void LaneSum(const double* x, int64_t n, double* acc);
// acc[j mod 8] += (x[j] - m)^2 for j in [0, n).
void LaneCenteredSquareSum(const double* x, double m, int64_t n, double* acc);

inline double LaneTree(const double* a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

}  // namespace vt::nn
