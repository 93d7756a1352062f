// safetensors files (the format of Hugging Face's `safetensors`), so weights move to and from
// PyTorch: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"key": "value"}}, then the tensors' little-endian bytes.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace vt {

struct SafetensorsFile {
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // in file order
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (any CPU dtype among F64, F32, F16, I64, I32, I16, I8, U8, BOOL) sorted by
// name, with string metadata. Throws vt::Error on a duplicate name or an I/O failure.
void SaveSafetensors(const std::string& path,
                     const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata = {});

// Reads and validates a file: header size and JSON, known dtypes, offsets inside the data,
// contiguous and non-overlapping, byte counts matching shapes. Throws vt::Error naming the
// file and the problem.
SafetensorsFile LoadSafetensors(const std::string& path);

// Decodes the bytes of a safetensors file, as LoadSafetensors does; `what` names the source
// in error messages ("safetensors file 'w.safetensors'"). Nothing is allocated for a tensor
// before its shape, dtype and offsets are checked against the bytes present.
SafetensorsFile DecodeSafetensors(const std::string& bytes, const std::string& what);

}  // namespace vt
