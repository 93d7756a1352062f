#include "bindings/module.h"

#include <luajit.h>

#include <chrono>

#include "bindings/lua_support.h"
#include "bindings/nn.h"
#include "bindings/tensor.h"
#include "runtime/common/cpu_allocator.h"
#include "runtime/common/threads.h"
#include "runtime/common/version.h"
#include "store/version.h"

namespace vt::lua {
namespace {

int Version(lua_State* L) {
  return Protect(L, "vt.version", [&] {
    lua_newtable(L);
    lua_pushstring(L, VTRUN_VERSION);
    lua_setfield(L, -2, "vtrun");
    lua_pushstring(L, LUAJIT_VERSION);
    lua_setfield(L, -2, "luajit");
    lua_pushstring(L, TorchVersion().c_str());
    lua_setfield(L, -2, "libtorch");
    lua_pushstring(L, store::RocksDbVersion().c_str());
    lua_setfield(L, -2, "rocksdb");
    lua_pushstring(L, store::OpenSslVersion().c_str());
    lua_setfield(L, -2, "openssl");
    return 1;
  });
}

// Monotonic wall-clock seconds (os.clock is CPU time, os.time whole seconds).
int Clock(lua_State* L) {
  lua_pushnumber(
      L,
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count());
  return 1;
}

int GetThreads(lua_State* L) {
  lua_pushnumber(L, Threads());
  return 1;
}

// vt.memory(): the caching CPU allocator's figures (runtime/common/cpu_allocator.h).
int Memory(lua_State* L) {
  CpuAllocatorStats s = CachingCpuAllocatorStats();
  lua_newtable(L);
  lua_pushboolean(L, s.installed);
  lua_setfield(L, -2, "caching");
  SetNumbers(L, {{"cache_limit", static_cast<double>(s.limit)},
                 {"cached", static_cast<double>(s.cached)},
                 {"in_use", static_cast<double>(s.in_use)},
                 {"hits", static_cast<double>(s.hits)},
                 {"misses", static_cast<double>(s.misses)},
                 {"evicted", static_cast<double>(s.evicted)},
                 {"large_block", static_cast<double>(kLargeBlock)}});
  return 1;
}

// vt.release_memory(): returns the allocator's cached blocks to the system.
int ReleaseMemory(lua_State* L) {
  ReleaseCachedCpuBlocks();
  return 0;
}

int Cpus(lua_State* L) {
  lua_pushnumber(L, AvailableCpus());
  return 1;
}

int SetThreadsFn(lua_State* L) {
  int64_t n = CheckInteger(L, 1);
  if (n < 1 || n > 1024) ArgError(L, 1, "thread count must be in [1, 1024]");
  return Protect(L, "vt.set_threads", [&] {
    SetDefaultThreads(static_cast<int>(n));
    return 0;
  });
}

}  // namespace

void OpenSystem(lua_State* L) {
  const luaL_Reg funcs[] = {
      {"version", Version},
      {"cpus", Cpus},
      {"threads", GetThreads},
      {"clock", Clock},
      {"set_threads", SetThreadsFn},
      {"memory", Memory},
      {"release_memory", ReleaseMemory},
      {nullptr, nullptr},
  };
  SetFuncs(L, funcs);
}

int OpenVtCore(lua_State* L) {
  lua_newtable(L);
  OpenSystem(L);
  OpenTensor(L);
  OpenPrecision(L);
  OpenStore(L);
  OpenProfiles(L);
  OpenData(L);
  OpenTrain(L);
  OpenRunner(L);
  OpenSafetensors(L);
  OpenJson(L);
  OpenCompress(L);
  OpenProcess(L);
  OpenFs(L);
  OpenDist(L);
  OpenNn(L);
  OpenBaseline(L);
  return 1;
}

}  // namespace vt::lua
