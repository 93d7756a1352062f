// What a leaf commits to: step digests, log digests, leaves, and the leaf schedule
// (PROTOCOL.md, "Objects"; byte layout in store/FORMAT.md, "Hash inputs").
//
//   step_digest(s) = SHA-256(u64be s || records sorted by (boundary, call), each
//                    u16be len(boundary) || boundary || u32be call || u64be len(value) ||
//                    value)   (self-delimiting, so no record count is needed; a step with
//                    no records hashes just u64be s)
//   log_digest_i   = c_m, where c_0 = 32 zero bytes and c_j = SHA-256(c_{j-1} ||
//                    step_digest(s_j)) over the steps s_1 < ... < s_m of leaf i's interval
//                    ((i-1)k, min(ik, n)]; leaf 0 has no steps, so log_digest_0 = 32 zeros
//   leaf_i         = SHA-256(spec_hash || u64be i || state_digest_i || log_digest_i)
//
// The chain makes the log digest cheap to keep while writing (32 bytes of state, updated per
// step from the records in memory, no read back) and to resume after a crash (the store
// persists the chain value with every step). Pure functions; LogDigestChain is a value type.
// Throw Error for invalid records (bad boundary name, duplicate (boundary, call)).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "store/sha256.h"

namespace vt::store {

// One log record of a step, viewed (the caller owns the bytes). `value` is the opaque
// encoded record produced by the precision core.
struct LogRecordView {
  std::string_view boundary;  // 1..255 printable ASCII bytes ("layer1.fc:fwd")
  uint32_t call = 0;          // call counter of the boundary within the step
  std::string_view value;
};

// Sorts `records` into key order (boundary bytes ascending, then call ascending) and checks
// names and uniqueness; throws Error naming the first bad record.
void SortAndCheckRecords(std::vector<LogRecordView>* records);

// step_digest(step) of records already in key order (SortAndCheckRecords).
Digest StepDigestSorted(uint64_t step, const std::vector<LogRecordView>& sorted);

// step_digest(step) of records in any order.
Digest StepDigest(uint64_t step, std::vector<LogRecordView> records);

// The running log digest of one leaf interval.
class LogDigestChain {
 public:
  LogDigestChain() { value_.fill(0); }
  explicit LogDigestChain(const Digest& value) : value_(value) {}
  // c = SHA-256(c || step_digest).
  void AddStep(const Digest& step_digest);
  // The current value: the log digest of the steps added so far.
  const Digest& value() const { return value_; }

 private:
  Digest value_;
};

// leaf_i = SHA-256(spec_hash || u64be index || state_digest || log_digest).
Digest ComputeLeaf(const Digest& spec_hash, uint64_t index, const Digest& state_digest,
                   const Digest& log_digest);

// The leaf schedule of a run of `steps` steps (n) with checkpoints every `every` steps (k,
// >= 1): leaves 0..NumLeaves-1; leaf i is taken after step min(i*k, n); NumLeaves is 1 for
// n == 0, else ceil(n/k) + 1. LeafStep throws Error for i >= NumLeaves. LeafOfStep(s), for
// 1 <= s <= n, is the leaf whose interval holds step s: ceil(s/k).
uint64_t NumLeaves(uint64_t steps, uint64_t every);
uint64_t LeafStep(uint64_t index, uint64_t steps, uint64_t every);
uint64_t LeafOfStep(uint64_t step, uint64_t every);

}  // namespace vt::store
