#include "runtime/common/crash_report.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace vt {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};

void (*volatile g_extra)() = nullptr;

// Writes without allocating (the heap may be what broke).
void Write(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    ssize_t n = write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

// "  0x7f..1234 libfoo.so (symbol+0x12)": the address with what dladdr knows of it.
void WriteAddress(const char* label, uintptr_t address) {
  char line[512];
  Dl_info info{};
  if (address != 0 && dladdr(reinterpret_cast<void*>(address), &info) != 0) {
    const char* object = info.dli_fname != nullptr ? info.dli_fname : "?";
    if (info.dli_sname != nullptr) {
      std::snprintf(line, sizeof line, "%s0x%zx %s (%s+0x%zx)\n", label,
                    static_cast<size_t>(address), object, info.dli_sname,
                    static_cast<size_t>(address - reinterpret_cast<uintptr_t>(info.dli_saddr)));
    } else {
      std::snprintf(line, sizeof line, "%s0x%zx %s+0x%zx\n", label, static_cast<size_t>(address),
                    object,
                    static_cast<size_t>(address - reinterpret_cast<uintptr_t>(info.dli_fbase)));
    }
  } else {
    std::snprintf(line, sizeof line, "%s0x%zx\n", label, static_cast<size_t>(address));
  }
  Write(line);
}

void OnFatalSignal(int sig, siginfo_t* info, void* context) {
  // Later signals (a fault inside this report) die at once.
  for (int s : kSignals) signal(s, SIG_DFL);
  char line[256];
  std::snprintf(line, sizeof line, "\nvtrun: crashed: signal %d (%s) at address %p\n", sig,
                strsignal(sig), info != nullptr ? info->si_addr : nullptr);
  Write(line);
#if defined(__x86_64__)
  if (context != nullptr) {
    const auto* uc = static_cast<const ucontext_t*>(context);
    const auto pc = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
    const auto sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
    WriteAddress("  pc ", pc);
    // After a call to an address that cannot run, the return address is on top of the stack.
    // A fault next to the stack pointer is a stack overflow: its top cannot be read.
    const auto fault = reinterpret_cast<uintptr_t>(info != nullptr ? info->si_addr : nullptr);
    const bool overflow = sig == SIGSEGV && fault + 65536 > sp && fault < sp + 65536;
    if (overflow) Write("  (the fault is at the stack pointer: a stack overflow?)\n");
    if (!overflow && sp != 0 && sp % sizeof(uintptr_t) == 0) {
      WriteAddress("  top of stack (return address of a bad call?) ",
                   *reinterpret_cast<const uintptr_t*>(sp));
    }
  }
#else
  (void)context;
#endif
  Write("  frames:\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  for (int i = 0; i < n; ++i) WriteAddress("    ", reinterpret_cast<uintptr_t>(frames[i]));
  if (auto extra = g_extra; extra != nullptr) extra();
  Write("  (addresses inside vtrun resolve with: addr2line -f -C -e <vtrun> <offset>)\n");
  raise(sig);  // the default action again: the exit status says which signal
}

}  // namespace

void SetCrashReportExtra(void (*extra)()) { g_extra = extra; }

void InstallCrashReport() {
  static std::once_flag once;
  std::call_once(once, [] {
    void* warm[1];
    backtrace(warm, 1);            // loads libgcc's unwinder now, not inside the handler
    static char stack[64 * 1024];  // a stack overflow still gets its report
    stack_t alt{};
    alt.ss_sp = stack;
    alt.ss_size = sizeof stack;
    sigaltstack(&alt, nullptr);
    for (int s : kSignals) {
      struct sigaction old {};
      if (sigaction(s, nullptr, &old) != 0) continue;
      if (old.sa_handler != SIG_DFL) continue;  // someone else's handler stays
      struct sigaction action {};
      action.sa_sigaction = OnFatalSignal;
      action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
      sigemptyset(&action.sa_mask);
      sigaction(s, &action, nullptr);
    }
  });
}

}  // namespace vt
