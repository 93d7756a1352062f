// The vtrun host: a LuaJIT state with `vt` loaded, script/-e/stdin execution under a
// traceback handler, Ctrl-C interruption, and error reporting as `vtrun: message`.
#pragma once

#include <lua.hpp>
#include <string>

namespace vt::lua {

// A new Lua state with the standard libraries, package.path set so `require "vt"` finds the
// project's Lua library (see LibraryDirectory), and the global `vt` loaded. Throws
// std::runtime_error if the library cannot be found or fails to load. Caller closes it.
// `alloc` (with `ud`), when given, is the state's allocator (a model's state counts what a
// source allocates: bindings/nn.cc).
lua_State* NewHostState(lua_Alloc alloc = nullptr, void* ud = nullptr);

// The directory holding the vt Lua library (vt/init.lua): <exe>/../share/vtrun/lua when
// installed, else the source tree's scripts/ this binary was built from. Throws if neither
// exists.
std::string LibraryDirectory();

// The message handler for lua_pcall: turns the error value into a string (using __tostring
// where present) and appends a traceback.
int Traceback(lua_State* L);

// Calls the function below `nargs` arguments on the stack with Traceback as handler; Ctrl-C
// during the call raises "interrupted!" in Lua. Returns the lua_pcall status.
int CallInterruptible(lua_State* L, int nargs, int nresults);

// Whether Ctrl-C was pressed during the current interruptible call, consuming it: a long C++
// loop (runner:run, a calibration) checks this between steps, stops cleanly with what it has
// finished, and returns normally; the pending "interrupted!" is cancelled and a later Ctrl-C
// interrupts again. Without this, the signal would only take effect when the loop returned,
// and its result would be thrown away.
bool ConsumeInterrupt(lua_State* L);

// While one of these lives, the code below checks ConsumeInterrupt between its steps, so a
// Ctrl-C (or several) only asks it to stop after the step in progress: the process is never
// killed by a second Ctrl-C, which would lose a REPL session in a long step.
class InterruptChecks {
 public:
  InterruptChecks();
  ~InterruptChecks();
  InterruptChecks(const InterruptChecks&) = delete;
  InterruptChecks& operator=(const InterruptChecks&) = delete;
};

// Prints the error message on top of the stack to stderr as "vtrun: <message>" and pops it.
void ReportError(lua_State* L);

// The entry point: parses the command line (see `vtrun --help`) and runs. Returns the exit
// status.
int HostMain(int argc, char** argv);

}  // namespace vt::lua
