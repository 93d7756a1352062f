#include "store/sha256.h"

#include <openssl/evp.h>

#include <cstring>

#include "store/error.h"

namespace vt::store {
namespace {

// The SHA-256 implementation, fetched once (an explicit fetch avoids OpenSSL 3's implicit
// per-call provider lookup, which costs more than hashing a Merkle node).
const EVP_MD* Sha256Md() {
  static const EVP_MD* md = [] {
    EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched != nullptr ? static_cast<const EVP_MD*>(fetched) : EVP_sha256();
  }();
  return md;
}

void Check(int ok, const char* what) {
  if (ok != 1) throw Error(std::string("OpenSSL SHA-256 failed in ") + what);
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) throw Error("OpenSSL SHA-256: out of memory");
  if (EVP_DigestInit_ex(ctx_, Sha256Md(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    throw Error("OpenSSL SHA-256 failed in EVP_DigestInit_ex");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

Sha256::Sha256(Sha256&& other) noexcept : ctx_(other.ctx_) { other.ctx_ = nullptr; }

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(ctx_);
    ctx_ = other.ctx_;
    other.ctx_ = nullptr;
  }
  return *this;
}

Sha256& Sha256::Update(const void* data, size_t bytes) {
  if (ctx_ == nullptr) throw Error("Sha256 used after move");
  if (bytes > 0) Check(EVP_DigestUpdate(ctx_, data, bytes), "EVP_DigestUpdate");
  return *this;
}

Sha256& Sha256::UpdateU16(uint16_t v) {
  uint8_t b[2] = {static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
  return Update(b, 2);
}

Sha256& Sha256::UpdateU32(uint32_t v) {
  uint8_t b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  return Update(b, 4);
}

Sha256& Sha256::UpdateU64(uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
  return Update(b, 8);
}

Digest Sha256::Final() {
  if (ctx_ == nullptr) throw Error("Sha256 used after move");
  Digest d;
  unsigned int len = 0;
  Check(EVP_DigestFinal_ex(ctx_, d.data(), &len), "EVP_DigestFinal_ex");
  Check(EVP_DigestInit_ex(ctx_, Sha256Md(), nullptr), "EVP_DigestInit_ex");
  return d;
}

Digest Sha256Of(std::string_view bytes) {
  Digest d;
  unsigned int len = 0;
  Check(EVP_Digest(bytes.data(), bytes.size(), d.data(), &len, Sha256Md(), nullptr), "EVP_Digest");
  return d;
}

std::string ToHex(std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    uint8_t b = static_cast<uint8_t>(bytes[i]);
    out[2 * i] = kHex[b >> 4];
    out[2 * i + 1] = kHex[b & 15];
  }
  return out;
}

std::string ToHex(const Digest& d) { return ToHex(AsBytes(d)); }

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = HexValue(hex[2 * i]);
    int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<char>(hi * 16 + lo);
  }
  return out;
}

std::optional<Digest> DigestFromHex(std::string_view hex) {
  if (hex.size() != 2 * kDigestBytes) return std::nullopt;
  std::optional<std::string> bytes = FromHex(hex);
  if (!bytes) return std::nullopt;
  return DigestFromBytes(*bytes);
}

std::optional<Digest> DigestFromBytes(std::string_view bytes) {
  if (bytes.size() != kDigestBytes) return std::nullopt;
  Digest d;
  std::memcpy(d.data(), bytes.data(), kDigestBytes);
  return d;
}

}  // namespace vt::store
