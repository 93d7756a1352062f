#include "store/version.h"

#include <openssl/crypto.h>
#include <rocksdb/version.h>

namespace vt::store {

std::string RocksDbVersion() {
  return std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) + "." +
         std::to_string(ROCKSDB_PATCH);
}

std::string OpenSslVersion() { return OpenSSL_version(OPENSSL_VERSION); }

}  // namespace vt::store
