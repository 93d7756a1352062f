// The canonical checkpoint encoding and the checkpoint digest (ROUNDING.md, "Checkpoint
// hashing"; byte layout in store/FORMAT.md, "Checkpoint encoding").
//
// A checkpoint is the model state (parameters, buffers, optimizer state) as named entries,
// encoded in ascending byte order of name, each as name, dtype tag, shape and little-endian
// element bytes. The bytes the store keeps ARE this encoding, and the checkpoint digest
// (state_digest in a leaf) is SHA-256 of them. CheckpointDigest() computes the same digest
// straight from the tensors' memory (one EVP_DigestUpdate per tensor on the caller's
// pointer, no copies), so hashing runs at the speed of raw SHA-256.
//
// The store cannot see LibTorch: an entry is a neutral view (name, dtype tag, shape, data
// pointer and byte count). Element bytes must already be little-endian (every supported host
// is). Functions throw Error for invalid entries (see CheckpointEntryError) and for
// malformed encodings; they are thread-safe (the caller's data must not change meanwhile).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "store/sha256.h"

namespace vt::store {

// Element types of checkpoint entries. The model precision is FP32 (ROUNDING.md); the other
// tags exist for integer buffers and counters (e.g. a batch-norm step count).
enum class DType : uint8_t {
  kFloat32 = 1,  // IEEE-754 binary32, 4 bytes
  kFloat64 = 2,  // IEEE-754 binary64, 8 bytes
  kInt64 = 3,    // two's complement, 8 bytes
  kInt32 = 4,    // two's complement, 4 bytes
  kUInt8 = 5,    // 1 byte (also booleans, 0 or 1)
};

// Bytes per element of a tag; 0 for an unknown tag.
size_t DTypeSize(uint8_t tag);
// "float32", "float64", "int64", "int32", "uint8"; nullptr for an unknown tag.
const char* DTypeName(uint8_t tag);
// The tag of a name above; 0 if unknown.
uint8_t DTypeFromName(std::string_view name);

constexpr size_t kMaxEntryNameBytes = 1024;
constexpr size_t kMaxDims = 16;
constexpr char kCheckpointMagic[] = "VTCKPT";  // 6 bytes, then u16be version
constexpr uint16_t kCheckpointVersion = 1;

// One named tensor, viewed: `data` points at `bytes` bytes of little-endian elements in
// row-major order, owned by the caller; bytes == product(shape) * DTypeSize(dtype).
struct StateEntry {
  std::string name;            // 1..1024 bytes, no 0x00 byte; unique within a checkpoint
  uint8_t dtype = 0;           // a DType value
  std::vector<int64_t> shape;  // 0..16 dimensions, each >= 0; {} is a scalar
  const void* data = nullptr;  // may be null only when bytes == 0
  size_t bytes = 0;
};

// Throws Error unless `e` is valid as documented on StateEntry.
void ValidateEntry(const StateEntry& e);

// SHA-256 of the canonical encoding of `entries` (given in any order; encoded sorted by
// name), hashing each entry's data in place. Throws Error for an invalid entry or a
// duplicate name. Equal to Sha256Of(SerializeCheckpoint(entries)).
Digest CheckpointDigest(const std::vector<StateEntry>& entries);

// The canonical encoding itself (one copy of every entry's data). Same errors.
std::string SerializeCheckpoint(const std::vector<StateEntry>& entries);

// SerializeCheckpoint into *out, where fill(i, dst) writes entry i's entries[i].bytes element
// bytes at dst instead of a copy from entries[i].data (ignored, may be null): for a writer that
// converts its tensors straight into the encoding (one pass instead of a conversion and a
// copy). *out is resized, not cleared: a buffer of the same size from an earlier checkpoint is
// reused without touching fresh memory. Same errors.
void SerializeCheckpointFilled(const std::vector<StateEntry>& entries,
                               const std::function<void(size_t, char*)>& fill, std::string* out);

// Size in bytes of SerializeCheckpoint(entries), without building it. Same errors.
size_t CheckpointEncodedSize(const std::vector<StateEntry>& entries);

// Parses and validates an encoding: magic and version, entry count, every entry (name
// length and bytes, strictly ascending names, known dtype, dimension count, byte count equal
// to the shape's element count times the element size, no overflow), and no trailing
// bytes. Returns the entries in encoded order with `data` pointing into `bytes` (valid
// while `bytes` is). Throws Error naming the offset and what is wrong.
std::vector<StateEntry> ParseCheckpoint(std::string_view bytes);

}  // namespace vt::store
