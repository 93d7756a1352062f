// The per-channel loops over [N, C, H, W] tensors that the hand-written batch-norm kernels
// share (nn/magnitude.cc, nn/batch_norm.cc).
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include <initializer_list>

#include "runtime/tensor/layout.h"

namespace vt::nn {

// Whether the fused per-channel loops apply: contiguous CPU float64 [N, C, H, W] tensors of
// one shape and per-channel factors of C CPU float64 values (contiguous: the callers pass
// .contiguous() ones).
inline bool FusablePlanes(std::initializer_list<const at::Tensor*> maps,
                          std::initializer_list<const at::Tensor*> factors) {
  const at::Tensor& first = **maps.begin();
  if (first.dim() != 4 || !ContiguousCpuDoubles(maps)) return false;
  for (const at::Tensor* t : factors) {
    if (!t->defined() || !t->device().is_cpu() || t->scalar_type() != at::kDouble ||
        !t->is_contiguous() || t->numel() != first.size(1)) {
      return false;
    }
  }
  return true;
}

// Runs body(ch, offset, plane) for every (image, channel) plane of an [N, C, H, W] tensor,
// channels split over threads: each thread takes its channels' planes image by image, in
// memory order, so each channel's planes come in image order on one thread and a per-channel
// sum has one order on any thread count.
template <class Body>
void ForEachPlane(const at::Tensor& t, Body&& body) {
  const int64_t n = t.size(0), c = t.size(1), plane = t.size(2) * t.size(3);
  at::parallel_for(0, c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t img = 0; img < n; ++img) {
      for (int64_t ch = c0; ch < c1; ++ch) body(ch, (img * c + ch) * plane, plane);
    }
  });
}

}  // namespace vt::nn
