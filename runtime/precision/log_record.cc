#include "runtime/precision/log_record.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "runtime/common/error.h"

namespace vt::precision {

double ExactEntry::value() const {
  float f;
  std::memcpy(&f, &fp32_bits, sizeof f);
  return static_cast<double>(f);
}

LogRecord LogRecord::FromStates(std::vector<uint8_t> states, std::vector<ExactEntry> exact) {
  const int64_t n = static_cast<int64_t>(states.size());
  StateCounts counts;
  for (int64_t i = 0; i < n; ++i) {
    switch (states[static_cast<size_t>(i)]) {
      case 0:
        ++counts.none;
        break;
      case 1:
        ++counts.down;
        break;
      case 2:
        ++counts.up;
        break;
      case 3:
        ++counts.exact;
        break;
      default:
        throw Error("log record: state " + std::to_string(states[static_cast<size_t>(i)]) +
                    " at position " + std::to_string(i) + " is not 0..3 (none, down, up, exact)");
    }
  }
  std::sort(exact.begin(), exact.end(),
            [](const ExactEntry& a, const ExactEntry& b) { return a.position < b.position; });
  for (size_t j = 0; j < exact.size(); ++j) {
    const ExactEntry& e = exact[j];
    if (e.position < 0 || e.position >= n) {
      throw Error("log record: EXACT value at position " + std::to_string(e.position) +
                  " is outside the " + std::to_string(n) + " elements");
    }
    if (j > 0 && exact[j - 1].position == e.position) {
      throw Error("log record: two EXACT values for position " + std::to_string(e.position));
    }
    if (states[static_cast<size_t>(e.position)] != 3) {
      throw Error("log record: EXACT value at position " + std::to_string(e.position) +
                  " but its state is " + std::to_string(states[static_cast<size_t>(e.position)]));
    }
    if ((e.fp32_bits & 0x7f800000u) == 0x7f800000u) {
      throw Error("log record: EXACT value at position " + std::to_string(e.position) +
                  " is not a finite FP32 number");
    }
  }
  if (static_cast<int64_t>(exact.size()) != counts.exact) {
    throw Error("log record: " + std::to_string(counts.exact) + " EXACT states but " +
                std::to_string(exact.size()) + " EXACT values");
  }
  LogRecord record;
  record.states_.assign(states.begin(), states.end());
  record.counts_ = counts;
  record.exact_ = std::move(exact);
  return record;
}

double LogRecord::EntropyBits() const {
  const double n = static_cast<double>(size());
  if (size() == 0) return 0.0;
  double h = 0.0;
  for (int64_t c : {counts_.none, counts_.down, counts_.up, counts_.exact}) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / n;
    h -= p * std::log2(p);
  }
  return h;
}

std::string LogRecord::Summary() const {
  return "LogRecord(n=" + std::to_string(size()) + ", none=" + std::to_string(counts_.none) +
         ", down=" + std::to_string(counts_.down) + ", up=" + std::to_string(counts_.up) +
         ", exact=" + std::to_string(counts_.exact) + ")";
}

bool LogRecord::operator==(const LogRecord& o) const {
  return size() == o.size() && counts_ == o.counts_ && exact_ == o.exact_ &&
         (size() == 0 || std::memcmp(states_.data(), o.states_.data(), states_.size()) == 0);
}

uint8_t* LogRecord::ResetForWrite(int64_t n) {
  if (n < 0) throw Error("log record: negative element count " + std::to_string(n));
  states_.resize(static_cast<size_t>(n));
  counts_ = StateCounts{};
  exact_.clear();
  zero_prefix_ = 0;
  return states_.data();
}

uint8_t* LogRecord::ResetToNoneForWrite(int64_t n) {
  const int64_t known = std::min(zero_prefix_, n);  // (states past size() are not kept)
  uint8_t* states = ResetForWrite(n);
  if (n > known) std::memset(states + known, 0, static_cast<size_t>(n - known));
  return states;
}

void LogRecord::ResetToNone(int64_t n) {
  ResetToNoneForWrite(n);
  counts_.none = n;
  zero_prefix_ = n;
}

void LogRecord::FinishWrite(const StateCounts& counts, std::vector<ExactEntry> exact) {
  counts_ = counts;
  exact_ = std::move(exact);
  // By the invariants, a record without entries has every state NONE.
  zero_prefix_ = counts.logged() == 0 ? size() : 0;
}

}  // namespace vt::precision
