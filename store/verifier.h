// StoreVerifier, the class behind Store::Verify() (not part of the store's API): one pass
// over every column family, in key order, collecting what each run's records say and
// checking them against each other. verify.cc holds the driver and the checks of the run
// records, step markers, log records and transcripts; verify_leaves.cc those of what the
// leaves commit to (leaf records, checkpoints, Merkle nodes).
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "store/envelope.h"
#include "store/keys.h"
#include "store/records.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace vt::store {

// Longest run of missing keys reported one by one; longer gaps get one line.
constexpr uint64_t kMaxMissingReported = 1024;

class StoreVerifier {
 public:
  explicit StoreVerifier(const Store* store) : store_(store), db_(store->h_->db) {}

  VerifyReport Run();

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

  // The run of a record in family `f`, or nullptr (reported) if the run has no config.
  RunCheck* Known(Family f, std::string_view key, const std::string& id);

  // verify.cc
  void CheckMeta();
  void CheckRuns();
  void CheckSteps();
  // A progress record that claims far more steps than there are markers (possible only if
  // it was rewritten and re-sealed) would make the per-step checks below run for ever:
  // report it once and leave the run out of them.
  void BoundProgress();
  void CheckLogs();
  void CompareSteps();
  void CheckTranscripts();

  // verify_leaves.cc
  // Reports chunks [from, to) of a checkpoint as missing (one line for a long range).
  void MissingChunks(const std::string& run, uint64_t leaf, uint32_t from, uint32_t to);
  // True if step s of run r has a marker that matched its records.
  static bool StepGood(const RunCheck& r, uint64_t s);
  void CheckLeaves();
  void CheckCheckpoints();
  void CheckMerkle();

  const Store* store_;
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snapshot_ = nullptr;
  VerifyReport report_;
  std::map<std::string, RunCheck> runs_;
};

}  // namespace vt::store
