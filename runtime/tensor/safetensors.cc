#include "runtime/tensor/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/common/error.h"

namespace vt {
namespace {

constexpr uint64_t kMaxHeader = 100u << 20;  // the reference implementation's limit

struct Code {
  at::ScalarType type;
  const char* name;
};
constexpr Code kCodes[] = {{at::kDouble, "F64"}, {at::kFloat, "F32"}, {at::kHalf, "F16"},
                           {at::kLong, "I64"},   {at::kInt, "I32"},   {at::kShort, "I16"},
                           {at::kChar, "I8"},    {at::kByte, "U8"},   {at::kBool, "BOOL"}};

const char* CodeOf(at::ScalarType t) {
  for (const auto& c : kCodes) {
    if (c.type == t) return c.name;
  }
  throw Error(std::string("safetensors: dtype ") + c10::toString(t) + " is not supported");
}

// A name that C and Lua strings cannot hold whole: "a\0b" would be cut to "a" on the way
// into Lua, and two tensors would load as one.
void CheckName(const std::string& what, const char* kind, const std::string& name) {
  if (name.find('\0') != std::string::npos) {
    throw Error(what + ": " + kind + " name '" + name.substr(0, name.find('\0')) +
                "\\0...' contains a 0x00 byte (not allowed)");
  }
}

// The "shape" of a header entry: an array of integers from 0 to INT64_MAX. Read by hand, as
// nlohmann's get<int64_t>() would wrap 2^64 - 1 to -1 and cast 1e30 (undefined behaviour).
std::vector<int64_t> ReadShape(const nlohmann::json& j) {
  if (!j.is_array()) throw Error("shape must be an array of integers, got " + j.dump());
  std::vector<int64_t> shape;
  for (size_t d = 0; d < j.size(); ++d) {
    const nlohmann::json& v = j[d];
    if (v.is_number_integer() && !v.is_number_unsigned()) {
      const int64_t x = v.get<int64_t>();
      if (x < 0) {
        throw Error("shape dimension " + std::to_string(d) + " is " + std::to_string(x) +
                    " (must be >= 0)");
      }
      shape.push_back(x);
    } else if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) {
      shape.push_back(static_cast<int64_t>(v.get<uint64_t>()));
    } else {
      throw Error("shape dimension " + std::to_string(d) + " is " + v.dump() +
                  " (must be an integer from 0 to " + std::to_string(INT64_MAX) + ")");
    }
  }
  return shape;
}

// The "data_offsets" of a header entry: exactly two unsigned integers, read by hand for the
// same reason as the shape (a float such as 1e30 must be refused, not cast).
std::pair<uint64_t, uint64_t> ReadOffsets(const nlohmann::json& j) {
  if (!j.is_array() || j.size() != 2)
    throw Error("data_offsets must be an array of two integers, got " + j.dump());
  uint64_t v[2];
  for (size_t i = 0; i < 2; ++i) {
    if (j[i].is_number_unsigned()) {
      v[i] = j[i].get<uint64_t>();
    } else if (j[i].is_number_integer() && j[i].get<int64_t>() >= 0) {
      v[i] = static_cast<uint64_t>(j[i].get<int64_t>());
    } else {
      throw Error("data_offsets[" + std::to_string(i) + "] is " + j[i].dump() +
                  " (must be an integer from 0 to 2^64 - 1)");
    }
  }
  return {v[0], v[1]};
}

// The byte size of a tensor of `shape` and `element` bytes per element, checked against
// `available` without overflowing; throws naming the bad dimension.
uint64_t CheckedBytes(const std::vector<int64_t>& shape, uint64_t element, uint64_t available) {
  bool empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      throw Error("shape dimension " + std::to_string(d) + " is " + std::to_string(shape[d]) +
                  " (must be >= 0)");
    }
    empty = empty || shape[d] == 0;
  }
  if (empty) return 0;
  uint64_t bytes = element;
  for (size_t d = 0; d < shape.size(); ++d) {
    const uint64_t n = static_cast<uint64_t>(shape[d]);
    if (bytes > available / n) {  // also keeps the product from overflowing
      throw Error("shape needs more than the " + std::to_string(available) +
                  " data bytes the file holds (dimension " + std::to_string(d) + " is " +
                  std::to_string(shape[d]) + ")");
    }
    bytes *= n;
  }
  return bytes;
}

}  // namespace

void SaveSafetensors(const std::string& path,
                     const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, at::Tensor>> sorted;
  for (const auto& [name, t] : tensors)
    sorted.emplace_back(name, t.detach().to(at::kCPU).contiguous());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::ordered_json header;
  for (const auto& [key, value] : metadata) CheckName("safetensors", "metadata", key);
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto& [name, t] = sorted[i];
    if (i > 0 && name == sorted[i - 1].first)
      throw Error("safetensors: duplicate tensor name '" + name + "'");
    if (name == "__metadata__")
      throw Error("safetensors: '__metadata__' is not a valid tensor name");
    CheckName("safetensors", "tensor", name);
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", CodeOf(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // align the data to 8 bytes, as the reference does
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("cannot open '" + path + "' for writing: " + std::strerror(errno));
  uint64_t n = json.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(json.data(), static_cast<std::streamsize>(json.size()));
  for (const auto& [name, t] : sorted) {
    f.write(static_cast<const char*>(t.data_ptr()),
            static_cast<std::streamsize>(t.numel() * t.element_size()));
  }
  f.close();
  if (!f) throw Error("failed writing '" + path + "'");
}

SafetensorsFile LoadSafetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << f.rdbuf();
  return DecodeSafetensors(buffer.str(), "safetensors file '" + path + "'");
}

SafetensorsFile DecodeSafetensors(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 8) throw Error(what + ": shorter than its 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  if (n > kMaxHeader || n > bytes.size() - 8)
    throw Error(what + ": header length " + std::to_string(n) + " is out of range");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8,
                                   bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + ": header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw Error(what + ": header is not a JSON object");
  for (auto it = header.begin(); it != header.end(); ++it) CheckName(what, "tensor", it.key());
  const uint64_t data_size = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;
  SafetensorsFile out;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw Error(what + ": __metadata__ must be an object of strings");
      for (auto m = it->begin(); m != it->end(); ++m) {
        CheckName(what, "metadata", m.key());
        if (!m->is_string()) throw Error(what + ": metadata '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const std::string name = it.key();
    try {
      const std::string dtype = it->at("dtype").get<std::string>();
      const std::vector<int64_t> shape = ReadShape(it->at("shape"));
      const auto [begin, end] = ReadOffsets(it->at("data_offsets"));
      const Code* code = nullptr;
      for (const auto& c : kCodes) {
        if (dtype == c.name) code = &c;
      }
      if (code == nullptr) throw Error("unsupported dtype '" + dtype + "'");
      if (begin > end || end > data_size) {
        throw Error("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                    "] out of range (the file holds " + std::to_string(data_size) + " data bytes)");
      }
      // Sized and checked before allocating: a hostile shape must not reach at::empty.
      const uint64_t need = CheckedBytes(shape, at::elementSize(code->type), data_size);
      if (end - begin != need) {
        throw Error("shape needs " + std::to_string(need) + " bytes, data_offsets give " +
                    std::to_string(end - begin));
      }
      at::Tensor t = at::empty(shape, at::TensorOptions().dtype(code->type));
      if (need > 0) std::memcpy(t.data_ptr(), data + begin, need);
      ranges.emplace_back(begin, end);
      out.tensors.emplace_back(name, t);
    } catch (const nlohmann::json::exception& e) {
      throw Error(what + ": tensor '" + name + "': malformed entry (" + e.what() + ")");
    } catch (const Error& e) {
      throw Error(what + ": tensor '" + name + "': " + e.what());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t expect = 0;
  for (const auto& [b, e] : ranges) {
    if (b != expect)
      throw Error(what + ": tensor data is not contiguous (gap or overlap at byte " +
                  std::to_string(b) + ")");
    expect = e;
  }
  if (expect != data_size)
    throw Error(what + ": " + std::to_string(data_size - expect) +
                " trailing bytes after the tensors");
  return out;
}

}  // namespace vt
