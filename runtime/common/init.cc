#include "runtime/common/init.h"

#include <c10/core/DefaultDtype.h>
#include <c10/util/typeid.h>
#include <dlfcn.h>
#include <malloc.h>

#include <mutex>

#include "runtime/common/cpu_allocator.h"
#include "runtime/common/threads.h"

namespace vt {

void LoadCudaKernels() {
  static std::once_flag once;
  std::call_once(once, [] { dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL); });
}

void InitializeRuntime() {
  LoadCudaKernels();
  // Training allocates and frees the same large buffers every step. Keep freed memory in the
  // heap (mmap only above glibc's 32 MiB maximum threshold, and never trimmed: -1) so buffers
  // are reused instead of page-faulted in again; ATen's buffers above that size are kept by
  // the caching allocator (cpu_allocator.h). A trim threshold of 1 GiB was not enough: GPT-2
  // small frees more than that of smaller buffers at the end of each backward pass, glibc
  // handed it back to the kernel, and the next step faulted 0.8-2.4 GB in again (a tenth of
  // its time in the kernel's `clear_page_erms`). vt.release_memory() trims on request.
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLargeBlock));
  mallopt(M_TRIM_THRESHOLD, -1);
  mallopt(M_TOP_PAD, 64 << 20);
  // VTRUN_ALLOC_CACHE=off leaves LibTorch's default allocator in place.
  if (std::size_t limit = AllocatorCacheLimitFromEnvironment(); limit > 0) {
    InstallCachingCpuAllocator(limit);
  }
  c10::set_default_dtype(caffe2::TypeMeta::Make<double>());
  ConfigureThreadsFromEnvironment();
  BackgroundAllowedByEnvironment();  // a bad VTRUN_BACKGROUND fails at startup, not mid-run
}

}  // namespace vt
