// Work on a background thread that reads or writes a store (a step written behind, the next
// step's records read ahead) must end before the process does: an exit that tears RocksDB
// down under such a thread loses what it was writing and can crash inside it. A PendingWork
// token counts one piece of such work from before its thread starts until Release() (or its
// destruction); an exit handler, registered with the first token, waits until none is left,
// whatever ends the process through exit() (LuaJIT's os.exit without closing its state,
// std::exit). A killed process is not waited for (the store's batches keep it consistent).
//
// The same handler then runs the exit actions registered with AtExitAfterPendingWork: a
// writer's flush of the steps it wrote without the write-ahead log, which would otherwise
// end with the process.
//
// Thread safety: tokens may be created and released, and actions registered and cancelled,
// on any threads.
#pragma once

#include <functional>

namespace vt::store {

// Runs `action` when the process exits through exit(), after all pending work has ended;
// `key` names it (registering a key again replaces its action). An action must not call
// these functions.
void AtExitAfterPendingWork(const void* key, std::function<void()> action);
// Forgets the action of `key`, waiting for it if the exit is running it.
void CancelAtExit(const void* key);
// Whether an action is registered under `key` (tests: a closed store leaves none behind).
bool HasAtExitAction(const void* key);

class PendingWork {
 public:
  PendingWork();   // counts it (registers the exit handler once)
  ~PendingWork();  // Release()
  PendingWork(PendingWork&& other) noexcept;
  PendingWork& operator=(PendingWork&&) = delete;
  PendingWork(const PendingWork&) = delete;
  PendingWork& operator=(const PendingWork&) = delete;

  // The work is done: no longer counted (idempotent).
  void Release();

 private:
  bool counted_ = true;
};

}  // namespace vt::store
