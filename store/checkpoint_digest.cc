#include "store/checkpoint_digest.h"

#include <algorithm>
#include <cstring>

#include "store/error.h"
#include "store/keys.h"

namespace vt::store {
namespace {

constexpr size_t kHeaderBytes = 6 + 2 + 8;

std::string Header(uint64_t count) {
  std::string h(kCheckpointMagic, 6);
  AppendU16(&h, kCheckpointVersion);
  AppendU64(&h, count);
  return h;
}

// Everything of an entry before its data: u16be name length, name, u8 dtype, u8 ndim,
// ndim x u64be dims, u64be data byte count.
std::string EntryHead(const StateEntry& e) {
  std::string h;
  h.reserve(2 + e.name.size() + 2 + 8 * e.shape.size() + 8);
  AppendU16(&h, static_cast<uint16_t>(e.name.size()));
  h.append(e.name);
  h.push_back(static_cast<char>(e.dtype));
  h.push_back(static_cast<char>(e.shape.size()));
  for (int64_t d : e.shape) AppendU64(&h, static_cast<uint64_t>(d));
  AppendU64(&h, e.bytes);
  return h;
}

// Entries sorted by name (pointers, no copies); throws on an invalid entry or duplicate.
std::vector<const StateEntry*> Sorted(const std::vector<StateEntry>& entries) {
  std::vector<const StateEntry*> sorted;
  sorted.reserve(entries.size());
  for (const StateEntry& e : entries) {
    ValidateEntry(e);
    sorted.push_back(&e);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const StateEntry* a, const StateEntry* b) { return a->name < b->name; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->name == sorted[i - 1]->name) {
      throw Error("checkpoint entry name '" + sorted[i]->name + "' appears twice");
    }
  }
  return sorted;
}

// Element count of a shape, or false on overflow past 2^63.
bool ElementCount(const std::vector<int64_t>& shape, uint64_t* count) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) return false;
    n *= static_cast<uint64_t>(d);
  }
  *count = n;
  return true;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

size_t DTypeSize(uint8_t tag) {
  switch (static_cast<DType>(tag)) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kInt64:
      return 8;
    case DType::kInt32:
      return 4;
    case DType::kUInt8:
      return 1;
  }
  return 0;
}

const char* DTypeName(uint8_t tag) {
  switch (static_cast<DType>(tag)) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kUInt8:
      return "uint8";
  }
  return nullptr;
}

uint8_t DTypeFromName(std::string_view name) {
  for (uint8_t tag = 1; tag <= 5; ++tag) {
    if (name == DTypeName(tag)) return tag;
  }
  return 0;
}

void ValidateEntry(const StateEntry& e) {
  if (e.name.empty() || e.name.size() > kMaxEntryNameBytes) {
    throw Error("checkpoint entry name must be 1 to " + std::to_string(kMaxEntryNameBytes) +
                " bytes, got " + std::to_string(e.name.size()));
  }
  if (e.name.find('\0') != std::string::npos) {
    throw Error("checkpoint entry name must not contain a 0x00 byte");
  }
  size_t elem = DTypeSize(e.dtype);
  if (elem == 0) {
    throw Error("checkpoint entry '" + e.name + "': unknown dtype tag " + std::to_string(e.dtype) +
                " (valid: 1 float32, 2 float64, 3 int64, 4 int32, 5 uint8)");
  }
  if (e.shape.size() > kMaxDims) {
    throw Error("checkpoint entry '" + e.name + "': " + std::to_string(e.shape.size()) +
                " dimensions, at most " + std::to_string(kMaxDims) + " allowed");
  }
  uint64_t count = 0;
  if (!ElementCount(e.shape, &count)) {
    throw Error("checkpoint entry '" + e.name + "': shape " + ShapeText(e.shape) +
                " has a negative dimension or too many elements");
  }
  if (count > (uint64_t{1} << 62) / elem || count * elem != e.bytes) {
    throw Error("checkpoint entry '" + e.name + "': shape " + ShapeText(e.shape) + " of " +
                DTypeName(e.dtype) + " needs " + std::to_string(count * elem) + " bytes, got " +
                std::to_string(e.bytes));
  }
  if (e.data == nullptr && e.bytes != 0) {
    throw Error("checkpoint entry '" + e.name + "': data is null");
  }
}

Digest CheckpointDigest(const std::vector<StateEntry>& entries) {
  std::vector<const StateEntry*> sorted = Sorted(entries);
  Sha256 h;
  h.Update(Header(sorted.size()));
  for (const StateEntry* e : sorted) {
    h.Update(EntryHead(*e));
    h.Update(e->data, e->bytes);
  }
  return h.Final();
}

size_t CheckpointEncodedSize(const std::vector<StateEntry>& entries) {
  size_t n = kHeaderBytes;
  for (const StateEntry& e : entries) {
    ValidateEntry(e);
    n += 2 + e.name.size() + 2 + 8 * e.shape.size() + 8 + e.bytes;
  }
  return n;
}

std::string SerializeCheckpoint(const std::vector<StateEntry>& entries) {
  for (const StateEntry& e : entries) ValidateEntry(e);  // (data present: the filler copies it)
  std::string out;
  SerializeCheckpointFilled(
      entries, [&](size_t i, char* dst) { std::memcpy(dst, entries[i].data, entries[i].bytes); },
      &out);
  return out;
}

void SerializeCheckpointFilled(const std::vector<StateEntry>& entries,
                               const std::function<void(size_t, char*)>& fill, std::string* out) {
  // Validated as if each entry's data were present: fill provides it.
  static const char kFilled = 0;
  std::vector<StateEntry> checked = entries;
  for (StateEntry& e : checked) e.data = &kFilled;
  const std::vector<const StateEntry*> sorted = Sorted(checked);
  out->resize(CheckpointEncodedSize(checked));
  size_t pos = 0;
  auto put = [&](const std::string& part) {
    std::memcpy(&(*out)[pos], part.data(), part.size());
    pos += part.size();
  };
  put(Header(sorted.size()));
  for (const StateEntry* e : sorted) {
    put(EntryHead(*e));
    if (e->bytes > 0) fill(static_cast<size_t>(e - checked.data()), &(*out)[pos]);
    pos += e->bytes;
  }
}

std::vector<StateEntry> ParseCheckpoint(std::string_view bytes) {
  auto fail = [](size_t offset, const std::string& what) -> Error {
    return Error("malformed checkpoint at byte " + std::to_string(offset) + ": " + what);
  };
  if (bytes.size() < kHeaderBytes) {
    throw fail(0, "shorter than the 16-byte header (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (bytes.substr(0, 6) != std::string_view(kCheckpointMagic, 6))
    throw fail(0, "magic is not 'VTCKPT'");
  uint16_t version = ReadU16(bytes.data() + 6);
  if (version != kCheckpointVersion) {
    throw fail(6, "version " + std::to_string(version) + " (this build reads version " +
                      std::to_string(kCheckpointVersion) + ")");
  }
  uint64_t count = ReadU64(bytes.data() + 8);
  size_t pos = kHeaderBytes;
  // Each entry takes at least 2 + 1 + 1 + 1 + 8 = 13 bytes.
  if (count > (bytes.size() - pos) / 13) {
    throw fail(8, "entry count " + std::to_string(count) + " cannot fit in " +
                      std::to_string(bytes.size()) + " bytes");
  }
  auto need = [&](size_t n, const char* what) {
    if (bytes.size() - pos < n) throw fail(pos, std::string("truncated ") + what);
  };
  std::vector<StateEntry> entries;
  entries.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    size_t entry_start = pos;
    need(2, "entry name length");
    size_t name_len = ReadU16(bytes.data() + pos);
    pos += 2;
    if (name_len == 0 || name_len > kMaxEntryNameBytes) {
      throw fail(entry_start, "entry " + std::to_string(i) + " name length " +
                                  std::to_string(name_len) + " (valid: 1.." +
                                  std::to_string(kMaxEntryNameBytes) + ")");
    }
    need(name_len, "entry name");
    StateEntry e;
    e.name = std::string(bytes.substr(pos, name_len));
    pos += name_len;
    if (e.name.find('\0') != std::string::npos)
      throw fail(entry_start, "entry name contains a 0x00 byte");
    if (!entries.empty() && !(entries.back().name < e.name)) {
      throw fail(entry_start, "entry '" + e.name + "' is not after '" + entries.back().name +
                                  "' (names must be unique and ascending)");
    }
    need(2, "entry dtype and dimension count");
    e.dtype = static_cast<uint8_t>(bytes[pos]);
    size_t ndim = static_cast<uint8_t>(bytes[pos + 1]);
    if (DTypeSize(e.dtype) == 0) {
      throw fail(pos, "entry '" + e.name + "' has unknown dtype tag " + std::to_string(e.dtype));
    }
    if (ndim > kMaxDims) {
      throw fail(pos + 1, "entry '" + e.name + "' has " + std::to_string(ndim) +
                              " dimensions (at most " + std::to_string(kMaxDims) + ")");
    }
    pos += 2;
    need(8 * ndim + 8, "entry shape and byte count");
    for (size_t d = 0; d < ndim; ++d) {
      uint64_t dim = ReadU64(bytes.data() + pos);
      if (dim > (uint64_t{1} << 62)) throw fail(pos, "entry '" + e.name + "' dimension too large");
      e.shape.push_back(static_cast<int64_t>(dim));
      pos += 8;
    }
    uint64_t data_bytes = ReadU64(bytes.data() + pos);
    pos += 8;
    if (data_bytes > bytes.size() - pos) {
      throw fail(pos - 8, "entry '" + e.name + "' declares " + std::to_string(data_bytes) +
                              " data bytes, only " + std::to_string(bytes.size() - pos) +
                              " remain");
    }
    e.bytes = static_cast<size_t>(data_bytes);
    e.data = bytes.data() + pos;
    try {
      ValidateEntry(e);
    } catch (const Error& err) {
      throw fail(entry_start, err.what());
    }
    pos += e.bytes;
    entries.push_back(std::move(e));
  }
  if (pos != bytes.size()) {
    throw fail(pos, std::to_string(bytes.size() - pos) + " trailing bytes after the last entry");
  }
  return entries;
}

}  // namespace vt::store
