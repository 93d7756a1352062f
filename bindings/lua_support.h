// Shared machinery for every binding file: the exception guard that turns C++ errors into
// Lua errors prefixed with the API name, option-table checking, and userdata helpers.
//
// Rules every binding follows (see STYLE.md):
//  - check Lua arguments first (luaL_check*), then run the C++ work inside Protect();
//  - never `catch (...)`: LuaJIT raises Lua errors as C++ exceptions on x86-64;
//  - a userdata holds a std::shared_ptr<T> (or an at::Tensor) and its __gc destroys it.
#pragma once

#include <c10/util/Exception.h>

#include <initializer_list>
#include <lua.hpp>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

namespace vt::lua {

// LibTorch's message without its C++ backtrace and source location lines.
std::string TorchMessage(const c10::Error& e);

// Runs `fn` (returning the number of Lua results) and converts c10::Error, and any
// std::exception, into a Lua error "api: message". The message is pushed inside the catch
// and lua_error is called after it, so no C++ exception is in flight when Lua unwinds.
template <class Fn>
int Protect(lua_State* L, const char* api, Fn&& fn) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    lua_pushfstring(L, "%s: %s", api, TorchMessage(e).c_str());
  } catch (const std::exception& e) {
    lua_pushfstring(L, "%s: %s", api, e.what());
  }
  return lua_error(L);
}

// Raises "api: message" as a Lua error.
[[noreturn]] void Fail(lua_State* L, const char* api, const std::string& message);

// The length of the table at `idx` as the entries from t[1] to the first nil. lua_objlen (`#`)
// gives any border of a table with holes, by the table's layout, which depends on the
// process (string-hash seed, addresses): a model source's table would read differently in two
// parties.
int ArrayLength(lua_State* L, int idx);

// Options tables -----------------------------------------------------------------------

// Checks that the value at `idx` is nil or a table whose keys are all in `valid`; raises
// "api: unknown option 'x' (valid: a, b, c)" otherwise. Returns true if a table is present.
bool CheckOptions(lua_State* L, int idx, const char* api, std::initializer_list<const char*> valid);

// Typed option getters for a table at `idx` (nil table means "all defaults"). A present
// value of the wrong type raises "api: option 'name' must be <type>, got <type>".
std::optional<double> OptNumber(lua_State* L, int idx, const char* api, const char* name);
std::optional<int64_t> OptInteger(lua_State* L, int idx, const char* api, const char* name);
std::optional<bool> OptBoolean(lua_State* L, int idx, const char* api, const char* name);
std::optional<std::string> OptString(lua_State* L, int idx, const char* api, const char* name);

// Argument checks. Errors read "bad argument #N to 'name' (...)", where N counts every
// argument including a method's self, and `name` is the function's registered name (the
// upvalue SetFuncs attaches), so messages do not depend on how the function was called.
[[noreturn]] void ArgError(lua_State* L, int arg, const std::string& message);
double CheckNumber(lua_State* L, int arg);
std::string CheckString(lua_State* L, int arg);
// The string at `arg` without copying (valid while it stays on the stack); `len` may be null.
const char* CheckStringArg(lua_State* L, int arg, size_t* len);
void CheckTable(lua_State* L, int arg);
// A Lua number that must be an integer (no fraction, within +-2^53) for argument `arg`.
int64_t CheckInteger(lua_State* L, int arg);

// Userdata ------------------------------------------------------------------------------

// Pushes a full userdata holding `value` (move-constructed) with metatable `mt`, which must
// have been registered with luaL_newmetatable and a __gc calling DestroyUserdata<T>.
template <class T>
T* PushUserdata(lua_State* L, T value, const char* mt) {
  void* mem = lua_newuserdata(L, sizeof(T));
  T* obj = new (mem) T(std::move(value));
  luaL_getmetatable(L, mt);
  lua_setmetatable(L, -2);
  return obj;
}

template <class T>
int DestroyUserdata(lua_State* L) {
  static_cast<T*>(lua_touserdata(L, 1))->~T();
  return 0;
}

// The object of metatable `mt` at `idx`, or a "bad argument" error naming `type_name`.
template <class T>
T& CheckUserdata(lua_State* L, int idx, const char* mt, const char* type_name) {
  void* p = luaL_testudata(L, idx, mt);
  if (p == nullptr) {
    ArgError(L, idx, std::string(type_name) + " expected, got " + luaL_typename(L, idx));
  }
  return *static_cast<T*>(p);
}

// Registers a metatable `mt` with methods `methods` reachable through __index and the
// given metamethods (which may include __index to override). Leaves nothing on the stack.
void RegisterClass(lua_State* L, const char* mt, const luaL_Reg* methods,
                   const luaL_Reg* metamethods);

// Sets `t[name] = f` for every entry of `funcs` on the table at the top of the stack; each
// function gets its name as upvalue 1 (used by ArgError).
void SetFuncs(lua_State* L, const luaL_Reg* funcs);

// Sets t[key] = value for each pair on the table at the top of the stack.
void SetNumbers(lua_State* L, std::initializer_list<std::pair<const char*, double>> fields);

// Pushes a std::vector<int64_t> as a Lua array of numbers.
void PushIntArray(lua_State* L, const std::vector<int64_t>& values);

}  // namespace vt::lua
