// Argument checks and result pushers shared by the store's binding files (store_support.h).
#include "bindings/store_support.h"

#include <cmath>
#include <optional>

#include "bindings/lua_support.h"

namespace vt::lua {

using store::Digest;

std::string CheckBytes(lua_State* L, int idx) {
  size_t len = 0;
  const char* s = CheckStringArg(L, idx, &len);
  return std::string(s, len);
}

std::string_view CheckView(lua_State* L, int idx) {
  size_t len = 0;
  const char* s = CheckStringArg(L, idx, &len);
  return std::string_view(s, len);
}

uint64_t CheckIndex(lua_State* L, int arg, const char* what) {
  double v = CheckNumber(L, arg);
  if (!(v >= 0) || v != std::floor(v) || v > kMaxExactInteger) {
    ArgError(L, arg,
             lua_pushfstring(L, "%s must be an integer in [0, 2^53], got %s", what,
                             lua_tostring(L, arg)));
  }
  return static_cast<uint64_t>(v);
}

uint64_t OptIndex(lua_State* L, int arg, const char* what, uint64_t def) {
  if (lua_isnoneornil(L, arg)) return def;
  return CheckIndex(L, arg, what);
}

Digest CheckDigest(lua_State* L, int arg, const char* what) {
  size_t len = 0;
  const char* s = CheckStringArg(L, arg, &len);
  std::optional<Digest> d = store::DigestFromHex(std::string_view(s, len));
  if (!d) {
    ArgError(L, arg, lua_pushfstring(L, "%s must be 64 hex characters (a SHA-256 digest)", what));
  }
  return *d;
}

std::vector<Digest> CheckProof(lua_State* L, int arg) {
  CheckTable(L, arg);
  std::vector<Digest> proof;
  int n = static_cast<int>(lua_objlen(L, arg));
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, arg, i);
    size_t len = 0;
    const char* s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : nullptr;
    std::optional<Digest> d = s ? store::DigestFromHex(std::string_view(s, len)) : std::nullopt;
    if (!d) {
      ArgError(L, arg,
               lua_pushfstring(L, "proof element %d must be 64 hex characters, got %s", i,
                               luaL_typename(L, -1)));
    }
    proof.push_back(*d);
    lua_pop(L, 1);
  }
  return proof;
}

void PushHex(lua_State* L, const Digest& d) {
  std::string hex = store::ToHex(d);
  lua_pushlstring(L, hex.data(), hex.size());
}

void PushBytes(lua_State* L, std::string_view s) { lua_pushlstring(L, s.data(), s.size()); }

void PushProof(lua_State* L, const std::vector<Digest>& proof) {
  lua_createtable(L, static_cast<int>(proof.size()), 0);
  for (size_t i = 0; i < proof.size(); ++i) {
    PushHex(L, proof[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

void SetNumber(lua_State* L, const char* key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}

void SetString(lua_State* L, const char* key, std::string_view v) {
  PushBytes(L, v);
  lua_setfield(L, -2, key);
}

void SetHex(lua_State* L, const char* key, const Digest& d) {
  PushHex(L, d);
  lua_setfield(L, -2, key);
}

}  // namespace vt::lua
