// Intra-op thread count for LibTorch (and through it OpenMP/OpenBLAS). LibTorch defaults to
// one thread here, so the host sets it at startup.
#pragma once

namespace vt {

// Sets LibTorch's intra-op threads to DefaultThreadCount(). Returns the count set.
int ConfigureThreadsFromEnvironment();

// The default thread count, which profiles without a count of their own (native) run with: the
// count SetDefaultThreads last set, else `VTRUN_THREADS` if set (an integer in [1, 1024];
// throws vt::Error naming the variable otherwise), else 1. One thread is the default because on the
// shared 2-vCPU machines this project runs on, a second thread was measured to give no speedup
// (GEMM, convolution, rounding) while idle OpenMP threads spinning on busy CPUs cost up to 8x.
int DefaultThreadCount();

// Sets LibTorch's intra-op threads to `n` (>= 1). Throws vt::Error otherwise. A runner's next
// step activates its profile, which sets the count again (DefaultThreadCount for native).
void SetThreads(int n);

// Sets the default thread count (>= 1; throws vt::Error otherwise) and LibTorch's threads to
// it: vt.set_threads, so that the next native step keeps the user's count.
void SetDefaultThreads(int n);

// LibTorch's current intra-op thread count.
int Threads();

// Restores LibTorch's thread count of its construction when it goes out of scope (also on an
// exception): for code that changes the count while it runs, such as the benchmarks.
class ThreadsRestorer {
 public:
  ThreadsRestorer() : saved_(Threads()) {}
  ~ThreadsRestorer() { SetThreads(saved_); }
  ThreadsRestorer(const ThreadsRestorer&) = delete;
  ThreadsRestorer& operator=(const ThreadsRestorer&) = delete;

 private:
  int saved_;
};

// The CPUs this process may run on (its affinity mask; 1 if that cannot be read).
int AvailableCpus();

// Whether work beside a step (encoding records, reading them ahead, writing a step behind) may
// run on a background thread when its option says "auto": `VTRUN_BACKGROUND` = "on" (the
// default), "idle" (only when a CPU is idle: LibTorch's threads fewer than the CPUs this
// process may run on) or "off". "on" is the default because the work is done either way and
// LibTorch's threads leave gaps: with VTRUN_THREADS=2 on 2 vCPUs, GPT 4x256's trainer and
// auditor took 1.28-1.34x and 1.26-1.31x of LibTorch's FP64 step with it, 1.36x and
// 1.40-1.43x with "idle" (EXPERIMENTS.md E6). Throws vt::Error naming the variable and the
// allowed values otherwise.
bool BackgroundAllowedByEnvironment();

}  // namespace vt
