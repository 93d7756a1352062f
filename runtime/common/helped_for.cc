#include "runtime/common/helped_for.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/common/threads.h"

namespace vt {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Set on helpers, and on a caller while it runs chunks: HelpedFor there runs serially.
thread_local bool t_in_help = false;
std::atomic<int64_t> g_helped_chunks{0};

// One HelpedFor call: its chunks are claimed from `next` by the caller and the helpers.
struct Job {
  c10::function_ref<void(int64_t, int64_t)> body;
  int64_t count = 0, chunk = 0, chunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int> active{0};  // helpers that joined and have not yet left
  std::mutex error_mu;
  std::exception_ptr error;

  explicit Job(c10::function_ref<void(int64_t, int64_t)> b) : body(b) {}

  // Runs chunks until none is left; returns how many it ran.
  int64_t Run() {
    int64_t ran = 0;
    while (true) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return ran;
      const int64_t first = c * chunk;
      try {
        body(first, std::min(count, first + chunk));
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!error) error = std::current_exception();
        }
        next.store(chunks, std::memory_order_relaxed);  // the unclaimed chunks are skipped
        return ran;
      }
      ++ran;
    }
  }
};

// The helper threads: created as calls need them and never destroyed (a process's exit ends
// them wherever they wait; destroying the pool at exit could pull its mutex from under one).
class Pool {
 public:
  static Pool& Get() {
    static Pool* const pool = new Pool;
    return *pool;
  }

  // Runs `job` on the caller and up to `helpers` helper threads (none while another thread's
  // call has the pool: that call runs on its own thread).
  void Run(Job* job, int helpers) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      helpers = busy_ ? 0 : StartHelpersLocked(helpers);
      if (helpers > 0) {
        busy_ = true;
        job_ = job;
        seats_ = helpers;
        ++generation_;
      }
    }
    if (helpers == 1) {
      wake_.notify_one();
    } else if (helpers > 1) {
      wake_.notify_all();
    }
    t_in_help = true;  // a call from inside a chunk runs on its own thread
    job->Run();
    t_in_help = false;
    if (helpers > 0) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        job_ = nullptr;  // a helper waking from here on does not join
        busy_ = false;
      }
      // A helper that joined finishes the chunk in hand (at most one each): spin, then yield
      // in case it was preempted.
      for (int spins = 0; job->active.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < 4096) {
          CpuRelax();
        } else {
          std::this_thread::yield();
        }
      }
    }
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  // Starts helpers up to `wanted` (mu_ held); returns how many there are (fewer if a thread
  // cannot start).
  int StartHelpersLocked(int wanted) {
    while (static_cast<int>(threads_.size()) < wanted) {
      try {
        threads_.emplace_back([this] { Help(); });
      } catch (const std::system_error&) {
        break;
      }
    }
    return std::min(wanted, static_cast<int>(threads_.size()));
  }

  void Help() {
    t_in_help = true;
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      Job* job = job_;
      if (job == nullptr || seats_ == 0) continue;
      --seats_;
      job->active.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      const int64_t ran = job->Run();
      if (ran > 0) g_helped_chunks.fetch_add(ran, std::memory_order_relaxed);
      job->active.fetch_sub(1, std::memory_order_release);  // `job` may be gone after this
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  Job* job_ = nullptr;  // the call in progress, while helpers may join it
  bool busy_ = false;   // a call has the helpers
  int seats_ = 0;       // helpers that may still join it
  uint64_t generation_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace

void HelpedFor(int64_t count, int64_t chunk, c10::function_ref<void(int64_t, int64_t)> body) {
  if (chunk < 1) throw Error("HelpedFor: chunk must be >= 1, got " + std::to_string(chunk));
  if (count <= 0) return;
  Job job(body);
  job.count = count;
  job.chunk = chunk;
  job.chunks = (count - 1) / chunk + 1;
  int helpers = 0;
  if (job.chunks > 1 && !t_in_help && !at::in_parallel_region()) {
    helpers = static_cast<int>(std::min<int64_t>(Threads() - 1, job.chunks - 1));
  }
  if (helpers <= 0) {
    job.Run();
    if (job.error) std::rethrow_exception(job.error);
    return;
  }
  Pool::Get().Run(&job, helpers);
}

int64_t HelpedChunks() { return g_helped_chunks.load(std::memory_order_relaxed); }

}  // namespace vt
