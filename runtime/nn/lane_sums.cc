#include "runtime/nn/lane_sums.h"

namespace vt::nn {

#define VT_LANE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

VT_LANE_CLONES void LaneSum(const double* __restrict x, int64_t n, double* __restrict acc) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += x[i + l];
  }
  for (; i < n; ++i) acc[i & 7] += x[i];
}

VT_LANE_CLONES void LaneCenteredSquareSum(const double* __restrict x, double m, int64_t n,
                                          double* __restrict acc) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      const double d = x[i + l] - m;
      acc[l] += d * d;
    }
  }
  for (; i < n; ++i) {
    const double d = x[i] - m;
    acc[i & 7] += d * d;
  }
}

}  // namespace vt::nn
