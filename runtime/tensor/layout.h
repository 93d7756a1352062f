// Layout checks shared by the hand-written elementwise loops (nn/magnitude.cc,
// optim/adamw_kernels.cc), which read tensors as flat float64 arrays and fall back to ATen
// expressions for anything else.
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>

namespace vt {

// Whether every tensor is defined, on the CPU, float64, contiguous and of the first's shape.
inline bool ContiguousCpuDoubles(std::initializer_list<const at::Tensor*> tensors) {
  const at::Tensor& first = **tensors.begin();
  for (const at::Tensor* t : tensors) {
    if (!t->defined() || !t->device().is_cpu() || t->scalar_type() != at::kDouble ||
        !t->is_contiguous() || t->sizes() != first.sizes()) {
      return false;
    }
  }
  return true;
}

}  // namespace vt
