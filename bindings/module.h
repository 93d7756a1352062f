// The `vt` core module: the C++ half of `require "vt"`. scripts/vt/init.lua loads it as
// "vt.core" and adds the parts written in Lua.
#pragma once

#include <lua.hpp>

namespace vt::lua {

// lua_CFunction: pushes the "vt.core" table with every C++ area registered.
int OpenVtCore(lua_State* L);

// Each area adds its fields to the table on top of the stack.
void OpenSystem(lua_State* L);       // vt.version(), vt.threads(), vt.set_threads()
void OpenPrecision(lua_State* L);    // vt.round, vt.replay, vt.grid, vt.log (precision core)
void OpenStore(lua_State* L);        // vt.store, vt.merkle
void OpenProfiles(lua_State* L);     // vt.profiles, vt.profile, vt.set_profile, vt.ops
void OpenData(lua_State* L);         // vt.data
void OpenSafetensors(lua_State* L);  // vt.safetensors
void OpenJson(lua_State* L);         // vt.json
void OpenCompress(lua_State* L);     // vt.zstd
void OpenFs(lua_State* L);           // vt.fs
void OpenDist(lua_State* L);         // vt.dist
void OpenProcess(lua_State* L);      // vt.process, vt.executable()
void OpenTrain(lua_State* L);        // vt.models, vt.optim, vt.spec, vt.train (train.cc)
void OpenRunner(lua_State* L);       // vt.trainer, vt.auditor (runner.cc)
void OpenBaseline(lua_State* L);     // vt.torch_baseline (baseline.cc)

}  // namespace vt::lua
