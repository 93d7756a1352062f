// vt.safetensors: save and load named tensors in the safetensors format (PyTorch interop).
#include "runtime/tensor/safetensors.h"

#include <ATen/ATen.h>

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "bindings/tensor.h"

namespace vt::lua {
namespace {

// vt.safetensors.save(path, {name = tensor, ...}[, {key = "value"}])
int Save(lua_State* L) {
  const char* api = "vt.safetensors.save";
  std::string path = CheckString(L, 1);
  CheckTable(L, 2);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  lua_pushnil(L);
  while (lua_next(L, 2) != 0) {
    if (lua_type(L, -2) != LUA_TSTRING) Fail(L, api, "tensor names must be strings");
    at::Tensor* t = TestTensor(L, -1);
    if (t == nullptr) Fail(L, api, std::string("'") + lua_tostring(L, -2) + "' is not a tensor");
    size_t len = 0;
    const char* name = lua_tolstring(L, -2, &len);
    tensors.emplace_back(std::string(name, len), *t);  // whole, so a 0x00 byte is rejected, not cut
    lua_pop(L, 1);
  }
  std::map<std::string, std::string> metadata;
  if (!lua_isnoneornil(L, 3)) {
    CheckTable(L, 3);
    lua_pushnil(L);
    while (lua_next(L, 3) != 0) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        Fail(L, api, "metadata must map strings to strings");
      size_t klen = 0, vlen = 0;
      const char* k = lua_tolstring(L, -2, &klen);
      const char* v = lua_tolstring(L, -1, &vlen);
      metadata[std::string(k, klen)] = std::string(v, vlen);
      lua_pop(L, 1);
    }
  }
  return Protect(L, api, [&] {
    SaveSafetensors(path, tensors, metadata);
    return 0;
  });
}

// vt.safetensors.load(path) -> {name = tensor}, {metadata}
int Load(lua_State* L) {
  std::string path = CheckString(L, 1);
  return Protect(L, "vt.safetensors.load", [&] {
    SafetensorsFile file = LoadSafetensors(path);
    lua_newtable(L);
    for (auto& [name, t] : file.tensors) {
      PushTensor(L, t);
      lua_setfield(L, -2, name.c_str());
    }
    lua_newtable(L);
    for (const auto& [k, v] : file.metadata) {
      lua_pushlstring(L, v.data(), v.size());  // names have no 0x00 (checked); values may
      lua_setfield(L, -2, k.c_str());
    }
    return 2;
  });
}

}  // namespace

void OpenSafetensors(lua_State* L) {
  const luaL_Reg funcs[] = {{"save", Save}, {"load", Load}, {nullptr, nullptr}};
  lua_newtable(L);
  SetFuncs(L, funcs);
  lua_setfield(L, -2, "safetensors");
}

}  // namespace vt::lua
