// WriterClaim: this process's claim to be the one writer of a store directory.
//
// RocksDB's LOCK file (an fcntl lock) keeps other processes out, but fcntl locks belong to
// the process, so a second DB::Open in the same process succeeds whenever RocksDB's own
// in-process check misses it; that check compares path strings, so a symlink, a bind mount
// or "dir/../dir" opens the same store twice, and the two writers destroy each other's
// files. A claim identifies the directory by its device and inode, which every way of
// naming it shares.
#pragma once

#include <string>

namespace vt::store {

class WriterClaim {
 public:
  // Claims the existing directory `dir` (its name is used in errors only). Throws
  // vt::store::Error if this process already holds a claim on that directory.
  explicit WriterClaim(const std::string& dir);
  ~WriterClaim();
  // Whether a writer holds `dir`: a claim in this process, or RocksDB's LOCK file locked by
  // another process (an fcntl lock, which F_GETLK reports only for other processes).
  static bool WriterActive(const std::string& dir);

  WriterClaim(const WriterClaim&) = delete;
  WriterClaim& operator=(const WriterClaim&) = delete;

 private:
  unsigned long long dev_ = 0;
  unsigned long long ino_ = 0;
};

}  // namespace vt::store
