// SHA-256 through OpenSSL's EVP API, the 32-byte Digest type, and hex conversion.
//
// Every hash in the store (spec hash, checkpoint digest, step and log digests, leaves,
// Merkle nodes) is SHA-256 computed here. Sha256 hashes caller memory in place
// (EVP_DigestUpdate on the caller's pointer, no copy), so hashing a tensor costs exactly one
// pass over its bytes. Digests cross into Lua as 64 lowercase hex characters.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace vt::store {

constexpr size_t kDigestBytes = 32;
using Digest = std::array<uint8_t, kDigestBytes>;

// Incremental SHA-256. Movable, not copyable. One object must not be used by two threads
// at once; distinct objects are independent. Throws Error only if OpenSSL fails (out of
// memory, or SHA-256 unavailable in the loaded provider).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // Appends `bytes` bytes at `data` (may be null when bytes == 0). Returns *this.
  Sha256& Update(const void* data, size_t bytes);
  Sha256& Update(std::string_view bytes) { return Update(bytes.data(), bytes.size()); }
  Sha256& Update(const Digest& d) { return Update(d.data(), d.size()); }
  Sha256& UpdateU8(uint8_t v) { return Update(&v, 1); }
  Sha256& UpdateU16(uint16_t v);  // 2 bytes, big-endian
  Sha256& UpdateU32(uint32_t v);  // 4 bytes, big-endian
  Sha256& UpdateU64(uint64_t v);  // 8 bytes, big-endian

  // The digest of everything appended since construction or the last Final(); the object
  // is then reset and can hash a new message.
  Digest Final();

 private:
  evp_md_ctx_st* ctx_;
};

// SHA-256 of `bytes` in one call.
Digest Sha256Of(std::string_view bytes);

// Lowercase hex of `bytes` (2 characters per byte).
std::string ToHex(std::string_view bytes);
std::string ToHex(const Digest& d);

// Bytes from hex of even length (either case); nullopt if the text is not hex.
std::optional<std::string> FromHex(std::string_view hex);
// A digest from exactly 64 hex characters (either case); nullopt otherwise.
std::optional<Digest> DigestFromHex(std::string_view hex);

// The digest's bytes as a string_view into `d` (valid while `d` lives).
inline std::string_view AsBytes(const Digest& d) {
  return std::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}
// A digest from exactly 32 bytes; nullopt if `bytes` has another length.
std::optional<Digest> DigestFromBytes(std::string_view bytes);

}  // namespace vt::store
