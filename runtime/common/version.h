// Versions of the libraries vtrun is built against, for `vtrun --version` and run metadata.
#pragma once

#include <string>

namespace vt {

// LibTorch's version string, e.g. "1.13.0".
std::string TorchVersion();

}  // namespace vt
