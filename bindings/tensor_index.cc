// vt.Tensor indexing: t[i] and t[{i, {first, last}, {}}] as views (or values, for 0-d
// results), assignment through them, and method lookup for string keys (__index,
// __newindex).
#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "bindings/lua_support.h"
#include "bindings/tensor.h"
#include "bindings/tensor_support.h"

namespace vt::lua {
namespace {

// Pushes a tensor, or its value if it has no dimensions (as element access does).
void PushTensorOrValue(lua_State* L, const at::Tensor& t) {
  if (t.dim() == 0) {
    PushScalarValue(L, t);
  } else {
    PushTensor(L, t);
  }
}

// Applies a key (number or table of per-dimension selectors) to `t`. Returns the view.
at::Tensor ApplyIndex(lua_State* L, const char* api, const at::Tensor& t, int key) {
  if (lua_type(L, key) == LUA_TNUMBER) {
    if (t.dim() == 0) Fail(L, api, "cannot index a 0-d tensor");
    double raw = lua_tonumber(L, key);
    if (raw != std::floor(raw)) Fail(L, api, "index must be an integer");
    return t.select(0, ResolveIndex(L, api, static_cast<int64_t>(raw), t.size(0), 0));
  }
  int n = ArrayLength(L, key);
  if (n > t.dim()) {
    Fail(L, api,
         "too many indices (" + std::to_string(n) + ") for a " + std::to_string(t.dim()) +
             "-d tensor");
  }
  at::Tensor view = t;
  int64_t dim = 0;  // current dimension in `view`
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, key, i);
    int64_t original_dim = i - 1;
    if (lua_type(L, -1) == LUA_TNUMBER) {
      double raw = lua_tonumber(L, -1);
      if (raw != std::floor(raw)) Fail(L, api, "index must be an integer");
      view = view.select(
          dim, ResolveIndex(L, api, static_cast<int64_t>(raw), view.size(dim), original_dim));
    } else if (lua_istable(L, -1)) {
      int parts = ArrayLength(L, -1);
      int64_t size = view.size(dim);
      int64_t first = 0, last = size - 1;
      if (parts >= 1) {
        lua_rawgeti(L, -1, 1);
        first = ResolveIndex(L, api, static_cast<int64_t>(CheckNumber(L, -1)), size, original_dim);
        lua_pop(L, 1);
        last = first;
        if (parts >= 2) {
          lua_rawgeti(L, -1, 2);
          last = ResolveIndex(L, api, static_cast<int64_t>(CheckNumber(L, -1)), size, original_dim);
          lua_pop(L, 1);
        } else {
          last = size - 1;
        }
      }
      if (parts > 2) Fail(L, api, "a range is {first, last}, {first} or {}");
      if (last < first)
        Fail(L, api,
             "empty range {" + std::to_string(first + 1) + ", " + std::to_string(last + 1) + "}");
      view = view.narrow(dim, first, last - first + 1);
      ++dim;
    } else {
      Fail(L, api,
           std::string("index entries must be numbers or {first, last} ranges, got ") +
               luaL_typename(L, -1));
    }
    lua_pop(L, 1);
  }
  return view;
}

int MIndex(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  int type = lua_type(L, 2);
  if (type == LUA_TSTRING) {
    luaL_getmetatable(L, kTensorMeta);
    lua_getfield(L, -1, "methods");
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
  }
  if (type != LUA_TNUMBER && type != LUA_TTABLE) return 0;
  const char* api = "vt.tensor.index";
  at::Tensor view = ApplyIndex(L, api, t, 2);
  return Protect(L, api, [&] {
    PushTensorOrValue(L, view);
    return 1;
  });
}

int MNewIndex(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  const char* api = "vt.tensor.newindex";
  int type = lua_type(L, 2);
  if (type != LUA_TNUMBER && type != LUA_TTABLE) {
    Fail(L, api, std::string("cannot set field of type ") + luaL_typename(L, 2) + " on a tensor");
  }
  at::Tensor view = ApplyIndex(L, api, t, 2);
  at::Tensor* src = TestTensor(L, 3);
  at::Scalar value = src ? at::Scalar(0) : CheckScalar(L, 3);
  return Protect(L, api, [&] {
    if (src) {
      view.copy_(*src);
    } else {
      view.fill_(value);
    }
    return 0;
  });
}

}  // namespace

void AddIndexMetamethods(lua_State* L) {
  const luaL_Reg metamethods[] = {
      {"__index", MIndex},
      {"__newindex", MNewIndex},
      {nullptr, nullptr},
  };
  SetFuncs(L, metamethods);
}

}  // namespace vt::lua
