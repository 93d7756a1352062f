// The store's database: opening a store as its writer or as a reader (RocksDB's options, the
// writer's claim, checks of the table files), closing, refreshing a reader, and raw access to
// sealed records. What the store keeps is read in store_read.cc and written in
// store_write.cc; Verify() is in verify.cc and verify_leaves.cc.
#include "store/store.h"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "store/envelope.h"
#include "store/error.h"
#include "store/pending_work.h"
#include "store/records.h"
#include "store/remove_tree.h"
#include "store/store_internal.h"
#include "store/writer_claim.h"

namespace vt::store {

namespace fs = std::filesystem;

const char* CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone:
      return "none";
    case Compression::kLz4:
      return "lz4";
    case Compression::kZstd:
      return "zstd";
  }
  return "?";
}

namespace {

constexpr Family kAllFamilies[kFamilyCount] = {
    Family::kMeta,        Family::kRuns,   Family::kSteps,  Family::kLogs,
    Family::kCheckpoints, Family::kLeaves, Family::kMerkle, Family::kTranscripts,
};

bool Supported(rocksdb::CompressionType t) {
  static const std::vector<rocksdb::CompressionType> supported =
      rocksdb::GetSupportedCompressions();
  return std::find(supported.begin(), supported.end(), t) != supported.end();
}

// The compression actually available for a request: zstd, else lz4, else none.
Compression Available(Compression want) {
  if (want == Compression::kZstd && Supported(rocksdb::kZSTD)) return Compression::kZstd;
  if (want != Compression::kNone && Supported(rocksdb::kLZ4Compression)) return Compression::kLz4;
  return Compression::kNone;
}

rocksdb::CompressionType ToRocks(Compression c) {
  switch (c) {
    case Compression::kNone:
      return rocksdb::kNoCompression;
    case Compression::kLz4:
      return rocksdb::kLZ4Compression;
    case Compression::kZstd:
      return rocksdb::kZSTD;
  }
  return rocksdb::kNoCompression;
}

// The store's RocksDB instances log nothing. Readers: their info log would otherwise need a
// directory of its own that outlives the process if it is killed. Writers: RocksDB's own
// info log lives in the store directory, and writing it on a full disk ends in an assertion
// (SIGABRT) inside RocksDB instead of an error; every failure that matters reaches the
// caller as a Status anyway.
class NullLogger : public rocksdb::Logger {
 public:
  NullLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::HEADER_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {}
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {}
};

bool IsLockError(const rocksdb::Status& s) {
  if (!s.IsIOError()) return false;
  std::string m = s.ToString();
  return m.find("lock") != std::string::npos || m.find("LOCK") != std::string::npos;
}

// True if the database in `path` (with column families `names`) holds no key at all;
// opened read-only, so it is not modified.
bool EmptyDatabase(const std::string& path, const std::vector<std::string>& names) {
  std::vector<rocksdb::ColumnFamilyDescriptor> cfds;
  for (const std::string& n : names) cfds.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), path, cfds, &handles, &raw);
  if (!s.ok()) return false;
  bool empty = true;
  for (rocksdb::ColumnFamilyHandle* cf : handles) {
    std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator(rocksdb::ReadOptions(), cf));
    it->SeekToFirst();
    if (it->Valid() || !it->status().ok()) empty = false;
  }
  for (rocksdb::ColumnFamilyHandle* cf : handles) raw->DestroyColumnFamilyHandle(cf);
  delete raw;
  return empty;
}

// A secondary instance (a reader) leaves every table file it cannot open out of its view of
// the database: RocksDB recovers its MANIFEST point-in-time, treating a damaged file as a
// missing one. The keys in that file then read as absent ("missing leaf", "not a vtrun
// store") instead of as corruption. So: if the directory holds SST files the reader does not
// list, recover the MANIFEST once more as a read-only instance does, which opens every live
// table file and fails with Corruption on a damaged one (paranoid_checks). Unlisted files are
// usually harmless (obsolete files a writer has not deleted yet, or one a killed flush left
// behind), and then that open succeeds; a writer's concurrent compaction or WAL switch only
// makes it fail with a non-corruption status, which is ignored. Throws Error on corruption.
void CheckTableFiles(rocksdb::DB* db, const rocksdb::DBOptions& db_options,
                     const std::vector<rocksdb::ColumnFamilyDescriptor>& cfds,
                     const std::string& path) {
  std::vector<rocksdb::LiveFileMetaData> live;
  db->GetLiveFilesMetaData(&live);
  std::set<std::string> listed;
  for (const rocksdb::LiveFileMetaData& f : live) listed.insert(fs::path(f.name).filename());
  bool unlisted = false;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    const fs::path& p = e.path();
    if (p.extension() == ".sst" && listed.count(p.filename().string()) == 0) unlisted = true;
  }
  if (!unlisted) return;
  rocksdb::DB* check = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(db_options, path, cfds, &handles, &check);
  if (s.ok()) {
    for (rocksdb::ColumnFamilyHandle* h : handles) check->DestroyColumnFamilyHandle(h);
    delete check;
  }
  if (s.IsCorruption()) throw Error("store '" + path + "' is corrupt: " + s.ToString());
}

// Opens `path` as a RocksDB secondary instance (a reader beside a possible writer). It needs a
// directory for its info log; with the null logger nothing is written there, so a scratch
// directory is made and removed right after opening: a killed reader leaves nothing behind.
// A writer may delete a file the reader is about to open (compaction, WAL recycling); that
// race is transient, so a failed open is retried a few times.
rocksdb::Status OpenSecondary(const rocksdb::DBOptions& db_options, const std::string& path,
                              const std::vector<rocksdb::ColumnFamilyDescriptor>& cfds,
                              std::vector<rocksdb::ColumnFamilyHandle*>* cfs, rocksdb::DB** db) {
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  if (ec) {
    const char* env = std::getenv("TMPDIR");
    throw Error("a store reader needs a temporary directory, and there is none (TMPDIR=" +
                std::string(env != nullptr ? env : "(unset)") + ": " + ec.message() +
                "); set TMPDIR to a writable directory");
  }
  std::string scratch = (tmp / "vtstore-reader-XXXXXX").string();
  if (mkdtemp(scratch.data()) == nullptr) {
    throw Error("cannot create a temporary directory for a store reader in " + tmp.string() + ": " +
                std::strerror(errno) + " (set TMPDIR to a writable directory)");
  }
  rocksdb::Status s;
  for (int attempt = 0; attempt < 5; ++attempt) {
    s = rocksdb::DB::OpenAsSecondary(db_options, path, scratch, cfds, cfs, db);
    if (s.ok()) break;
    cfs->clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * (attempt + 1)));
  }
  RemoveTree(scratch, ec);
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Opening and closing

Store::Store(std::string path, const StoreOptions& options)
    : path_(std::move(path)), options_(options) {}

Store::~Store() {
  // A destructor must not throw; a failed flush leaves the data in the write-ahead log,
  // from which the next open recovers it.
  try {
    Close();
  } catch (const std::exception&) {
  }
}

std::shared_ptr<Store> Store::Open(const std::string& dir, const StoreOptions& options) {
  if (dir.empty()) throw Error("store directory must be a non-empty path");
  if (dir.find('\0') != std::string::npos)
    throw Error("store directory must not contain a 0x00 byte");
  std::error_code ec;
  fs::path abs = fs::absolute(fs::path(dir), ec);
  if (ec) throw Error("store '" + dir + "': " + ec.message());
  std::string path = abs.lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();

  std::shared_ptr<Store> store(new Store(path, options));
  const fs::path current = fs::path(path) / "CURRENT";
  const bool exists = fs::exists(path, ec);
  const bool has_db = fs::exists(current, ec);
  if (exists && !fs::is_directory(path, ec)) throw Error("store '" + path + "' is not a directory");
  if (options.read_only || !options.create_if_missing) {
    if (!exists) throw Error("store '" + path + "' does not exist");
    if (!has_db) throw Error("'" + path + "' is not a vtrun store (no RocksDB database in it)");
  }
  if (!has_db && exists && !fs::is_empty(path, ec)) {
    throw Error("'" + path +
                "' is not a vtrun store (a non-empty directory without a RocksDB database)");
  }
  if (!exists) {
    fs::create_directories(path, ec);
    if (ec) throw Error("cannot create store directory '" + path + "': " + ec.message());
  }

  auto h = std::make_unique<Handles>();
  h->cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  store->log_compression_ = Available(options.log_compression);
  store->logs_compressing_ = store->log_compression_ != Compression::kNone;
  const Compression small = Available(Compression::kZstd);

  rocksdb::DBOptions db;
  db.create_if_missing = !options.read_only && options.create_if_missing;
  db.create_missing_column_families = !options.read_only;
  db.paranoid_checks = true;
  // A damaged record anywhere in the write-ahead log fails the open. Point-in-time recovery
  // (RocksDB's default) would silently drop the bad record and everything after it, which
  // also drops the run's later progress records, so the shortened run still verifies. Only an
  // incomplete record at the very end of a log is tolerated: that is what a writer killed in
  // the middle of a write leaves (kill -9 must recover as before); kAbsoluteConsistency would
  // refuse that too. Finished runs do not depend on this: they are flushed to checksummed
  // SST files (Close, and PutCheckpoint of a run's last leaf).
  db.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  db.keep_log_file_num = 3;
  db.max_background_jobs = 2;
  db.max_open_files = -1;  // required by secondary instances; fine for writers
  db.info_log = std::make_shared<NullLogger>();
  // Reopening after a crash replays the WAL into memtables instead of flushing tiny files.
  db.avoid_flush_during_recovery = true;
  // Steps written without the WAL (StoreOptions::unlogged_step_bytes) survive a crash only
  // in SST files; flushing every family together keeps what survives a prefix of the
  // batches (a step's log records never without its marker and progress, or the reverse).
  db.atomic_flush = true;

  std::vector<rocksdb::ColumnFamilyDescriptor> cfds;
  for (Family f : kAllFamilies) {
    rocksdb::ColumnFamilyOptions cf;
    cf.level_compaction_dynamic_level_bytes = true;
    rocksdb::BlockBasedTableOptions table;
    table.block_cache = h->cache;
    table.block_size = 16 * 1024;
    cf.compression = rocksdb::kNoCompression;
    switch (f) {
      case Family::kLogs:
        table.block_size = 32 * 1024;
        // 16 MiB, not RocksDB's 64: a memtable's memory is fresh pages until the first flush
        // frees one for the next to reuse, and inserting GPT 4x256's 6.5 MB step into fresh
        // pages took 4 ms against 1 ms into reused ones; with 64 MiB memtables that lasted the
        // first ten steps of every run (EXPERIMENTS.md E6, twenty-third session).
        cf.write_buffer_size = size_t{16} << 20;
        cf.max_write_buffer_number = 4;  // keep accepting steps while earlier memtables flush
        cf.compression = ToRocks(store->log_compression_);
        cf.compression_opts.level = 1;  // zstd 1: same ratio on encoded logs as 3, faster
        break;
      case Family::kRuns:
      case Family::kTranscripts:
        cf.compression = ToRocks(small);
        break;
      case Family::kSteps:
      case Family::kLeaves:
      case Family::kMerkle:
        table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
        break;
      default:
        break;
    }
    cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    cfds.emplace_back(FamilyName(f), cf);
  }

  if (has_db) {
    std::vector<std::string> names;
    rocksdb::Status s = rocksdb::DB::ListColumnFamilies(db, path, &names);
    if (!s.ok()) throw Error("store '" + path + "': cannot list column families: " + s.ToString());
    for (const std::string& n : names) {
      bool known = std::any_of(std::begin(kAllFamilies), std::end(kAllFamilies),
                               [&](Family f) { return n == FamilyName(f); });
      if (!known)
        throw Error("'" + path + "' is not a vtrun store (unknown column family '" + n + "')");
    }
    for (Family f : kAllFamilies) {
      if (std::find(names.begin(), names.end(), FamilyName(f)) != names.end()) continue;
      // A store has all its families from its first open on. A database without some of
      // them is either someone else's or one whose creation was interrupted (then empty);
      // only the latter may be completed, and never by a reader.
      if (options.read_only || !EmptyDatabase(path, names)) {
        throw Error("'" + path + "' is not a vtrun store (no column family '" + FamilyName(f) +
                    "')");
      }
      break;
    }
  }

  rocksdb::DB* raw = nullptr;
  if (options.read_only) {
    rocksdb::Status s = OpenSecondary(db, path, cfds, &h->cfs, &raw);
    if (!s.ok()) throw Error("cannot open store '" + path + "' for reading: " + s.ToString());
  } else {
    // Claimed before RocksDB's LOCK file, which cannot tell this process's writers apart.
    h->claim = std::make_unique<WriterClaim>(path);
    rocksdb::Status s = rocksdb::DB::Open(db, path, cfds, &h->cfs, &raw);
    if (IsLockError(s)) {
      throw Error("store '" + path +
                  "' is already open for writing by another process (or another store object" +
                  " in this process); open it with read_only = true to read it meanwhile (" +
                  s.ToString() + ")");
    }
    if (!s.ok()) throw Error("cannot open store '" + path + "': " + s.ToString());
  }
  h->db = raw;
  if (options.read_only) {
    h->db_options = db;
    h->cfds = cfds;
    CheckTableFiles(raw, db, cfds, path);
  }
  store->h_ = std::move(h);

  // The format record: written by the first writer, checked by everyone.
  std::optional<std::string> format = store->GetSealed(Family::kMeta, kFormatKey);
  if (format) {
    if (format->size() != 4 || ReadU32(format->data()) != kFormatVersion) {
      throw Error(
          "store '" + path + "' has format version " +
          (format->size() == 4 ? std::to_string(ReadU32(format->data())) : std::string("?")) +
          "; this build reads version " + std::to_string(kFormatVersion));
    }
  } else if (options.read_only) {
    throw Error("'" + path + "' is not a vtrun store (no format record)");
  } else if (has_db && !store->FamiliesEmpty()) {
    // A database with data but no format record was not made by this store (ours writes the
    // format record right after creating the database, before anything else).
    throw Error("'" + path + "' is not a vtrun store (a RocksDB database without a format record)");
  } else {
    std::string v;
    AppendU32(&v, kFormatVersion);
    rocksdb::WriteBatch batch;
    batch.Put(store->Cf(Family::kMeta), kFormatKey, Seal(Family::kMeta, kFormatKey, v));
    store->WriteBatchOrThrow(&batch, "the format record");
  }
  return store;
}

Store::Handles::~Handles() {
  if (db != nullptr) {
    for (rocksdb::ColumnFamilyHandle* cf : cfs) db->DestroyColumnFamilyHandle(cf);
    db->Close();
    delete db;
  }
}

void Store::Close() {
  CancelAtExit(this);  // before mu_: an exit flushing this store holds the actions' lock
  // A step written behind goes in first, and no other is handed over after it; if it failed,
  // the store still closes, then says so. behind_mu_ is let go before waiting for the calls in
  // flight: one of them may itself wait for a write behind.
  std::string behind_failed;
  {
    std::lock_guard<std::mutex> b(behind_mu_);
    closing_ = true;
    try {
      WaitBehindLocked();
    } catch (const Error& e) {
      behind_failed = e.what();
    }
  }
  // The step written behind (or a writer that held write_mu_ meanwhile) may have registered
  // the exit's flush after the cancel above; it would run on a freed store. No write from here
  // on registers one (this Close flushes), and the one registered meanwhile goes.
  {
    std::lock_guard<std::mutex> w(write_mu_);
    exit_flush_closed_ = true;
  }
  CancelAtExit(this);
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (!h_) {
    if (!behind_failed.empty()) throw Error(behind_failed);
    return;
  }
  // Everything written goes into checksummed SST files before the write-ahead log is left
  // behind: a closed store never depends on WAL recovery.
  rocksdb::Status flushed;
  if (!options_.read_only) flushed = FlushAll();
  h_.reset();
  run_states_.clear();
  next_transcript_seq_.clear();
  std::string failed = behind_failed;
  if (!flushed.ok()) {
    failed += (failed.empty() ? "" : "; and ") + std::string("store '") + path_ +
              "' closed, but flushing it to SST files failed (what went through the "
              "write-ahead log is recovered by the next open; steps written without it since "
              "the last flush are lost, and their run resumes from its last checkpoint): " +
              flushed.ToString();
  }
  if (!failed.empty()) throw Error(failed);
}

rocksdb::Status Store::FlushAll() {
  rocksdb::FlushOptions fo;
  fo.wait = true;
  rocksdb::Status s = h_->db->Flush(fo, h_->cfs);
  if (s.ok()) s = h_->db->FlushWAL(true);
  return s;
}

bool Store::FamiliesEmpty() const {
  for (Family f : kAllFamilies) {
    std::unique_ptr<rocksdb::Iterator> it(h_->db->NewIterator(rocksdb::ReadOptions(), Cf(f)));
    it->SeekToFirst();
    if (it->Valid() || !it->status().ok()) return false;
  }
  return true;
}

bool Store::closed() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return !h_;
}

std::shared_lock<std::shared_mutex> Store::Guard() const {
  WaitBehind();
  return OpenLock();
}

std::shared_lock<std::shared_mutex> Store::OpenLock() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (!h_) throw Error("store '" + path_ + "' is closed");
  return lock;
}

void Store::CheckWritable() const {
  if (options_.read_only) throw Error("store '" + path_ + "' is open read-only");
}

rocksdb::ColumnFamilyHandle* Store::Cf(Family f) const { return h_->cfs[static_cast<size_t>(f)]; }

void Store::Flush() {
  auto g = Guard();
  if (options_.read_only) return;
  rocksdb::Status s = FlushAll();
  if (!s.ok()) throw Error("store '" + path_ + "': flush failed: " + s.ToString());
}

void Store::Refresh() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (!h_) throw Error("store '" + path_ + "' is closed");
  if (!options_.read_only) return;
  rocksdb::Status s = h_->db->TryCatchUpWithPrimary();
  if (!s.ok())
    throw Error("store '" + path_ + "': cannot catch up with the writer: " + s.ToString());
  CheckTableFiles(h_->db, h_->db_options, h_->cfds, path_);
  // A writer that closes flushes its last writes to SST files and drops the write-ahead log;
  // a secondary instance that had not tailed those writes from the log before then does not
  // see them by catching up (measured: a reader stuck one leaf short of a finished run). So
  // once no writer holds the directory, the reader opens it afresh, which recovers every file,
  // and does so again only after another writer has come and gone.
  const bool writer = WriterClaim::WriterActive(path_);
  if (writer) {
    reopened_without_writer_ = false;
  } else if (!reopened_without_writer_) {
    ReopenReader();
    reopened_without_writer_ = true;
  }
}

void Store::ReopenReader() {
  rocksdb::DBOptions db_options = h_->db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfds = h_->cfds;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = OpenSecondary(db_options, path_, cfds, &cfs, &raw);
  if (!s.ok()) throw Error("cannot reopen store '" + path_ + "' for reading: " + s.ToString());
  auto fresh = std::make_unique<Handles>();
  fresh->db = raw;
  fresh->cfs = std::move(cfs);
  fresh->cache = h_->cache;
  fresh->db_options = db_options;
  fresh->cfds = cfds;
  CheckTableFiles(raw, db_options, cfds, path_);
  h_ = std::move(fresh);
  run_states_.clear();
}

// ---------------------------------------------------------------------------------------
// Raw access

std::optional<std::string> Store::GetRaw(Family f, std::string_view key,
                                         const rocksdb::Snapshot* snap) const {
  rocksdb::ReadOptions ro;
  ro.snapshot = snap;
  rocksdb::PinnableSlice value;
  rocksdb::Status s = h_->db->Get(ro, Cf(f), rocksdb::Slice(key.data(), key.size()), &value);
  if (s.IsNotFound()) return std::nullopt;
  if (s.IsCorruption()) throw CorruptionError(FamilyName(f), DescribeKey(f, key), s.ToString());
  if (!s.ok()) {
    throw Error("store '" + path_ + "': read of " + FamilyName(f) + " " + DescribeKey(f, key) +
                " failed: " + s.ToString());
  }
  return std::string(value.data(), value.size());
}

std::optional<std::string> Store::GetSealed(Family f, std::string_view key,
                                            const rocksdb::Snapshot* snap) const {
  std::optional<std::string> raw = GetRaw(f, key, snap);
  if (!raw) return std::nullopt;
  std::optional<std::string_view> payload = Unseal(f, key, *raw);
  if (!payload) throw CorruptionError(FamilyName(f), DescribeKey(f, key), "checksum mismatch");
  raw->resize(payload->size());
  return raw;
}

void Store::WriteBatchOrThrow(rocksdb::WriteBatch* batch, const char* what) {
  if (unlogged_pending_) {
    // Replaying this batch from the WAL after a crash must not bring back a leaf or a
    // rollback without the unlogged steps before it.
    rocksdb::Status s = FlushAll();
    if (!s.ok()) {
      throw Error("store '" + path_ + "': writing " + what +
                  " failed: flushing the steps written before it failed: " + s.ToString());
    }
    unlogged_pending_ = false;
  }
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync;
  rocksdb::Status s = h_->db->Write(wo, batch);
  if (!s.ok()) throw Error("store '" + path_ + "': writing " + what + " failed: " + s.ToString());
}

void Store::WriteUnloggedOrThrow(rocksdb::WriteBatch* batch, const char* what) {
  if (!flush_at_exit_ && !exit_flush_closed_) {
    // A script that ends with os.exit(code, false) never closes its stores: the exit flushes
    // the unlogged steps (after a step still being written behind), as the WAL kept them.
    AtExitAfterPendingWork(this, [this] {
      std::shared_lock<std::shared_mutex> lock(mu_);
      if (h_) FlushAll();
    });
    flush_at_exit_ = true;
  }
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  unlogged_pending_ = true;  // before the write: a failed one may have reached a memtable
  rocksdb::Status s = h_->db->Write(wo, batch);
  if (!s.ok()) throw Error("store '" + path_ + "': writing " + what + " failed: " + s.ToString());
}

}  // namespace vt::store
