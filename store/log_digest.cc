#include "store/log_digest.h"

#include <algorithm>

#include "store/error.h"
#include "store/keys.h"

namespace vt::store {

void SortAndCheckRecords(std::vector<LogRecordView>* records) {
  for (const LogRecordView& r : *records) ValidateBoundary(r.boundary);
  std::sort(records->begin(), records->end(), [](const LogRecordView& a, const LogRecordView& b) {
    if (a.boundary != b.boundary) return a.boundary < b.boundary;
    return a.call < b.call;
  });
  for (size_t i = 1; i < records->size(); ++i) {
    const LogRecordView& a = (*records)[i - 1];
    const LogRecordView& b = (*records)[i];
    if (a.boundary == b.boundary && a.call == b.call) {
      throw Error("log record (boundary '" + std::string(b.boundary) + "', call " +
                  std::to_string(b.call) + ") appears twice in one step");
    }
  }
}

Digest StepDigestSorted(uint64_t step, const std::vector<LogRecordView>& sorted) {
  Sha256 h;
  h.UpdateU64(step);
  for (const LogRecordView& r : sorted) {
    h.UpdateU16(static_cast<uint16_t>(r.boundary.size()))
        .Update(r.boundary)
        .UpdateU32(r.call)
        .UpdateU64(r.value.size())
        .Update(r.value);
  }
  return h.Final();
}

Digest StepDigest(uint64_t step, std::vector<LogRecordView> records) {
  if (records.size() > UINT32_MAX) throw Error("too many log records in one step");
  SortAndCheckRecords(&records);
  return StepDigestSorted(step, records);
}

void LogDigestChain::AddStep(const Digest& step_digest) {
  Sha256 h;
  h.Update(value_).Update(step_digest);
  value_ = h.Final();
}

Digest ComputeLeaf(const Digest& spec_hash, uint64_t index, const Digest& state_digest,
                   const Digest& log_digest) {
  Sha256 h;
  h.Update(spec_hash).UpdateU64(index).Update(state_digest).Update(log_digest);
  return h.Final();
}

uint64_t NumLeaves(uint64_t steps, uint64_t every) {
  if (every == 0) throw Error("checkpoint interval must be at least 1");
  if (steps == 0) return 1;
  return (steps - 1) / every + 2;
}

uint64_t LeafStep(uint64_t index, uint64_t steps, uint64_t every) {
  uint64_t total = NumLeaves(steps, every);
  if (index >= total) {
    throw Error("leaf " + std::to_string(index) + " out of range: the run has leaves 0.." +
                std::to_string(total - 1));
  }
  if (index == total - 1) return steps;
  return index * every;
}

uint64_t LeafOfStep(uint64_t step, uint64_t every) {
  if (every == 0) throw Error("checkpoint interval must be at least 1");
  return step == 0 ? 0 : (step - 1) / every + 1;
}

}  // namespace vt::store
