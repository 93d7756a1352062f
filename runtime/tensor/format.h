// Human-readable tensor printing, like torch's: a header line with dtype and shape, then the
// values, nested brackets per dimension, summarized with "..." when large.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace vt {

struct FormatOptions {
  int64_t threshold = 1000;  // Summarize when numel exceeds this. Default: 1000.
  int64_t edge_items = 3;    // Items kept at each end of a summarized dimension. Default: 3.
  int precision = 4;         // Digits after the point for floating values. Default: 4.
};

// "vt.tensor float64 [2, 2]\n[[1.0000, 2.0000],\n [3.0000, 4.0000]]". Any device and dtype.
std::string FormatTensor(const at::Tensor& tensor, const FormatOptions& options = {});

}  // namespace vt
