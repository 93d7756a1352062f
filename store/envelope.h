// The record envelope: every value the store writes is `payload || crc` where crc is the
// 4-byte big-endian CRC-32C of (family byte || u32be key length || key || payload)
// (store/FORMAT.md, "Record envelope"). Binding the family and key into the checksum
// catches a record that was corrupted, truncated, or moved under another key. Pure
// functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "store/keys.h"

namespace vt::store {

constexpr size_t kEnvelopeBytes = 4;

// The checksum of `payload` stored under `key` in family `f`.
uint32_t EnvelopeCrc(Family f, std::string_view key, std::string_view payload);

// The 4-byte trailer to append to `payload` (for writing large payloads without copying
// them: RocksDB's SliceParts takes payload and trailer as two parts).
std::string EnvelopeTrailer(Family f, std::string_view key, std::string_view payload);

// payload || trailer.
std::string Seal(Family f, std::string_view key, std::string_view payload);

// The payload of a stored value (a view into `stored`) if its checksum is right; nullopt if
// the value is shorter than the trailer or the checksum does not match.
std::optional<std::string_view> Unseal(Family f, std::string_view key, std::string_view stored);

}  // namespace vt::store
