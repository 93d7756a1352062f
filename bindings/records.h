// Log records passed from Lua as arrays of {boundary=, call=, value=} (the format of
// run:step(s)): one reader for run:write_step, vt.store.step_digest and runner:step.
#pragma once

#include <lua.hpp>
#include <vector>

#include "store/store.h"

namespace vt::lua {

// The records of the array at `idx`. The views point into the Lua strings of the array, so
// they are valid while it stays on the stack. Raises "api: record N ..." on a bad entry:
// boundary must be a string, call an integer in [0, 2^32 - 1] (default 0), value a string.
std::vector<store::LogRecordView> CheckRecordViews(lua_State* L, int idx, const char* api);

}  // namespace vt::lua
