// vt.profiles, vt.profile, vt.set_profile and vt.ops: device profiles and the kernels whose
// summation order they choose.
#include "runtime/profile/profile.h"

#include <ATen/ATen.h>

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "bindings/tensor.h"

namespace vt::lua {
namespace {

void PushProfile(lua_State* L, const Profile& p) {
  lua_newtable(L);
  lua_pushstring(L, p.name.c_str());
  lua_setfield(L, -2, "name");
  lua_pushstring(L, p.description.c_str());
  lua_setfield(L, -2, "description");
  lua_pushnumber(L, p.threads);
  lua_setfield(L, -2, "threads");
  lua_pushstring(L, p.GemmName().c_str());
  lua_setfield(L, -2, "gemm");
  lua_pushstring(L, p.ReduceName().c_str());
  lua_setfield(L, -2, "reduce");
  lua_pushboolean(L, p.process_level());
  lua_setfield(L, -2, "process_level");
  lua_newtable(L);
  for (const auto& [key, value] : p.env) {
    lua_pushstring(L, value.c_str());
    lua_setfield(L, -2, key.c_str());
  }
  lua_setfield(L, -2, "env");
  lua_pushboolean(L, &p == &CurrentProfile());
  lua_setfield(L, -2, "active");
}

int Profiles(lua_State* L) {
  return Protect(L, "vt.profiles", [&] {
    const auto& all = ShippedProfiles();
    lua_createtable(L, static_cast<int>(all.size()), 0);
    for (size_t i = 0; i < all.size(); ++i) {
      PushProfile(L, all[i]);
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    return 1;
  });
}

int CurrentProfileFn(lua_State* L) {
  return Protect(L, "vt.profile", [&] {
    PushProfile(L, CurrentProfile());
    lua_pushstring(L, LoadedBlasLibrary().c_str());
    lua_setfield(L, -2, "blas_library");
    return 1;
  });
}

int SetProfile(lua_State* L) {
  std::string name = CheckString(L, 1);
  return Protect(L, "vt.set_profile", [&] {
    ActivateProfile(FindProfile(name));
    return 0;
  });
}

int OpsMatmul(lua_State* L) {
  at::Tensor& a = CheckTensor(L, 1);
  at::Tensor& b = CheckTensor(L, 2);
  return Protect(L, "vt.ops.matmul", [&] {
    PushTensor(L, Matmul(a, b));
    return 1;
  });
}

int OpsSum(lua_State* L) {
  at::Tensor& x = CheckTensor(L, 1);
  std::vector<int64_t> dims;
  if (!lua_isnoneornil(L, 2)) {
    if (lua_type(L, 2) == LUA_TNUMBER) {
      dims.push_back(CheckInteger(L, 2));
    } else {
      CheckTable(L, 2);
      for (int i = 1; i <= static_cast<int>(lua_objlen(L, 2)); ++i) {
        lua_rawgeti(L, 2, i);
        dims.push_back(static_cast<int64_t>(lua_tonumber(L, -1)));
        lua_pop(L, 1);
      }
    }
  }
  for (auto& d : dims) {
    if (d == 0 || d > x.dim() || d < -x.dim()) ArgError(L, 2, "dimension out of range");
    d = d > 0 ? d - 1 : d + x.dim();
  }
  bool keepdim = lua_toboolean(L, 3);
  return Protect(L, "vt.ops.sum", [&] {
    PushTensor(L, Sum(x, dims, keepdim));
    return 1;
  });
}

int OpsConv2d(lua_State* L) {
  const char* api = "vt.ops.conv2d";
  at::Tensor& x = CheckTensor(L, 1);
  at::Tensor& w = CheckTensor(L, 2);
  CheckOptions(L, 3, api, {"bias", "stride", "padding"});
  at::Tensor bias;
  if (!lua_isnoneornil(L, 3)) {
    lua_getfield(L, 3, "bias");
    if (!lua_isnil(L, -1)) bias = CheckTensor(L, lua_gettop(L));
    lua_pop(L, 1);
  }
  int64_t stride = OptInteger(L, 3, api, "stride").value_or(1);
  int64_t padding = OptInteger(L, 3, api, "padding").value_or(0);
  if (stride < 1) Fail(L, api, "option 'stride' must be >= 1");
  if (padding < 0) Fail(L, api, "option 'padding' must be >= 0");
  return Protect(L, api, [&] {
    PushTensor(L, Conv2d(x, w, bias, {stride, stride}, {padding, padding}));
    return 1;
  });
}

}  // namespace

void OpenProfiles(lua_State* L) {
  const luaL_Reg funcs[] = {
      {"profiles", Profiles},
      {"profile", CurrentProfileFn},
      {"set_profile", SetProfile},
      {nullptr, nullptr},
  };
  SetFuncs(L, funcs);
  const luaL_Reg ops[] = {
      {"matmul", OpsMatmul},
      {"sum", OpsSum},
      {"conv2d", OpsConv2d},
      {nullptr, nullptr},
  };
  lua_newtable(L);
  SetFuncs(L, ops);
  lua_setfield(L, -2, "ops");
}

}  // namespace vt::lua
