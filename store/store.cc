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
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "store/checkpoint_digest.h"
#include "store/envelope.h"
#include "store/error.h"
#include "store/records.h"
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

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

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
        cf.write_buffer_size = size_t{64} << 20;
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
    // A secondary instance needs a directory for its info log; with the null logger nothing
    // is written there, so the scratch directory is removed right after opening and a
    // killed reader leaves nothing behind.
    std::string scratch = (fs::temp_directory_path() / "vtstore-reader-XXXXXX").string();
    if (mkdtemp(scratch.data()) == nullptr) {
      throw Error("cannot create a temporary directory for a store reader");
    }
    rocksdb::Status s;
    // A writer may delete a file the reader is about to open (compaction, WAL recycling);
    // that race is transient, so retry a few times.
    for (int attempt = 0; attempt < 5; ++attempt) {
      s = rocksdb::DB::OpenAsSecondary(db, path, scratch, cfds, &h->cfs, &raw);
      if (s.ok()) break;
      h->cfs.clear();
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * (attempt + 1)));
    }
    fs::remove_all(scratch, ec);
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
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (!h_) return;
  // Everything written goes into checksummed SST files before the write-ahead log is left
  // behind: a closed store never depends on WAL recovery.
  rocksdb::Status flushed;
  if (!options_.read_only) flushed = FlushAll();
  h_.reset();
  run_states_.clear();
  next_transcript_seq_.clear();
  if (!flushed.ok()) {
    throw Error("store '" + path_ +
                "' closed, but flushing it to SST files failed (what was written stays in the "
                "write-ahead log and is recovered by the next open): " +
                flushed.ToString());
  }
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
  std::error_code ec;
  std::string scratch = (fs::temp_directory_path() / "vtstore-reader-XXXXXX").string();
  if (mkdtemp(scratch.data()) == nullptr) throw Error("cannot create a temporary directory for a store reader");
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s;
  for (int attempt = 0; attempt < 5; ++attempt) {
    s = rocksdb::DB::OpenAsSecondary(db_options, path_, scratch, cfds, &cfs, &raw);
    if (s.ok()) break;
    cfs.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * (attempt + 1)));
  }
  fs::remove_all(scratch, ec);
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
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync;
  rocksdb::Status s = h_->db->Write(wo, batch);
  if (!s.ok()) throw Error("store '" + path_ + "': writing " + what + " failed: " + s.ToString());
}

namespace {

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

}  // namespace

// ---------------------------------------------------------------------------------------
// Runs

RunInfo Store::LoadRun(std::string_view id) const {
  ValidateId(id, "run id");
  std::string config_key = RunKey(id, RunField::kConfig);
  std::optional<std::string> config = GetSealed(Family::kRuns, config_key);
  if (!config) throw Error("run '" + std::string(id) + "' does not exist in store '" + path_ + "'");
  std::optional<RunConfigRecord> c = DecodeRunConfig(*config);
  if (!c)
    throw CorruptionError("runs", DescribeKey(Family::kRuns, config_key), "malformed run config");
  std::string progress_key = RunKey(id, RunField::kProgress);
  std::optional<std::string> progress = GetSealed(Family::kRuns, progress_key);
  if (!progress)
    throw CorruptionError("runs", DescribeKey(Family::kRuns, progress_key), "missing run progress");
  std::optional<ProgressRecord> p = DecodeProgress(*progress);
  if (!p)
    throw CorruptionError("runs", DescribeKey(Family::kRuns, progress_key),
                          "malformed run progress");
  RunInfo info;
  info.id = std::string(id);
  info.spec = std::move(c->spec);
  info.spec_hash = c->spec_hash;
  info.checkpoint_every = c->checkpoint_every;
  info.steps = c->steps;
  info.steps_written = p->steps_written;
  info.leaves = p->leaves;
  std::optional<std::string> metadata = GetSealed(Family::kRuns, RunKey(id, RunField::kMetadata));
  if (metadata) info.metadata = std::move(*metadata);
  return info;
}

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

std::vector<std::string> Store::ListIds(Family f, const char* what) const {
  std::vector<std::string> ids;
  std::unique_ptr<rocksdb::Iterator> it(h_->db->NewIterator(rocksdb::ReadOptions(), Cf(f)));
  for (it->SeekToFirst(); it->Valid();) {
    std::string_view key(it->key().data(), it->key().size());
    size_t z = key.find('\0');
    if (z == std::string_view::npos) {
      it->Next();
      continue;
    }
    std::string id(key.substr(0, z));
    if (DecodeKey(f, key) && (ids.empty() || ids.back() != id)) ids.push_back(id);
    it->Seek(PrefixSuccessor(IdPrefix(id)));
  }
  if (!it->status().ok()) {
    throw Error("store '" + path_ + "': listing " + what + " failed: " + it->status().ToString());
  }
  return ids;
}

std::vector<std::string> Store::Runs() const {
  auto g = Guard();
  return ListIds(Family::kRuns, "runs");
}

std::optional<RunInfo> Store::GetRun(std::string_view id) const {
  ValidateId(id, "run id");
  auto g = Guard();
  if (!GetRaw(Family::kRuns, RunKey(id, RunField::kConfig))) return std::nullopt;
  return LoadRun(id);
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

Digest Store::WriteStep(std::string_view run, uint64_t step, std::vector<LogRecordView> records) {
  CheckWritable();
  ValidateId(run, "run id");
  auto g = Guard();
  std::lock_guard<std::mutex> w(write_mu_);
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
  if (records.size() > UINT32_MAX)
    throw Error("run " + r + ": too many log records in step " + std::to_string(step));
  SortAndCheckRecords(&records);
  uint64_t value_bytes = 0;
  for (const LogRecordView& rec : records) {
    if (rec.value.size() > kMaxValueBytes) {
      throw Error("run " + r + " step " + std::to_string(step) + ": log record '" +
                  std::string(rec.boundary) + "' call " + std::to_string(rec.call) +
                  " is larger than 1 GiB");
    }
    value_bytes += rec.value.size();
  }
  StepInfo marker;
  marker.step = step;
  marker.records = static_cast<uint32_t>(records.size());
  marker.value_bytes = value_bytes;
  marker.digest = StepDigestSorted(step, records);
  LogDigestChain chain = st.chain;
  chain.AddStep(marker.digest);

  // Reserve the batch up front: growing it by doubling would copy every value again.
  rocksdb::WriteBatch batch(static_cast<size_t>(value_bytes) +
                            records.size() * (run.size() + kMaxBoundaryBytes / 8 + 48) + 512);
  rocksdb::ColumnFamilyHandle* logs = Cf(Family::kLogs);
  for (const LogRecordView& rec : records) {
    PutSealed(&batch, logs, Family::kLogs, LogKey(run, step, rec.boundary, rec.call), rec.value);
  }
  PutSealed(&batch, Cf(Family::kSteps), Family::kSteps, StepKey(run, step), EncodeStepInfo(marker));
  ProgressRecord p{step, info.leaves, chain.value()};
  PutSealed(&batch, Cf(Family::kRuns), Family::kRuns, RunKey(run, RunField::kProgress),
            EncodeProgress(p));
  WriteBatchOrThrow(&batch, "a step");
  st.info.steps_written = step;
  st.chain = chain;
  return marker.digest;
}

LeafRecord Store::PutCheckpoint(std::string_view run, uint64_t leaf, std::string_view checkpoint,
                                const PutCheckpointOptions& options) {
  CheckWritable();
  ValidateId(run, "run id");
  if (checkpoint.size() > kMaxCheckpointBytes) throw Error("checkpoint is larger than 1 TiB");
  if (options.metadata && options.metadata->size() > kMaxValueBytes)
    throw Error("run metadata must be at most 1 GiB");
  auto g = Guard();
  std::lock_guard<std::mutex> w(write_mu_);
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
  LeafRecord rec;
  rec.index = leaf;
  rec.step = due;
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
// Reading logs

std::optional<StepInfo> Store::GetStep(std::string_view run, uint64_t step) const {
  ValidateId(run, "run id");
  auto g = Guard();
  std::string key = StepKey(run, step);
  std::optional<std::string> v = GetSealed(Family::kSteps, key);
  if (!v) return std::nullopt;
  std::optional<StepInfo> s = DecodeStepInfo(step, *v);
  if (!s) throw CorruptionError("steps", DescribeKey(Family::kSteps, key), "malformed step marker");
  return s;
}

uint64_t Store::ScanLogs(std::string_view run, const LogQuery& query, const LogVisitor& fn) const {
  ValidateId(run, "run id");
  if (query.boundary) ValidateBoundary(*query.boundary);
  auto g = Guard();
  if (query.first_step > query.last_step) return 0;
  const std::string upper = PrefixSuccessor(IdPrefix(run));
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(h_->db->NewIterator(ro, Cf(Family::kLogs)));
  uint64_t calls = 0;
  auto seek_step = [&](uint64_t step) {
    if (query.boundary) {
      it->Seek(LogBoundaryPrefix(run, step, *query.boundary));
    } else {
      it->Seek(LogStepPrefix(run, step));
    }
  };
  seek_step(query.first_step);
  while (it->Valid()) {
    std::string_view key(it->key().data(), it->key().size());
    std::optional<DecodedKey> d = DecodeKey(Family::kLogs, key);
    if (!d || d->id != run)
      throw CorruptionError("logs", DescribeKey(Family::kLogs, key), "malformed key");
    if (d->number > query.last_step) break;
    if (query.boundary && d->boundary != *query.boundary) {
      if (d->boundary < *query.boundary) {
        seek_step(d->number);
      } else if (d->number == UINT64_MAX) {
        break;
      } else {
        seek_step(d->number + 1);
      }
      continue;
    }
    std::string_view stored(it->value().data(), it->value().size());
    std::optional<std::string_view> payload = Unseal(Family::kLogs, key, stored);
    if (!payload)
      throw CorruptionError("logs", DescribeKey(Family::kLogs, key), "checksum mismatch");
    ++calls;
    if (!fn(d->number, d->boundary, d->sub, *payload)) return calls;
    it->Next();
  }
  if (it->status().IsCorruption()) {
    throw CorruptionError("logs", "run '" + std::string(run) + "'", it->status().ToString());
  }
  if (!it->status().ok())
    throw Error("store '" + path_ + "': reading logs failed: " + it->status().ToString());
  return calls;
}

std::optional<std::vector<LogRecord>> Store::GetStepRecords(std::string_view run,
                                                            uint64_t step) const {
  std::optional<StepInfo> marker = GetStep(run, step);
  if (!marker) return std::nullopt;
  std::vector<LogRecord> out;
  out.reserve(marker->records);
  LogQuery q;
  q.first_step = step;
  q.last_step = step;
  ScanLogs(run, q, [&](uint64_t s, std::string_view b, uint32_t c, std::string_view v) {
    out.push_back(LogRecord{s, std::string(b), c, std::string(v)});
    return true;
  });
  if (out.size() != marker->records) {
    throw CorruptionError("steps", DescribeKey(Family::kSteps, StepKey(run, step)),
                          "the step marker counts " + std::to_string(marker->records) +
                              " records, the store holds " + std::to_string(out.size()));
  }
  return out;
}

std::optional<std::string> Store::GetLogRecord(std::string_view run, uint64_t step,
                                               std::string_view boundary, uint32_t call) const {
  ValidateId(run, "run id");
  ValidateBoundary(boundary);
  auto g = Guard();
  return GetSealed(Family::kLogs, LogKey(run, step, boundary, call));
}

Digest Store::RecomputeLogDigest(std::string_view run, uint64_t leaf) const {
  RunInfo info;
  {
    auto g = Guard();
    info = LoadRun(run);
  }
  const uint64_t total = info.total_leaves();
  if (leaf >= total) {
    throw Error("run '" + std::string(run) + "': leaf " + std::to_string(leaf) +
                " out of range (leaves 0.." + std::to_string(total - 1) + ")");
  }
  LogDigestChain chain;
  if (leaf == 0) return chain.value();
  uint64_t first = LeafStep(leaf - 1, info.steps, info.checkpoint_every) + 1;
  uint64_t last = std::min(LeafStep(leaf, info.steps, info.checkpoint_every), info.steps_written);
  StepDigestStream stream(first, &chain);
  LogQuery q;
  q.first_step = first;
  q.last_step = last;
  ScanLogs(run, q, [&](uint64_t s, std::string_view b, uint32_t c, std::string_view v) {
    stream.Add(s, b, c, v);
    return true;
  });
  if (last >= first) stream.FinishThrough(last);
  return chain.value();
}

// ---------------------------------------------------------------------------------------
// Checkpoints, leaves and the Merkle tree

std::optional<LeafRecord> Store::GetLeaf(std::string_view run, uint64_t leaf) const {
  ValidateId(run, "run id");
  auto g = Guard();
  std::string key = LeafKey(run, leaf);
  std::optional<std::string> v = GetSealed(Family::kLeaves, key);
  if (!v) return std::nullopt;
  std::optional<LeafRecord> r = DecodeLeafRecord(leaf, *v);
  if (!r)
    throw CorruptionError("leaves", DescribeKey(Family::kLeaves, key), "malformed leaf record");
  return r;
}

LeafRecord Store::LeafOrThrow(std::string_view run, uint64_t leaf) const {
  std::string key = LeafKey(run, leaf);
  std::optional<std::string> v = GetSealed(Family::kLeaves, key);
  if (!v) throw CorruptionError("leaves", DescribeKey(Family::kLeaves, key), "missing leaf record");
  std::optional<LeafRecord> r = DecodeLeafRecord(leaf, *v);
  if (!r)
    throw CorruptionError("leaves", DescribeKey(Family::kLeaves, key), "malformed leaf record");
  return *r;
}

std::optional<std::string> Store::GetCheckpoint(std::string_view run, uint64_t leaf) const {
  std::optional<LeafRecord> rec = GetLeaf(run, leaf);
  if (!rec) return std::nullopt;
  if (rec->checkpoint_bytes > kMaxCheckpointBytes) {
    throw CorruptionError("leaves", DescribeKey(Family::kLeaves, LeafKey(run, leaf)),
                          "impossible checkpoint size");
  }
  auto g = Guard();
  std::string out;
  out.reserve(rec->checkpoint_bytes);
  for (uint32_t c = 0; c < rec->checkpoint_chunks; ++c) {
    std::string key = CheckpointKey(run, leaf, c);
    std::optional<std::string> part = GetSealed(Family::kCheckpoints, key);
    if (!part)
      throw CorruptionError("checkpoints", DescribeKey(Family::kCheckpoints, key),
                            "missing checkpoint chunk");
    out.append(*part);
  }
  std::string leaf_key = DescribeKey(Family::kLeaves, LeafKey(run, leaf));
  if (out.size() != rec->checkpoint_bytes) {
    throw CorruptionError("checkpoints", leaf_key,
                          "checkpoint has " + std::to_string(out.size()) +
                              " bytes, its leaf records " + std::to_string(rec->checkpoint_bytes));
  }
  if (Sha256Of(out) != rec->state_digest) {
    throw CorruptionError("checkpoints", leaf_key,
                          "checkpoint bytes do not match the leaf's state digest");
  }
  return out;
}

StoreNodes::StoreNodes(const Store* store, std::string_view run) : store_(store), run_(run) {}

Digest StoreNodes::Node(unsigned level, uint64_t index) const {
  std::string key = NodeKey(run_, static_cast<uint8_t>(level), index);
  std::optional<std::string> v = store_->GetSealed(Family::kMerkle, key);
  if (!v) throw CorruptionError("merkle", DescribeKey(Family::kMerkle, key), "missing Merkle node");
  std::optional<Digest> d = DigestFromBytes(*v);
  if (!d)
    throw CorruptionError("merkle", DescribeKey(Family::kMerkle, key),
                          "Merkle node is not 32 bytes");
  return *d;
}

uint64_t Store::TreeSize(std::string_view run) const {
  auto g = Guard();
  return LoadRun(run).leaves;
}

Digest Store::Root(std::string_view run) const {
  auto g = Guard();
  uint64_t size = LoadRun(run).leaves;
  return MerkleRoot(StoreNodes(this, run), size);
}

namespace {

void CheckSize(std::string_view run, uint64_t size, uint64_t leaves) {
  if (size > leaves) {
    throw Error("run '" + std::string(run) + "': tree size " + std::to_string(size) +
                " is beyond its " + std::to_string(leaves) + " stored leaves");
  }
}

}  // namespace

Digest Store::RootAt(std::string_view run, uint64_t size) const {
  auto g = Guard();
  CheckSize(run, size, LoadRun(run).leaves);
  return MerkleRoot(StoreNodes(this, run), size);
}

std::vector<Digest> Store::InclusionProof(std::string_view run, uint64_t leaf,
                                          uint64_t size) const {
  auto g = Guard();
  CheckSize(run, size, LoadRun(run).leaves);
  return MerkleInclusionProof(StoreNodes(this, run), leaf, size);
}

std::vector<Digest> Store::ConsistencyProof(std::string_view run, uint64_t m, uint64_t n) const {
  auto g = Guard();
  CheckSize(run, n, LoadRun(run).leaves);
  return MerkleConsistencyProof(StoreNodes(this, run), m, n);
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

std::optional<std::string> Store::GetTranscriptEntry(std::string_view game, uint64_t seq) const {
  ValidateId(game, "game id");
  auto g = Guard();
  return GetSealed(Family::kTranscripts, TranscriptKey(game, seq));
}

std::vector<std::string> Store::Transcript(std::string_view game) const {
  ValidateId(game, "game id");
  auto g = Guard();
  const std::string prefix = IdPrefix(game);
  const std::string upper = PrefixSuccessor(prefix);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(h_->db->NewIterator(ro, Cf(Family::kTranscripts)));
  std::vector<std::string> out;
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    std::string_view key(it->key().data(), it->key().size());
    std::optional<DecodedKey> d = DecodeKey(Family::kTranscripts, key);
    if (!d)
      throw CorruptionError("transcripts", DescribeKey(Family::kTranscripts, key), "malformed key");
    if (d->number != out.size()) {
      throw CorruptionError("transcripts", DescribeKey(Family::kTranscripts, key),
                            "expected entry " + std::to_string(out.size()) + " here");
    }
    std::optional<std::string_view> payload =
        Unseal(Family::kTranscripts, key, std::string_view(it->value().data(), it->value().size()));
    if (!payload)
      throw CorruptionError("transcripts", DescribeKey(Family::kTranscripts, key),
                            "checksum mismatch");
    out.emplace_back(*payload);
  }
  if (!it->status().ok())
    throw Error("store '" + path_ + "': reading transcripts failed: " + it->status().ToString());
  return out;
}

std::vector<std::string> Store::Games() const {
  auto g = Guard();
  return ListIds(Family::kTranscripts, "games");
}

}  // namespace vt::store
