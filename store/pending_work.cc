#include "store/pending_work.h"

#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>

namespace vt::store {
namespace {

std::mutex g_mu;
std::condition_variable g_none_left;
int g_count = 0;

// The exit actions; g_actions_mu is held while the exit runs them, so a cancel waits.
std::mutex g_actions_mu;
std::map<const void*, std::function<void()>> g_actions;

void WaitForPendingWorkAtExit() {
  {
    std::unique_lock<std::mutex> lock(g_mu);
    g_none_left.wait(lock, [] { return g_count == 0; });
  }
  std::lock_guard<std::mutex> lock(g_actions_mu);
  for (auto& [key, action] : g_actions) action();
  g_actions.clear();
}

void RegisterExitHandler() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(WaitForPendingWorkAtExit); });
}

}  // namespace

void AtExitAfterPendingWork(const void* key, std::function<void()> action) {
  RegisterExitHandler();
  std::lock_guard<std::mutex> lock(g_actions_mu);
  g_actions[key] = std::move(action);
}

void CancelAtExit(const void* key) {
  std::lock_guard<std::mutex> lock(g_actions_mu);
  g_actions.erase(key);
}

bool HasAtExitAction(const void* key) {
  std::lock_guard<std::mutex> lock(g_actions_mu);
  return g_actions.count(key) != 0;
}

PendingWork::PendingWork() {
  RegisterExitHandler();
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
