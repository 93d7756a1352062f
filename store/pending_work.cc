#include "store/pending_work.h"

#include <condition_variable>
#include <cstdlib>
#include <mutex>

namespace vt::store {
namespace {

std::mutex g_mu;
std::condition_variable g_none_left;
int g_count = 0;

void WaitForPendingWorkAtExit() {
  std::unique_lock<std::mutex> lock(g_mu);
  g_none_left.wait(lock, [] { return g_count == 0; });
}

}  // namespace

PendingWork::PendingWork() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(WaitForPendingWorkAtExit); });
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_count;
}

PendingWork::~PendingWork() { Release(); }

PendingWork::PendingWork(PendingWork&& other) noexcept : counted_(other.counted_) {
  other.counted_ = false;
}

void PendingWork::Release() {
  if (!counted_) return;
  counted_ = false;
  std::lock_guard<std::mutex> lock(g_mu);
  if (--g_count == 0) g_none_left.notify_all();
}

}  // namespace vt::store
