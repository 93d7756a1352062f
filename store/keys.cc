#include "store/keys.h"

#include <algorithm>

#include "store/error.h"
#include "store/sha256.h"

namespace vt::store {

const char kFormatKey[] = "vtrun.store.format";

const char* FamilyName(Family f) {
  switch (f) {
    case Family::kMeta:
      return "default";
    case Family::kRuns:
      return "runs";
    case Family::kSteps:
      return "steps";
    case Family::kLogs:
      return "logs";
    case Family::kCheckpoints:
      return "checkpoints";
    case Family::kLeaves:
      return "leaves";
    case Family::kMerkle:
      return "merkle";
    case Family::kTranscripts:
      return "transcripts";
  }
  return "?";
}

namespace {

bool IdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// A name quoted for an error message, with non-printable bytes escaped and long names cut.
std::string Quote(std::string_view s) {
  std::string out = "'";
  size_t n = std::min<size_t>(s.size(), 80);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > n) out += "...";
  return out + "'";
}

}  // namespace

void ValidateId(std::string_view id, const char* what) {
  if (id.empty() || id.size() > kMaxIdBytes) {
    throw Error(std::string("invalid ") + what + " " + Quote(id) + ": must be 1 to " +
                std::to_string(kMaxIdBytes) + " characters, got " + std::to_string(id.size()));
  }
  for (char c : id) {
    if (!IdChar(c)) {
      throw Error(std::string("invalid ") + what + " " + Quote(id) +
                  ": allowed characters are A-Z a-z 0-9 . _ -");
    }
  }
  if (id[0] == '.') {
    throw Error(std::string("invalid ") + what + " " + Quote(id) + ": must not start with '.'");
  }
}

void ValidateBoundary(std::string_view name) {
  if (name.empty() || name.size() > kMaxBoundaryBytes) {
    throw Error("invalid boundary name " + Quote(name) + ": must be 1 to " +
                std::to_string(kMaxBoundaryBytes) + " bytes, got " + std::to_string(name.size()));
  }
  for (char c : name) {
    if (c < 0x20 || c > 0x7E) {
      throw Error("invalid boundary name " + Quote(name) +
                  ": allowed are printable ASCII characters");
    }
  }
}

void AppendU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

void AppendU32(std::string* out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void AppendU64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint16_t ReadU16(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return static_cast<uint16_t>((u[0] << 8) | u[1]);
}

uint32_t ReadU32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

uint64_t ReadU64(const char* p) { return (uint64_t{ReadU32(p)} << 32) | ReadU32(p + 4); }

std::string IdPrefix(std::string_view id) {
  std::string k(id);
  k.push_back('\0');
  return k;
}

std::string RunKey(std::string_view run, RunField field) {
  std::string k = IdPrefix(run);
  k.push_back(static_cast<char>(field));
  return k;
}

std::string StepKey(std::string_view run, uint64_t step) {
  std::string k = IdPrefix(run);
  AppendU64(&k, step);
  return k;
}

std::string LogStepPrefix(std::string_view run, uint64_t step) { return StepKey(run, step); }

std::string LogBoundaryPrefix(std::string_view run, uint64_t step, std::string_view boundary) {
  std::string k = StepKey(run, step);
  k.append(boundary);
  k.push_back('\0');
  return k;
}

std::string LogKey(std::string_view run, uint64_t step, std::string_view boundary, uint32_t call) {
  std::string k = LogBoundaryPrefix(run, step, boundary);
  AppendU32(&k, call);
  return k;
}

std::string CheckpointLeafPrefix(std::string_view run, uint64_t leaf) { return StepKey(run, leaf); }

std::string CheckpointKey(std::string_view run, uint64_t leaf, uint32_t chunk) {
  std::string k = StepKey(run, leaf);
  AppendU32(&k, chunk);
  return k;
}

std::string LeafKey(std::string_view run, uint64_t leaf) { return StepKey(run, leaf); }

std::string NodeKey(std::string_view run, uint8_t level, uint64_t index) {
  std::string k = IdPrefix(run);
  k.push_back(static_cast<char>(level));
  AppendU64(&k, index);
  return k;
}

std::string TranscriptKey(std::string_view game, uint64_t seq) { return StepKey(game, seq); }

std::string PrefixSuccessor(std::string_view prefix) {
  std::string s(prefix);
  while (!s.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(s.back());
    if (c != 0xFF) {
      ++c;
      return s;
    }
    s.pop_back();
  }
  return s;
}

namespace {

// Splits "id 0x00 rest"; false if there is no terminator or the id is invalid.
bool SplitId(std::string_view key, std::string* id, std::string_view* rest) {
  size_t z = key.find('\0');
  if (z == std::string_view::npos) return false;
  std::string_view name = key.substr(0, z);
  try {
    ValidateId(name, "id");
  } catch (const Error&) {
    return false;
  }
  *id = std::string(name);
  *rest = key.substr(z + 1);
  return true;
}

}  // namespace

std::optional<DecodedKey> DecodeKey(Family f, std::string_view key) {
  DecodedKey d;
  if (f == Family::kMeta) {
    if (key != kFormatKey) return std::nullopt;
    return d;
  }
  std::string_view rest;
  if (!SplitId(key, &d.id, &rest)) return std::nullopt;
  switch (f) {
    case Family::kRuns: {
      if (rest.size() != 1) return std::nullopt;
      char c = rest[0];
      if (c != 'C' && c != 'M' && c != 'P') return std::nullopt;
      d.field = static_cast<RunField>(c);
      return d;
    }
    case Family::kSteps:
    case Family::kLeaves:
    case Family::kTranscripts:
      if (rest.size() != 8) return std::nullopt;
      d.number = ReadU64(rest.data());
      return d;
    case Family::kCheckpoints:
      if (rest.size() != 12) return std::nullopt;
      d.number = ReadU64(rest.data());
      d.sub = ReadU32(rest.data() + 8);
      return d;
    case Family::kMerkle:
      if (rest.size() != 9) return std::nullopt;
      d.level = static_cast<uint8_t>(rest[0]);
      if (d.level > 63) return std::nullopt;
      d.number = ReadU64(rest.data() + 1);
      return d;
    case Family::kLogs: {
      if (rest.size() < 8 + 1 + 1 + 4) return std::nullopt;
      d.number = ReadU64(rest.data());
      std::string_view tail = rest.substr(8);
      size_t z = tail.find('\0');
      if (z == std::string_view::npos || tail.size() != z + 1 + 4) return std::nullopt;
      std::string_view boundary = tail.substr(0, z);
      try {
        ValidateBoundary(boundary);
      } catch (const Error&) {
        return std::nullopt;
      }
      d.boundary = std::string(boundary);
      d.sub = ReadU32(tail.data() + z + 1);
      return d;
    }
    case Family::kMeta:
      break;
  }
  return std::nullopt;
}

std::string DescribeKey(Family f, std::string_view key) {
  std::optional<DecodedKey> d = DecodeKey(f, key);
  if (!d) return "key 0x" + ToHex(key);
  switch (f) {
    case Family::kMeta:
      return Quote(key);
    case Family::kRuns: {
      const char* what = d->field == RunField::kConfig     ? "config"
                         : d->field == RunField::kMetadata ? "metadata"
                                                           : "progress";
      return "run " + Quote(d->id) + " " + what;
    }
    case Family::kSteps:
      return "run " + Quote(d->id) + " step " + std::to_string(d->number);
    case Family::kLogs:
      return "run " + Quote(d->id) + " step " + std::to_string(d->number) + " boundary " +
             Quote(d->boundary) + " call " + std::to_string(d->sub);
    case Family::kCheckpoints:
      return "run " + Quote(d->id) + " leaf " + std::to_string(d->number) + " chunk " +
             std::to_string(d->sub);
    case Family::kLeaves:
      return "run " + Quote(d->id) + " leaf " + std::to_string(d->number);
    case Family::kMerkle:
      return "run " + Quote(d->id) + " level " + std::to_string(d->level) + " index " +
             std::to_string(d->number);
    case Family::kTranscripts:
      return "game " + Quote(d->id) + " entry " + std::to_string(d->number);
  }
  return "key 0x" + ToHex(key);
}

}  // namespace vt::store
