#include "store/writer_claim.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "store/error.h"

namespace vt::store {
namespace {

std::mutex claims_mu;

// (device, inode) -> the path the claiming writer opened, for the error message.
std::map<std::pair<unsigned long long, unsigned long long>, std::string>& Claims() {
  static auto* claims =
      new std::map<std::pair<unsigned long long, unsigned long long>, std::string>;
  return *claims;  // never destroyed: a store closed during static destruction still finds it
}

}  // namespace

WriterClaim::WriterClaim(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    throw Error("store '" + dir + "': cannot stat the directory: " + std::strerror(errno));
  }
  dev_ = static_cast<unsigned long long>(st.st_dev);
  ino_ = static_cast<unsigned long long>(st.st_ino);
  std::lock_guard<std::mutex> lock(claims_mu);
  auto [it, inserted] = Claims().emplace(std::make_pair(dev_, ino_), dir);
  if (!inserted) {
    throw Error("store '" + dir + "' is already open for writing in this process (as '" +
                it->second +
                "', the same directory); close that store first, or open this one with "
                "read_only = true");
  }
}

WriterClaim::~WriterClaim() {
  std::lock_guard<std::mutex> lock(claims_mu);
  Claims().erase(std::make_pair(dev_, ino_));
}

bool WriterClaim::WriterActive(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) {
    std::lock_guard<std::mutex> lock(claims_mu);
    if (Claims().count(std::make_pair(static_cast<unsigned long long>(st.st_dev),
                                      static_cast<unsigned long long>(st.st_ino)))) {
      return true;
    }
  }
  const int fd = open((dir + "/LOCK").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  const bool held = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  close(fd);
  return held;
}

}  // namespace vt::store
