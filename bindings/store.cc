// vt.store and vt.merkle: the RocksDB store in Lua (to be filled in).
#include "bindings/module.h"

namespace vt::lua {

void OpenStore(lua_State* L) {}

}  // namespace vt::lua
