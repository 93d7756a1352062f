// The caching CPU allocator (runtime/common/cpu_allocator.h): large blocks come back for the
// next request of their size class, the cache keeps within its limit (least recently freed
// blocks go first), raw allocations of either size free correctly, threads share it, and a
// malformed VTRUN_ALLOC_CACHE is an error naming it. vt_tests' main installs it as vtrun does.
#include "runtime/common/cpu_allocator.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/error.h"

namespace {

using vt::CachingCpuAllocatorStats;
using vt::kLargeBlock;

constexpr std::size_t kClass = std::size_t{2} << 20;  // the size classes' step

at::Tensor Bytes(std::size_t n) { return at::empty({static_cast<int64_t>(n)}, at::kByte); }

// Sets the cache limit for one test and puts the process's limit back after it.
struct ScopedLimit {
  explicit ScopedLimit(std::size_t limit) { vt::InstallCachingCpuAllocator(limit); }
  ~ScopedLimit() {
    vt::ReleaseCachedCpuBlocks();
    vt::InstallCachingCpuAllocator(vt::AllocatorCacheLimitFromEnvironment());
  }
};

// Sets (or unsets) an environment variable for one test.
struct ScopedEnv {
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("cpu allocator: a freed large block serves the next request of its size class",
          "[allocator]") {
  ScopedLimit limit(std::size_t{1} << 30);
  REQUIRE(CachingCpuAllocatorStats().installed);
  const std::size_t n = kLargeBlock + 12345;
  auto before = CachingCpuAllocatorStats();
  at::Tensor a = Bytes(n);
  void* block = a.data_ptr();
  CHECK(reinterpret_cast<std::uintptr_t>(block) % kClass == 0);
  CHECK(CachingCpuAllocatorStats().misses == before.misses + 1);
  CHECK(CachingCpuAllocatorStats().in_use == before.in_use + kLargeBlock + kClass);
  a.fill_(7);
  a.reset();
  CHECK(CachingCpuAllocatorStats().cached == before.cached + kLargeBlock + kClass);

  // Another size in the same class gets the same block, uninitialized as `empty` promises;
  // `zeros` on it clears it.
  at::Tensor b = at::zeros({static_cast<int64_t>(kLargeBlock + kClass - 1)}, at::kByte);
  CHECK(b.data_ptr() == block);
  CHECK(CachingCpuAllocatorStats().hits == before.hits + 1);
  CHECK(b.sum().item<int64_t>() == 0);
  // A request of the next class does not take it.
  at::Tensor c = Bytes(kLargeBlock + kClass + 1);
  CHECK(c.data_ptr() != block);
  b.reset();
  c.reset();
  CHECK(CachingCpuAllocatorStats().in_use == before.in_use);

  // Small requests stay with LibTorch's default allocator.
  auto small_before = CachingCpuAllocatorStats();
  at::Tensor s = Bytes(kLargeBlock - 1);
  s.reset();
  auto small_after = CachingCpuAllocatorStats();
  CHECK(small_after.hits == small_before.hits);
  CHECK(small_after.misses == small_before.misses);
  CHECK(small_after.cached == small_before.cached);
}

TEST_CASE("cpu allocator: the cache keeps within its limit, least recently freed first",
          "[allocator]") {
  vt::ReleaseCachedCpuBlocks();
  const std::size_t block = kLargeBlock;  // a class of its own
  ScopedLimit limit(2 * block);
  auto before = CachingCpuAllocatorStats();
  at::Tensor first = Bytes(block), second = Bytes(block), third = Bytes(block);
  void* first_ptr = first.data_ptr();
  void* third_ptr = third.data_ptr();
  first.reset();
  second.reset();
  third.reset();  // the first-freed block goes
  auto after = CachingCpuAllocatorStats();
  CHECK(after.cached == 2 * block);
  CHECK(after.evicted == before.evicted + 1);
  at::Tensor again = Bytes(block);  // the most recently freed block comes back first
  CHECK(again.data_ptr() == third_ptr);
  CHECK(again.data_ptr() != first_ptr);
  again.reset();

  SECTION("a block larger than the limit is unmapped when freed") {
    at::Tensor big = Bytes(3 * block);
    big.reset();
    CHECK(CachingCpuAllocatorStats().cached == 2 * block);
  }
  SECTION("lowering the limit drops blocks at once; release drops them all") {
    vt::InstallCachingCpuAllocator(block);
    CHECK(CachingCpuAllocatorStats().cached == block);
    vt::ReleaseCachedCpuBlocks();
    CHECK(CachingCpuAllocatorStats().cached == 0);
  }
  SECTION("with no cache every large request maps new memory") {
    vt::InstallCachingCpuAllocator(0);
    CHECK(CachingCpuAllocatorStats().cached == 0);
    auto s0 = CachingCpuAllocatorStats();
    Bytes(block).reset();
    Bytes(block).reset();
    CHECK(CachingCpuAllocatorStats().misses == s0.misses + 2);
    CHECK(CachingCpuAllocatorStats().hits == s0.hits);
  }
}

TEST_CASE(
    "cpu allocator: memory the system cannot give is LibTorch's out-of-memory error, "
    "after the cache is released",
    "[allocator]") {
  ScopedLimit limit(std::size_t{1} << 30);
  Bytes(kLargeBlock).reset();
  REQUIRE(CachingCpuAllocatorStats().cached > 0);
  // More than the machine has is refused before mapping: where the kernel overcommits, the
  // mapping would succeed and the process be killed when it writes the block.
  CHECK_THROWS_AS(Bytes(std::size_t{1} << 50), c10::OutOfMemoryError);
  CHECK_THROWS_WITH(Bytes(std::size_t{1} << 50),
                    Catch::Contains("more than this machine's memory"));
  // Even where rounding up to a size class would overflow.
  CHECK_THROWS_AS(c10::GetCPUAllocator()->raw_allocate(~std::size_t{0}), c10::OutOfMemoryError);
  CHECK(CachingCpuAllocatorStats().cached > 0);

  // A mapping the system refuses (here: this process's address space capped just above what
  // it maps now) releases the cache, tries again, then fails as LibTorch's allocator does.
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  REQUIRE(pages > 0);
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_AS, &old) == 0);
  rlimit tight = old;
  tight.rlim_cur = static_cast<rlim_t>(pages) * sysconf(_SC_PAGE_SIZE) + (std::size_t{64} << 20);
  REQUIRE(setrlimit(RLIMIT_AS, &tight) == 0);
  bool threw = false;
  try {
    Bytes(std::size_t{1} << 30);
  } catch (const c10::OutOfMemoryError& e) {
    threw = std::string(e.what()).find("cannot allocate memory") != std::string::npos;
  }
  REQUIRE(setrlimit(RLIMIT_AS, &old) == 0);
  CHECK(threw);
  CHECK(CachingCpuAllocatorStats().cached == 0);
}

TEST_CASE("cpu allocator: raw allocations of either size are freed by its raw deleter",
          "[allocator]") {
  ScopedLimit limit(std::size_t{1} << 30);
  c10::Allocator* allocator = c10::GetCPUAllocator();
  auto before = CachingCpuAllocatorStats();
  for (std::size_t n : {std::size_t{64}, std::size_t{1} << 20, kLargeBlock, kLargeBlock + 1}) {
    void* p = allocator->raw_allocate(n);
    REQUIRE(p != nullptr);
    static_cast<char*>(p)[n - 1] = 1;
    allocator->raw_deallocate(p);
  }
  CHECK(CachingCpuAllocatorStats().in_use == before.in_use);
}

TEST_CASE("cpu allocator: threads allocate and free large blocks at once", "[allocator]") {
  ScopedLimit limit(std::size_t{256} << 20);
  auto before = CachingCpuAllocatorStats();
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int i = 0; i < 40; ++i) {
        const int64_t n = static_cast<int64_t>(kLargeBlock / 8) + (i % 3) * 300000;
        at::Tensor x = at::full({n}, static_cast<double>(t * 1000 + i), at::kDouble);
        if (x[n - 1].item<double>() != t * 1000 + i) ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == std::vector<int>(4, 0));
  auto after = CachingCpuAllocatorStats();
  CHECK(after.in_use == before.in_use);
  CHECK(after.hits + after.misses == before.hits + before.misses + 160);
  CHECK(after.cached <= after.limit);
}

namespace {

// Minor page faults of this process so far.
long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Allocates `count` blocks of `bytes` below kLargeBlock (glibc's heap, not the cache) through
// ATen's allocator, writes them, frees them newest first (their memory ends as one free
// stretch at the heap's top, as a step's buffers do) and returns the page faults that writing
// them took.
long FaultsOfSmallBlocks(int count, std::size_t bytes) {
  c10::Allocator* allocator = c10::GetCPUAllocator();
  std::vector<void*> held;
  held.reserve(static_cast<std::size_t>(count));
  const long before = MinorFaults();
  for (int i = 0; i < count; ++i) {
    held.push_back(allocator->raw_allocate(bytes));
    std::memset(held.back(), 1, bytes);
  }
  const long faults = MinorFaults() - before;
  while (!held.empty()) {
    allocator->raw_deallocate(held.back());
    held.pop_back();
  }
  return faults;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace

TEST_CASE(
    "cpu allocator: more than a GiB of smaller buffers freed at once is reused without page "
    "faults, and vt.release_memory's trim hands it back",
    "[allocator]") {
  if (kAddressSanitizer) {
    WARN("skipped: AddressSanitizer's allocator replaces glibc's heap");
    return;
  }
  // GPT-2 small frees about this much at the end of each backward pass; glibc trimmed it (a
  // trim threshold of 1 GiB) and the next step faulted it all in again.
  const int count = 48;
  const std::size_t bytes = std::size_t{24} << 20;
  const long pages = static_cast<long>(count * bytes / static_cast<std::size_t>(getpagesize()));
  // The heap grows to hold them over the first rounds (the blocks' alignment leaves gaps);
  // after that, one round in three at least takes no new memory. With trimming, every round
  // faulted its blocks in again.
  long fewest = pages;
  for (int round = 0; round < 6; ++round) {
    const long faults = FaultsOfSmallBlocks(count, bytes);
    if (round >= 3) fewest = std::min(fewest, faults);
  }
  CHECK(fewest < pages / 20);
  // The control: once trimmed, the same buffers fault in again.
  vt::ReleaseCachedCpuBlocks();
  CHECK(FaultsOfSmallBlocks(count, bytes) > pages / 2);
}

TEST_CASE("cpu allocator: VTRUN_ALLOC_CACHE sets the limit, and a malformed one names the variable",
          "[allocator]") {
  {
    ScopedEnv env("VTRUN_ALLOC_CACHE", std::nullopt);
    CHECK(vt::AllocatorCacheLimitFromEnvironment() > 0);  // a quarter of the memory
  }
  const std::pair<const char*, std::size_t> good[] = {
      {"off", 0},
      {"0", 0},
      {"1024", 1024},
      {"512M", std::size_t{512} << 20},
      {"3g", std::size_t{3} << 30},
      {"64K", std::size_t{64} << 10},
  };
  for (const auto& [text, bytes] : good) {
    ScopedEnv env("VTRUN_ALLOC_CACHE", std::string(text));
    CHECK(vt::AllocatorCacheLimitFromEnvironment() == bytes);
  }
  for (const char* text : {"abc", "12X", "-1", "1.5G", "G", " 1G", "1GB", "99999999999999999999",
                           "18446744073709551615G"}) {
    ScopedEnv env("VTRUN_ALLOC_CACHE", std::string(text));
    INFO(text);
    CHECK_THROWS_WITH(vt::AllocatorCacheLimitFromEnvironment(),
                      Catch::Contains("VTRUN_ALLOC_CACHE") && Catch::Contains(text) &&
                          Catch::Contains("K, M or G"));
  }
}
