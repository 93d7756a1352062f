// vt::HelpedFor: every element once, in chunks of the given size, whichever threads run them;
// helpers do take part; errors reach the caller; nested calls and calls inside a parallel
// region run on their own thread.
#include "runtime/common/helped_for.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/common/threads.h"

namespace vt {
namespace {

TEST_CASE("HelpedFor: every element once, in whole chunks, on any thread count", "[helped_for]") {
  ThreadsRestorer restore;
  for (int threads : {1, 2, 4}) {
    SetThreads(threads);
    for (int64_t chunk : {int64_t{1}, int64_t{7}, int64_t{32768}}) {
      for (int64_t count :
           {int64_t{0}, int64_t{1}, chunk - 1, chunk, chunk + 1, 5 * chunk + 3, int64_t{100000}}) {
        if (count < 0) continue;
        INFO("threads " << threads << " chunk " << chunk << " count " << count);
        std::vector<std::atomic<int>> seen(static_cast<size_t>(count));
        std::atomic<bool> bad_range{false};
        HelpedFor(count, chunk, [&](int64_t first, int64_t last) {
          const bool whole = first % chunk == 0 && (last - first == chunk || last == count);
          if (!whole || first >= last) bad_range = true;
          for (int64_t i = first; i < last; ++i) seen[static_cast<size_t>(i)]++;
        });
        CHECK_FALSE(bad_range);
        int64_t wrong = 0;
        for (const auto& s : seen) wrong += s.load() != 1;
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("HelpedFor: helpers run chunks while the caller does, and none on one thread",
          "[helped_for]") {
  ThreadsRestorer restore;
  const auto caller = std::this_thread::get_id();
  auto threads_used = [&](int64_t chunks) {
    std::mutex mu;
    std::set<std::thread::id> ids;
    HelpedFor(chunks, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // long enough for a wake
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
    return ids;
  };
  SetThreads(1);
  const int64_t before = HelpedChunks();
  auto ids = threads_used(20);
  CHECK(ids == std::set<std::thread::id>{caller});
  CHECK(HelpedChunks() == before);

  // Enough chunks (2 ms each) that a helper wakes in time even on a loaded CI machine.
  SetThreads(2);
  ids = threads_used(100);
  CHECK(ids.count(caller) == 1);
  CHECK(ids.size() == 2);  // one helper joined
  CHECK(HelpedChunks() > before);

  SetThreads(3);
  ids = threads_used(150);
  CHECK(ids.size() == 3);
}

TEST_CASE("HelpedFor: an error in a chunk reaches the caller, and the next call works",
          "[helped_for]") {
  ThreadsRestorer restore;
  for (int threads : {1, 2}) {
    SetThreads(threads);
    INFO("threads " << threads);
    std::atomic<int64_t> ran{0};
    CHECK_THROWS_WITH(HelpedFor(1000, 1,
                                [&](int64_t first, int64_t) {
                                  if (first == 3) throw Error("chunk 3 failed");
                                  std::this_thread::sleep_for(std::chrono::microseconds(200));
                                  ran++;
                                }),
                      "chunk 3 failed");
    CHECK(ran < 999);  // the unclaimed chunks were skipped
    // A helper's own error: the chunks that do not run on the caller throw.
    const auto caller = std::this_thread::get_id();
    if (threads == 2) {
      CHECK_THROWS_WITH(HelpedFor(200, 1,
                                  [&](int64_t, int64_t) {
                                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                    if (std::this_thread::get_id() != caller) {
                                      throw std::runtime_error("helper failed");
                                    }
                                  }),
                        "helper failed");
    }
    std::atomic<int64_t> sum{0};
    HelpedFor(1000, 10, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) sum += i;
    });
    CHECK(sum == 999 * 1000 / 2);
  }
  CHECK_THROWS_WITH(HelpedFor(10, 0, [](int64_t, int64_t) {}),
                    "HelpedFor: chunk must be >= 1, got 0");
}

TEST_CASE("HelpedFor: nested calls and calls inside a parallel region run where they are",
          "[helped_for]") {
  ThreadsRestorer restore;
  SetThreads(2);
  std::atomic<int64_t> total{0};
  std::atomic<bool> moved{false};
  HelpedFor(8, 1, [&](int64_t, int64_t) {
    const auto outer = std::this_thread::get_id();
    HelpedFor(64, 4, [&](int64_t first, int64_t last) {
      if (std::this_thread::get_id() != outer) moved = true;
      total += last - first;
    });
  });
  CHECK(total == 8 * 64);
  CHECK_FALSE(moved);

  total = 0;
  moved = false;
  at::parallel_for(0, 4, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto outer = std::this_thread::get_id();
      HelpedFor(1000, 10, [&](int64_t first, int64_t last) {
        if (std::this_thread::get_id() != outer) moved = true;
        total += last - first;
      });
    }
  });
  CHECK(total == 4000);
  CHECK_FALSE(moved);
}

TEST_CASE("HelpedFor: many short calls in a row", "[helped_for]") {
  // The pattern of a step's boundaries: thousands of calls, most of them over before a helper
  // wakes. Every call must see all of its chunks done when it returns.
  ThreadsRestorer restore;
  SetThreads(2);
  std::vector<int64_t> out(4096);
  for (int call = 0; call < 20000; ++call) {
    const int64_t n = 1 + (call * 37) % 4096;
    HelpedFor(n, 64, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) out[static_cast<size_t>(i)] = call;
    });
    if (out[0] != call || out[static_cast<size_t>(n - 1)] != call) {
      FAIL("call " << call << " returned before its chunks were done");
    }
  }
}

TEST_CASE("HelpedFor: calls from two threads at once each get all their chunks done",
          "[helped_for]") {
  // One call has the helpers; the other runs on its own thread meanwhile.
  ThreadsRestorer restore;
  SetThreads(2);
  std::atomic<int> failures{0};
  auto caller = [&](int salt) {
    std::vector<int64_t> out(3000);
    for (int call = 0; call < 3000; ++call) {
      const int64_t n = 1 + (call * 53 + salt) % 3000;
      const int64_t tag = int64_t{call} * 2 + salt;
      HelpedFor(n, 50, [&](int64_t first, int64_t last) {
        for (int64_t i = first; i < last; ++i) out[static_cast<size_t>(i)] = tag;
      });
      for (int64_t i = 0; i < n; ++i) {
        if (out[static_cast<size_t>(i)] != tag) {
          failures++;
          break;
        }
      }
    }
  };
  std::thread a(caller, 0), b(caller, 1);
  a.join();
  b.join();
  CHECK(failures == 0);
}

}  // namespace
}  // namespace vt
