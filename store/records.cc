#include "store/records.h"

#include <cstring>

#include "store/keys.h"

namespace vt::store {
namespace {

Digest ReadDigest(const char* p) {
  Digest d;
  std::memcpy(d.data(), p, kDigestBytes);
  return d;
}

}  // namespace

std::string EncodeRunConfig(const RunConfigRecord& r) {
  std::string out;
  out.reserve(48 + r.spec.size());
  AppendU64(&out, r.checkpoint_every);
  AppendU64(&out, r.steps);
  out.append(AsBytes(r.spec_hash));
  out.append(r.spec);
  return out;
}

std::optional<RunConfigRecord> DecodeRunConfig(std::string_view p) {
  if (p.size() < 48) return std::nullopt;
  RunConfigRecord r;
  r.checkpoint_every = ReadU64(p.data());
  r.steps = ReadU64(p.data() + 8);
  r.spec_hash = ReadDigest(p.data() + 16);
  r.spec = std::string(p.substr(48));
  if (r.checkpoint_every == 0) return std::nullopt;
  return r;
}

std::string EncodeProgress(const ProgressRecord& r) {
  std::string out;
  out.reserve(kProgressBytes);
  AppendU64(&out, r.steps_written);
  AppendU64(&out, r.leaves);
  out.append(AsBytes(r.chain));
  return out;
}

std::optional<ProgressRecord> DecodeProgress(std::string_view p) {
  if (p.size() != kProgressBytes) return std::nullopt;
  ProgressRecord r;
  r.steps_written = ReadU64(p.data());
  r.leaves = ReadU64(p.data() + 8);
  r.chain = ReadDigest(p.data() + 16);
  return r;
}

std::string EncodeStepInfo(const StepInfo& s) {
  std::string out;
  out.reserve(kStepInfoBytes);
  AppendU32(&out, s.records);
  AppendU64(&out, s.value_bytes);
  out.append(AsBytes(s.digest));
  return out;
}

std::optional<StepInfo> DecodeStepInfo(uint64_t step, std::string_view p) {
  if (p.size() != kStepInfoBytes) return std::nullopt;
  StepInfo s;
  s.step = step;
  s.records = ReadU32(p.data());
  s.value_bytes = ReadU64(p.data() + 4);
  s.digest = ReadDigest(p.data() + 12);
  return s;
}

std::string EncodeLeafRecord(const LeafRecord& r) {
  std::string out;
  out.reserve(kLeafRecordBytes);
  AppendU64(&out, r.step);
  out.append(AsBytes(r.state_digest));
  out.append(AsBytes(r.log_digest));
  out.append(AsBytes(r.leaf));
  AppendU64(&out, r.checkpoint_bytes);
  AppendU32(&out, r.checkpoint_chunks);
  return out;
}

std::optional<LeafRecord> DecodeLeafRecord(uint64_t index, std::string_view p) {
  if (p.size() != kLeafRecordBytes) return std::nullopt;
  LeafRecord r;
  r.index = index;
  r.step = ReadU64(p.data());
  r.state_digest = ReadDigest(p.data() + 8);
  r.log_digest = ReadDigest(p.data() + 40);
  r.leaf = ReadDigest(p.data() + 72);
  r.checkpoint_bytes = ReadU64(p.data() + 104);
  r.checkpoint_chunks = ReadU32(p.data() + 112);
  if (r.checkpoint_chunks != CheckpointChunks(r.checkpoint_bytes)) return std::nullopt;
  return r;
}

uint32_t CheckpointChunks(uint64_t bytes) {
  if (bytes == 0) return 1;
  return static_cast<uint32_t>((bytes + kCheckpointChunkBytes - 1) / kCheckpointChunkBytes);
}

}  // namespace vt::store
