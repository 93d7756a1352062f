// vt.json: JSON for results files and for the verification game's messages.
//
// encode(value [, {indent=}]) -> text; decode(text) -> value; vt.json.null is JSON null.
// Lua strings that are not valid UTF-8 (checkpoints, log records) are encoded as
// {"$bytes": "<base64>"} and decoded back to the same bytes, so any Lua string survives a
// round trip. Tables with keys 1..n are arrays (an empty table is []), tables with string
// keys objects; object keys are written sorted, so equal values give equal text.
#include <openssl/evp.h>

#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "bindings/lua_support.h"
#include "bindings/module.h"

namespace vt::lua {
namespace {

using Json = nlohmann::json;
constexpr const char* kBytesKey = "$bytes";
constexpr int kMaxDepth = 200;
// nlohmann's serializer grows its indent buffer (512 spaces) by doubling once per level, so
// an indent above 512 reads past it (heap bytes in the output, or a crash); 64 is plenty.
constexpr int64_t kMaxIndent = 64;

bool ValidUtf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= n) return false;
    for (size_t k = 1; k <= extra; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values beyond U+10FFFF are not UTF-8.
    if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

std::string Base64Encode(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// Strict base64 (padded, no whitespace); nullopt if malformed.
std::optional<std::string> Base64Decode(const std::string& text) {
  if (text.size() % 4 != 0) return std::nullopt;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool pad_ok =
        c == '=' && i >= text.size() - 2 && (i == text.size() - 1 || text.back() == '=');
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || pad_ok))
      return std::nullopt;
  }
  std::string out(3 * (text.size() / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  size_t len = static_cast<size_t>(n);
  if (!text.empty() && text[text.size() - 1] == '=') --len;
  if (text.size() >= 2 && text[text.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

void* NullSentinel() {
  static char sentinel;
  return &sentinel;
}

Json ToJson(lua_State* L, int idx, const std::string& path, int depth) {
  if (depth > kMaxDepth)
    Fail(L, "vt.json.encode",
         "value nested deeper than " + std::to_string(kMaxDepth) + " at " + path);
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return nullptr;
    case LUA_TBOOLEAN:
      return static_cast<bool>(lua_toboolean(L, idx));
    case LUA_TNUMBER: {
      const double v = lua_tonumber(L, idx);
      if (!std::isfinite(v))
        Fail(L, "vt.json.encode",
             "number " + std::to_string(v) + " at " + path + " has no JSON form");
      if (v == std::floor(v) && std::fabs(v) <= 9007199254740992.0) return static_cast<int64_t>(v);
      return v;
    }
    case LUA_TSTRING: {
      size_t len = 0;
      const char* p = lua_tolstring(L, idx, &len);
      std::string s(p, len);
      if (ValidUtf8(s)) return s;
      return Json{{kBytesKey, Base64Encode(s)}};
    }
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, idx) == NullSentinel()) return nullptr;
      break;
    case LUA_TTABLE: {
      if (idx < 0) idx = lua_gettop(L) + idx + 1;
      // Array if every key is an integer 1..n.
      size_t count = 0;
      bool all_index = true;
      lua_pushnil(L);
      while (lua_next(L, idx) != 0) {
        ++count;
        if (lua_type(L, -2) != LUA_TNUMBER) {
          all_index = false;
        } else {
          const double k = lua_tonumber(L, -2);
          if (k != std::floor(k) || k < 1) all_index = false;
        }
        lua_pop(L, 1);
      }
      const size_t n = lua_objlen(L, idx);
      if (all_index && count == n) {
        Json array = Json::array();
        for (size_t i = 1; i <= n; ++i) {
          lua_rawgeti(L, idx, static_cast<int>(i));
          array.push_back(
              ToJson(L, lua_gettop(L), path + "[" + std::to_string(i) + "]", depth + 1));
          lua_pop(L, 1);
        }
        return array;
      }
      Json object = Json::object();
      lua_pushnil(L);
      while (lua_next(L, idx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING) {
          Fail(L, "vt.json.encode",
               "table at " + path +
                   " mixes array items and other keys (JSON objects need string keys)");
        }
        std::string key = lua_tostring(L, -2);
        if (!ValidUtf8(key)) Fail(L, "vt.json.encode", "a key at " + path + " is not UTF-8 text");
        object[key] = ToJson(L, lua_gettop(L), path + "." + key, depth + 1);
        lua_pop(L, 1);
      }
      if (object.size() == 1 && object.contains(kBytesKey)) {
        Fail(L, "vt.json.encode",
             std::string("key '") + kBytesKey + "' alone at " + path + " is reserved for bytes");
      }
      return object;
    }
    default:
      break;
  }
  Fail(L, "vt.json.encode",
       std::string("value at ") + path + " is a " + luaL_typename(L, idx) +
           ", which has no JSON form");
}

void PushJson(lua_State* L, const Json& j, int depth) {
  if (depth > kMaxDepth)
    throw std::runtime_error("JSON nested deeper than " + std::to_string(kMaxDepth));
  switch (j.type()) {
    case Json::value_t::null:
      lua_pushlightuserdata(L, NullSentinel());
      return;
    case Json::value_t::boolean:
      lua_pushboolean(L, j.get<bool>());
      return;
    case Json::value_t::number_integer:
      lua_pushnumber(L, static_cast<lua_Number>(j.get<int64_t>()));
      return;
    case Json::value_t::number_unsigned:
      lua_pushnumber(L, static_cast<lua_Number>(j.get<uint64_t>()));
      return;
    case Json::value_t::number_float:
      lua_pushnumber(L, j.get<double>());
      return;
    case Json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      lua_pushlstring(L, s.data(), s.size());
      return;
    }
    case Json::value_t::array: {
      lua_createtable(L, static_cast<int>(j.size()), 0);
      int i = 1;
      for (const auto& v : j) {
        PushJson(L, v, depth + 1);
        lua_rawseti(L, -2, i++);
      }
      return;
    }
    case Json::value_t::object: {
      // A lone bytes key is bytes or an error, never a table: encode refuses such a table, so
      // a decoded one could not be passed on (a transcript, a digest) by whoever received it.
      if (j.size() == 1 && j.contains(kBytesKey) && !j.at(kBytesKey).is_string()) {
        throw std::runtime_error(std::string("a '") + kBytesKey +
                                 "' object must hold a base64 string, got " +
                                 j.at(kBytesKey).type_name());
      }
      if (j.size() == 1 && j.contains(kBytesKey)) {
        auto bytes = Base64Decode(j.at(kBytesKey).get<std::string>());
        if (!bytes)
          throw std::runtime_error(std::string("malformed base64 in a '") + kBytesKey + "' value");
        lua_pushlstring(L, bytes->data(), bytes->size());
        return;
      }
      lua_createtable(L, 0, static_cast<int>(j.size()));
      for (const auto& [k, v] : j.items()) {
        lua_pushlstring(L, k.data(), k.size());
        PushJson(L, v, depth + 1);
        lua_rawset(L, -3);
      }
      return;
    }
    default:
      throw std::runtime_error("unsupported JSON value");
  }
}

int Encode(lua_State* L) {
  const char* api = "vt.json.encode";
  CheckOptions(L, 2, api, {"indent"});
  std::optional<int64_t> indent_option = OptInteger(L, 2, api, "indent");
  if (indent_option && (*indent_option < 0 || *indent_option > kMaxIndent)) {
    Fail(L, api,
         "option 'indent' must be an integer from 0 to " + std::to_string(kMaxIndent) +
             " (omit it for compact output), got " + std::to_string(*indent_option));
  }
  const int indent = static_cast<int>(indent_option.value_or(-1));  // -1: compact
  Json j = ToJson(L, 1, "$", 0);
  return Protect(L, api, [&] {
    std::string text = j.dump(indent);
    lua_pushlstring(L, text.data(), text.size());
    return 1;
  });
}

int Decode(lua_State* L) {
  size_t len = 0;
  const char* text = CheckStringArg(L, 1, &len);
  return Protect(L, "vt.json.decode", [&] {
    Json j;
    try {
      j = Json::parse(text, text + len);
    } catch (const nlohmann::json::parse_error& e) {
      // "[json.exception.parse_error.101] parse error at line 1, column 3: ..." -> the part after
      // "] ".
      std::string what = e.what();
      const size_t cut = what.find("] ");
      throw std::runtime_error(cut == std::string::npos ? what : what.substr(cut + 2));
    }
    lua_checkstack(L, 2 * kMaxDepth + 20);
    PushJson(L, j, 0);
    return 1;
  });
}

}  // namespace

void OpenJson(lua_State* L) {
  const luaL_Reg funcs[] = {{"encode", Encode}, {"decode", Decode}, {nullptr, nullptr}};
  lua_newtable(L);
  SetFuncs(L, funcs);
  lua_pushlightuserdata(L, NullSentinel());
  lua_setfield(L, -2, "null");
  lua_setfield(L, -2, "json");
}

}  // namespace vt::lua
