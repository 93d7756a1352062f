// Intra-op thread count for LibTorch (and through it OpenMP/OpenBLAS). LibTorch defaults to
// one thread here, so the host sets it at startup.
#pragma once

namespace vt {

// Sets LibTorch's intra-op threads: `VTRUN_THREADS` if set (an integer >= 1), else the number
// of online CPUs. Throws vt::Error naming the variable if `VTRUN_THREADS` is malformed.
// Returns the count set.
int ConfigureThreadsFromEnvironment();

// The default thread count: `VTRUN_THREADS` if set (an integer in [1, 1024]; throws vt::Error
// naming the variable otherwise), else the number of online CPUs.
int DefaultThreadCount();

// Sets LibTorch's intra-op threads to `n` (>= 1). Throws vt::Error otherwise.
void SetThreads(int n);

// LibTorch's current intra-op thread count.
int Threads();

}  // namespace vt
