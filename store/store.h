// vt::store::Store: one party's RocksDB store of runs, log records, checkpoints, Merkle
// trees and game transcripts (byte format: store/FORMAT.md).
//
// A run is created with its spec bytes, checkpoint interval k and step count n. It is then
// written strictly in order: leaf 0 (the initial checkpoint), steps 1..k, leaf 1, steps
// k+1..2k, leaf 2, ..., up to step n and the last leaf. WriteStep commits all records of a
// step, the step marker and the run's progress in ONE RocksDB WriteBatch; PutCheckpoint
// commits the checkpoint bytes, the leaf record, the new Merkle nodes and the progress in
// ONE WriteBatch. The write-ahead log makes each batch all-or-nothing, so a store reopened
// after the process was killed at any instant holds a consistent prefix of the run: every
// leaf has its checkpoint and Merkle nodes, and every step is complete or absent. A writer
// resumes with Rollback() (drops steps after the last checkpoint) and goes on from there.
// A damaged record in the middle of the write-ahead log fails every open (only an incomplete
// record at its end, what a kill leaves, is dropped); a run's last leaf and Close() flush
// everything to checksummed SST files, so finished runs never depend on the log.
//
// Every value carries a CRC-32C bound to its key (FORMAT.md, "Record envelope"); reads check
// it and throw CorruptionError naming the family and key instead of returning bad bytes.
// Verify() checks every record and every derived hash and lists every bad key.
//
// Processes: one writer per store directory (RocksDB's LOCK file across processes; within a
// process a claim on the directory's device and inode, so a symlink or another spelling of the
// path cannot open a second writer); a second writer gets an Error naming the directory. Readers
// (read_only) open a RocksDB secondary instance, which needs no lock, writes nothing, and works
// while a writer writes; Refresh() catches up with the writer.
//
// Threads: all methods are thread-safe. Writes are serialized internally; Close() waits for
// calls in flight, and any call after Close() throws Error("store '<dir>' is closed").
// Numbers: steps are 1-based (step 0 is the initial state), leaves and Merkle indices are
// 0-based, sizes are leaf counts.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "store/keys.h"
#include "store/log_digest.h"
#include "store/merkle.h"
#include "store/sha256.h"

namespace rocksdb {
class DB;
class Status;
class ColumnFamilyHandle;
class Snapshot;
class WriteBatch;
}  // namespace rocksdb

namespace vt::store {

enum class Compression { kNone, kLz4, kZstd };
const char* CompressionName(Compression c);  // "none", "lz4", "zstd"

struct StoreOptions {
  // Open as a reader (RocksDB secondary instance): no writes, no lock, the directory must
  // already hold a store. Default: false.
  bool read_only = false;
  // Writers: create the directory and the store if missing. Default: true.
  bool create_if_missing = true;
  // fsync the write-ahead log on every batch. Without it a killed process loses nothing
  // (the data is in the OS page cache); with it a power failure loses nothing either.
  // Default: false.
  bool sync = false;
  // Block compression of the log-record family. If this RocksDB build lacks it, zstd falls
  // back to lz4, then to none (log_compression() tells which is in use). Default: kZstd.
  Compression log_compression = Compression::kZstd;
  // Shared RocksDB block cache. Default: 64 MiB.
  size_t block_cache_bytes = size_t{64} << 20;
  // A step whose log records hold at least this many bytes skips the write-ahead log (not
  // with `sync`), and so does any step after it until the next flush: it becomes durable when
  // the memtables are flushed, which the store does
  // before any write that goes through the WAL (a leaf, a rollback, a new run...), on close
  // and whenever a memtable fills, all column families at once (RocksDB's atomic flush), so
  // a crash still leaves a prefix of the batches, shorter by the steps since the last
  // flush. Writing those bytes to the WAL copied every log byte into the page cache once
  // more than the flush does (store/FORMAT.md, "Write batches: what is atomic"). Default: 1 MiB.
  uint64_t unlogged_step_bytes = uint64_t{1} << 20;
};

// What a run is created with.
struct RunConfig {
  std::string spec;               // canonical spec bytes (opaque to the store); spec_hash = SHA-256
  uint64_t checkpoint_every = 0;  // k >= 1 (required; 0 is rejected)
  uint64_t steps = 0;             // n, 0 <= n <= 2^53
  std::string metadata;           // caller bytes (e.g. JSON); may be empty. Default: empty.
};

// A run as stored.
struct RunInfo {
  std::string id;
  std::string spec;
  Digest spec_hash;
  uint64_t checkpoint_every = 0;
  uint64_t steps = 0;
  std::string metadata;
  uint64_t steps_written = 0;  // last step written (0: none)
  uint64_t leaves = 0;         // leaves stored (= Merkle tree size)

  uint64_t total_leaves() const { return NumLeaves(steps, checkpoint_every); }
  bool complete() const { return leaves == total_leaves(); }
};

// A leaf as stored with its checkpoint.
struct LeafRecord {
  uint64_t index = 0;
  uint64_t step = 0;  // the step after which the checkpoint was taken
  Digest state_digest{};
  Digest log_digest{};
  Digest leaf{};
  uint64_t checkpoint_bytes = 0;
  uint32_t checkpoint_chunks = 0;
};

// Summary of a written step (its marker in the `steps` family).
struct StepInfo {
  uint64_t step = 0;
  uint32_t records = 0;
  uint64_t value_bytes = 0;  // sum of the record values' sizes
  Digest digest{};           // step_digest
};

// One log record read back.
struct LogRecord {
  uint64_t step = 0;
  std::string boundary;
  uint32_t call = 0;
  std::string value;
};

// Which log records ScanLogs visits.
struct LogQuery {
  uint64_t first_step = 1;              // Default: 1.
  uint64_t last_step = UINT64_MAX;      // inclusive. Default: no limit.
  std::optional<std::string> boundary;  // only this boundary. Default: all.
};

struct PutCheckpointOptions {
  // If set, the checkpoint's SHA-256 must equal it (the writer's own digest, e.g. from
  // CheckpointDigest over its tensors), else Error and nothing is written. Default: unset.
  std::optional<Digest> expected_state_digest;
  // If set, replaces the run's metadata in the same batch. Default: unset.
  std::optional<std::string> metadata;
};

// One finding of Verify().
struct Problem {
  std::string family;   // column family ("logs"), or "" for store-wide problems
  std::string key;      // DescribeKey() of the key, or "" for store-wide problems
  std::string key_hex;  // the raw key in hex, or ""
  std::string message;  // what is wrong
};

struct VerifyReport {
  uint64_t records = 0;  // records read and checked
  std::vector<Problem> problems;
  bool ok() const { return problems.empty(); }
};

constexpr size_t kCheckpointChunkBytes = size_t{64}
                                         << 20;     // checkpoints are stored in 64 MiB chunks
constexpr size_t kMaxValueBytes = size_t{1} << 30;  // a log record or transcript entry
constexpr size_t kMaxCheckpointBytes = size_t{1} << 40;

class Store {
 public:
  // Opens (a writer creates, unless create_if_missing is false) the store in `dir`.
  // Throws Error: "store '<dir>' is already open for writing by another process" when
  // another writer holds it; "store '<dir>' does not exist" (readers, or
  // !create_if_missing); "'<dir>' is not a vtrun store" for a non-empty directory that is
  // not one; RocksDB failures with their status.
  static std::shared_ptr<Store> Open(const std::string& dir, const StoreOptions& options = {});

  ~Store();  // closes
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Closes the database (idempotent). Later calls throw Error("store '<dir>' is closed").
  // Writers first flush everything to SST files; if that fails (disk full) the store is
  // still closed, the data stays in the write-ahead log for the next open, and Close throws
  // Error saying so. The destructor closes and swallows that error.
  void Close();
  bool closed() const;
  const std::string& path() const { return path_; }  // absolute directory
  bool read_only() const { return options_.read_only; }
  Compression log_compression() const { return log_compression_; }

  // Writers: flushes memtables to SST files and syncs the WAL. Readers: no-op.
  void Flush();
  // Readers: catch up with the writer's latest writes. Writers: no-op.
  void Refresh();

  // Runs --------------------------------------------------------------------------------
  // Creates run `id` (ValidateId rules) with no leaves yet. Throws if it exists.
  RunInfo CreateRun(std::string_view id, const RunConfig& config);
  std::vector<std::string> Runs() const;                     // ids, sorted
  std::optional<RunInfo> GetRun(std::string_view id) const;  // nullopt if absent
  void SetMetadata(std::string_view run, std::string_view metadata);

  // Writing -----------------------------------------------------------------------------
  // Writes step `step` of `run` with its records (any order; (boundary, call) unique;
  // values <= 1 GiB) in one batch; returns its step digest. Requires step == steps_written
  // + 1, the previous leaf stored, and step <= n.
  Digest WriteStep(std::string_view run, uint64_t step, std::vector<LogRecordView> records);
  // WriteStep in the background ("write-behind"): checks the step as WriteStep does (the same
  // errors, thrown here), then writes it on another thread and returns. `keep` owns the bytes
  // the records view and is released once they are written. Every later call on this store,
  // from any thread (reads, writes, Flush, Close and the destructor), first waits for that
  // write, so it sees the step; if the write failed, that call and every later one throw
  // Error("store '<dir>': step 5 of run 'r' was not written: <why> (...)"), and Close closes
  // the store and throws it too. A process killed before the write finished holds the store
  // as it was before the step (each step is one batch; Rollback resumes from the last leaf).
  void WriteStepBehind(std::string_view run, uint64_t step, std::vector<LogRecordView> records,
                       std::shared_ptr<const void> keep);
  // Waits for a step written behind, and throws its error if it failed. Every call waits
  // anyway; this is for callers that only want the write done.
  void WaitBehind() const;

  // Stores leaf `leaf` (== leaves stored so far) with its checkpoint in one batch; requires
  // every step up to LeafStep(leaf) written and none after. The checkpoint must be a valid
  // canonical encoding (ParseCheckpoint); state_digest = SHA-256(checkpoint), log_digest is
  // the chain of the steps since the previous leaf, and the leaf is appended to the Merkle
  // tree. Returns the leaf record.
  LeafRecord PutCheckpoint(std::string_view run, uint64_t leaf, std::string_view checkpoint,
                           const PutCheckpointOptions& options = {});
  // PutCheckpoint in the background, as WriteStepBehind writes a step: checks the leaf and
  // the encoding here (the same errors, thrown here), then hashes and writes it on another
  // thread and returns (GPT 4x256's 39 MB took 0.10 s of a trainer's step to hash and
  // write). Later calls wait for it and throw its error as for a step written behind. A
  // run's last leaf is written before it returns, as PutCheckpoint writes it: a finished run
  // is whole in the store, flushed, when its last checkpoint call returns.
  void PutCheckpointBehind(std::string_view run, uint64_t leaf,
                           std::shared_ptr<const std::string> checkpoint);

  // Deletes the steps written after the last stored leaf (one batch), so a writer that lost
  // its in-memory state can resume from the last checkpoint. Returns that leaf (nullopt if
  // the run has none yet: resume by storing leaf 0).
  std::optional<LeafRecord> Rollback(std::string_view run);

  // Reading logs ------------------------------------------------------------------------
  std::optional<StepInfo> GetStep(std::string_view run, uint64_t step) const;
  // All records of a step in key order; nullopt if the step is not written.
  std::optional<std::vector<LogRecord>> GetStepRecords(std::string_view run, uint64_t step) const;
  std::optional<std::string> GetLogRecord(std::string_view run, uint64_t step,
                                          std::string_view boundary, uint32_t call) const;
  // Visits records in key order (step, boundary, call). `fn` gets a record whose views are
  // valid during the call and returns false to stop. Returns the number of calls made.
  using LogVisitor = std::function<bool(uint64_t step, std::string_view boundary, uint32_t call,
                                        std::string_view value)>;
  uint64_t ScanLogs(std::string_view run, const LogQuery& query, const LogVisitor& fn) const;
  // log_digest of leaf `leaf` recomputed from the stored records (for verification).
  Digest RecomputeLogDigest(std::string_view run, uint64_t leaf) const;

  // Checkpoints and leaves --------------------------------------------------------------
  std::optional<std::string> GetCheckpoint(std::string_view run, uint64_t leaf) const;
  std::optional<LeafRecord> GetLeaf(std::string_view run, uint64_t leaf) const;

  // Merkle tree of a run's leaves (leaf hash = SHA-256(0x00 || leaf_i)) ---------------------
  uint64_t TreeSize(std::string_view run) const;  // = leaves stored
  Digest Root(std::string_view run) const;
  Digest RootAt(std::string_view run, uint64_t size) const;  // size <= TreeSize
  std::vector<Digest> InclusionProof(std::string_view run, uint64_t leaf, uint64_t size) const;
  std::vector<Digest> ConsistencyProof(std::string_view run, uint64_t m, uint64_t n) const;

  // Game transcripts --------------------------------------------------------------------
  // Appends an entry (<= 1 GiB) to game `game` (ValidateId rules); returns its sequence
  // number (0, 1, 2, ...).
  uint64_t AppendTranscript(std::string_view game, std::string_view entry);
  std::optional<std::string> GetTranscriptEntry(std::string_view game, uint64_t seq) const;
  std::vector<std::string> Transcript(std::string_view game) const;  // empty if none
  std::vector<std::string> Games() const;                            // ids, sorted

  // Integrity ---------------------------------------------------------------------------
  // Reads every record of every family and checks: RocksDB block checksums, the envelope of
  // every value, key syntax, value layouts, run progress against the stored steps and
  // leaves, step markers against their records (count, bytes, step digest), log digests,
  // state digests against the checkpoint bytes, leaves, every Merkle node, and transcript
  // numbering. Reports every bad key; never throws for bad data (only if closed).
  VerifyReport Verify() const;

 private:
  // Defined in store/store_internal.h, shared by the implementation files.
  struct RunState;
  struct Handles;

  Store(std::string path, const StoreOptions& options);

  // Waits for a step written behind (WaitBehind), then throws if closed; the returned lock
  // keeps the database open during the call.
  std::shared_lock<std::shared_mutex> Guard() const;
  // Guard without waiting: for the write-behind thread itself.
  std::shared_lock<std::shared_mutex> OpenLock() const;
  void WaitBehindLocked() const;  // call with behind_mu_ held
  void CheckStepWrite(std::string_view run, uint64_t step, std::vector<LogRecordView>* records);
  Digest CommitStep(std::string_view run, uint64_t step, const std::vector<LogRecordView>& records);
  // PutCheckpoint's checks (leaf order, the steps before it, the encoding) and its write;
  // both with write_mu_ held.
  void CheckCheckpointWrite(std::string_view run, uint64_t leaf, std::string_view checkpoint,
                            const PutCheckpointOptions& options);
  LeafRecord CommitCheckpoint(std::string_view run, uint64_t leaf, std::string_view checkpoint,
                              const PutCheckpointOptions& options);
  void CheckWritable() const;
  bool FamiliesEmpty() const;  // true if no family holds any key
  rocksdb::Status FlushAll();  // memtables to SST files, then sync the WAL; writers only
  rocksdb::ColumnFamilyHandle* Cf(Family f) const;
  std::optional<std::string> GetRaw(Family f, std::string_view key,
                                    const rocksdb::Snapshot* snap = nullptr) const;
  std::optional<std::string> GetSealed(Family f, std::string_view key,
                                       const rocksdb::Snapshot* snap = nullptr) const;
  // Writes `batch` through the WAL, flushing first if unlogged steps are not yet durable
  // (a WAL batch must never outlive a batch written before it). Call with write_mu_ held
  // (or before the store is shared, at open).
  void WriteBatchOrThrow(rocksdb::WriteBatch* batch, const char* what);
  // Writes a step's batch without the WAL (StoreOptions::unlogged_step_bytes).
  void WriteUnloggedOrThrow(rocksdb::WriteBatch* batch, const char* what);
  RunInfo LoadRun(std::string_view id) const;   // throws if absent
  RunState& WriterState(std::string_view run);  // call with write_mu_ held
  LeafRecord LeafOrThrow(std::string_view run, uint64_t leaf) const;
  // The distinct ids (the part of each key before its 0x00) in family `f`, sorted, that have
  // a well-formed key; `what` names the list in errors ("runs"). Call with Guard() held.
  std::vector<std::string> ListIds(Family f, const char* what) const;

  std::string path_;
  StoreOptions options_;
  Compression log_compression_ = Compression::kNone;
  // Whether the logs family compresses now (write_mu_): off while steps are mostly records
  // in the dense log encoding, which compression does not shrink (CommitStep).
  bool logs_compressing_ = false;
  // Turns the logs family's compression on or off for what it flushes from now on
  // (RocksDB's mutable options); call with write_mu_ held. A failure leaves it as it was.
  void SetLogsCompressing(bool on);

  mutable std::shared_mutex mu_;  // shared: any call; exclusive: Close, Refresh
  std::mutex write_mu_;           // serializes writers
  // A batch went in without the WAL and no flush has made it durable since (write_mu_).
  bool unlogged_pending_ = false;
  bool flush_at_exit_ = false;  // registered with AtExitAfterPendingWork (write_mu_)
  // Close has cancelled that action for good: no later write registers it (write_mu_).
  bool exit_flush_closed_ = false;
  // The step written behind (WriteStepBehind), what it is ("step 5 of run 'r'"), and the error
  // of one that failed (then every call throws it). behind_mu_ comes before mu_ and write_mu_.
  mutable std::mutex behind_mu_;
  mutable std::future<void> behind_;
  std::string behind_what_;
  mutable std::string behind_failed_;
  bool closing_ = false;        // Close has begun: no step is handed over any more (behind_mu_)
  std::unique_ptr<Handles> h_;  // null once closed
  // Readers: the database reopened after its writer left (Refresh), not again until another
  // writer has come and gone.
  bool reopened_without_writer_ = false;
  void ReopenReader();
  std::map<std::string, std::unique_ptr<RunState>, std::less<>> run_states_;  // writer caches
  std::map<std::string, uint64_t, std::less<>> next_transcript_seq_;

  // Tests: the next step written behind fails with this error instead of being written, and
  // the next one waits for this future before it writes.
  std::string fail_behind_for_test_;
  std::shared_future<void> hold_behind_for_test_;

  friend class StoreVerifier;
  friend class StoreNodes;
  friend struct StoreTestAccess;
};

}  // namespace vt::store
