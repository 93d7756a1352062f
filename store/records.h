// Value layouts of the store's fixed-format records (store/FORMAT.md, "Values"): run config
// and progress, step markers, leaf records. These are the payloads inside the record
// envelope. Decoders return nullopt for a payload of the wrong size or with impossible
// fields; they never throw. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "store/sha256.h"
#include "store/store.h"

namespace vt::store {

// runs/<id>/C: u64be k || u64be n || spec_hash[32] || spec bytes.
struct RunConfigRecord {
  uint64_t checkpoint_every = 0;
  uint64_t steps = 0;
  Digest spec_hash{};
  std::string spec;
};
std::string EncodeRunConfig(const RunConfigRecord& r);
std::optional<RunConfigRecord> DecodeRunConfig(std::string_view payload);

// runs/<id>/P: u64be steps_written || u64be leaves || chain[32].
struct ProgressRecord {
  uint64_t steps_written = 0;
  uint64_t leaves = 0;
  Digest chain{};
};
constexpr size_t kProgressBytes = 8 + 8 + 32;
std::string EncodeProgress(const ProgressRecord& r);
std::optional<ProgressRecord> DecodeProgress(std::string_view payload);

// steps/<id>/<step>: u32be records || u64be value_bytes || step_digest[32].
constexpr size_t kStepInfoBytes = 4 + 8 + 32;
std::string EncodeStepInfo(const StepInfo& s);
std::optional<StepInfo> DecodeStepInfo(uint64_t step, std::string_view payload);

// leaves/<id>/<leaf>: u64be step || state_digest[32] || log_digest[32] || leaf[32] ||
// u64be checkpoint_bytes || u32be checkpoint_chunks.
constexpr size_t kLeafRecordBytes = 8 + 32 + 32 + 32 + 8 + 4;
std::string EncodeLeafRecord(const LeafRecord& r);
std::optional<LeafRecord> DecodeLeafRecord(uint64_t index, std::string_view payload);

// default/"vtrun.store.format": u32be format version.
constexpr uint32_t kFormatVersion = 1;

// Number of chunks a checkpoint of `bytes` bytes is stored in (at least 1).
uint32_t CheckpointChunks(uint64_t bytes);

}  // namespace vt::store
