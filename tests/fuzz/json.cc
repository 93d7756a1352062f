// libFuzzer target for vt.json.decode (bindings/json.cc): every message of the verification
// game crosses between parties as one line of JSON and is decoded by the receiver. Every
// input must either decode or raise a Lua error; a decoded value encodes to JSON that
// decodes and encodes to the same text again (encoding is canonical: sorted keys).
#include <cstdint>
#include <cstdlib>
#include <lua.hpp>
#include <string>

#include "bindings/module.h"

namespace {

lua_State* State() {
  static lua_State* L = [] {
    lua_State* s = luaL_newstate();
    luaL_openlibs(s);
    lua_newtable(s);
    vt::lua::OpenJson(s);
    lua_setglobal(s, "vt");
    const char* chunk =
        "local json = vt.json\n"
        "return function(text)\n"
        "  local ok, value = pcall(json.decode, text)\n"
        "  if not ok then return true end\n"
        "  local ok2, once = pcall(json.encode, value)\n"
        "  if not ok2 then return true end\n"  // e.g. a number with no JSON form after decoding
        "  local twice = json.encode(json.decode(once))\n"
        "  return once == twice\n"
        "end\n";
    if (luaL_loadstring(s, chunk) != 0 || lua_pcall(s, 0, 1, 0) != 0) std::abort();
    lua_setglobal(s, "check");
    return s;
  }();
  return L;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lua_State* L = State();
  lua_getglobal(L, "check");
  lua_pushlstring(L, reinterpret_cast<const char*>(data), size);
  if (lua_pcall(L, 1, 1, 0) != 0) std::abort();  // the round trip itself raised
  if (!lua_toboolean(L, -1)) std::abort();       // encode(decode(encode(v))) differs
  lua_pop(L, 1);
  lua_gc(L, LUA_GCSTEP, 0);
  return 0;
}
