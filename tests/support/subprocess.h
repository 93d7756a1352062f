// Test support: run a program with arguments, environment overrides and standard input, and
// collect its exit status, stdout and stderr; or drive it under a pseudo-terminal.
// Header-only so any test file can include it. POSIX only.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace vt::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 if killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

inline std::vector<char*> ArgvOf(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

inline void ApplyEnv(const std::map<std::string, std::string>& env) {
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
}

// Runs `args[0]` with `args` and returns when it exits (killed after `timeout_s`).
inline ProcessResult RunProcess(std::vector<std::string> args, const std::string& input = "",
                                const std::map<std::string, std::string>& env = {},
                                double timeout_s = 120) {
  int in[2], out[2], err[2];
  if (pipe(in) || pipe(out) || pipe(err)) throw std::runtime_error("pipe failed");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    ApplyEnv(env);
    auto argv = ArgvOf(args);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  // Feed stdin from a thread so a chatty child cannot deadlock us.
  std::thread writer([fd = in[1], input] {
    signal(SIGPIPE, SIG_IGN);
    size_t done = 0;
    while (done < input.size()) {
      ssize_t n = write(fd, input.data() + done, input.size() - done);
      if (n <= 0) break;
      done += n;
    }
    close(fd);
  });
  ProcessResult r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, n);
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  writer.join();
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

// A program running under a pseudo-terminal, as a person at a terminal would see it.
class PtySession {
 public:
  PtySession(std::vector<std::string> args, const std::map<std::string, std::string>& env) {
    struct winsize ws {};
    ws.ws_row = 40;
    ws.ws_col = 120;
    pid_ = forkpty(&fd_, nullptr, nullptr, &ws);
    if (pid_ < 0) throw std::runtime_error("forkpty failed");
    if (pid_ == 0) {
      ApplyEnv(env);
      auto argv = ArgvOf(args);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~PtySession() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

  void Send(const std::string& keys) {
    size_t done = 0;
    while (done < keys.size()) {
      ssize_t n = write(fd_, keys.data() + done, keys.size() - done);
      if (n <= 0) throw std::runtime_error("write to pty failed");
      done += n;
    }
  }

  // Reads until everything printed since the last call contains `text`; returns false on
  // timeout. What was read is appended to transcript().
  bool WaitFor(const std::string& text, double timeout_s = 20) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (unread_.find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) return unread_.find(text) != std::string::npos;
      unread_.append(buf, n);
      transcript_.append(buf, n);
    }
    unread_.erase(0, unread_.find(text) + text.size());
    return true;
  }

  // Waits for the process to exit; returns its exit code, or -1 on timeout or signal.
  int Wait(double timeout_s = 20) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) > 0) {
        ssize_t n = read(fd_, buf, sizeof buf);
        if (n > 0) transcript_.append(buf, n);
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
    }
    return -1;
  }

  const std::string& transcript() const { return transcript_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string unread_;
  std::string transcript_;
};

// A fresh temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/vtrun-test-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace vt::testing
