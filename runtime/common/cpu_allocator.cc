#include "runtime/common/cpu_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <list>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "runtime/common/error.h"

namespace vt {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t SizeClassOf(std::size_t n) { return (n + kHugePage - 1) / kHugePage * kHugePage; }

// `bytes` of fresh anonymous memory aligned to kHugePage, or nullptr when the system has none.
void* MapAligned(std::size_t bytes) {
  const std::size_t span = bytes + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto start = reinterpret_cast<std::uintptr_t>(raw);
  std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t tail = start + span - (aligned + bytes);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  void* block = reinterpret_cast<void*>(aligned);
  // Fewer, larger page faults on first touch where transparent huge pages are "madvise".
  madvise(block, bytes, MADV_HUGEPAGE);
  return block;
}

// Physical memory and swap, in bytes (the most one block could ever be backed by).
std::size_t MachineMemory() {
  static const std::size_t bytes = [] {
    struct sysinfo info {};
    if (sysinfo(&info) != 0) return ~std::size_t{0};
    return (static_cast<std::size_t>(info.totalram) + info.totalswap) * info.mem_unit;
  }();
  return bytes;
}

// The cache of large blocks; the allocator below puts it behind c10::Allocator.
class LargeBlockCache {
 public:
  // A block of `bytes` (a size class), from the cache or newly mapped.
  void* Take(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        auto entry = it->second.back();
        it->second.pop_back();
        void* ptr = entry->ptr;
        order_.erase(entry);
        stats_.cached -= bytes;
        stats_.in_use += bytes;
        ++stats_.hits;
        live_.emplace(ptr, bytes);
        return ptr;
      }
    }
    void* ptr = MapAligned(bytes);
    if (ptr == nullptr) {  // under memory pressure the cache goes first
      ReleaseAll();
      ptr = MapAligned(bytes);
    }
    // As LibTorch's own allocator fails: callers that turn an allocation failure into their
    // own message (vt.data's batches) look for this error.
    TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr,
                     "CPU allocator: cannot allocate memory: ", "mapping ", bytes,
                     " bytes failed: ", std::strerror(errno));
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.in_use += bytes;
    ++stats_.misses;
    live_.emplace(ptr, bytes);
    return ptr;
  }

  // Keeps a large block for reuse (or unmaps it, beyond the limit). False when `ptr` is not
  // a block of this cache.
  bool GiveBack(void* ptr) {
    std::vector<Block> release;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(ptr);
      if (it == live_.end()) return false;
      const std::size_t bytes = it->second;
      live_.erase(it);
      stats_.in_use -= bytes;
      if (bytes > stats_.limit) {
        release.push_back({ptr, bytes});
      } else {
        EvictLocked(bytes, release);
        order_.push_front({ptr, bytes});
        free_[bytes].push_back(order_.begin());
        stats_.cached += bytes;
      }
    }
    Unmap(release);
    return true;
  }

  void SetLimit(std::size_t limit) {
    std::vector<Block> release;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.limit = limit;
      EvictLocked(0, release);
    }
    Unmap(release);
  }

  void ReleaseAll() {
    std::vector<Block> release;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (!order_.empty()) EvictOldestLocked(release);
    }
    Unmap(release);
  }

  CpuAllocatorStats Stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    CpuAllocatorStats s = stats_;
    s.installed = true;
    return s;
  }

 private:
  struct Block {
    void* ptr;
    std::size_t bytes;
  };

  // Drops the least recently freed blocks until `room` more bytes fit under the limit.
  void EvictLocked(std::size_t room, std::vector<Block>& release) {
    while (!order_.empty() && stats_.cached + room > stats_.limit) EvictOldestLocked(release);
  }

  void EvictOldestLocked(std::vector<Block>& release) {
    auto oldest = std::prev(order_.end());
    auto& same = free_[oldest->bytes];
    for (auto it = same.begin(); it != same.end(); ++it) {
      if (*it == oldest) {
        same.erase(it);
        break;
      }
    }
    release.push_back(*oldest);
    stats_.cached -= oldest->bytes;
    ++stats_.evicted;
    order_.erase(oldest);
  }

  static void Unmap(const std::vector<Block>& blocks) {
    for (const Block& b : blocks) munmap(b.ptr, b.bytes);
  }

  mutable std::mutex mutex_;
  // Cached blocks, most recently freed first, and the same blocks by size (most recent last).
  std::list<Block> order_;
  std::unordered_map<std::size_t, std::vector<std::list<Block>::iterator>> free_;
  std::unordered_map<void*, std::size_t> live_;
  CpuAllocatorStats stats_;
};

// Never destroyed: tensors freed during static destruction still return their blocks.
LargeBlockCache* cache = nullptr;
c10::Allocator* fallback = nullptr;

void DeleteLarge(void* ptr) { cache->GiveBack(ptr); }

// raw_allocate hands out what allocate returned (small blocks from the fallback, whose data
// is also its context), so the raw deleter tells the two apart.
void DeleteAny(void* ptr) {
  if (!cache->GiveBack(ptr)) c10::free_cpu(ptr);
}

c10::DataPtr Allocate(std::size_t n) {
  if (n < kLargeBlock) return fallback->allocate(n);
  // Where the kernel overcommits (vm.overcommit_memory = 1, as on some GPU hosts), mapping
  // more than the machine has succeeds, and the process is killed when it writes the block.
  // (Checked before rounding up to a size class, which could overflow.)
  TORCH_CHECK_WITH(
      OutOfMemoryError, n <= MachineMemory(), "CPU allocator: cannot allocate memory: ", n,
      " bytes is more than this machine's memory and swap (", MachineMemory(), " bytes)");
  void* block = cache->Take(SizeClassOf(n));
  return {block, block, &DeleteLarge, c10::Device(c10::DeviceType::CPU)};
}

// LibTorch 1.13's Allocator::allocate is const, 2.x's is not (and 2.x adds copy_data).
constexpr bool kConstAllocate =
    std::is_same<decltype(&c10::Allocator::allocate),
                 c10::DataPtr (c10::Allocator::*)(std::size_t) const>::value;

// Partial specializations, so that only the one that matches this LibTorch is instantiated.
template <bool kConst, typename Base = c10::Allocator>
struct CachingCpuAllocator;

template <typename Base>
struct CachingCpuAllocator<true, Base> final : Base {
  c10::DataPtr allocate(std::size_t n) const override { return Allocate(n); }
  c10::DeleterFnPtr raw_deleter() const override { return &DeleteAny; }
};

template <typename Base>
struct CachingCpuAllocator<false, Base> final : Base {
  c10::DataPtr allocate(std::size_t n) override { return Allocate(n); }
  c10::DeleterFnPtr raw_deleter() const override { return &DeleteAny; }
  void copy_data(void* dest, const void* src, std::size_t count) const {
    if (count > 0) std::memcpy(dest, src, count);
  }
};

std::size_t PhysicalMemory() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                               : std::size_t{0};
}

}  // namespace

std::size_t AllocatorCacheLimitFromEnvironment() {
  const char* env = std::getenv("VTRUN_ALLOC_CACHE");
  if (env == nullptr || *env == '\0') return PhysicalMemory() / 4;
  const std::string value = env;
  if (value == "off") return 0;
  auto bad = [&] {
    return Error(
        "VTRUN_ALLOC_CACHE must be a byte count with an optional K, M or G suffix, or "
        "'off', got '" +
        value + "'");
  };
  if (value[0] < '0' || value[0] > '9') throw bad();
  errno = 0;
  char* end = nullptr;
  unsigned long long n = std::strtoull(env, &end, 10);
  if (errno != 0) throw bad();
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift != 0) ++end;
  if (*end != '\0' || (shift != 0 && n > (~0ULL >> shift))) throw bad();
  return static_cast<std::size_t>(n << shift);
}

void InstallCachingCpuAllocator(std::size_t limit) {
  static std::once_flag once;
  std::call_once(once, [] {
    cache = new LargeBlockCache();
    fallback = c10::GetDefaultCPUAllocator();
    c10::SetCPUAllocator(new CachingCpuAllocator<kConstAllocate>(), /*priority=*/1);
  });
  cache->SetLimit(limit);
}

void ReleaseCachedCpuBlocks() {
  if (cache != nullptr) cache->ReleaseAll();
  malloc_trim(0);  // the heap's free memory too: InitializeRuntime turns automatic trimming off
}

CpuAllocatorStats CachingCpuAllocatorStats() {
  if (cache == nullptr) return {};
  return cache->Stats();
}

}  // namespace vt
