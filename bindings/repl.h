// The interactive REPL: readline editing, persistent history (~/.vtrun_history), completion of
// globals and fields, multi-line chunks, expression values printed without `=`, pretty
// printing (scripts/vt/repl.lua), errors with traceback, Ctrl-C to interrupt, Ctrl-D to exit.
#pragma once

#include <lua.hpp>

namespace vt::lua {

// Runs the REPL on `L` until end of input. Returns the exit status (0).
int RunRepl(lua_State* L);

}  // namespace vt::lua
