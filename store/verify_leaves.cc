// Store::Verify(), continued (store/verifier.h): what the leaves commit to. Each leaf record
// against the run's schedule, its hash and the log digest of its steps; each checkpoint's
// chunks, size and digest against its leaf; and every stored Merkle node against the tree of
// the run's leaves.
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/checkpoint_digest.h"
#include "store/log_digest.h"
#include "store/merkle.h"
#include "store/records.h"
#include "store/sha256.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "store/verifier.h"

namespace vt::store {

void StoreVerifier::MissingChunks(const std::string& run, uint64_t leaf, uint32_t from,
                                  uint32_t to) {
  if (to <= from) return;
  if (to - from > kMaxMissingReported) {
    Add(Family::kCheckpoints, CheckpointKey(run, leaf, from),
        "missing checkpoint chunks " + std::to_string(from) + ".." + std::to_string(to - 1));
    return;
  }
  for (uint32_t c = from; c < to; ++c)
    Add(Family::kCheckpoints, CheckpointKey(run, leaf, c), "missing checkpoint chunk");
}

bool StoreVerifier::StepGood(const RunCheck& r, uint64_t s) {
  if (r.bad_markers.count(s) != 0 || r.bad_steps.count(s) != 0) return false;
  auto m = r.markers.find(s);
  auto c = r.computed.find(s);
  return m != r.markers.end() && c != r.computed.end() && m->second.digest == c->second.digest &&
         m->second.records == c->second.records;
}

void StoreVerifier::CheckLeaves() {
  Scan(
      Family::kLeaves,
      [&](const DecodedKey& d, std::string_view key, std::string_view payload) {
        RunCheck* r = Known(Family::kLeaves, key, d.id);
        if (r == nullptr) return;
        std::optional<LeafRecord> rec = DecodeLeafRecord(d.number, payload);
        if (!rec) {
          Add(Family::kLeaves, key, "malformed leaf record");
          r->bad_leaves.insert(d.number);
          return;
        }
        r->leaves[d.number] = *rec;
        if (!r->ready()) return;
        const uint64_t k = r->config.checkpoint_every;
        const uint64_t n = r->config.steps;
        const uint64_t i = d.number;
        if (i >= r->progress.leaves) {
          Add(Family::kLeaves, key,
              "leaf beyond the run's progress (" + std::to_string(r->progress.leaves) + " leaves)");
          r->bad_leaves.insert(i);
          return;
        }
        if (rec->step != LeafStep(i, n, k)) {
          Add(Family::kLeaves, key,
              "leaf records step " + std::to_string(rec->step) + ", the schedule says " +
                  std::to_string(LeafStep(i, n, k)));
          r->bad_leaves.insert(i);
          return;
        }
        if (ComputeLeaf(r->config.spec_hash, i, rec->state_digest, rec->log_digest) != rec->leaf) {
          Add(Family::kLeaves, key,
              "leaf hash does not match SHA-256(spec_hash || i || state || log)");
          r->bad_leaves.insert(i);
          return;
        }
        // The log digest, from the step digests of the interval (when all are sound).
        LogDigestChain chain;
        bool all_good = true;
        if (i > 0) {
          for (uint64_t s = LeafStep(i - 1, n, k) + 1; s <= rec->step; ++s) {
            if (!StepGood(*r, s)) {
              all_good = false;
              break;
            }
            chain.AddStep(r->markers[s].digest);
          }
        }
        if (all_good && chain.value() != rec->log_digest) {
          Add(Family::kLeaves, key, "log digest does not match the logs of the leaf's steps");
          r->bad_leaves.insert(i);
        }
      },
      [&](const DecodedKey& d, std::string_view) { runs_[d.id].bad_leaves.insert(d.number); });
  for (auto& [id, r] : runs_) {
    if (!r.ready()) continue;
    uint64_t present = r.leaves.size() + r.bad_leaves.size();
    if (r.progress.leaves > present + kMaxMissingReported) {
      Add(Family::kRuns, RunKey(id, RunField::kProgress),
          "progress counts " + std::to_string(r.progress.leaves) + " leaves, but only " +
              std::to_string(present) + " leaf records exist");
      r.progress_ok = false;
      continue;
    }
    for (uint64_t i = 0; i < r.progress.leaves; ++i) {
      if (r.leaves.count(i) == 0 && r.bad_leaves.count(i) == 0)
        Add(Family::kLeaves, LeafKey(id, i), "missing leaf record");
    }
  }
}

void StoreVerifier::CheckCheckpoints() {
  std::string cur_run;
  uint64_t cur_leaf = 0;
  bool active = false;
  Sha256 hash;
  CheckpointComputed acc;
  auto finish = [&] {
    if (!active) return;
    acc.digest = hash.Final();
    runs_[cur_run].checkpoints[cur_leaf] = acc;
    active = false;
  };
  auto begin = [&](const DecodedKey& d) {
    if (active && d.id == cur_run && d.number == cur_leaf) return;
    finish();
    cur_run = d.id;
    cur_leaf = d.number;
    active = true;
    acc = CheckpointComputed();
  };
  Scan(
      Family::kCheckpoints,
      [&](const DecodedKey& d, std::string_view key, std::string_view payload) {
        if (Known(Family::kCheckpoints, key, d.id) == nullptr) return;
        begin(d);
        if (d.sub != acc.chunks) {
          MissingChunks(d.id, d.number, acc.chunks, d.sub);
          acc.damaged = true;
          acc.chunks = d.sub;
        }
        hash.Update(payload);
        acc.bytes += payload.size();
        ++acc.chunks;
      },
      [&](const DecodedKey& d, std::string_view) {
        begin(d);
        acc.damaged = true;
        ++acc.chunks;
      });
  finish();
  for (auto& [id, r] : runs_) {
    for (const auto& [leaf, c] : r.checkpoints) {
      std::string key0 = CheckpointKey(id, leaf, 0);
      auto rec = r.leaves.find(leaf);
      if (rec == r.leaves.end()) {
        if (r.bad_leaves.count(leaf) == 0)
          Add(Family::kCheckpoints, key0, "checkpoint without a leaf record");
        continue;
      }
      // A damaged chunk is reported already; a leaf that failed its own checks cannot vouch
      // for the checkpoint either way.
      if (c.damaged || r.bad_leaves.count(leaf) != 0) continue;
      if (c.chunks != rec->second.checkpoint_chunks || c.bytes != rec->second.checkpoint_bytes) {
        MissingChunks(id, leaf, c.chunks, rec->second.checkpoint_chunks);
        if (c.chunks >= rec->second.checkpoint_chunks) {
          Add(Family::kCheckpoints, key0,
              "checkpoint has " + std::to_string(c.bytes) + " bytes in " +
                  std::to_string(c.chunks) + " chunks, its leaf records " +
                  std::to_string(rec->second.checkpoint_bytes) + " in " +
                  std::to_string(rec->second.checkpoint_chunks));
        }
      } else if (c.digest != rec->second.state_digest) {
        Add(Family::kCheckpoints, key0, "checkpoint bytes do not match the leaf's state digest");
      }
    }
    for (const auto& [leaf, rec] : r.leaves) {
      if (r.checkpoints.count(leaf) == 0) MissingChunks(id, leaf, 0, rec.checkpoint_chunks);
    }
  }
}

void StoreVerifier::CheckMerkle() {
  // Expected trees, for runs whose leaves are all present and sound.
  std::map<std::string, std::unique_ptr<MemoryMerkleTree>> trees;
  std::map<std::string, uint64_t> sizes;
  for (auto& [id, r] : runs_) {
    if (!r.ready()) continue;
    sizes[id] = r.progress.leaves;
    bool sound = r.bad_leaves.empty() && r.leaves.size() == r.progress.leaves;
    if (!sound) continue;
    auto tree = std::make_unique<MemoryMerkleTree>();
    for (const auto& [i, rec] : r.leaves) tree->AppendLeafHash(MerkleLeafHash(AsBytes(rec.leaf)));
    trees[id] = std::move(tree);
  }
  // Next expected index per level, for the run being scanned.
  std::string cur;
  bool started = false;
  std::vector<uint64_t> next;
  bool sized = false;
  uint64_t size = 0;
  auto finish = [&] {
    if (!sized) return;
    for (unsigned level = 0; level < 64; ++level) {
      uint64_t count = size >> level;
      if (count == 0) break;
      for (uint64_t j = next[level]; j < count; ++j) {
        Add(Family::kMerkle, NodeKey(cur, static_cast<uint8_t>(level), j), "missing Merkle node");
      }
    }
    sized = false;
  };
  auto begin = [&](const std::string& id) {
    if (started && id == cur) return;
    finish();
    started = true;
    cur = id;
    next.assign(64, 0);
    auto s = sizes.find(id);
    sized = s != sizes.end();
    size = sized ? s->second : 0;
  };
  auto visit = [&](const DecodedKey& d, std::string_view key,
                   const std::optional<std::string_view>& payload) {
    if (Known(Family::kMerkle, key, d.id) == nullptr) return;
    begin(d.id);
    if (!sized) return;
    uint64_t count = d.level < 64 ? size >> d.level : 0;
    if (d.number >= count) {
      Add(Family::kMerkle, key, "Merkle node beyond the run's " + std::to_string(size) + " leaves");
      return;
    }
    for (uint64_t j = next[d.level]; j < d.number; ++j) {
      Add(Family::kMerkle, NodeKey(d.id, d.level, j), "missing Merkle node");
    }
    next[d.level] = d.number + 1;
    if (!payload) return;
    if (payload->size() != kDigestBytes) {
      Add(Family::kMerkle, key, "Merkle node is not 32 bytes");
      return;
    }
    auto t = trees.find(d.id);
    if (t != trees.end() && AsBytes(t->second->Node(d.level, d.number)) != *payload) {
      Add(Family::kMerkle, key,
          d.level == 0 ? "Merkle leaf hash does not match SHA-256(0x00 || leaf)"
                       : "Merkle node does not match the hash of its children");
    }
  };
  Scan(
      Family::kMerkle,
      [&](const DecodedKey& d, std::string_view key, std::string_view payload) {
        visit(d, key, payload);
      },
      [&](const DecodedKey& d, std::string_view key) {
        // Already reported as damaged; count it as present so it is not also "missing".
        if (runs_.count(d.id) == 0) return;
        begin(d.id);
        if (sized && d.level < 64 && d.number < (size >> d.level) && d.number >= next[d.level]) {
          for (uint64_t j = next[d.level]; j < d.number; ++j) {
            Add(Family::kMerkle, NodeKey(d.id, d.level, j), "missing Merkle node");
          }
          next[d.level] = d.number + 1;
        }
      });
  finish();
  // Runs with leaves but no node at all.
  for (const auto& [id, n] : sizes) {
    if (n == 0) continue;
    bool seen = false;
    std::string prefix = IdPrefix(id);
    rocksdb::ReadOptions ro;
    ro.snapshot = snapshot_;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, store_->Cf(Family::kMerkle)));
    it->Seek(prefix);
    seen = it->Valid() && it->key().starts_with(prefix);
    if (!seen) {
      for (unsigned level = 0; (n >> level) != 0; ++level) {
        for (uint64_t j = 0; j < (n >> level); ++j)
          Add(Family::kMerkle, NodeKey(id, static_cast<uint8_t>(level), j), "missing Merkle node");
      }
    }
  }
}

}  // namespace vt::store
