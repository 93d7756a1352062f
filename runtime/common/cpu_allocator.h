// LibTorch's CPU allocator with a cache of large blocks.
//
// A training step allocates and frees the same large tensors every step (GPT-2 small's
// logits and their gradient are 206 MB each, AdamW's temporaries 500 MB). glibc serves
// blocks above its mmap threshold (32 MiB at most) with a fresh mmap each time, so every step
// page-faults and zeroes them again: on GPT-2 small that was a third of a trainer's time, in
// the kernel (`clear_page_erms`), and a varying third. This allocator keeps freed blocks of at
// least `kLargeBlock` bytes, by size class (a multiple of 2 MiB, backed by transparent huge
// pages where the kernel allows), and hands them back to the next request of that class.
// Smaller requests go to LibTorch's default allocator, as before.
//
// The cache holds at most its limit in freed blocks (the oldest go first); a block is never
// shared while in use, and a reused block is not cleared (tensors from `empty` are
// uninitialized either way). Installed process-wide by InitializeRuntime (init.h), so
// LibTorch code in the same process (vt.torch_baseline) uses it too.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vt {

// Requests of at least this many bytes are served from, and returned to, the cache: glibc's
// largest mmap threshold, below which InitializeRuntime keeps freed memory in glibc's heap.
constexpr std::size_t kLargeBlock = std::size_t{32} << 20;

struct CpuAllocatorStats {
  bool installed = false;     // whether ATen's CPU allocations go through the cache
  std::size_t limit = 0;      // most bytes of freed blocks kept
  std::size_t cached = 0;     // bytes of freed blocks kept now
  std::size_t in_use = 0;     // bytes of large blocks handed out and not yet freed
  std::uint64_t hits = 0;     // large requests served from the cache
  std::uint64_t misses = 0;   // large requests that mapped new memory
  std::uint64_t evicted = 0;  // cached blocks released to keep within the limit
};

// The cache limit from `VTRUN_ALLOC_CACHE`: a byte count with an optional K, M or G suffix
// (powers of 1024), "0" or "off" for none (InitializeRuntime then leaves LibTorch's default
// allocator in place); unset or empty: a quarter of the physical memory. Throws vt::Error
// naming the variable and the allowed forms otherwise.
std::size_t AllocatorCacheLimitFromEnvironment();

// Makes the caching allocator ATen's CPU allocator, with `limit` bytes of cache (0: large
// blocks are mapped and unmapped on every request, as glibc does). Once per process; a second
// call changes only the limit.
void InstallCachingCpuAllocator(std::size_t limit);

// Releases every cached block to the system, and glibc's heap its free memory (malloc_trim);
// blocks in use stay.
void ReleaseCachedCpuBlocks();

CpuAllocatorStats CachingCpuAllocatorStats();

}  // namespace vt
