// Data sets from tensors a user brings (vt.data.tensors): arrays made in a script, .npy
// files, tensors of a safetensors file. The same sampler, permutation and batching as the
// shipped sets (dataset.h); no augmentation. The digest covers the content and its shapes,
// so a trainer and an auditor with different arrays are refused by the spec.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "runtime/data/dataset.h"

namespace vt::data {

struct TensorSetOptions {
  // [N, ...] (at least 2 dimensions): floating inputs (held as float64) or integer ones
  // (token ids, int64, >= 0, for language models).
  at::Tensor inputs;
  // Integer labels: [N] classes, or [N, T] next tokens. Floating targets are refused.
  at::Tensor targets;
  // Labels (and integer inputs) lie in [0, classes). 0: one more than the largest label or
  // integer input. Default: 0.
  int64_t classes = 0;
  // The set's name in specs: "tensors:<name>" ("tensors" when empty). Printable ASCII
  // without '=' or ':'; at most 64 bytes. Default: "".
  std::string name;
};

// Checks and copies the tensors (throws vt::Error naming the problem: shapes that disagree,
// NaN or infinite inputs, labels out of range, ...). Digest: SHA-256 of "vtrun-tensors 1\n",
// a line "inputs <float64|int64> <d0>x<d1>...", a line "targets int64 <shape>", a line
// "classes <n>", then the inputs' and the targets' little-endian bytes, row-major.
std::shared_ptr<Dataset> Tensors(const TensorSetOptions& options);

// A tensor from a file reference: "path.npy", or "path.safetensors#name" (one tensor of a
// safetensors file). Throws vt::Error naming the file and the problem.
at::Tensor LoadTensorFile(const std::string& reference);

}  // namespace vt::data
