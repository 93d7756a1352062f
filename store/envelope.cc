#include "store/envelope.h"

#include "store/crc32c.h"

namespace vt::store {

uint32_t EnvelopeCrc(Family f, std::string_view key, std::string_view payload) {
  std::string head;
  head.reserve(5 + key.size());
  head.push_back(static_cast<char>(f));
  AppendU32(&head, static_cast<uint32_t>(key.size()));
  head.append(key);
  uint32_t crc = Crc32cExtend(0, head.data(), head.size());
  return Crc32cExtend(crc, payload.data(), payload.size());
}

std::string EnvelopeTrailer(Family f, std::string_view key, std::string_view payload) {
  std::string t;
  AppendU32(&t, EnvelopeCrc(f, key, payload));
  return t;
}

std::string Seal(Family f, std::string_view key, std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + kEnvelopeBytes);
  out.append(payload);
  AppendU32(&out, EnvelopeCrc(f, key, payload));
  return out;
}

std::optional<std::string_view> Unseal(Family f, std::string_view key, std::string_view stored) {
  if (stored.size() < kEnvelopeBytes) return std::nullopt;
  std::string_view payload = stored.substr(0, stored.size() - kEnvelopeBytes);
  uint32_t want = ReadU32(stored.data() + payload.size());
  if (EnvelopeCrc(f, key, payload) != want) return std::nullopt;
  return payload;
}

}  // namespace vt::store
