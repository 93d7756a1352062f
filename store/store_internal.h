// Internals shared by store.cc, store_read.cc, store_write.cc and verify*.cc (not part of the
// store's API): the open database handles, a writer's cached run state, the Merkle node
// source backed by the `merkle` family, and a streaming step-digest helper.
#pragma once

#include <rocksdb/cache.h>
#include <rocksdb/db.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/log_digest.h"
#include "store/merkle.h"
#include "store/sha256.h"
#include "store/store.h"
#include "store/writer_claim.h"

namespace vt::store {

struct Store::Handles {
  std::unique_ptr<WriterClaim> claim;  // writers only; released after the database closes
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;  // indexed by Family
  std::shared_ptr<rocksdb::Cache> cache;
  // Readers only: how the database was opened, for CheckTableFiles after each Refresh().
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfds;
  ~Handles();
};

// What a writer keeps of a run between calls, so appending needs no reads.
struct Store::RunState {
  RunInfo info;
  LogDigestChain chain;     // log digest of the steps since the last leaf
  MerkleFrontier frontier;  // right edge of the run's Merkle tree
};

// The run's complete-subtree hashes read from the `merkle` family (Get per node). Throws
// CorruptionError for a missing or damaged node. The caller holds the store's guard.
class StoreNodes : public MerkleNodes {
 public:
  StoreNodes(const Store* store, std::string_view run);
  Digest Node(unsigned level, uint64_t index) const override;

 private:
  const Store* store_;
  std::string run_;
};

// Computes step digests from records streamed in key order, starting at step `first`;
// steps without records get the digest of no records. Each finished step is added to
// `chain` (if not null) and reported to `on_step` (if set).
class StepDigestStream {
 public:
  using OnStep =
      std::function<void(uint64_t step, const Digest& digest, uint32_t records, uint64_t bytes)>;

  StepDigestStream(uint64_t first, LogDigestChain* chain, OnStep on_step = nullptr)
      : next_(first), chain_(chain), on_step_(std::move(on_step)) {}

  // A record of step `step` (>= every step added before).
  void Add(uint64_t step, std::string_view boundary, uint32_t call, std::string_view value) {
    while (next_ < step) Finish();
    if (!open_) {
      h_.UpdateU64(next_);
      open_ = true;
    }
    h_.UpdateU16(static_cast<uint16_t>(boundary.size()))
        .Update(boundary)
        .UpdateU32(call)
        .UpdateU64(value.size())
        .Update(value);
    ++records_;
    bytes_ += value.size();
  }

  // Finishes every step up to and including `last`.
  void FinishThrough(uint64_t last) {
    while (next_ <= last) Finish();
  }

  uint64_t next() const { return next_; }

 private:
  void Finish() {
    if (!open_) h_.UpdateU64(next_);
    Digest d = h_.Final();
    if (chain_ != nullptr) chain_->AddStep(d);
    if (on_step_) on_step_(next_, d, records_, bytes_);
    open_ = false;
    records_ = 0;
    bytes_ = 0;
    ++next_;
  }

  uint64_t next_;
  LogDigestChain* chain_;
  OnStep on_step_;
  Sha256 h_;
  bool open_ = false;
  uint32_t records_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace vt::store
