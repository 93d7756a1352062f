// The crash report: a process that dies of a fatal signal says where, and still dies of it.
#include "runtime/common/crash_report.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

namespace {

using Callback = void (*)();

// Runs `crash` in a child with the report installed; returns its stderr and wait status.
std::string CrashChild(Callback crash, int* status) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    // Catch2 handles fatal signals itself; the report leaves a handler it finds in place.
    for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) signal(s, SIG_DFL);
    vt::InstallCrashReport();
    crash();
    _exit(0);  // not reached
  }
  close(fds[1]);
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  REQUIRE(waitpid(pid, status, 0) == pid);
  return out;
}

volatile Callback g_null = nullptr;

__attribute__((noinline)) void CallThroughNull() {
  g_null();
  asm volatile("");  // keeps the call a call, not a tail jump
}

// Deep enough to overflow any stack (the depth test only keeps the compiler from calling it
// infinite recursion).
__attribute__((noinline)) int Recurse(int depth) {
  volatile char pad[4096];
  pad[0] = static_cast<char>(depth);
  return depth < 0 ? 0 : Recurse(depth + 1) + pad[0];
}

}  // namespace

TEST_CASE("crash report: a stack overflow is reported from its own stack", "[host]") {
  int status = 0;
  const std::string report = CrashChild([] { Recurse(1); }, &status);
  INFO(report);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
  CHECK(report.find("vtrun: crashed: signal 11") != std::string::npos);
  CHECK(report.find("a stack overflow?") != std::string::npos);
  CHECK(report.find("frames:") != std::string::npos);
}

TEST_CASE("crash report: a call through a null pointer names the signal and its caller", "[host]") {
  int status = 0;
  const std::string report = CrashChild(CallThroughNull, &status);
  INFO(report);
  REQUIRE(WIFSIGNALED(status));  // the same death as without the report
  CHECK(WTERMSIG(status) == SIGSEGV);
  CHECK(report.find("vtrun: crashed: signal 11") != std::string::npos);
  CHECK(report.find("  pc 0x0\n") != std::string::npos);
  // The caller is named from the return address on the stack (the test binary exports its
  // symbols only where it was linked with -rdynamic; the object's name is there either way).
  const auto top = report.find("top of stack");
  REQUIRE(top != std::string::npos);
  CHECK(report.find("vt_tests", top) != std::string::npos);
  CHECK(report.find("frames:") != std::string::npos);
}

TEST_CASE("crash report: installing twice keeps one handler and the default death", "[host]") {
  int status = 0;
  const std::string report = CrashChild(
      [] {
        vt::InstallCrashReport();
        raise(SIGBUS);
      },
      &status);
  INFO(report);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGBUS);
  CHECK(report.find("vtrun: crashed: signal 7") != std::string::npos);
}

TEST_CASE("crash report: the extra lines run after the frames, and can be removed", "[host]") {
  int status = 0;
  std::string report = CrashChild(
      [] {
        vt::SetCrashReportExtra([] {
          ssize_t ignored = write(STDERR_FILENO, "EXTRA\n", 6);
          (void)ignored;
        });
        raise(SIGFPE);
      },
      &status);
  CHECK(report.find("frames:") < report.find("EXTRA\n"));
  CHECK(report.find("EXTRA\n") != std::string::npos);
  report = CrashChild(
      [] {
        vt::SetCrashReportExtra([] {
          ssize_t ignored = write(STDERR_FILENO, "EXTRA\n", 6);
          (void)ignored;
        });
        vt::SetCrashReportExtra(nullptr);
        raise(SIGILL);
      },
      &status);
  CHECK(WTERMSIG(status) == SIGILL);
  CHECK(report.find("EXTRA") == std::string::npos);
}
