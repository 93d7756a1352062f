// Store::Verify(): a full check of every record and every hash derived from them. This file
// drives the pass (store/verifier.h) and checks the store's format record, each run's config
// and progress, its step markers against its log records (recomputing every step digest),
// and the transcripts; verify_leaves.cc checks what the leaves commit to.
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "store/error.h"
#include "store/records.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "store/verifier.h"

namespace vt::store {

VerifyReport StoreVerifier::Run() {
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

StoreVerifier::RunCheck* StoreVerifier::Known(Family f, std::string_view key,
                                              const std::string& id) {
  auto found = runs_.find(id);
  if (found == runs_.end() || !found->second.has_config) {
    Add(f, key, "record of run '" + id + "', which has no config record");
    return nullptr;
  }
  return &found->second;
}

void StoreVerifier::CheckMeta() {
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

void StoreVerifier::CheckRuns() {
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

void StoreVerifier::CheckSteps() {
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

void StoreVerifier::BoundProgress() {
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

void StoreVerifier::CheckLogs() {
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

void StoreVerifier::CompareSteps() {
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

void StoreVerifier::CheckTranscripts() {
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

VerifyReport Store::Verify() const {
  auto g = Guard();
  StoreVerifier verifier(this);
  return verifier.Run();
}

}  // namespace vt::store
