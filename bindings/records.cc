#include "bindings/records.h"

#include <cstdint>
#include <optional>
#include <string>

#include "bindings/lua_support.h"

namespace vt::lua {

std::vector<store::LogRecordView> CheckRecordViews(lua_State* L, int idx, const char* api) {
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  if (!lua_istable(L, idx)) Fail(L, api, "records must be an array of {boundary=, call=, value=}");
  std::vector<store::LogRecordView> records;
  const int n = static_cast<int>(lua_objlen(L, idx));
  records.reserve(n);
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, i);
    const int e = lua_gettop(L);
    const std::string which = "record " + std::to_string(i);
    if (!lua_istable(L, e)) Fail(L, api, which + " must be a table {boundary=, call=, value=}");
    CheckOptions(L, e, api, {"boundary", "call", "value"});
    store::LogRecordView rec;
    size_t len = 0;
    lua_getfield(L, e, "boundary");
    if (lua_type(L, -1) != LUA_TSTRING) Fail(L, api, which + ": boundary must be a string");
    const char* b = lua_tolstring(L, -1, &len);
    rec.boundary = std::string_view(b, len);  // the string stays referenced by the record table
    lua_pop(L, 1);
    std::optional<int64_t> call = OptInteger(L, e, api, "call");
    if (call && (*call < 0 || *call > static_cast<int64_t>(UINT32_MAX))) {
      Fail(L, api, which + ": call must be in [0, 2^32 - 1]");
    }
    rec.call = static_cast<uint32_t>(call.value_or(0));
    lua_getfield(L, e, "value");
    if (lua_type(L, -1) != LUA_TSTRING) Fail(L, api, which + ": value must be a string");
    const char* v = lua_tolstring(L, -1, &len);
    rec.value = std::string_view(v, len);
    lua_pop(L, 2);  // value, record table
    records.push_back(rec);
  }
  return records;
}

}  // namespace vt::lua
