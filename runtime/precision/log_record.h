// A log record: what a trainer writes at one rounding boundary and call (ROUNDING.md "Log
// entries and replay"). It holds one state per element of the rounded tensor (NONE, DOWN,
// UP, EXACT), their counts, and, for every EXACT element, the FP32 bits of the trainer's
// rnd_b(x). Records are produced by Round() (round.h) or by DecodeLog() (codec.h), consumed
// by Replay() and EncodeLog().
//
// Invariants (every constructor enforces them): states are 0..3; counts match the states;
// the EXACT list is sorted by position, has exactly one entry per EXACT state and holds
// finite FP32 values. No ATen: the codec and its fuzzer build without LibTorch.
// Thread safety: const methods may run concurrently; mutation needs exclusive access.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace vt::precision {

// Per-element states, with the numbering of :states() in Lua.
enum class LogState : uint8_t {
  kNone = 0,   // replay with rnd_b(x')
  kDown = 1,   // replay with lo(x') (toward -inf)
  kUp = 2,     // replay with hi(x') (toward +inf)
  kExact = 3,  // replay with the stored FP32 value
};

// How many elements are in each state.
struct StateCounts {
  int64_t none = 0;
  int64_t down = 0;
  int64_t up = 0;
  int64_t exact = 0;

  int64_t total() const { return none + down + up + exact; }
  // DOWN + UP + EXACT: the entries that carry a decision.
  int64_t logged() const { return down + up + exact; }
  bool operator==(const StateCounts& o) const {
    return none == o.none && down == o.down && up == o.up && exact == o.exact;
  }
  bool operator!=(const StateCounts& o) const { return !(*this == o); }
};

// One EXACT element: its position (0-based, flat) and the FP32 bits of rnd_b(x).
struct ExactEntry {
  int64_t position = 0;
  uint32_t fp32_bits = 0;

  double value() const;
  bool operator==(const ExactEntry& o) const {
    return position == o.position && fp32_bits == o.fp32_bits;
  }
};

// std::allocator that leaves bytes uninitialized on resize (the kernels write every state).
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using StateBuffer = std::vector<uint8_t, UninitializedAllocator<uint8_t>>;

class LogRecord {
 public:
  // An empty record (0 elements).
  LogRecord() = default;

  // A record from explicit states (values 0..3, one per element) and the EXACT values,
  // given as (position, FP32 bits) in any order. Throws vt::Error if a state is out of
  // range, an EXACT state has no value or a value has no EXACT state, a position repeats,
  // or a value is not a finite FP32 number. For tests and tools; Round() builds records
  // directly.
  static LogRecord FromStates(std::vector<uint8_t> states, std::vector<ExactEntry> exact);

  // Number of elements (of the tensor the record belongs to).
  int64_t size() const { return static_cast<int64_t>(states_.size()); }

  const StateCounts& counts() const { return counts_; }

  // The states, size() bytes (LogState values).
  const uint8_t* states() const { return states_.data(); }
  LogState state(int64_t i) const { return static_cast<LogState>(states_[static_cast<size_t>(i)]); }

  // The EXACT entries, sorted by position.
  const std::vector<ExactEntry>& exact() const { return exact_; }

  // Entropy floor of the states in bits per element: -sum_s p_s log2 p_s over the four
  // states (EXACT is a fourth symbol; the 32 bits of each EXACT value are not included).
  // 0 for an empty record.
  double EntropyBits() const;

  // "LogRecord(n=1000, none=500, down=251, up=249, exact=0)".
  std::string Summary() const;

  // Same states and EXACT values.
  bool operator==(const LogRecord& o) const;
  bool operator!=(const LogRecord& o) const { return !(*this == o); }

  // Internal writers used by the kernels and the decoder. They keep the capacity of the
  // state buffer, so a record reused across calls does not reallocate.

  // n elements, all NONE (an exact boundary's record), keeping the buffer's capacity.
  void ResetToNone(int64_t n);

  // Resizes to n elements with unspecified states and clears counts and EXACT entries.
  uint8_t* ResetForWrite(int64_t n);

  // ResetForWrite with every state NONE, for a writer that then sets a few (the sparse
  // decoder).
  uint8_t* ResetToNoneForWrite(int64_t n);
  // Sets the counts and EXACT list after the states were written. Not validated: callers
  // guarantee the invariants (Round and DecodeLog do).
  void FinishWrite(const StateCounts& counts, std::vector<ExactEntry> exact);
  uint8_t* mutable_states() {
    zero_prefix_ = 0;
    return states_.data();
  }

 private:
  StateBuffer states_;
  StateCounts counts_;
  std::vector<ExactEntry> exact_;
  // How many leading states are known to be NONE (0) while no writer holds the buffer. A
  // record is reused at its boundary every step, and most records of a calibrated run (and
  // every exact boundary's) are all NONE step after step: ResetToNone then writes nothing
  // (a trainer's exact boundaries and an auditor's sparse records cleared 20-40 MB of states
  // a step otherwise).
  int64_t zero_prefix_ = 0;
};

}  // namespace vt::precision
