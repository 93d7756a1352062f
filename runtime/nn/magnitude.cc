#include "runtime/nn/magnitude.h"

#include <ATen/ATen.h>

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

void MoveOffer(const at::Tensor& from, const at::Tensor& to, double factor) {
  StepContext* step = StepContext::Current();
  if (step == nullptr || !step->magnitudes_wanted()) return;
  at::Tensor m = step->TakeOffer(from);
  if (m.defined()) step->OfferMagnitude(to, m.mul_(factor));
}

}  // namespace vt::nn
