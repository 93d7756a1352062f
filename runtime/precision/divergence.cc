#include "runtime/precision/divergence.h"

#include <ATen/ATen.h>

#include "runtime/common/error.h"
#include "runtime/precision/round.h"

namespace vt::precision {

Divergence MeasureDivergence(const at::Tensor& x, const at::Tensor& y, int bits) {
  if (!x.sizes().equals(y.sizes())) throw Error("the tensors have different shapes");
  Divergence d;
  d.elements = x.numel();
  if (d.elements == 0) return d;
  const at::Tensor xd = x.to(at::kDouble), yd = y.to(at::kDouble);
  d.max_abs = (xd - yd).abs().max().item<double>();
  d.scale = xd.abs().max().item<double>();
  d.differ = xd.ne(yd).sum().item<int64_t>();
  if (d.differ > 0) {
    RoundOptions o;
    o.bits = bits;
    d.straddles = Round(xd, o).rounded.ne(Round(yd, o).rounded).sum().item<int64_t>();
  }
  return d;
}

}  // namespace vt::precision
