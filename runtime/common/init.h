// Process-wide runtime settings applied once at startup by the host (and by test mains).
#pragma once

namespace vt {

// Makes float64 LibTorch's default dtype (vtrun trains in FP64) and sets the intra-op thread
// count from the environment (see threads.h). Throws vt::Error on a malformed VTRUN_THREADS.
void InitializeRuntime();

// Loads LibTorch's CUDA kernels (libtorch_cuda) when this LibTorch has them and the linker
// left them out (nothing names them directly). Must run before anything asks ATen whether
// it has CUDA: ATen keeps the first answer. Once per process; a no-op on a CPU LibTorch.
void LoadCudaKernels();

}  // namespace vt
