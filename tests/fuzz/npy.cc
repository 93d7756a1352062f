// libFuzzer target for the .npy decoder (runtime/tensor/npy.h). Every input must either
// decode or raise vt::Error; a decoded tensor encodes to a file that decodes to an equal
// tensor (the encoder writes NumPy's own header layout, which need not be the input's).
#include "runtime/tensor/npy.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  at::Tensor t;
  try {
    t = vt::DecodeNpy(bytes, "fuzz input");
  } catch (const vt::Error&) {
    return 0;
  }
  if (static_cast<size_t>(t.numel()) * t.element_size() > size) std::abort();
  const at::Tensor back = vt::DecodeNpy(vt::EncodeNpy(t), "re-encoded");
  if (back.scalar_type() != t.scalar_type() || !back.sizes().equals(t.sizes())) std::abort();
  // Bitwise, so NaN payloads count too.
  const size_t n = static_cast<size_t>(t.numel()) * t.element_size();
  if (n > 0 && std::memcmp(back.data_ptr(), t.data_ptr(), n) != 0) std::abort();
  return 0;
}
