// Reading a store: runs and their configs, step markers and log records, checkpoints,
// leaves, the Merkle tree with its roots and proofs, and transcripts. Every record is
// unsealed (store/envelope.h) and a damaged one raises CorruptionError. Writing is in
// store_write.cc.
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/slice.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/envelope.h"
#include "store/error.h"
#include "store/records.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace vt::store {

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
