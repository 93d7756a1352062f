// Store::Verify(): a full check of every record and every hash derived from them.
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>

#include <map>
#include <set>

#include "store/checkpoint_digest.h"
#include "store/envelope.h"
#include "store/error.h"
#include "store/records.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace vt::store {

// Longest run of missing keys reported one by one; longer gaps get one line.
constexpr uint64_t kMaxMissingReported = 1024;

class StoreVerifier {
 public:
  explicit StoreVerifier(const Store* store) : store_(store), db_(store->h_->db) {}

  VerifyReport Run() {
    // Block checksums of every SST file first: a damaged block is a store-wide problem
    // (RocksDB cannot tell which keys it held) and iteration stops at it.
    rocksdb::Status s = db_->VerifyChecksum();
    if (!s.ok()) StoreWide("RocksDB file check failed: " + s.ToString());
    if (!store_->options_.read_only) snapshot_ = db_->GetSnapshot();
    CheckMeta();
    CheckRuns();
    CheckSteps();
    BoundProgress();
    CheckLogs();
    CompareSteps();
    CheckLeaves();
    CheckCheckpoints();
    CheckMerkle();
    CheckTranscripts();
    if (snapshot_ != nullptr) db_->ReleaseSnapshot(snapshot_);
    return std::move(report_);
  }

 private:
  struct StepComputed {
    Digest digest{};
    uint32_t records = 0;
    uint64_t bytes = 0;
  };
  struct CheckpointComputed {
    uint64_t bytes = 0;
    uint32_t chunks = 0;
    bool damaged = false;
    Digest digest{};
  };
  struct RunCheck {
    bool has_config = false, config_ok = false, has_progress = false, progress_ok = false;
    RunConfigRecord config;
    ProgressRecord progress;
    std::map<uint64_t, StepInfo> markers;
    std::set<uint64_t> bad_markers;  // present but unreadable
    std::map<uint64_t, StepComputed> computed;
    std::set<uint64_t> bad_steps;  // a record of the step is unreadable
    std::map<uint64_t, LeafRecord> leaves;
    std::set<uint64_t> bad_leaves;
    std::map<uint64_t, CheckpointComputed> checkpoints;
    bool ready() const { return config_ok && progress_ok; }
  };

  void Add(Family f, std::string_view key, const std::string& message) {
    report_.problems.push_back(Problem{FamilyName(f), DescribeKey(f, key), ToHex(key), message});
  }
  void StoreWide(const std::string& message) {
    report_.problems.push_back(Problem{"", "", "", message});
  }

  // Visits every record of `f` in key order. Malformed keys and checksum failures are
  // reported here; `fn(decoded, key, payload)` gets the good ones. `bad(decoded, key)` is
  // told about well-formed keys whose value failed its checksum.
  template <class Fn, class Bad>
  void Scan(Family f, Fn fn, Bad bad) {
    rocksdb::ReadOptions ro;
    ro.snapshot = snapshot_;
    ro.verify_checksums = true;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, store_->Cf(f)));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ++report_.records;
      std::string_view key(it->key().data(), it->key().size());
      std::optional<DecodedKey> d = DecodeKey(f, key);
      if (!d) {
        Add(f, key, "malformed key");
        continue;
      }
      std::optional<std::string_view> payload =
          Unseal(f, key, std::string_view(it->value().data(), it->value().size()));
      if (!payload) {
        Add(f, key, "checksum mismatch (the record is damaged)");
        bad(*d, key);
        continue;
      }
      fn(*d, key, *payload);
    }
    if (!it->status().ok()) {
      StoreWide(std::string("reading column family '") + FamilyName(f) +
                "' stopped: " + it->status().ToString());
    }
  }

  // Reports chunks [from, to) of a checkpoint as missing (one line for a long range).
  void MissingChunks(const std::string& run, uint64_t leaf, uint32_t from, uint32_t to) {
    if (to <= from) return;
    if (to - from > kMaxMissingReported) {
      Add(Family::kCheckpoints, CheckpointKey(run, leaf, from),
          "missing checkpoint chunks " + std::to_string(from) + ".." + std::to_string(to - 1));
      return;
    }
    for (uint32_t c = from; c < to; ++c)
      Add(Family::kCheckpoints, CheckpointKey(run, leaf, c), "missing checkpoint chunk");
  }

  RunCheck* Known(Family f, std::string_view key, const std::string& id) {
    auto found = runs_.find(id);
    if (found == runs_.end() || !found->second.has_config) {
      Add(f, key, "record of run '" + id + "', which has no config record");
      return nullptr;
    }
    return &found->second;
  }

  void CheckMeta() {
    bool seen = false;
    Scan(
        Family::kMeta,
        [&](const DecodedKey&, std::string_view key, std::string_view payload) {
          seen = true;
          if (payload.size() != 4 || ReadU32(payload.data()) != kFormatVersion)
            Add(Family::kMeta, key, "unknown format version");
        },
        [&](const DecodedKey&, std::string_view) { seen = true; });
    if (!seen) StoreWide("the store has no format record");
  }

  void CheckRuns() {
    Scan(
        Family::kRuns,
        [&](const DecodedKey& d, std::string_view key, std::string_view payload) {
          RunCheck& r = runs_[d.id];
          if (d.field == RunField::kConfig) {
            r.has_config = true;
            std::optional<RunConfigRecord> c = DecodeRunConfig(payload);
            if (!c) {
              Add(Family::kRuns, key, "malformed run config");
            } else if (Sha256Of(c->spec) != c->spec_hash) {
              Add(Family::kRuns, key, "spec bytes do not match the stored spec hash");
            } else {
              r.config = std::move(*c);
              r.config_ok = true;
            }
          } else if (d.field == RunField::kProgress) {
            r.has_progress = true;
            std::optional<ProgressRecord> p = DecodeProgress(payload);
            if (!p) {
              Add(Family::kRuns, key, "malformed run progress");
            } else {
              r.progress = *p;
              r.progress_ok = true;
            }
          }
        },
        [&](const DecodedKey& d, std::string_view) {
          RunCheck& r = runs_[d.id];
          if (d.field == RunField::kConfig) r.has_config = true;
          if (d.field == RunField::kProgress) r.has_progress = true;
        });
    for (auto& [id, r] : runs_) {
      if (!r.has_config) Add(Family::kRuns, RunKey(id, RunField::kConfig), "missing run config");
      if (!r.has_progress)
        Add(Family::kRuns, RunKey(id, RunField::kProgress), "missing run progress");
      if (r.ready()) {
        const uint64_t k = r.config.checkpoint_every;
        const uint64_t n = r.config.steps;
        const ProgressRecord& p = r.progress;
        std::string bad;
        if (p.leaves > NumLeaves(n, k)) {
          bad = "more leaves than the run has";
        } else if (p.steps_written > n) {
          bad = "more steps than the run has";
        } else if (p.leaves == 0 && p.steps_written != 0) {
          bad = "steps written before leaf 0";
        } else if (p.leaves > 0 &&
                   (p.steps_written < LeafStep(p.leaves - 1, n, k) ||
                    (p.leaves < NumLeaves(n, k) && p.steps_written > LeafStep(p.leaves, n, k)) ||
                    (p.leaves == NumLeaves(n, k) && p.steps_written != n))) {
          bad = "steps written do not fit the leaves stored";
        }
        if (!bad.empty()) {
          Add(Family::kRuns, RunKey(id, RunField::kProgress), "impossible progress (" + bad + ")");
          r.progress_ok = false;
        }
      }
    }
  }

  void CheckSteps() {
    Scan(
        Family::kSteps,
        [&](const DecodedKey& d, std::string_view key, std::string_view payload) {
          RunCheck* r = Known(Family::kSteps, key, d.id);
          if (r == nullptr) return;
          std::optional<StepInfo> s = DecodeStepInfo(d.number, payload);
          if (!s) {
            Add(Family::kSteps, key, "malformed step marker");
            r->bad_markers.insert(d.number);
            return;
          }
          r->markers[d.number] = *s;
        },
        [&](const DecodedKey& d, std::string_view) { runs_[d.id].bad_markers.insert(d.number); });
  }

  // A progress record that claims far more steps than there are markers (possible only if
  // it was rewritten and re-sealed) would make the per-step checks below run for ever:
  // report it once and leave the run out of them.
  void BoundProgress() {
    for (auto& [id, r] : runs_) {
      if (!r.ready()) continue;
      uint64_t markers = r.markers.size() + r.bad_markers.size();
      if (r.progress.steps_written > markers + kMaxMissingReported) {
        Add(Family::kRuns, RunKey(id, RunField::kProgress),
            "progress counts " + std::to_string(r.progress.steps_written) + " steps, but only " +
                std::to_string(markers) + " step markers exist");
        r.progress_ok = false;
      }
    }
  }

  void CheckLogs() {
    std::string current;
    bool started = false;
    RunCheck* run = nullptr;
    std::unique_ptr<StepDigestStream> stream;
    auto finish = [&] {
      if (stream && run != nullptr) stream->FinishThrough(run->progress.steps_written);
      stream.reset();
    };
    auto start = [&](const std::string& id) {
      finish();
      current = id;
      started = true;
      auto found = runs_.find(id);
      run = found == runs_.end() ? nullptr : &found->second;
      if (run != nullptr && run->ready()) {
        RunCheck* target = run;
        stream = std::make_unique<StepDigestStream>(
            1, nullptr,
            [target](uint64_t step, const Digest& digest, uint32_t records, uint64_t bytes) {
              target->computed[step] = StepComputed{digest, records, bytes};
            });
      }
    };
    Scan(
        Family::kLogs,
        [&](const DecodedKey& d, std::string_view key, std::string_view payload) {
          if (!started || d.id != current) start(d.id);
          if (run == nullptr || !run->has_config) {
            Add(Family::kLogs, key, "record of run '" + d.id + "', which has no config record");
            return;
          }
          if (!run->ready()) return;
          if (d.number == 0 || d.number > run->progress.steps_written) {
            Add(Family::kLogs, key,
                "log record of step " + std::to_string(d.number) +
                    ", which the run's progress does not include (steps 1.." +
                    std::to_string(run->progress.steps_written) + ")");
            return;
          }
          stream->Add(d.number, d.boundary, d.sub, payload);
        },
        [&](const DecodedKey& d, std::string_view) {
          if (!started || d.id != current) start(d.id);
          if (run != nullptr) run->bad_steps.insert(d.number);
        });
    finish();
    // Runs without any log records still need their (empty) steps computed.
    for (auto& [id, r] : runs_) {
      if (!r.ready() || !r.computed.empty() || r.progress.steps_written == 0) continue;
      RunCheck* target = &r;
      StepDigestStream empty(
          1, nullptr,
          [target](uint64_t step, const Digest& digest, uint32_t records, uint64_t bytes) {
            target->computed[step] = StepComputed{digest, records, bytes};
          });
      empty.FinishThrough(r.progress.steps_written);
    }
  }

  void CompareSteps() {
    for (auto& [id, r] : runs_) {
      if (!r.ready()) continue;
      for (const auto& [step, m] : r.markers) {
        if (step == 0 || step > r.progress.steps_written) {
          Add(Family::kSteps, StepKey(id, step),
              "step marker beyond the run's progress (steps 1.." +
                  std::to_string(r.progress.steps_written) + ")");
        }
      }
      for (uint64_t s = 1; s <= r.progress.steps_written; ++s) {
        if (r.bad_markers.count(s) != 0) continue;
        auto m = r.markers.find(s);
        if (m == r.markers.end()) {
          Add(Family::kSteps, StepKey(id, s),
              "missing step marker (the run's progress counts " +
                  std::to_string(r.progress.steps_written) + " steps)");
          continue;
        }
        if (r.bad_steps.count(s) != 0) continue;
        const StepComputed& c = r.computed[s];
        if (c.records != m->second.records || c.bytes != m->second.value_bytes) {
          Add(Family::kSteps, StepKey(id, s),
              "step marker counts " + std::to_string(m->second.records) + " records of " +
                  std::to_string(m->second.value_bytes) + " bytes, the store holds " +
                  std::to_string(c.records) + " of " + std::to_string(c.bytes));
        } else if (c.digest != m->second.digest) {
          Add(Family::kSteps, StepKey(id, s), "the step's records do not match its step digest");
        }
      }
    }
  }

  // True if step s of run r has a marker that matched its records.
  static bool StepGood(const RunCheck& r, uint64_t s) {
    if (r.bad_markers.count(s) != 0 || r.bad_steps.count(s) != 0) return false;
    auto m = r.markers.find(s);
    auto c = r.computed.find(s);
    return m != r.markers.end() && c != r.computed.end() && m->second.digest == c->second.digest &&
           m->second.records == c->second.records;
  }

  void CheckLeaves() {
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
                "leaf beyond the run's progress (" + std::to_string(r->progress.leaves) +
                    " leaves)");
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
          if (ComputeLeaf(r->config.spec_hash, i, rec->state_digest, rec->log_digest) !=
              rec->leaf) {
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

  void CheckCheckpoints() {
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

  void CheckMerkle() {
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
        Add(Family::kMerkle, key,
            "Merkle node beyond the run's " + std::to_string(size) + " leaves");
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
            Add(Family::kMerkle, NodeKey(id, static_cast<uint8_t>(level), j),
                "missing Merkle node");
        }
      }
    }
  }

  void CheckTranscripts() {
    std::map<std::string, uint64_t> next;
    auto visit = [&](const DecodedKey& d, std::string_view key) {
      uint64_t& n = next[d.id];
      if (d.number != n) {
        for (uint64_t j = n; j < d.number && j < n + 1000; ++j) {
          Add(Family::kTranscripts, TranscriptKey(d.id, j), "missing transcript entry");
        }
      }
      n = d.number + 1;
    };
    Scan(
        Family::kTranscripts,
        [&](const DecodedKey& d, std::string_view key, std::string_view) { visit(d, key); },
        [&](const DecodedKey& d, std::string_view key) { visit(d, key); });
  }

  const Store* store_;
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snapshot_ = nullptr;
  VerifyReport report_;
  std::map<std::string, RunCheck> runs_;
};

VerifyReport Store::Verify() const {
  auto g = Guard();
  StoreVerifier verifier(this);
  return verifier.Run();
}

}  // namespace vt::store
