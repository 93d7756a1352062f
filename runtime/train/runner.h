// Trainer and auditor: a run of a spec on a device profile, step by step, writing to a store.
//
// The trainer computes every step in the logging mode and commits per step one batch of log
// records (WriteStep), and per leaf one checkpoint (PutCheckpoint): leaf 0 is the initial
// state, leaf i the state after step min(i*k, n). A trainer opened on a store that already
// holds part of its run resumes from the last checkpoint (after Rollback of later steps)
// and ends with the same root as an uninterrupted run.
//
// The auditor replays a trainer's run: for each step it reads the trainer's records (from
// the trainer's store, or the records the trainer disclosed), applies them at every boundary
// on its own profile, checks each entry's legitimacy, and commits the same records and its
// own checkpoints to its own store. Equal states give equal leaves and roots, since the
// leaves commit to the same logs. Per boundary and step it reports corrections,
// illegitimate entries and near misses.
//
// Data parallelism: with RunnerOptions::group, the runner is one rank of a group of
// processes that compute a sharded spec's shards together (train/engine.h ShardPlan). Rank 0
// holds the store: it opens or resumes the run and sends its state to the others, gathers
// every rank's log records and report, commits steps and checkpoints once, and (auditing)
// reads the trainer's records and sends each rank those of its shards. At every checkpoint
// the ranks check that their states are equal. The committed run is the same whatever the
// number of processes: a one-process auditor replays a four-process trainer's run.
#pragma once

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "runtime/data/dataset.h"
#include "runtime/dist/group.h"
#include "runtime/nn/context.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/train/deviation.h"
#include "runtime/train/record_encoder.h"
#include "runtime/train/spec.h"
#include "store/store.h"

namespace vt::train {

struct RunnerOptions {
  std::shared_ptr<data::Dataset> data;  // must match the spec's data digest
  std::shared_ptr<store::Store> store;  // this party's own store (writer)
  std::string run = "run";              // run id in the store. Default: "run".
  std::string profile = "native";       // device profile for every step. Default: "native".
  std::string metadata;                 // stored with the run (e.g. JSON). Default: empty.
  // Initial weights (safetensors) when the spec has model.init; their digest must match.
  std::string init_path;
  // Trainers only: how a dishonest trainer departs from the spec (the game's scenarios).
  // Default: none.
  Deviation deviation;
  // Auditors without a store (a judge): start from this canonical checkpoint after step
  // `start_step` instead of the spec's initial state. Empty: the initial state.
  std::string start_checkpoint;
  int64_t start_step = 0;
  // Calibration: every step report carries the FP64 input of every boundary call whose kind
  // is in this mask (bit 1 << nn::BoundaryKind; 0: none, 0xF: all).
  unsigned capture_kinds = 0;
  // Data parallelism: the group this runner is one rank of (null: one process). Only rank 0
  // has a store (and, auditing, the trainer's records); the spec's shards must be a multiple
  // of the group's world size.
  std::shared_ptr<dist::Group> group;
  // Work on a background thread beside the step: kAuto as `VTRUN_BACKGROUND` says (by
  // default on; common/threads.h BackgroundAllowedByEnvironment).
  enum class Background { kAuto, kOff, kOn };
  // Trainers without a group: encode the step's records as they are written
  // (record_encoder.h); the records are the same bytes either way. Default: kAuto.
  Background encode_ahead = Background::kAuto;
  // Auditors without a group: read and decode the next step's records while a step computes.
  // Only for a record source that may be called for a step before the auditor reaches it (a
  // store's, StoreRecords); a source without records for that step yet is asked again when
  // the step comes. Default: kOff (vt.auditor with a store's logs: kAuto).
  Background read_ahead = Background::kOff;
  // Runners with a store: write each step's records while the next step computes
  // (store::Store::WriteStepBehind). Every call on the store, and the next step's write or
  // checkpoint, waits for it, so whoever reads the store sees the step. Default: kAuto.
  Background write_behind = Background::kAuto;
  // Auditors: the element states a step decodes before it runs, at most. Records beyond it,
  // and any declaring more than precision::kDefaultLogElements, are decoded at their
  // boundary call with its tensor's size as their limit (StepContext::set_deferred_records).
  // The same replay either way. Default: 2^31 (2 GiB of states).
  int64_t eager_log_states = int64_t{1} << 31;
  // Auditors: count the applied entries in the outer part of each window
  // (StepReport::near_limit; precision::ReplayReport::near_limit). A judge's replay: an
  // auditor's illegitimacy claim on an interval holding such entries cannot be refuted by the
  // judge's own values. Default: false.
  bool count_near_limit = false;
};

// Whether `choice` runs work on a background thread now.
bool UseBackground(RunnerOptions::Background choice);

struct StepReport {
  int64_t step = 0;
  double loss = 0.0;
  int64_t elements = 0;  // values rounded in the step
  int64_t logged = 0;    // logged entries (DOWN, UP, EXACT)
  int64_t exact = 0;
  // Values the trainer could have rounded either way unflagged (nn::BoundaryStats): the
  // trainer's real room to steer, logged or not. The auditor's count is authoritative.
  int64_t steerable = 0;
  int64_t steered = 0;  // trainer only: values a deviating trainer tampered with (nn::Tamper)
  int64_t steered_unlogged = 0;  // among them, values an honest trainer leaves unlogged
  int64_t corrections = 0, illegitimate = 0, near_misses = 0;  // auditor only
  int64_t near_limit = 0;  // auditor with RunnerOptions::count_near_limit only
  int64_t log_bytes = 0;   // encoded record bytes committed for the step
  bool checkpoint = false;
  double seconds = 0.0;
  // Where the step's seconds went: reading and decoding the records to replay (auditor),
  // boundaries (nn::StepContext::boundary_seconds), encoding the step's records, writing
  // them to the store, the checkpoint (encode, hash, store); compute is the rest (the
  // model's arithmetic, magnitudes, the optimizer).
  struct Times {
    double prepare = 0.0, boundaries = 0.0, encode = 0.0, commit = 0.0, checkpoint = 0.0;
    double compute = 0.0;
  } times;
  // Auditor: the first boundary call whose rounded values differ from the trainer's trace
  // ("" if none did; a replay that ends with equal states may still show none).
  std::string divergence;
  // Auditor: log records that do not fit the replayed computation (StepContext::Finish)
  // and the first one described ("" if none).
  int64_t log_mismatches = 0;
  std::string log_mismatch;
  std::map<std::string, nn::BoundaryStats> boundaries;
  // With RunnerOptions::capture: each boundary call's FP64 input before rounding.
  std::map<nn::RecordKey, at::Tensor> captured;
  // After Runner::CompareNextStep: per boundary, the divergence from the reference's inputs.
  std::map<std::string, nn::DivergenceStats> divergence_stats;

  // Adds the counts of `other` (elements, logged, exact, steerable, steered(_unlogged),
  // corrections, illegitimate, near_misses, log_bytes, log_mismatches) and keeps the first
  // divergence and mismatch; for totals over steps.
  void AddCounts(const StepReport& other);
};

class Runner {
 public:
  virtual ~Runner() = default;

  const Spec& spec() const { return spec_; }
  int64_t step() const { return step_; }  // last step done (0 = none)
  bool done() const { return step_ >= spec_.steps(); }
  // Runs the next step. Throws vt::Error when done or on any failure (the store keeps the
  // consistent prefix written so far).
  StepReport Step();
  // Calibration: compare the next step's boundary inputs with `reference` (keyed like
  // StepReport::captured) as they happen; the report carries divergence_stats.
  void CompareNextStep(std::map<nn::RecordKey, at::Tensor> reference) {
    compare_next_ = std::move(reference);
  }
  // The last step this runner will run (the spec's steps).
  int64_t last_step() const { return spec_.steps(); }
  // The Merkle root of the leaves stored so far (the committed root once done()). Throws
  // vt::Error for a runner without a store.
  store::Digest Root() const;
  nn::Model& model() { return *model_; }
  const std::string& run() const { return options_.run; }
  store::Store& store() { return *options_.store; }
  const RunnerOptions& options() const { return options_; }
  // The current state (model and optimizer) in its canonical encoding, and its digest.
  std::string StateBytes();

 protected:
  Runner(Spec spec, RunnerOptions options, nn::Mode mode);
  // The records for `step`: the trainer's to write, or the ones to replay (filled by the
  // auditor). Returns the encoded records to commit in the step's batch.
  virtual std::vector<std::pair<nn::RecordKey, std::string>> PrepareStep(int64_t step,
                                                                         nn::StepLog* log) = 0;
  virtual std::vector<std::pair<nn::RecordKey, std::string>> FinishStep(
      int64_t step, const nn::StepContext& context, const nn::StepLog& log,
      std::vector<std::pair<nn::RecordKey, std::string>> prepared) = 0;
  // Set by an auditor's PrepareStep: the trainer's trace of the step, and the records it
  // could not decode (dropped from the step's log; boundary, description), counted as log
  // mismatches by Step.
  nn::StepTrace expected_trace_;
  bool expected_trace_given_ = false;  // the step's trace decoded (it may be empty)
  std::vector<std::pair<std::string, std::string>> undecodable_;
  std::map<nn::RecordKey, std::string> deferred_;  // records decoded at their boundary
  nn::StepLog step_log_;  // one step's records; kept so that their buffers are reused
  // A logging step's records encoded while it computes (record_encoder.h); after step_log_,
  // so that it stops reading the records before they are destroyed. Null until used.
  std::unique_ptr<RecordEncoder> encoder_;
  std::map<nn::RecordKey, at::Tensor> compare_next_;
  void OpenOrResume();
  // Data parallelism, from the constructors: rank 0 runs `open` (OpenOrResume, or loading a
  // start checkpoint); then every rank checks the spec and takes rank 0's step and state.
  // Without a group, just `open`.
  void OpenAcrossRanks(const std::function<void()>& open);
  bool root_rank() const { return !options_.group || options_.group->rank() == 0; }
  // The model and optimizer state, by name (what a checkpoint holds).
  std::vector<std::pair<std::string, at::Tensor*>> State();

  Spec spec_;
  RunnerOptions options_;
  nn::Mode mode_;
  nn::WindowTable windows_;
  std::shared_ptr<nn::Model> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  int64_t step_ = 0;

 private:
  void Checkpoint(uint64_t leaf);
  // Data parallelism: merges the other ranks' parts of the step report into rank 0's.
  void GatherReports(const nn::StepContext& context, StepReport* report);
  // Data parallelism: throws on every rank unless all ranks hold the same state.
  void CheckRanksAgree(int64_t step);
  // The spec's window overrides that name no boundary `seen` in step 1 (in a group, no
  // boundary of any rank's step 1), as UnknownBoundaryOverrides words them ("" when none).
  std::string UnknownOverridesOfFirstStep(const std::map<std::string, nn::BoundaryStats>& seen);
  std::string broken_;  // why this runner refuses to go on ("" while it can)
  // The bytes of the last checkpoint handed to the store (Checkpoint), reused for the next.
  std::shared_ptr<std::string> checkpoint_bytes_;
};

class Trainer : public Runner {
 public:
  // Creates the run in options.store, or resumes it (its spec must be this spec).
  // `mode` kLog is the verifiable trainer. The other modes (kFp32, kFp64, kRounded) exist for
  // experiments and benchmarks: they need no store and commit nothing.
  Trainer(Spec spec, RunnerOptions options, nn::Mode mode = nn::Mode::kLog);

 protected:
  std::vector<std::pair<nn::RecordKey, std::string>> PrepareStep(int64_t step,
                                                                 nn::StepLog* log) override;
  std::vector<std::pair<nn::RecordKey, std::string>> FinishStep(
      int64_t step, const nn::StepContext& context, const nn::StepLog& log,
      std::vector<std::pair<nn::RecordKey, std::string>> prepared) override;
};

// Where an auditor gets the trainer's records for a step: (boundary, call, encoded bytes).
using RecordSource = std::function<std::vector<store::LogRecord>(int64_t step)>;

// A source reading from the trainer's store (which may be opened read-only).
RecordSource StoreRecords(std::shared_ptr<store::Store> store, std::string run);

class Auditor : public Runner {
 public:
  // With options.store, the auditor commits its replay as a run there (resuming a partial
  // one). Without a store it commits nothing (the judge): it starts from
  // options.start_checkpoint after options.start_step, or from the spec's initial state.
  Auditor(Spec spec, RunnerOptions options, RecordSource records);

 protected:
  std::vector<std::pair<nn::RecordKey, std::string>> PrepareStep(int64_t step,
                                                                 nn::StepLog* log) override;
  std::vector<std::pair<nn::RecordKey, std::string>> FinishStep(
      int64_t step, const nn::StepContext& context, const nn::StepLog& log,
      std::vector<std::pair<nn::RecordKey, std::string>> prepared) override;

 private:
  // Decodes a step's records into `log` (and the trace); returns them encoded, to commit.
  std::vector<std::pair<nn::RecordKey, std::string>> DecodeAuditorRecords(
      int64_t step, std::vector<store::LogRecord> records, nn::StepLog* log);
  // The trace of records decoded by DecodeRecordsInto into `log`; a record that failed to
  // decode (or a trace that does not parse) is dropped from `log` and noted in undecodable_.
  // Returns every record encoded, to commit: the trainer committed those bytes.
  std::vector<std::pair<nn::RecordKey, std::string>> FinishDecoding(
      int64_t step, std::vector<store::LogRecord> records, const std::vector<std::string>& errors,
      nn::StepLog* log);
  // The entries of a trainer's trace for the boundary calls this process makes: in a group,
  // its own shards' and the shared ones.
  nn::StepTrace TraceOfMyShards(nn::StepTrace trace) const;
  // Reads and decodes the records of `step` on a background thread (RunnerOptions::read_ahead).
  void StartReadAhead(int64_t step);
  RecordSource records_;
  // What the background thread read: the step's records decoded into a log whose buffers
  // are swapped with the step's, unless the source failed (had none yet: read again then).
  struct Ahead {
    int64_t step = 0;
    bool read = false;
    std::vector<store::LogRecord> records;
    nn::StepLog log;
    std::vector<std::string> errors;
    std::map<nn::RecordKey, std::string> deferred;
  };
  Ahead ahead_;
  std::future<void> ahead_job_;  // after ahead_: joined before ahead_ is destroyed
};

// The first leaf index at which two runs' stored leaves differ, or nullopt if every common
// leaf agrees.
std::optional<uint64_t> FirstDifferingLeaf(const store::Store& a, const std::string& run_a,
                                           const store::Store& b, const std::string& run_b);

}  // namespace vt::train
