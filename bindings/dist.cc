// vt.dist: this process's place in a data-parallel group (bindings/dist.h).
#include "bindings/dist.h"

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "runtime/common/error.h"

namespace vt::lua {

std::shared_ptr<dist::Group>& DefaultGroup() {
  static std::shared_ptr<dist::Group> group;
  return group;
}

namespace {

// vt.dist.world() -> the number of processes (1 without --world).
int World(lua_State* L) {
  lua_pushnumber(L, DefaultGroup() ? DefaultGroup()->world() : 1);
  return 1;
}

// vt.dist.rank() -> this process's rank (0 without --world).
int Rank(lua_State* L) {
  lua_pushnumber(L, DefaultGroup() ? DefaultGroup()->rank() : 0);
  return 1;
}

// vt.dist.barrier(): waits for every rank.
int Barrier(lua_State* L) {
  return Protect(L, "vt.dist.barrier", [&] {
    if (DefaultGroup()) DefaultGroup()->Barrier();
    return 0;
  });
}

// vt.dist.broadcast(s) -> rank 0's string s, on every rank (each rank passes its own s, or
// nil on the others).
int Broadcast(lua_State* L) {
  size_t n = 0;
  const char* s = lua_isnoneornil(L, 1) ? "" : luaL_checklstring(L, 1, &n);
  std::string bytes(s, n);
  return Protect(L, "vt.dist.broadcast", [&] {
    if (DefaultGroup()) DefaultGroup()->BroadcastBytes(&bytes, 0);
    lua_pushlstring(L, bytes.data(), bytes.size());
    return 1;
  });
}

// vt.dist.gather(s) -> on rank 0, every rank's string by rank ({[1] = rank 0's, ...}); nil
// on the others.
int Gather(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  std::string mine(s, n);
  return Protect(L, "vt.dist.gather", [&] {
    std::vector<std::string> all =
        DefaultGroup() ? DefaultGroup()->GatherBytes(mine, 0) : std::vector<std::string>{mine};
    if (all.empty()) {
      lua_pushnil(L);
      return 1;
    }
    lua_createtable(L, static_cast<int>(all.size()), 0);
    for (size_t i = 0; i < all.size(); ++i) {
      lua_pushlstring(L, all[i].data(), all[i].size());
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    return 1;
  });
}

// vt.dist.bytes_sent() -> bytes this rank has sent to the others so far (runtime/dist/group.h).
int BytesSent(lua_State* L) {
  lua_pushnumber(L, DefaultGroup() ? static_cast<double>(DefaultGroup()->bytes_sent()) : 0.0);
  return 1;
}

}  // namespace

void OpenDist(lua_State* L) {
  const luaL_Reg funcs[] = {
      {"world", World},         {"rank", Rank},     {"barrier", Barrier},
      {"broadcast", Broadcast}, {"gather", Gather}, {"bytes_sent", BytesSent},
      {nullptr, nullptr},
  };
  lua_newtable(L);
  SetFuncs(L, funcs);
  lua_setfield(L, -2, "dist");
}

}  // namespace vt::lua
