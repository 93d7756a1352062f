// The C++ half of vt.nn (nn.cc): models written in Lua as the spec's model type "lua", and the
// vt.core.nn_* functions scripts/vt/nn.lua calls.
#pragma once

#include <lua.hpp>

namespace vt::lua {

// Registers the "lua" model type (once per process) and adds vt.core.nn_* to the table on top
// of the stack.
void OpenNn(lua_State* L);

}  // namespace vt::lua
