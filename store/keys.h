// The store's column families, key encodings and name validation (store/FORMAT.md, "Keys").
//
// Every key starts with an id (a run id, or a game id for transcripts) and a 0x00
// terminator; integers are fixed-width big-endian so RocksDB's bytewise order is numeric
// order; boundary names are 0x00-terminated. Ids and boundary names never contain 0x00, so
// each prefix is unambiguous and keys sort by id, then number, then name.
//
// Encoders take already-validated names (Validate* throw Error naming what is allowed).
// DecodeKey never throws: a malformed key decodes to nullopt. Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vt::store {

// Column families; the value is the family byte mixed into every record checksum.
enum class Family : uint8_t {
  kMeta = 0,         // "default": store format version
  kRuns = 1,         // "runs": run config (spec), metadata, progress
  kSteps = 2,        // "steps": one marker per written step (record count, step digest)
  kLogs = 3,         // "logs": log records (run, step, boundary, call)
  kCheckpoints = 4,  // "checkpoints": checkpoint bytes in chunks (run, leaf, chunk)
  kLeaves = 5,       // "leaves": leaf records (run, leaf)
  kMerkle = 6,       // "merkle": complete-subtree hashes (run, level, index)
  kTranscripts = 7,  // "transcripts": game transcript entries (game, sequence number)
};
constexpr int kFamilyCount = 8;

// RocksDB column family name ("default" for kMeta).
const char* FamilyName(Family f);

// Record kinds of a run in the `runs` family (the byte after the run prefix).
enum class RunField : uint8_t {
  kConfig = 'C',    // checkpoint interval, step count, spec hash, spec bytes
  kMetadata = 'M',  // caller metadata bytes
  kProgress = 'P',  // steps written, leaves stored, running log digest
};

constexpr size_t kMaxIdBytes = 128;        // run and game ids
constexpr size_t kMaxBoundaryBytes = 255;  // boundary names

// Ids: 1..128 bytes of [A-Za-z0-9._-], not starting with '.'. `what` names the thing in the
// message ("run id", "game id"). Throws Error otherwise.
void ValidateId(std::string_view id, const char* what);
// Boundary names: 1..255 bytes of printable ASCII (0x20..0x7E). Throws Error otherwise.
void ValidateBoundary(std::string_view name);

// Key encoders (FORMAT.md gives the byte layout of each).
std::string IdPrefix(std::string_view id);  // id || 0x00
std::string RunKey(std::string_view run, RunField field);
std::string StepKey(std::string_view run, uint64_t step);
std::string LogKey(std::string_view run, uint64_t step, std::string_view boundary, uint32_t call);
std::string LogStepPrefix(std::string_view run, uint64_t step);
std::string LogBoundaryPrefix(std::string_view run, uint64_t step, std::string_view boundary);
std::string CheckpointKey(std::string_view run, uint64_t leaf, uint32_t chunk);
std::string CheckpointLeafPrefix(std::string_view run, uint64_t leaf);
std::string LeafKey(std::string_view run, uint64_t leaf);
std::string NodeKey(std::string_view run, uint8_t level, uint64_t index);
std::string TranscriptKey(std::string_view game, uint64_t seq);
extern const char kFormatKey[];  // the one key of the meta family

// The smallest key greater than every key starting with `prefix` (prefix with its last
// byte incremented, dropping trailing 0xFF bytes); empty if there is none.
std::string PrefixSuccessor(std::string_view prefix);

// A decoded key. Which fields are set depends on the family:
//   runs: id, field | steps: id, number (step) | logs: id, number (step), boundary, sub (call)
//   checkpoints: id, number (leaf), sub (chunk) | leaves: id, number (leaf)
//   merkle: id, level, number (index) | transcripts: id (game), number (seq) | meta: none
struct DecodedKey {
  std::string id;
  uint64_t number = 0;
  uint32_t sub = 0;
  uint8_t level = 0;
  std::string boundary;
  RunField field = RunField::kConfig;
};

// Parses `key` of family `f`; nullopt if it is not a well-formed key of that family.
std::optional<DecodedKey> DecodeKey(Family f, std::string_view key);

// A human-readable key for messages: "run 'r1' step 12 boundary 'fc1:fwd' call 0"; a
// malformed key prints as "key 0x<hex>".
std::string DescribeKey(Family f, std::string_view key);

// Big-endian helpers shared by the value encodings.
void AppendU16(std::string* out, uint16_t v);
void AppendU32(std::string* out, uint32_t v);
void AppendU64(std::string* out, uint64_t v);
uint16_t ReadU16(const char* p);
uint32_t ReadU32(const char* p);
uint64_t ReadU64(const char* p);

}  // namespace vt::store
