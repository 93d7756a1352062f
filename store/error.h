// vt::store::Error and vt::store::CorruptionError: the exceptions the store throws.
//
// Error is every failure a caller can cause or must handle: bad arguments (an invalid run
// id, a step out of order), a store that is closed, locked by another writer or missing,
// and RocksDB I/O failures. CorruptionError is the subclass thrown when a stored record
// fails its integrity check (see store/FORMAT.md, "Record envelope"): it names the column
// family and the key, and the record's bytes are never returned as data. The store cannot
// see runtime/ (vt::Error), so it has its own type; bindings convert both to Lua errors
// through std::exception.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace vt::store {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

class CorruptionError : public Error {
 public:
  // `family`: column family name ("logs"); `key`: the key as DescribeKey() prints it;
  // `detail`: what is wrong ("checksum mismatch").
  CorruptionError(std::string family, std::string key, const std::string& detail)
      : Error("corrupt record in " + family + " at " + key + ": " + detail),
        family_(std::move(family)),
        key_(std::move(key)) {}

  const std::string& family() const { return family_; }
  const std::string& key() const { return key_; }

 private:
  std::string family_;
  std::string key_;
};

}  // namespace vt::store
