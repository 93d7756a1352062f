// NumPy .npy files (format versions 1.0, 2.0 and 3.0) for moving tensors to and from NumPy.
//
// Written files are byte-identical to numpy.save of the same array (NumPy >= 1.24 header
// layout: sorted dict, growth padding, 64-byte alignment). Reading accepts little-endian,
// C-order arrays of float16/32/64, int8/16/32/64, uint8 and bool; anything else (big-endian,
// Fortran order, structured or object dtypes, truncated data) throws vt::Error naming the
// file and what is wrong. Not thread-safe on the same path.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace vt {

// Writes `tensor` (any device, any strides; copied to contiguous CPU) to `path`.
// Supported dtypes: float16, float32, float64, int8, int16, int32, int64, uint8, bool.
// Throws vt::Error on an unsupported dtype or an I/O failure.
void SaveNpy(const at::Tensor& tensor, const std::string& path);

// Encodes `tensor` as the bytes of a .npy file.
std::string EncodeNpy(const at::Tensor& tensor);

// Reads a .npy file into a new contiguous CPU tensor. Throws vt::Error (see above).
at::Tensor LoadNpy(const std::string& path);

// Decodes the bytes of a .npy file; `what` names the source in error messages.
at::Tensor DecodeNpy(const std::string& bytes, const std::string& what);

}  // namespace vt
