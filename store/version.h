// Versions of the store's libraries, for `vtrun --version` and run metadata.
#pragma once

#include <string>

namespace vt::store {

std::string RocksDbVersion();  // e.g. "7.8.3"
std::string OpenSslVersion();  // e.g. "OpenSSL 3.0.17 1 Jul 2025"

}  // namespace vt::store
