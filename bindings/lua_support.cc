#include "bindings/lua_support.h"

#include <algorithm>
#include <cmath>

namespace vt::lua {

std::string TorchMessage(const c10::Error& e) {
  std::string msg = e.what_without_backtrace();
  // LibTorch 1.13 may still append "Exception raised from ..." lines; keep the first
  // paragraph that carries the message itself.
  size_t cut = msg.find("\nException raised from");
  if (cut != std::string::npos) msg.resize(cut);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return msg;
}

void Fail(lua_State* L, const char* api, const std::string& message) {
  lua_pushfstring(L, "%s: %s", api, message.c_str());
  lua_error(L);
  __builtin_unreachable();
}

int ArrayLength(lua_State* L, int idx) {
  int n = 0;
  for (;; ++n) {
    lua_rawgeti(L, idx, n + 1);
    const bool end = lua_isnil(L, -1);
    lua_pop(L, 1);
    if (end) return n;
  }
}

bool CheckOptions(lua_State* L, int idx, const char* api,
                  std::initializer_list<const char*> valid) {
  if (lua_isnoneornil(L, idx)) return false;
  if (!lua_istable(L, idx)) {
    Fail(L, api, std::string("options must be a table, got ") + luaL_typename(L, idx));
  }
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    bool ok = false;
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char* key = lua_tostring(L, -1);
      ok = std::any_of(valid.begin(), valid.end(),
                       [&](const char* v) { return std::string(v) == key; });
    }
    if (!ok) {
      std::vector<std::string> names(valid.begin(), valid.end());
      std::sort(names.begin(), names.end());
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      std::string key = lua_type(L, -1) == LUA_TSTRING
                            ? lua_tostring(L, -1)
                            : std::string("<") + luaL_typename(L, -1) + ">";
      Fail(L, api, "unknown option '" + key + "' (valid: " + list + ")");
    }
  }
  return true;
}

namespace {

// Pushes t[name] for the options table at idx; returns false (and pushes nothing) if absent.
bool GetOption(lua_State* L, int idx, const char* name) {
  if (lua_isnoneornil(L, idx)) return false;
  lua_getfield(L, idx, name);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return false;
  }
  return true;
}

[[noreturn]] void WrongType(lua_State* L, const char* api, const char* name, const char* expected) {
  std::string got = luaL_typename(L, -1);
  Fail(L, api, std::string("option '") + name + "' must be " + expected + ", got " + got);
}

}  // namespace

std::optional<double> OptNumber(lua_State* L, int idx, const char* api, const char* name) {
  if (!GetOption(L, idx, name)) return std::nullopt;
  if (lua_type(L, -1) != LUA_TNUMBER) WrongType(L, api, name, "a number");
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

std::optional<int64_t> OptInteger(lua_State* L, int idx, const char* api, const char* name) {
  if (!GetOption(L, idx, name)) return std::nullopt;
  double v = lua_tonumber(L, -1);
  if (lua_type(L, -1) != LUA_TNUMBER || v != std::floor(v) || std::fabs(v) > 9007199254740992.0) {
    WrongType(L, api, name, "an integer");
  }
  lua_pop(L, 1);
  return static_cast<int64_t>(v);
}

std::optional<bool> OptBoolean(lua_State* L, int idx, const char* api, const char* name) {
  if (!GetOption(L, idx, name)) return std::nullopt;
  if (lua_type(L, -1) != LUA_TBOOLEAN) WrongType(L, api, name, "a boolean");
  bool v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

std::optional<std::string> OptString(lua_State* L, int idx, const char* api, const char* name) {
  if (!GetOption(L, idx, name)) return std::nullopt;
  if (lua_type(L, -1) != LUA_TSTRING) WrongType(L, api, name, "a string");
  size_t len = 0;
  const char* s = lua_tolstring(L, -1, &len);
  std::string v(s, len);
  lua_pop(L, 1);
  return v;
}

void ArgError(lua_State* L, int arg, const std::string& message) {
  const char* name = lua_tostring(L, lua_upvalueindex(1));
  if (name == nullptr) {
    lua_Debug ar;
    name = lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name ? ar.name : "?";
  }
  lua_pushfstring(L, "bad argument #%d to '%s' (%s)", arg, name, message.c_str());
  lua_error(L);
  __builtin_unreachable();
}

double CheckNumber(lua_State* L, int arg) {
  if (lua_type(L, arg) != LUA_TNUMBER) {
    ArgError(L, arg, std::string("number expected, got ") + luaL_typename(L, arg));
  }
  return lua_tonumber(L, arg);
}

const char* CheckStringArg(lua_State* L, int arg, size_t* len) {
  if (lua_type(L, arg) != LUA_TSTRING) {
    ArgError(L, arg, std::string("string expected, got ") + luaL_typename(L, arg));
  }
  return lua_tolstring(L, arg, len);
}

std::string CheckString(lua_State* L, int arg) {
  if (lua_type(L, arg) != LUA_TSTRING) {
    ArgError(L, arg, std::string("string expected, got ") + luaL_typename(L, arg));
  }
  size_t len = 0;
  const char* s = lua_tolstring(L, arg, &len);
  return std::string(s, len);
}

void CheckTable(lua_State* L, int arg) {
  if (!lua_istable(L, arg))
    ArgError(L, arg, std::string("table expected, got ") + luaL_typename(L, arg));
}

int64_t CheckInteger(lua_State* L, int arg) {
  double v = CheckNumber(L, arg);
  if (v != std::floor(v) || std::fabs(v) > 9007199254740992.0) {
    ArgError(L, arg, "integer expected, got " + std::to_string(v));
  }
  return static_cast<int64_t>(v);
}

void SetFuncs(lua_State* L, const luaL_Reg* funcs) {
  for (; funcs->name != nullptr; ++funcs) {
    lua_pushstring(L, funcs->name);
    lua_pushcclosure(L, funcs->func, 1);
    lua_setfield(L, -2, funcs->name);
  }
}

void RegisterClass(lua_State* L, const char* mt, const luaL_Reg* methods,
                   const luaL_Reg* metamethods) {
  luaL_newmetatable(L, mt);
  lua_newtable(L);
  SetFuncs(L, methods);
  lua_setfield(L, -2, "__index");
  if (metamethods != nullptr) SetFuncs(L, metamethods);
  lua_pushstring(L, mt);
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);
}

void SetNumbers(lua_State* L, std::initializer_list<std::pair<const char*, double>> fields) {
  for (const auto& [key, value] : fields) {
    lua_pushnumber(L, value);
    lua_setfield(L, -2, key);
  }
}

void PushIntArray(lua_State* L, const std::vector<int64_t>& values) {
  lua_createtable(L, static_cast<int>(values.size()), 0);
  for (size_t i = 0; i < values.size(); ++i) {
    lua_pushnumber(L, static_cast<lua_Number>(values[i]));
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

}  // namespace vt::lua
