#include "store/remove_tree.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace vt {
namespace {

// nftw takes a plain function: the walk's state lives here, one walk per thread at a time.
thread_local std::uintmax_t t_removed = 0;
thread_local int t_error = 0;

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  // FTW_DP: a directory after its contents (FTW_DEPTH); FTW_DNR: one that could not be read.
  const int rc = (type == FTW_DP || type == FTW_DNR) ? rmdir(path) : unlink(path);
  if (rc != 0) {
    if (errno == ENOENT) return 0;  // gone meanwhile: what was wanted
    t_error = errno;
    return 1;  // stops the walk
  }
  ++t_removed;
  return 0;
}

}  // namespace

std::uintmax_t RemoveTree(const std::string& path, std::error_code& ec) {
  ec.clear();
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) ec.assign(errno, std::generic_category());
    return 0;
  }
  if (!S_ISDIR(st.st_mode)) {
    if (unlink(path.c_str()) != 0) {
      if (errno == ENOENT) return 0;
      ec.assign(errno, std::generic_category());
      return 0;
    }
    return 1;
  }
  t_removed = 0;
  t_error = 0;
  const int rc = nftw(path.c_str(), RemoveEntry, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  if (t_error != 0) {
    ec.assign(t_error, std::generic_category());
  } else if (rc != 0) {
    ec.assign(errno != 0 ? errno : EIO, std::generic_category());
  }
  return t_removed;
}

}  // namespace vt
