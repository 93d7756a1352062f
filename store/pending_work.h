// Work on a background thread that reads or writes a store (a step written behind, the next
// step's records read ahead) must end before the process does: an exit that tears RocksDB
// down under such a thread loses what it was writing and can crash inside it. A PendingWork
// token counts one piece of such work from before its thread starts until Release() (or its
// destruction); an exit handler, registered with the first token, waits until none is left,
// whatever ends the process through exit() (LuaJIT's os.exit without closing its state,
// std::exit). A killed process is not waited for (the store's batches keep it consistent).
//
// Thread safety: tokens may be created and released on any threads.
#pragma once

namespace vt::store {

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
