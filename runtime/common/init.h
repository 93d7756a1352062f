// Process-wide runtime settings applied once at startup by the host (and by test mains).
#pragma once

namespace vt {

// Makes float64 LibTorch's default dtype (vtrun trains in FP64) and sets the intra-op thread
// count from the environment (see threads.h). Throws vt::Error on a malformed VTRUN_THREADS.
void InitializeRuntime();

}  // namespace vt
