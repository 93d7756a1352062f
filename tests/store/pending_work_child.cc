// The child of pending_work_test.cc: starts a thread that writes PATH after 300 ms, counted as
// store::PendingWork unless the second argument is "uncounted", and exits at once with 7.
//
//   vt_pending_work_child PATH [uncounted]
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "store/pending_work.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string path = argv[1];
  vt::store::PendingWork pending;
  if (argc > 2 && std::string(argv[2]) == "uncounted") pending.Release();
  std::thread([path, pending = std::move(pending)]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ofstream(path) << "done";
    pending.Release();
  }).detach();
  std::exit(7);
}
