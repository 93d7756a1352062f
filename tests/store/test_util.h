// Helpers for the store tests: temporary directories, subprocesses (vtrun children that
// are waited on, read from, or killed), seeds that are printed so a failure can be replayed.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace vt::store::testing {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "vt-store-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string Vtrun() { return VTRUN_BINARY; }
inline std::string SourceDir() { return VTRUN_SOURCE_DIR; }

// A seed from VT_TEST_SEED if set, else random; printed so the run can be replayed.
inline uint64_t TestSeed(const char* test) {
  uint64_t seed;
  if (const char* env = std::getenv("VT_TEST_SEED")) {
    seed = std::strtoull(env, nullptr, 10);
  } else {
    seed = std::random_device{}();
  }
  std::printf("%s: seed %llu (set VT_TEST_SEED to replay)\n", test,
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

// A child process with its stdout and stderr on one pipe.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, 0);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    fd_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      Wait();
    }
    if (fd_ >= 0) close(fd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Reads output until a line equal to `line` arrives (true), or EOF / timeout (false).
  bool WaitForLine(const std::string& line, int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      size_t nl;
      while ((nl = pending_.find('\n')) != std::string::npos) {
        std::string got = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        if (got == line) return true;
      }
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - std::chrono::steady_clock::now())
                                      .count());
      if (left <= 0) return false;
      if (!ReadSome(left)) return false;
    }
  }

  // Reads all remaining output (until EOF) and waits; returns the raw wait status.
  int Finish() {
    while (ReadSome(-1)) {
    }
    return Wait();
  }

  // SIGKILL, then wait; returns the raw wait status.
  int Kill() {
    kill(pid_, SIGKILL);
    return Wait();
  }

  int Wait() {
    if (reaped_) return status_;
    while (waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return status_;
  }

  // Everything read so far (including lines consumed by WaitForLine).
  const std::string& output() const { return all_; }

 private:
  bool ReadSome(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0) return false;
    char buf[4096];
    ssize_t n = read(fd_, buf, sizeof(buf));
    if (n <= 0) return false;
    pending_.append(buf, static_cast<size_t>(n));
    all_.append(buf, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  std::string pending_;
  std::string all_;
};

// Runs a command to completion; returns (exit code or -signal, output).
inline std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv) {
  Child c(argv);
  int status = c.Finish();
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return {code, c.output()};
}

}  // namespace vt::store::testing
