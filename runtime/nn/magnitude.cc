#include "runtime/nn/magnitude.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "runtime/nn/context.h"

namespace vt::nn {

at::Tensor RowNorms(const at::Tensor& t) {
  at::NoGradGuard no_grad;
  return at::linalg_vector_norm(t.detach(), 2, {-1}, /*keepdim=*/true);
}

at::Tensor ColNorms(const at::Tensor& t) {
  at::NoGradGuard no_grad;
  return at::linalg_vector_norm(t.detach(), 2, {-2}, /*keepdim=*/true);
}

at::Tensor ProductMagnitude(const at::Tensor& a, const at::Tensor& b) {
  at::NoGradGuard no_grad;
  return RowNorms(a) * ColNorms(b);
}

at::Tensor ZeroMagnitude() { return at::zeros({}, at::kDouble); }

bool IsZeroMagnitude(const at::Tensor& m) { return m.defined() && m.dim() == 0; }

at::Tensor IncomingMagnitude(const at::Tensor& g) {
  StepContext* step = StepContext::Current();
  at::Tensor m = step != nullptr ? step->OfferedFor(g) : at::Tensor();
  if (m.defined()) return m;
  at::NoGradGuard no_grad;
  return g.detach().abs();
}

at::Tensor Materialized(const at::Tensor& m, const at::Tensor& like) {
  return IsZeroMagnitude(m) ? at::zeros(like.sizes(), like.options().dtype(at::kDouble)) : m;
}

void MoveOffer(const at::Tensor& from, const at::Tensor& to, double factor) {
  StepContext* step = StepContext::Current();
  if (step == nullptr || !step->magnitudes_wanted()) return;
  at::Tensor m = step->OfferedFor(from);
  if (m.defined()) step->OfferMagnitude(to, m * factor);
}

}  // namespace vt::nn
