#include "store/log_pager.h"

#include <utility>

#include "store/error.h"
#include "store/keys.h"

namespace vt::store {

LogPager::LogPager(std::shared_ptr<Store> store, std::string run, const LogQuery& query)
    : store_(std::move(store)), run_(std::move(run)), query_(query) {
  ValidateId(run_, "run id");
  if (query_.boundary) ValidateBoundary(*query_.boundary);
  if (store_->closed()) throw Error("store '" + store_->path() + "' is closed");
}

std::vector<LogRecord> LogPager::NextStep() {
  std::vector<LogRecord> page;
  if (done_ || query_.first_step > query_.last_step) return page;
  uint64_t step = 0;
  store_->ScanLogs(run_, query_,
                   [&](uint64_t s, std::string_view b, uint32_t call, std::string_view v) {
                     if (!page.empty() && s != step) return false;
                     step = s;
                     page.push_back(LogRecord{s, std::string(b), call, std::string(v)});
                     return true;
                   });
  if (page.empty() || step == UINT64_MAX) {
    done_ = true;
  } else {
    query_.first_step = step + 1;
  }
  return page;
}

}  // namespace vt::store
