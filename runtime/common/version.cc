#include "runtime/common/version.h"

#include <torch/csrc/api/include/torch/version.h>

namespace vt {

std::string TorchVersion() { return TORCH_VERSION; }

}  // namespace vt
