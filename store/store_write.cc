// Writing a store (its single writer): creating runs and setting their metadata, appending
// steps with their log records, checkpoints with their leaves and Merkle nodes, rolling a
// run back to its last leaf, and appending transcript entries. Each call writes one RocksDB
// batch of sealed records (store/envelope.h). Reading is in store_read.cc.
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/slice.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "store/checkpoint_digest.h"
#include "store/envelope.h"
#include "store/error.h"
#include "store/pending_work.h"
#include "store/records.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace vt::store {

namespace {

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// Steps with at least this many value bytes hash on a second thread while their batch is
// built (CommitStep): below it, starting the thread costs more than the overlap saves.
constexpr uint64_t kParallelDigestBytes = uint64_t{1} << 20;

// Puts `payload` sealed under `key` without copying the payload into a temporary.
void PutSealed(rocksdb::WriteBatch* batch, rocksdb::ColumnFamilyHandle* cf, Family f,
               const std::string& key, std::string_view payload) {
  std::string trailer = EnvelopeTrailer(f, key, payload);
  rocksdb::Slice key_slice(key);
  rocksdb::Slice parts[2] = {rocksdb::Slice(payload.data(), payload.size()),
                             rocksdb::Slice(trailer)};
  rocksdb::Status s =
      batch->Put(cf, rocksdb::SliceParts(&key_slice, 1), rocksdb::SliceParts(parts, 2));
  if (!s.ok()) throw Error(std::string("cannot add a record to a write batch: ") + s.ToString());
}

// A record in the dense log encoding (runtime/precision/LOG_FORMAT.md: magic "VTLG", a
// version byte, encoding byte 0). Its 1.6 bits per element are within 7% of the states'
// entropy under the paper's window: zstd saved under 1% of GPT 4x256's 6.5 MB logs a step
// and cost an auditor about 10 ms of CPU a step, while sparse records (calibrated windows)
// shrink about 3x (EXPERIMENTS.md E6, twenty-first session).
bool DenseLogRecord(std::string_view value) {
  return value.size() > 5 && value.compare(0, 4, "VTLG") == 0 && value[5] == 0;
}

// Bytes of a step's records in the dense encoding.
uint64_t DenseBytes(const std::vector<LogRecordView>& records) {
  uint64_t dense = 0;
  for (const LogRecordView& rec : records) {
    if (DenseLogRecord(rec.value)) dense += rec.value.size();
  }
  return dense;
}

}  // namespace

void Store::SetLogsCompressing(bool on) {
  const char* type = !on                                      ? "kNoCompression"
                     : log_compression_ == Compression::kZstd ? "kZSTD"
                                                              : "kLZ4Compression";
  if (h_->db->SetOptions(Cf(Family::kLogs), {{"compression", type}}).ok()) {
    logs_compressing_ = on;
  }
}

// ---------------------------------------------------------------------------------------
// Runs

RunInfo Store::CreateRun(std::string_view id, const RunConfig& config) {
  CheckWritable();
  ValidateId(id, "run id");
  if (config.checkpoint_every < 1) {
    throw Error("run '" + std::string(id) + "': checkpoint_every must be at least 1, got " +
                std::to_string(config.checkpoint_every));
  }
  if (config.steps > (uint64_t{1} << 53)) {
    throw Error("run '" + std::string(id) + "': steps must be at most 2^53, got " +
                std::to_string(config.steps));
  }
  if (config.spec.size() > kMaxValueBytes || config.metadata.size() > kMaxValueBytes) {
    throw Error("run '" + std::string(id) + "': spec and metadata must be at most 1 GiB each");
  }
  auto g = Guard();
  std::lock_guard<std::mutex> w(write_mu_);
  if (GetRaw(Family::kRuns, RunKey(id, RunField::kConfig)) ||
      GetRaw(Family::kRuns, RunKey(id, RunField::kProgress))) {
    throw Error("run '" + std::string(id) + "' already exists in store '" + path_ + "'");
  }
  RunConfigRecord c;
  c.checkpoint_every = config.checkpoint_every;
  c.steps = config.steps;
  c.spec_hash = Sha256Of(config.spec);
  c.spec = config.spec;
  ProgressRecord p;
  p.chain.fill(0);
  rocksdb::WriteBatch batch;
  std::string ck = RunKey(id, RunField::kConfig);
  std::string pk = RunKey(id, RunField::kProgress);
  std::string mk = RunKey(id, RunField::kMetadata);
  PutSealed(&batch, Cf(Family::kRuns), Family::kRuns, ck, EncodeRunConfig(c));
  PutSealed(&batch, Cf(Family::kRuns), Family::kRuns, pk, EncodeProgress(p));
  PutSealed(&batch, Cf(Family::kRuns), Family::kRuns, mk, config.metadata);
  // Stale records of an id that was never fully created cannot exist (one batch), but a
  // run id may be reused only if nothing of it is left in any family.
  WriteBatchOrThrow(&batch, "a new run");
  run_states_.erase(std::string(id));
  RunInfo info;
  info.id = std::string(id);
  info.spec = config.spec;
  info.spec_hash = c.spec_hash;
  info.checkpoint_every = c.checkpoint_every;
  info.steps = c.steps;
  info.metadata = config.metadata;
  return info;
}

void Store::SetMetadata(std::string_view run, std::string_view metadata) {
  CheckWritable();
  ValidateId(run, "run id");
  if (metadata.size() > kMaxValueBytes) throw Error("run metadata must be at most 1 GiB");
  auto g = Guard();
  std::lock_guard<std::mutex> w(write_mu_);
  RunState& st = WriterState(run);
  rocksdb::WriteBatch batch;
  PutSealed(&batch, Cf(Family::kRuns), Family::kRuns, RunKey(run, RunField::kMetadata), metadata);
  WriteBatchOrThrow(&batch, "run metadata");
  st.info.metadata = std::string(metadata);
}

Store::RunState& Store::WriterState(std::string_view run) {
  auto found = run_states_.find(run);
  if (found != run_states_.end()) return *found->second;
  auto st = std::make_unique<RunState>();
  st->info = LoadRun(run);
  std::optional<std::string> progress = GetSealed(Family::kRuns, RunKey(run, RunField::kProgress));
  st->chain = LogDigestChain(DecodeProgress(*progress)->chain);
  StoreNodes nodes(this, run);
  st->frontier = MerkleFrontier::Load(nodes, st->info.leaves);
  RunState& ref = *st;
  run_states_.emplace(std::string(run), std::move(st));
  return ref;
}

// ---------------------------------------------------------------------------------------
// Writing steps and checkpoints

// The checks of a step write against the run's state (order, sizes, record keys); sorts the
// records. Call with the store open and write_mu_ held.
void Store::CheckStepWrite(std::string_view run, uint64_t step,
                           std::vector<LogRecordView>* records) {
  RunState& st = WriterState(run);
  const RunInfo& info = st.info;
  const std::string r = Quote(run);
  if (info.complete()) {
    throw Error("run " + r + " is complete (" + std::to_string(info.steps) + " steps, " +
                std::to_string(info.leaves) + " leaves); step " + std::to_string(step) +
                " cannot be written");
  }
  if (info.leaves == 0)
    throw Error("run " + r + ": store leaf 0 (the initial checkpoint) before step 1");
  if (step != info.steps_written + 1) {
    throw Error("run " + r + ": expected step " + std::to_string(info.steps_written + 1) +
                " next, got step " + std::to_string(step));
  }
  uint64_t due = LeafStep(info.leaves, info.steps, info.checkpoint_every);
  if (info.steps_written >= due) {
    throw Error("run " + r + ": store leaf " + std::to_string(info.leaves) +
                " (the checkpoint after step " + std::to_string(due) + ") before step " +
                std::to_string(step));
  }
  if (records->size() > UINT32_MAX)
    throw Error("run " + r + ": too many log records in step " + std::to_string(step));
  SortAndCheckRecords(records);
  for (const LogRecordView& rec : *records) {
    if (rec.value.size() > kMaxValueBytes) {
      throw Error("run " + r + " step " + std::to_string(step) + ": log record '" +
                  std::string(rec.boundary) + "' call " + std::to_string(rec.call) +
                  " is larger than 1 GiB");
    }
  }
}

// Writes a step CheckStepWrite accepted (records sorted). Call with the store open and
// write_mu_ held.
Digest Store::CommitStep(std::string_view run, uint64_t step,
                         const std::vector<LogRecordView>& records) {
  RunState& st = WriterState(run);
  uint64_t value_bytes = 0;
  for (const LogRecordView& rec : records) value_bytes += rec.value.size();
  // Compression follows what the steps hold (readers see the same bytes either way): off once
  // a step holds nine tenths of its bytes or more in dense records, on again once one holds
  // less than half. The gap keeps steps near either line from switching it (and RocksDB from
  // writing a new options file) at every step.
  if (log_compression_ != Compression::kNone && value_bytes > 0) {
    const uint64_t dense = DenseBytes(records);
    if (logs_compressing_ && dense * 10 >= value_bytes * 9) SetLogsCompressing(false);
    if (!logs_compressing_ && dense * 2 < value_bytes) SetLogsCompressing(true);
  }
  StepInfo marker;
  marker.step = step;
  marker.records = static_cast<uint32_t>(records.size());
  marker.value_bytes = value_bytes;
  // The step digest is one SHA-256 stream over every value (about 3.7 ms for GPT 4x256's
  // 6.5 MB under the paper's window, at 1.8 GB/s); the batch's copy of the values (about
  // 1 ms) needs no digest, so a large step hashes on a second thread meanwhile.
  // (A thread that cannot start leaves the hashing to this one.)
  std::future<Digest> digest;
  if (value_bytes >= kParallelDigestBytes) {
    try {
      digest = std::async(std::launch::async,
                          [step, &records] { return StepDigestSorted(step, records); });
    } catch (const std::system_error&) {
    }
  }

  // Reserve the batch up front: growing it by doubling would copy every value again.
  rocksdb::WriteBatch batch(static_cast<size_t>(value_bytes) +
                            records.size() * (run.size() + kMaxBoundaryBytes / 8 + 48) + 512);
  rocksdb::ColumnFamilyHandle* logs = Cf(Family::kLogs);
  for (const LogRecordView& rec : records) {
    PutSealed(&batch, logs, Family::kLogs, LogKey(run, step, rec.boundary, rec.call), rec.value);
  }
  marker.digest = digest.valid() ? digest.get() : StepDigestSorted(step, records);
  LogDigestChain chain = st.chain;
  chain.AddStep(marker.digest);
  PutSealed(&batch, Cf(Family::kSteps), Family::kSteps, StepKey(run, step), EncodeStepInfo(marker));
  ProgressRecord p{step, st.info.leaves, chain.value()};
  PutSealed(&batch, Cf(Family::kRuns), Family::kRuns, RunKey(run, RunField::kProgress),
            EncodeProgress(p));
  // Once a step went in without the WAL, smaller ones follow it there too until the next
  // flush: through the WAL each would first have to flush (and sync) the store.
  if (!options_.sync && (value_bytes >= options_.unlogged_step_bytes || unlogged_pending_)) {
    WriteUnloggedOrThrow(&batch, "a step");
  } else {
    WriteBatchOrThrow(&batch, "a step");
  }
  st.info.steps_written = step;
  st.chain = chain;
  return marker.digest;
}

Digest Store::WriteStep(std::string_view run, uint64_t step, std::vector<LogRecordView> records) {
  CheckWritable();
  ValidateId(run, "run id");
  auto g = Guard();
  std::lock_guard<std::mutex> w(write_mu_);
  CheckStepWrite(run, step, &records);
  return CommitStep(run, step, records);
}

void Store::WriteStepBehind(std::string_view run, uint64_t step, std::vector<LogRecordView> records,
                            std::shared_ptr<const void> keep) {
  CheckWritable();
  ValidateId(run, "run id");
  std::lock_guard<std::mutex> b(behind_mu_);
  WaitBehindLocked();
  if (closing_) throw Error("store '" + path_ + "' is closed");
  {
    auto g = OpenLock();
    std::lock_guard<std::mutex> w(write_mu_);
    CheckStepWrite(run, step, &records);
  }
  behind_what_ = "step " + std::to_string(step) + " of run " + Quote(run);
  PendingWork pending;  // the exit waits for this write (store/pending_work.h)
  behind_ = std::async(
      std::launch::async,
      [this, run = std::string(run), step, records = std::move(records), keep = std::move(keep),
       fail = std::exchange(fail_behind_for_test_, {}),
       hold = std::exchange(hold_behind_for_test_, {}), pending = std::move(pending)]() mutable {
        // Moved out of the callable, which lives on in the future until the next wait: the
        // records' bytes go when the write ends, then the count.
        const PendingWork counted = std::move(pending);
        const std::shared_ptr<const void> bytes = std::move(keep);
        if (hold.valid()) hold.wait();
        if (!fail.empty()) throw Error(fail);
        auto g = OpenLock();
        std::lock_guard<std::mutex> w(write_mu_);
        CommitStep(run, step, records);
      });
}

void Store::WaitBehind() const {
  std::lock_guard<std::mutex> b(behind_mu_);
  WaitBehindLocked();
}

void Store::WaitBehindLocked() const {
  if (behind_.valid()) {
    try {
      behind_.get();
    } catch (const std::exception& e) {
      behind_failed_ = "store '" + path_ + "': " + behind_what_ + " was not written: " + e.what() +
                       " (the store takes no more calls: close it and reopen it; its runs resume "
                       "from their last checkpoint)";
    }
  }
  if (!behind_failed_.empty()) throw Error(behind_failed_);
}

LeafRecord Store::PutCheckpoint(std::string_view run, uint64_t leaf, std::string_view checkpoint,
                                const PutCheckpointOptions& options) {
  CheckWritable();
  ValidateId(run, "run id");
  auto g = Guard();
  std::lock_guard<std::mutex> w(write_mu_);
  CheckCheckpointWrite(run, leaf, checkpoint, options);
  return CommitCheckpoint(run, leaf, checkpoint, options);
}

void Store::PutCheckpointBehind(std::string_view run, uint64_t leaf,
                                std::shared_ptr<const std::string> checkpoint) {
  CheckWritable();
  ValidateId(run, "run id");
  if (checkpoint == nullptr) throw Error("PutCheckpointBehind: no checkpoint bytes");
  std::lock_guard<std::mutex> b(behind_mu_);
  WaitBehindLocked();
  if (closing_) throw Error("store '" + path_ + "' is closed");
  {
    auto g = OpenLock();
    std::lock_guard<std::mutex> w(write_mu_);
    CheckCheckpointWrite(run, leaf, *checkpoint, {});
    // A run's last leaf is written here: a finished run is whole in the store (and flushed)
    // when this returns, for a reader that opens it, a copy of the directory or a kill.
    if (leaf + 1 == WriterState(run).info.total_leaves()) {
      CommitCheckpoint(run, leaf, *checkpoint, {});
      return;
    }
  }
  behind_what_ = "the checkpoint of leaf " + std::to_string(leaf) + " of run " + Quote(run);
  PendingWork pending;  // the exit waits for this write (store/pending_work.h)
  behind_ = std::async(
      std::launch::async,
      [this, run = std::string(run), leaf, checkpoint = std::move(checkpoint),
       fail = std::exchange(fail_behind_for_test_, {}),
       hold = std::exchange(hold_behind_for_test_, {}), pending = std::move(pending)]() mutable {
        const PendingWork counted = std::move(pending);
        const std::shared_ptr<const std::string> bytes = std::move(checkpoint);
        if (hold.valid()) hold.wait();
        if (!fail.empty()) throw Error(fail);
        auto g = OpenLock();
        std::lock_guard<std::mutex> w(write_mu_);
        CommitCheckpoint(run, leaf, *bytes, {});
      });
}

void Store::CheckCheckpointWrite(std::string_view run, uint64_t leaf, std::string_view checkpoint,
                                 const PutCheckpointOptions& options) {
  if (checkpoint.size() > kMaxCheckpointBytes) throw Error("checkpoint is larger than 1 TiB");
  if (options.metadata && options.metadata->size() > kMaxValueBytes)
    throw Error("run metadata must be at most 1 GiB");
  RunState& st = WriterState(run);
  const RunInfo& info = st.info;
  const std::string r = Quote(run);
  const uint64_t total = info.total_leaves();
  if (info.leaves >= total) {
    throw Error("run " + r + " is complete (" + std::to_string(total) + " leaves); leaf " +
                std::to_string(leaf) + " cannot be stored");
  }
  if (leaf != info.leaves) {
    throw Error("run " + r + ": expected leaf " + std::to_string(info.leaves) + " next, got leaf " +
                std::to_string(leaf));
  }
  uint64_t due = LeafStep(leaf, info.steps, info.checkpoint_every);
  if (info.steps_written != due) {
    throw Error("run " + r + ": leaf " + std::to_string(leaf) + " is the checkpoint after step " +
                std::to_string(due) + ", but the run has written steps up to " +
                std::to_string(info.steps_written));
  }
  ParseCheckpoint(checkpoint);  // validates the canonical encoding
}

LeafRecord Store::CommitCheckpoint(std::string_view run, uint64_t leaf, std::string_view checkpoint,
                                   const PutCheckpointOptions& options) {
  RunState& st = WriterState(run);
  const RunInfo& info = st.info;
  const std::string r = Quote(run);
  const uint64_t total = info.total_leaves();
  LeafRecord rec;
  rec.index = leaf;
  rec.step = LeafStep(leaf, info.steps, info.checkpoint_every);
  rec.state_digest = Sha256Of(checkpoint);
  if (options.expected_state_digest && *options.expected_state_digest != rec.state_digest) {
    throw Error("run " + r + " leaf " + std::to_string(leaf) + ": checkpoint digest " +
                ToHex(rec.state_digest) + " differs from the expected " +
                ToHex(*options.expected_state_digest));
  }
  rec.log_digest = st.chain.value();
  rec.leaf = ComputeLeaf(info.spec_hash, leaf, rec.state_digest, rec.log_digest);
  rec.checkpoint_bytes = checkpoint.size();
  rec.checkpoint_chunks = CheckpointChunks(checkpoint.size());
  MerkleFrontier frontier = st.frontier;
  std::vector<MerkleNode> nodes = frontier.Append(MerkleLeafHash(AsBytes(rec.leaf)));

  rocksdb::WriteBatch batch(checkpoint.size() + rec.checkpoint_chunks * 64 + nodes.size() * 96 +
                            1024);
  for (uint32_t c = 0; c < rec.checkpoint_chunks; ++c) {
    std::string_view part =
        checkpoint.substr(static_cast<size_t>(c) * kCheckpointChunkBytes, kCheckpointChunkBytes);
    PutSealed(&batch, Cf(Family::kCheckpoints), Family::kCheckpoints, CheckpointKey(run, leaf, c),
              part);
  }
  PutSealed(&batch, Cf(Family::kLeaves), Family::kLeaves, LeafKey(run, leaf),
            EncodeLeafRecord(rec));
  for (const MerkleNode& n : nodes) {
    PutSealed(&batch, Cf(Family::kMerkle), Family::kMerkle,
              NodeKey(run, static_cast<uint8_t>(n.level), n.index), AsBytes(n.hash));
  }
  ProgressRecord p;
  p.steps_written = info.steps_written;
  p.leaves = leaf + 1;
  p.chain.fill(0);
  PutSealed(&batch, Cf(Family::kRuns), Family::kRuns, RunKey(run, RunField::kProgress),
            EncodeProgress(p));
  if (options.metadata) {
    PutSealed(&batch, Cf(Family::kRuns), Family::kRuns, RunKey(run, RunField::kMetadata),
              *options.metadata);
  }
  WriteBatchOrThrow(&batch, "a checkpoint");
  st.info.leaves = leaf + 1;
  st.chain = LogDigestChain();
  st.frontier = std::move(frontier);
  if (options.metadata) st.info.metadata = *options.metadata;
  if (st.info.leaves == total) {
    // A finished run goes into checksummed SST files at once, so that it survives damage to
    // the write-ahead log even if this process is killed before it closes the store.
    rocksdb::Status s = FlushAll();
    if (!s.ok()) {
      throw Error("store '" + path_ + "': run " + r +
                  " is complete, but flushing it to SST files failed: " + s.ToString());
    }
  }
  return rec;
}

std::optional<LeafRecord> Store::Rollback(std::string_view run) {
  CheckWritable();
  ValidateId(run, "run id");
  auto g = Guard();
  std::lock_guard<std::mutex> w(write_mu_);
  RunState& st = WriterState(run);
  const RunInfo& info = st.info;
  uint64_t resume =
      info.leaves == 0 ? 0 : LeafStep(info.leaves - 1, info.steps, info.checkpoint_every);
  if (info.steps_written > resume) {
    rocksdb::WriteBatch batch;
    const std::string end = PrefixSuccessor(IdPrefix(run));
    const std::string begin = StepKey(run, resume + 1);
    rocksdb::Status s = batch.DeleteRange(Cf(Family::kLogs), begin, end);
    if (s.ok()) s = batch.DeleteRange(Cf(Family::kSteps), begin, end);
    if (!s.ok()) throw Error("cannot build the rollback batch: " + s.ToString());
    ProgressRecord p;
    p.steps_written = resume;
    p.leaves = info.leaves;
    p.chain.fill(0);
    PutSealed(&batch, Cf(Family::kRuns), Family::kRuns, RunKey(run, RunField::kProgress),
              EncodeProgress(p));
    WriteBatchOrThrow(&batch, "a rollback");
    st.info.steps_written = resume;
    st.chain = LogDigestChain();
  }
  if (info.leaves == 0) return std::nullopt;
  return LeafOrThrow(run, info.leaves - 1);
}

// ---------------------------------------------------------------------------------------
// Transcripts

uint64_t Store::AppendTranscript(std::string_view game, std::string_view entry) {
  CheckWritable();
  ValidateId(game, "game id");
  if (entry.size() > kMaxValueBytes) throw Error("transcript entry is larger than 1 GiB");
  auto g = Guard();
  std::lock_guard<std::mutex> w(write_mu_);
  auto found = next_transcript_seq_.find(game);
  uint64_t seq = 0;
  if (found != next_transcript_seq_.end()) {
    seq = found->second;
  } else {
    std::unique_ptr<rocksdb::Iterator> it(
        h_->db->NewIterator(rocksdb::ReadOptions(), Cf(Family::kTranscripts)));
    const std::string prefix = IdPrefix(game);
    it->SeekForPrev(TranscriptKey(game, UINT64_MAX));
    if (it->Valid() && it->key().starts_with(prefix)) {
      std::optional<DecodedKey> d =
          DecodeKey(Family::kTranscripts, std::string_view(it->key().data(), it->key().size()));
      if (!d)
        throw CorruptionError("transcripts",
                              DescribeKey(Family::kTranscripts, it->key().ToString()),
                              "malformed key");
      seq = d->number + 1;
    }
    if (!it->status().ok())
      throw Error("store '" + path_ + "': reading transcripts failed: " + it->status().ToString());
  }
  rocksdb::WriteBatch batch;
  PutSealed(&batch, Cf(Family::kTranscripts), Family::kTranscripts, TranscriptKey(game, seq),
            entry);
  WriteBatchOrThrow(&batch, "a transcript entry");
  next_transcript_seq_[std::string(game)] = seq + 1;
  return seq;
}

}  // namespace vt::store
