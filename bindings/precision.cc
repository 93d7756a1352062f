// vt.round, vt.replay, vt.grid and vt.log: the precision core in Lua (to be filled in).
#include "bindings/module.h"

namespace vt::lua {

void OpenPrecision(lua_State* L) {}

}  // namespace vt::lua
