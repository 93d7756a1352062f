#include "runtime/precision/divergence.h"

#include <ATen/ATen.h>

#include "runtime/common/error.h"
#include "runtime/precision/round.h"

namespace vt::precision {

Divergence MeasureDivergence(const at::Tensor& x, const at::Tensor& y, int bits,
                             const at::Tensor& magnitude) {
  if (!x.sizes().equals(y.sizes())) throw Error("the tensors have different shapes");
  Divergence d;
  d.elements = x.numel();
  if (d.elements == 0) return d;
  const at::Tensor xd = x.to(at::kDouble), yd = y.to(at::kDouble);
  const at::Tensor diff = (xd - yd).abs();
  d.max_abs = diff.max().item<double>();
  if (magnitude.defined()) {
    if (magnitude.numel() != d.elements) throw Error("the magnitude has another element count");
    // 0/0 (equal values, zero magnitude) is no divergence; d/0 is infinite.
    const at::Tensor m = magnitude.to(at::kDouble).reshape(diff.sizes());
    d.max_ratio = at::where(diff.eq(0), at::zeros_like(diff), diff / m).max().item<double>();
  }
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
