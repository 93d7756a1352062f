#include "runtime/common/threads.h"

#include <ATen/Parallel.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "runtime/common/error.h"

namespace vt {
namespace {
std::atomic<int> g_default_threads{0};  // 0: not set, the environment decides
}  // namespace

int ConfigureThreadsFromEnvironment() {
  int n = DefaultThreadCount();
  SetThreads(n);
  return n;
}

int DefaultThreadCount() {
  if (const int set = g_default_threads.load(); set > 0) return set;
  int n = 0;
  if (const char* env = std::getenv("VTRUN_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    long value = std::strtol(env, &end, 10);
    if (*end != '\0' || value < 1 || value > 1024) {
      throw Error(std::string("VTRUN_THREADS must be an integer in [1, 1024], got '") + env + "'");
    }
    n = static_cast<int>(value);
  } else {
    n = 1;
  }
  return n;
}

void SetThreads(int n) {
  if (n < 1) throw Error("thread count must be >= 1, got " + std::to_string(n));
  // Only on a change: LibTorch's set_num_threads also re-creates its pthreadpool every time
  // it is called, and the new pool's threads spin on the cores the step runs on (every
  // Runner::Step activates its profile; at 2 threads that cost the GPT's FP64 step 6% of
  // its samples).
  if (at::get_num_threads() != n) at::set_num_threads(n);
}

void SetDefaultThreads(int n) {
  SetThreads(n);
  g_default_threads.store(n);
}

int Threads() { return at::get_num_threads(); }

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

bool BackgroundAllowedByEnvironment() {
  const char* env = std::getenv("VTRUN_BACKGROUND");
  const std::string value = env == nullptr ? "" : env;
  if (value.empty() || value == "on") return true;
  if (value == "off") return false;
  if (value != "idle") {
    throw Error("VTRUN_BACKGROUND must be 'on', 'idle' or 'off', got '" + value + "'");
  }
  return AvailableCpus() > at::get_num_threads();
}

}  // namespace vt
