// A report on stderr when the process dies of a fatal signal (SIGSEGV, SIGBUS, SIGILL,
// SIGFPE): the signal, the faulting address, the instruction pointer, the return address on
// top of the stack (the caller, when a call went through a null function pointer and the
// frame walk has nothing to start from) and the frames glibc's backtrace() finds, each with
// the shared object and symbol dladdr() names. The process then dies of the same signal,
// so its exit status is unchanged. Nothing is reported where another handler was installed.
#pragma once

namespace vt {

// Installs the handlers once per process (later calls do nothing).
void InstallCrashReport();

// Adds lines to the report: `extra` runs inside the signal handler after the frames (the
// host writes the Lua call stack there), so it must not allocate or lock. nullptr removes it.
void SetCrashReportExtra(void (*extra)());

}  // namespace vt
