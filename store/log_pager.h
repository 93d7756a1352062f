// Reading a run's log records a step at a time (run:records{} in Lua): each page holds every
// record of the next step that has any (of one boundary, if the query names one), so a reader
// walks a long run holding one step's records at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace vt::store {

class LogPager {
 public:
  // Pages through run `run` of `store` over `query`'s steps and boundary. Throws Error for
  // an invalid run id or boundary name, or a closed store.
  LogPager(std::shared_ptr<Store> store, std::string run, const LogQuery& query);

  // The records of the next step in the range that has any, in key order (boundary, call);
  // empty once no step is left. Throws what Store::ScanLogs throws.
  std::vector<LogRecord> NextStep();

 private:
  std::shared_ptr<Store> store_;
  std::string run_;
  LogQuery query_;  // first_step: the next step to look at
  bool done_ = false;
};

}  // namespace vt::store
