// vt::store::Store: the known-answer run, ordering rules, reading back, rollback, reopen,
// transcripts, closed and read-only stores, and errors.
#include "store/store.h"

#include <rocksdb/convenience.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/checkpoint_digest.h"
#include "store/error.h"
#include "store/merkle.h"
#include "store/sha256.h"
#include "tests/store/kat_run.h"
#include "tests/store/test_util.h"

namespace vt::store {
namespace {

using testing::KatCheckpoint;
using testing::KatRecords;
using testing::TempDir;

TEST_CASE("store: the known-answer run gives the documented leaves and root", "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  testing::WriteKatRun(*s, "kat");
  std::optional<RunInfo> info = s->GetRun("kat");
  REQUIRE(info);
  CHECK(info->complete());
  CHECK(info->steps_written == 3);
  CHECK(info->leaves == 3);
  CHECK(info->spec == "kat-spec");
  CHECK(info->spec_hash == Sha256Of("kat-spec"));
  for (uint64_t i = 0; i < 3; ++i) {
    std::optional<LeafRecord> leaf = s->GetLeaf("kat", i);
    REQUIRE(leaf);
    CHECK(ToHex(leaf->leaf) == testing::kKatLeaves[i]);
    CHECK(ToHex(leaf->state_digest) == testing::kKatStates[i]);
    CHECK(leaf->step == std::vector<uint64_t>{0, 2, 3}[i]);
    CHECK(s->RecomputeLogDigest("kat", i) == leaf->log_digest);
    CHECK(s->GetCheckpoint("kat", i) == KatCheckpoint(i));
  }
  CHECK(ToHex(s->Root("kat")) == testing::kKatRoot);
  CHECK(ToHex(s->RootAt("kat", 2)) == testing::kKatRootAt2);
  CHECK(s->RootAt("kat", 0) == MerkleEmptyRoot());
  CHECK_FALSE(s->GetLeaf("kat", 3));
  CHECK_FALSE(s->GetCheckpoint("kat", 3));
  // Proofs from the store verify against the documented root.
  for (uint64_t n = 1; n <= 3; ++n) {
    Digest root = s->RootAt("kat", n);
    for (uint64_t i = 0; i < n; ++i) {
      Digest lh = MerkleLeafHash(AsBytes(s->GetLeaf("kat", i)->leaf));
      CHECK(VerifyInclusion(lh, i, n, s->InclusionProof("kat", i, n), root));
    }
    for (uint64_t m = 0; m <= n; ++m) {
      CHECK(VerifyConsistency(m, n, s->RootAt("kat", m), root, s->ConsistencyProof("kat", m, n)));
    }
  }
  CHECK_THROWS_WITH(s->RootAt("kat", 4), Catch::Contains("beyond its 3 stored leaves"));
  CHECK_THROWS_WITH(s->InclusionProof("kat", 3, 3), Catch::Contains("out of range"));
  CHECK(s->Verify().ok());
}

TEST_CASE("store: log records read back by step, boundary and call", "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  testing::WriteKatRun(*s, "kat");
  std::optional<std::vector<LogRecord>> step2 = s->GetStepRecords("kat", 2);
  REQUIRE(step2);
  REQUIRE(step2->size() == 3);
  CHECK((*step2)[0].boundary == "a:fwd");
  CHECK((*step2)[0].call == 0);
  CHECK((*step2)[0].value == std::string(2, '\x02'));
  CHECK((*step2)[1].boundary == "a:fwd");
  CHECK((*step2)[1].call == 1);
  CHECK((*step2)[1].value.empty());
  CHECK((*step2)[2].boundary == "b:bwd");
  CHECK_FALSE(s->GetStepRecords("kat", 4));
  CHECK_FALSE(s->GetStepRecords("kat", 0));
  CHECK(s->GetLogRecord("kat", 3, "b:bwd", 0) == std::string("v3"));
  CHECK_FALSE(s->GetLogRecord("kat", 3, "b:bwd", 1));
  CHECK_FALSE(s->GetLogRecord("kat", 3, "c:fwd", 0));
  std::optional<StepInfo> info = s->GetStep("kat", 2);
  REQUIRE(info);
  CHECK(info->records == 3);
  CHECK(info->value_bytes == 4);
  CHECK(info->digest == StepDigest(2, KatRecords(2).records()));

  std::vector<std::string> seen;
  LogQuery all;
  CHECK(s->ScanLogs("kat", all, [&](uint64_t st, std::string_view b, uint32_t c, std::string_view) {
    seen.push_back(std::to_string(st) + "/" + std::string(b) + "/" + std::to_string(c));
    return true;
  }) == 7);
  CHECK(seen == std::vector<std::string>{"1/a:fwd/0", "1/b:bwd/0", "2/a:fwd/0", "2/a:fwd/1",
                                         "2/b:bwd/0", "3/a:fwd/0", "3/b:bwd/0"});
  seen.clear();
  LogQuery only_b;
  only_b.boundary = "b:bwd";
  only_b.first_step = 2;
  s->ScanLogs("kat", only_b, [&](uint64_t st, std::string_view b, uint32_t c, std::string_view v) {
    seen.push_back(std::to_string(st) + "/" + std::string(b) + "=" + std::string(v));
    return true;
  });
  CHECK(seen == std::vector<std::string>{"2/b:bwd=v2", "3/b:bwd=v3"});
  seen.clear();
  LogQuery a_to_2;
  a_to_2.boundary = "a:fwd";
  a_to_2.last_step = 2;
  s->ScanLogs("kat", a_to_2, [&](uint64_t st, std::string_view b, uint32_t c, std::string_view) {
    seen.push_back(std::to_string(st) + "/" + std::to_string(c));
    return seen.size() < 2;  // stop after two
  });
  CHECK(seen == std::vector<std::string>{"1/0", "2/0"});
  LogQuery none;
  none.boundary = "zzz";
  CHECK(s->ScanLogs("kat", none, [](uint64_t, std::string_view, uint32_t, std::string_view) {
    return true;
  }) == 0);
}

TEST_CASE("store: runs are created once and written strictly in order", "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  CHECK(s->Runs().empty());
  CHECK_FALSE(s->GetRun("r"));
  CHECK_THROWS_WITH(s->CreateRun("bad id", RunConfig{"s", 2, 4, ""}),
                    Catch::Contains("invalid run id 'bad id'"));
  CHECK_THROWS_WITH(s->CreateRun("r", RunConfig{"s", 0, 4, ""}),
                    Catch::Contains("checkpoint_every must be at least 1"));
  s->CreateRun("r", RunConfig{"s", 2, 3, "meta"});
  CHECK_THROWS_WITH(s->CreateRun("r", RunConfig{"s", 2, 3, ""}),
                    Catch::Contains("run 'r' already exists"));
  s->CreateRun("q", RunConfig{"s", 1, 0, ""});
  CHECK(s->Runs() == std::vector<std::string>{"q", "r"});
  CHECK(s->GetRun("r")->metadata == "meta");
  CHECK_THROWS_WITH(s->WriteStep("nope", 1, {}), Catch::Contains("run 'nope' does not exist"));

  const std::string ck = KatCheckpoint(0);
  CHECK_THROWS_WITH(s->WriteStep("r", 1, {}),
                    Catch::Contains("store leaf 0 (the initial checkpoint) before step 1"));
  CHECK_THROWS_WITH(s->PutCheckpoint("r", 1, ck),
                    Catch::Contains("expected leaf 0 next, got leaf 1"));
  CHECK_THROWS_WITH(s->PutCheckpoint("r", 0, "not a checkpoint"),
                    Catch::Contains("malformed checkpoint"));
  PutCheckpointOptions wrong;
  wrong.expected_state_digest = Sha256Of("other");
  CHECK_THROWS_WITH(s->PutCheckpoint("r", 0, ck, wrong),
                    Catch::Contains("differs from the expected"));
  PutCheckpointOptions right;
  right.expected_state_digest = Sha256Of(ck);
  right.metadata = "m2";
  LeafRecord l0 = s->PutCheckpoint("r", 0, ck, right);
  CHECK(l0.log_digest == Digest{});
  CHECK(s->GetRun("r")->metadata == "m2");
  CHECK_THROWS_WITH(s->WriteStep("r", 2, {}), Catch::Contains("expected step 1 next, got step 2"));
  CHECK_THROWS_WITH(s->WriteStep("r", 1, {{"a", 0, "x"}, {"a", 0, "y"}}),
                    Catch::Contains("appears twice"));
  CHECK_THROWS_WITH(s->WriteStep("r", 1, {{"bad\x01", 0, "x"}}),
                    Catch::Contains("invalid boundary name"));
  s->WriteStep("r", 1, {});
  CHECK_THROWS_WITH(
      s->PutCheckpoint("r", 1, ck),
      Catch::Contains("checkpoint after step 2, but the run has written steps up to 1"));
  s->WriteStep("r", 2, {{"a", 0, "x"}});
  CHECK_THROWS_WITH(s->WriteStep("r", 3, {}),
                    Catch::Contains("store leaf 1 (the checkpoint after step 2) before step 3"));
  s->PutCheckpoint("r", 1, ck);
  s->WriteStep("r", 3, {});
  CHECK_THROWS_WITH(s->WriteStep("r", 4, {}), Catch::Contains("store leaf 2"));
  s->PutCheckpoint("r", 2, ck);
  CHECK(s->GetRun("r")->complete());
  CHECK_THROWS_WITH(s->WriteStep("r", 4, {}), Catch::Contains("run 'r' is complete"));
  CHECK_THROWS_WITH(s->PutCheckpoint("r", 3, ck), Catch::Contains("run 'r' is complete"));
  // A run of zero steps has exactly leaf 0.
  s->PutCheckpoint("q", 0, ck);
  CHECK(s->GetRun("q")->complete());
  CHECK(s->Verify().ok());
  s->SetMetadata("q", "new");
  CHECK(s->GetRun("q")->metadata == "new");
}

TEST_CASE("store: rollback drops the steps after the last leaf, resuming gives the same root",
          "[store]") {
  TempDir dir;
  Digest expected;
  {
    auto ref = Store::Open(dir.Sub("ref"));
    testing::WriteKatRun(*ref, "kat");
    expected = ref->Root("kat");
  }
  auto s = Store::Open(dir.Sub("db"));
  s->CreateRun("kat", RunConfig{"kat-spec", 2, 3, ""});
  CHECK_FALSE(s->Rollback("kat"));  // no leaf yet: resume at leaf 0
  s->PutCheckpoint("kat", 0, KatCheckpoint(0));
  // A different step 1 written, then lost (the writer died before leaf 1).
  s->WriteStep("kat", 1, {{"garbage", 0, "zzz"}});
  std::optional<LeafRecord> last = s->Rollback("kat");
  REQUIRE(last);
  CHECK(last->index == 0);
  CHECK(last->step == 0);
  CHECK(s->GetRun("kat")->steps_written == 0);
  CHECK_FALSE(s->GetStep("kat", 1));
  CHECK_FALSE(s->GetLogRecord("kat", 1, "garbage", 0));
  CHECK(s->Verify().ok());
  s->WriteStep("kat", 1, KatRecords(1).records());
  s->WriteStep("kat", 2, KatRecords(2).records());
  s->PutCheckpoint("kat", 1, KatCheckpoint(1));
  s->WriteStep("kat", 3, KatRecords(3).records());
  CHECK(s->Rollback("kat")->index == 1);
  CHECK(s->GetRun("kat")->steps_written == 2);
  s->WriteStep("kat", 3, KatRecords(3).records());
  s->PutCheckpoint("kat", 2, KatCheckpoint(2));
  CHECK(s->Rollback("kat")->index == 2);  // nothing to drop
  CHECK(s->Root("kat") == expected);
  CHECK(s->Verify().ok());
}

TEST_CASE("store: a reopened store resumes writing with the same state", "[store]") {
  TempDir dir;
  Digest expected;
  {
    auto ref = Store::Open(dir.Sub("ref"));
    testing::WriteKatRun(*ref, "kat");
    expected = ref->Root("kat");
  }
  {
    auto s = Store::Open(dir.Sub("db"));
    s->CreateRun("kat", RunConfig{"kat-spec", 2, 3, ""});
    s->PutCheckpoint("kat", 0, KatCheckpoint(0));
    s->WriteStep("kat", 1, KatRecords(1).records());  // mid-interval: the chain is persisted
  }
  {
    auto s = Store::Open(dir.Sub("db"));
    s->WriteStep("kat", 2, KatRecords(2).records());
    s->PutCheckpoint("kat", 1, KatCheckpoint(1));
  }
  auto s = Store::Open(dir.Sub("db"));
  s->WriteStep("kat", 3, KatRecords(3).records());
  s->PutCheckpoint("kat", 2, KatCheckpoint(2));
  CHECK(s->Root("kat") == expected);
  CHECK(ToHex(expected) == testing::kKatRoot);
}

TEST_CASE("store: many leaves, proofs at every size match an in-memory tree", "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  const uint64_t n = 300;
  s->CreateRun("long", RunConfig{"spec", 1, n, ""});
  MemoryMerkleTree mem;
  std::string ck = KatCheckpoint(7);
  for (uint64_t i = 0; i <= n; ++i) {
    if (i > 0) s->WriteStep("long", i, {{"x", 0, std::to_string(i)}});
    LeafRecord rec = s->PutCheckpoint("long", i, ck);
    mem.Append(AsBytes(rec.leaf));
  }
  CHECK(s->TreeSize("long") == n + 1);
  for (uint64_t size = 1; size <= n + 1; size += 13) {
    REQUIRE(s->RootAt("long", size) == mem.RootAt(size));
    for (uint64_t i = 0; i < size; i += 7)
      REQUIRE(s->InclusionProof("long", i, size) == mem.InclusionProof(i, size));
    for (uint64_t m = 0; m <= size; m += 11)
      REQUIRE(s->ConsistencyProof("long", m, size) == mem.ConsistencyProof(m, size));
  }
  CHECK(s->Root("long") == mem.Root());
  CHECK(s->Verify().ok());
}

TEST_CASE("store: checkpoints larger than a chunk round-trip", "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  std::string data(kCheckpointChunkBytes + 1000, '\0');
  for (size_t i = 0; i < data.size(); i += 512) data[i] = static_cast<char>(i / 512);
  std::string ck = SerializeCheckpoint(
      {StateEntry{"big", 5, {static_cast<int64_t>(data.size())}, data.data(), data.size()}});
  s->CreateRun("big", RunConfig{"spec", 1, 0, ""});
  LeafRecord rec = s->PutCheckpoint("big", 0, ck);
  CHECK(rec.checkpoint_chunks == 2);
  CHECK(rec.checkpoint_bytes == ck.size());
  CHECK(s->GetCheckpoint("big", 0) == ck);
  CHECK(s->Verify().ok());
}

TEST_CASE("store: transcripts append in sequence and persist", "[store]") {
  TempDir dir;
  {
    auto s = Store::Open(dir.Sub("db"));
    CHECK(s->Games().empty());
    CHECK(s->Transcript("g1").empty());
    CHECK(s->AppendTranscript("g1", "hello") == 0);
    CHECK(s->AppendTranscript("g1", std::string("\0bin", 4)) == 1);
    CHECK(s->AppendTranscript("g0", "") == 0);
    CHECK_THROWS_WITH(s->AppendTranscript("bad/game", "x"), Catch::Contains("invalid game id"));
  }
  auto s = Store::Open(dir.Sub("db"));
  CHECK(s->AppendTranscript("g1", "again") == 2);
  CHECK(s->Games() == std::vector<std::string>{"g0", "g1"});
  CHECK(s->Transcript("g1") == std::vector<std::string>{"hello", std::string("\0bin", 4), "again"});
  CHECK(s->GetTranscriptEntry("g1", 1) == std::string("\0bin", 4));
  CHECK_FALSE(s->GetTranscriptEntry("g1", 3));
  CHECK(s->Verify().ok());
}

TEST_CASE("store: a closed store refuses every call with a clear error", "[store]") {
  TempDir dir;
  auto s = Store::Open(dir.Sub("db"));
  testing::WriteKatRun(*s, "kat");
  s->Close();
  CHECK(s->closed());
  s->Close();  // idempotent
  const std::string msg = "is closed";
  CHECK_THROWS_WITH(s->Runs(), Catch::Contains(msg));
  CHECK_THROWS_WITH(s->GetRun("kat"), Catch::Contains(msg));
  CHECK_THROWS_WITH(s->Root("kat"), Catch::Contains(msg));
  CHECK_THROWS_WITH(s->GetCheckpoint("kat", 0), Catch::Contains(msg));
  CHECK_THROWS_WITH(s->WriteStep("kat", 4, {}), Catch::Contains(msg));
  CHECK_THROWS_WITH(s->Verify(), Catch::Contains(msg));
  CHECK_THROWS_WITH(s->AppendTranscript("g", "x"), Catch::Contains(msg));
  CHECK_THROWS_WITH(s->Flush(), Catch::Contains(msg));
}

TEST_CASE("store: open errors name the directory", "[store]") {
  TempDir dir;
  StoreOptions ro;
  ro.read_only = true;
  CHECK_THROWS_WITH(Store::Open(dir.Sub("missing"), ro),
                    Catch::Contains("store '" + dir.Sub("missing") + "' does not exist"));
  StoreOptions no_create;
  no_create.create_if_missing = false;
  CHECK_THROWS_WITH(Store::Open(dir.Sub("missing"), no_create), Catch::Contains("does not exist"));
  std::filesystem::create_directories(dir.Sub("junk"));
  std::ofstream(dir.Sub("junk") + "/file.txt") << "hello";
  CHECK_THROWS_WITH(Store::Open(dir.Sub("junk")), Catch::Contains("is not a vtrun store"));
  CHECK_THROWS_WITH(Store::Open(dir.Sub("junk") + "/file.txt"),
                    Catch::Contains("is not a directory"));
  CHECK_THROWS_WITH(Store::Open(""), Catch::Contains("non-empty path"));
  // One writer per directory, also inside one process.
  auto w = Store::Open(dir.Sub("db"));
  CHECK_THROWS_WITH(Store::Open(dir.Sub("db")),
                    Catch::Contains("store '" + dir.Sub("db") + "' is already open for writing"));
  // A reader may open it meanwhile.
  auto r = Store::Open(dir.Sub("db"), ro);
  CHECK(r->read_only());
  CHECK_THROWS_WITH(r->CreateRun("x", RunConfig{"s", 1, 1, ""}),
                    Catch::Contains("is open read-only"));
  CHECK_THROWS_WITH(r->AppendTranscript("g", "x"), Catch::Contains("is open read-only"));
  // The reader catches up with the writer on Refresh().
  testing::WriteKatRun(*w, "kat");  // in the WAL and memtables only, not flushed
  r->Refresh();
  REQUIRE(r->GetRun("kat"));
  CHECK(ToHex(r->Root("kat")) == testing::kKatRoot);
  CHECK(r->Verify().ok());
  w->Close();
  // Once closed, the directory can be opened for writing again.
  CHECK_NOTHROW(Store::Open(dir.Sub("db")));
}

TEST_CASE("store: other RocksDB databases are not taken for stores", "[store]") {
  TempDir dir;
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    REQUIRE(rocksdb::DB::Open(options, dir.Sub("plain"), &db).ok());
    REQUIRE(db->Put(rocksdb::WriteOptions(), "some", "data").ok());
    rocksdb::ColumnFamilyHandle* cf = nullptr;
    REQUIRE(db->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), "other", &cf).ok());
    db->DestroyColumnFamilyHandle(cf);
    delete db;
  }
  CHECK_THROWS_WITH(Store::Open(dir.Sub("plain")),
                    Catch::Contains("is not a vtrun store (unknown column family 'other')"));
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    REQUIRE(rocksdb::DB::Open(options, dir.Sub("plain2"), &db).ok());
    REQUIRE(db->Put(rocksdb::WriteOptions(), "some", "data").ok());
    delete db;
  }
  CHECK_THROWS_WITH(Store::Open(dir.Sub("plain2")),
                    Catch::Contains("is not a vtrun store (no column family 'runs')"));
  StoreOptions ro;
  ro.read_only = true;
  CHECK_THROWS_WITH(Store::Open(dir.Sub("plain2"), ro),
                    Catch::Contains("is not a vtrun store (no column family 'runs')"));
  // Refusing did not change the database: it still has only its default family.
  std::vector<std::string> names;
  REQUIRE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.Sub("plain2"), &names).ok());
  CHECK(names == std::vector<std::string>{"default"});
  // An empty database (a store whose creation was interrupted) is completed by a writer.
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    REQUIRE(rocksdb::DB::Open(options, dir.Sub("empty"), &db).ok());
    delete db;
  }
  CHECK_THROWS_WITH(Store::Open(dir.Sub("empty"), ro), Catch::Contains("no column family"));
  auto completed = Store::Open(dir.Sub("empty"));
  testing::WriteKatRun(*completed, "kat");
  CHECK(completed->Verify().ok());
}

TEST_CASE("store: log compression falls back and is reported", "[store]") {
  TempDir dir;
  StoreOptions none;
  none.log_compression = Compression::kNone;
  CHECK(Store::Open(dir.Sub("a"), none)->log_compression() == Compression::kNone);
  // The default asks for zstd and falls back to lz4, then none, by what this RocksDB build
  // supports (Debian's supports both, so zstd is expected there).
  const std::vector<rocksdb::CompressionType> supported = rocksdb::GetSupportedCompressions();
  auto has = [&](rocksdb::CompressionType t) {
    return std::find(supported.begin(), supported.end(), t) != supported.end();
  };
  const Compression expected = has(rocksdb::kZSTD)             ? Compression::kZstd
                               : has(rocksdb::kLZ4Compression) ? Compression::kLz4
                                                               : Compression::kNone;
  Compression zstd = Store::Open(dir.Sub("b"))->log_compression();
  CHECK(zstd == expected);
  std::printf("log compression in use: %s\n", CompressionName(zstd));
  // Asking for lz4 never gives zstd.
  StoreOptions lz4;
  lz4.log_compression = Compression::kLz4;
  CHECK(Store::Open(dir.Sub("c"), lz4)->log_compression() ==
        (has(rocksdb::kLZ4Compression) ? Compression::kLz4 : Compression::kNone));
}

}  // namespace
}  // namespace vt::store

namespace vt::store {
namespace {

// Bytes in the SST files under `dir`.
uint64_t SstBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".sst") bytes += e.file_size();
  }
  return bytes;
}

TEST_CASE("store: a large step's digest, hashed beside its batch, is the step digest", "[store]") {
  // Steps of 1 MiB or more hash on a second thread while their batch is built: the digest
  // stored and returned must still be StepDigest's over the records in key order. Records
  // are given out of order, with distinct contents, written directly and behind.
  auto value = [](size_t bytes, char seed) {
    std::string v(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>(seed + 7 * i + (i >> 9));
    return v;
  };
  const std::string a = value(size_t{3} << 19, 1), b = value(size_t{1} << 20, 2), c = value(40, 3);
  const std::vector<LogRecordView> records = {
      {"z.fc:fwd", 1, a}, {"a.fc:bwd", 0, b}, {"z.fc:fwd", 0, c}};
  TempDir dir;
  auto s = Store::Open(dir.Sub("s"));
  s->CreateRun("r", RunConfig{"s", 4, 4, ""});
  s->PutCheckpoint("r", 0, KatCheckpoint(0));
  const Digest expected1 = StepDigest(1, records);
  CHECK(s->WriteStep("r", 1, records) == expected1);
  s->WriteStepBehind("r", 2, records, nullptr);
  s->WaitBehind();
  REQUIRE(s->GetStep("r", 1));
  REQUIRE(s->GetStep("r", 2));
  CHECK(s->GetStep("r", 1)->digest == expected1);
  CHECK(s->GetStep("r", 2)->digest == StepDigest(2, records));
  // Control: the step number is in the digest, so the two steps' digests differ.
  CHECK(expected1 != StepDigest(2, records));
  CHECK(s->Verify().ok());
}

TEST_CASE("store: steps of dense log records skip compression, others keep it", "[store]") {
  // Dense records (LOG_FORMAT.md encoding 0) do not shrink under zstd; compressing them only
  // costs CPU. The payload here is all zeros, which would shrink a hundredfold: only the
  // encoding byte tells the two stores apart.
  TempDir dir;
  if (Store::Open(dir.Sub("probe"))->log_compression() == Compression::kNone) {
    WARN("no compression in this RocksDB build: nothing to check");
    return;
  }
  auto write = [&](const std::string& path, char encoding) {
    auto s = Store::Open(path);
    s->CreateRun("r", RunConfig{"s", 100, 100, ""});
    s->PutCheckpoint("r", 0, KatCheckpoint(0));
    std::string value(size_t{1} << 20, '\0');
    value.replace(0, 6, std::string("VTLG\x01", 5) + encoding);
    for (uint64_t step = 1; step <= 8; ++step) {
      s->WriteStep("r", step, {{"a:fwd", 0, value}, {"b:fwd", 0, value}});
    }
    s->Close();
    return SstBytes(path);
  };
  const uint64_t raw = 8 * 2 * (uint64_t{1} << 20);
  const uint64_t dense = write(dir.Sub("dense"), '\0');
  const uint64_t sparse = write(dir.Sub("sparse"), '\x01');
  INFO("raw " << raw << " bytes, dense store " << dense << ", sparse store " << sparse);
  CHECK(dense >= raw);
  CHECK(sparse < raw / 10);

  // Between the lines (off at nine tenths dense, on again below half) the setting stays: steps
  // two thirds dense after dense ones are stored uncompressed, after sparse ones compressed
  // (everything here is flushed at Close, under the setting of the last step).
  auto write_then_mixed = [&](const std::string& path, char first) {
    auto s = Store::Open(path);
    s->CreateRun("r", RunConfig{"s", 100, 100, ""});
    s->PutCheckpoint("r", 0, KatCheckpoint(0));
    auto value = [](char encoding) {
      std::string v(size_t{1} << 20, '\0');
      return v.replace(0, 6, std::string("VTLG\x01", 5) + encoding);
    };
    for (uint64_t step = 1; step <= 4; ++step) {
      s->WriteStep("r", step, {{"a:fwd", 0, value(first)}, {"b:fwd", 0, value(first)}});
    }
    for (uint64_t step = 5; step <= 8; ++step) {
      s->WriteStep("r", step,
                   {{"a:fwd", 0, value('\0')}, {"b:fwd", 0, value('\0')}, {"c:fwd", 0, value(1)}});
    }
    s->Close();
    return SstBytes(path);
  };
  const uint64_t after_dense = write_then_mixed(dir.Sub("after-dense"), '\0');
  const uint64_t after_sparse = write_then_mixed(dir.Sub("after-sparse"), '\x01');
  INFO("mixed steps after dense ones " << after_dense << " bytes, after sparse ones "
                                       << after_sparse);
  CHECK(after_dense >= raw);
  CHECK(after_sparse < raw / 10);
}

}  // namespace
}  // namespace vt::store
