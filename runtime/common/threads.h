// Intra-op thread count for LibTorch (and through it OpenMP/OpenBLAS). LibTorch defaults to
// one thread here, so the host sets it at startup.
#pragma once

namespace vt {

// Sets LibTorch's intra-op threads to DefaultThreadCount(). Returns the count set.
int ConfigureThreadsFromEnvironment();

// The default thread count: `VTRUN_THREADS` if set (an integer in [1, 1024]; throws vt::Error
// naming the variable otherwise), else 1. One thread is the default because on the shared
// 2-vCPU machines this project runs on, a second thread was measured to give no speedup
// (GEMM, convolution, rounding) while idle OpenMP threads spinning on busy CPUs cost up to 8x.
int DefaultThreadCount();

// Sets LibTorch's intra-op threads to `n` (>= 1). Throws vt::Error otherwise.
void SetThreads(int n);

// LibTorch's current intra-op thread count.
int Threads();

}  // namespace vt
