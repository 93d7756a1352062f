// vtrun --nproc N: the launcher of a one-host data-parallel run (bindings/dist.h). It starts
// N copies of this executable, one per rank, with --world/--rank/--rendezvous in front of the
// user's own arguments, waits for them all, and when one fails stops the others (they would
// otherwise wait in a collective until their timeout), as torchrun does.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bindings/dist.h"
#include "store/remove_tree.h"

namespace vt::lua {
namespace {

constexpr int kMaxRanks = 256;
volatile sig_atomic_t g_rank_count = 0;
pid_t g_rank_pids[kMaxRanks];

// SIGTERM/SIGHUP to the launcher: pass it on to every rank (SIGINT from a terminal reaches
// them through the process group already).
void ForwardSignal(int sig) {
  for (int i = 0; i < g_rank_count; ++i) {
    if (g_rank_pids[i] > 0) kill(g_rank_pids[i], sig);
  }
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "stopped (status " + std::to_string(status) + ")";
}

}  // namespace

int LaunchRanks(int nproc, const dist::GroupOptions& options,
                const std::vector<std::string>& args) {
  if (nproc < 1 || nproc > kMaxRanks) {
    std::fprintf(stderr, "vtrun: --nproc must be in [1, %d], got %d\n", kMaxRanks, nproc);
    return 1;
  }
  std::string rendezvous = options.rendezvous;
  std::string made_dir;
  if (rendezvous.empty()) {
    // One host: a FileStore in a fresh directory (no port to pick or to collide).
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/vtrun-rendezvous-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      std::fprintf(stderr, "vtrun: --nproc: cannot make a rendezvous directory %s: %s\n",
                   pattern.c_str(), std::strerror(errno));
      return 1;
    }
    made_dir = buf.data();
    rendezvous = "file://" + made_dir + "/store";
  }
  struct sigaction forward {};
  forward.sa_handler = ForwardSignal;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGTERM, &forward, nullptr);
  sigaction(SIGHUP, &forward, nullptr);

  std::vector<pid_t> pids(static_cast<size_t>(nproc), -1);
  int failed_rank = -1;
  std::string failure;
  for (int r = 0; r < nproc; ++r) {
    std::vector<std::string> argv = {args.empty() ? "vtrun" : args[0],
                                     "--world",
                                     std::to_string(nproc),
                                     "--rank",
                                     std::to_string(r),
                                     "--rendezvous",
                                     rendezvous,
                                     "--timeout",
                                     std::to_string(options.timeout_seconds)};
    if (!options.interface_host.empty()) {
      argv.push_back("--gloo-host");
      argv.push_back(options.interface_host);
    }
    argv.insert(argv.end(), args.begin() + (args.empty() ? 0 : 1), args.end());
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      std::vector<char*> c;
      for (std::string& a : argv) c.push_back(a.data());
      c.push_back(nullptr);
      execv("/proc/self/exe", c.data());
      std::fprintf(stderr, "vtrun: cannot start rank %d: %s\n", r, std::strerror(errno));
      _exit(127);
    }
    if (pid < 0) {
      failed_rank = r;
      failure = std::string("could not be started: ") + std::strerror(errno);
      break;
    }
    pids[static_cast<size_t>(r)] = pid;
    g_rank_pids[r] = pid;
    g_rank_count = r + 1;
  }
  // Ctrl-C on a terminal reaches every rank through the process group, and each stops after
  // its step (together, train/runner.h); the launcher waits for them instead of dying first.
  // (Set after the forks: an ignored signal would stay ignored across the ranks' exec.)
  signal(SIGINT, SIG_IGN);
  int running = 0;
  for (pid_t p : pids) running += p > 0 ? 1 : 0;
  auto stop_all = [&] {
    for (pid_t p : pids) {
      if (p > 0) kill(p, SIGTERM);
    }
  };
  if (failed_rank >= 0) stop_all();
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(
        -1, &status, deadline == std::chrono::steady_clock::time_point::max() ? 0 : WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    if (pid == 0) {
      // Stopping: ranks that ignore SIGTERM for 10 s are killed.
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids) {
          if (p > 0) kill(p, SIGKILL);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    for (int r = 0; r < nproc; ++r) {
      if (pids[static_cast<size_t>(r)] != pid) continue;
      pids[static_cast<size_t>(r)] = -1;
      g_rank_pids[r] = -1;
      --running;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && failed_rank < 0) {
        failed_rank = r;
        failure = Describe(status);
        stop_all();
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      }
    }
  }
  if (!made_dir.empty()) {
    std::error_code ec;
    RemoveTree(made_dir, ec);
  }
  if (failed_rank >= 0) {
    std::fprintf(stderr, "vtrun: rank %d of %d %s; stopped the other ranks\n", failed_rank, nproc,
                 failure.c_str());
    return 1;
  }
  return 0;
}

}  // namespace vt::lua
