// libFuzzer target for the safetensors decoder (runtime/tensor/safetensors.h). Every input
// must either decode or raise vt::Error naming the problem; a decoded file's tensors hold no
// more bytes than the input, and nothing is allocated for a tensor before its shape is
// checked against the bytes present.
#include "runtime/tensor/safetensors.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const vt::SafetensorsFile file = vt::DecodeSafetensors(bytes, "fuzz input");
    size_t total = 0;
    for (const auto& [name, t] : file.tensors) {
      if (name.find('\0') != std::string::npos || name == "__metadata__") std::abort();
      total += static_cast<size_t>(t.numel()) * t.element_size();
    }
    if (total > size) std::abort();
  } catch (const vt::Error&) {
  }
  return 0;
}
