// vt.tensor: LibTorch tensors in Lua. This file holds the vt.Tensor userdata, the helpers
// the other tensor files share (tensor_support.h), and OpenTensor, which assembles vt.tensor
// and the vt.Tensor metatable from tensor_make.cc, tensor_shape.cc, tensor_index.cc,
// tensor_math.cc and tensor_values.cc. Dimensions and indices are 1-based as in Torch7
// (negative values count from the end); ranges in slices are inclusive.
#include "bindings/tensor.h"

#include <ATen/ATen.h>

#include <string>

#include "bindings/lua_support.h"
#include "bindings/tensor_support.h"
#include "runtime/tensor/dtype.h"

namespace vt::lua {

at::Scalar CheckScalar(lua_State* L, int idx) {
  if (lua_type(L, idx) == LUA_TBOOLEAN) return at::Scalar(static_cast<bool>(lua_toboolean(L, idx)));
  return at::Scalar(CheckNumber(L, idx));
}

int64_t CheckDim(lua_State* L, int arg, const at::Tensor& t) {
  int64_t d = CheckInteger(L, arg);
  int64_t n = std::max<int64_t>(t.dim(), 1);
  if (d == 0 || d > n || d < -n) {
    ArgError(L, arg,
             "dimension " + std::to_string(d) + " out of range for a " + std::to_string(t.dim()) +
                 "-d tensor (use 1.." + std::to_string(n) + " or -1..-" + std::to_string(n) + ")");
  }
  return d > 0 ? d - 1 : d + n;
}

int64_t ResolveIndex(lua_State* L, const char* api, int64_t index, int64_t size, int64_t dim) {
  int64_t pos = index > 0 ? index - 1 : size + index;
  if (index == 0 || pos < 0 || pos >= size) {
    Fail(L, api,
         "index " + std::to_string(index) + " out of range for dimension " +
             std::to_string(dim + 1) + " of size " + std::to_string(size));
  }
  return pos;
}

// DtypeFromName throws vt::Error, which the guard turns into a Lua error.
at::ScalarType ParseDtype(lua_State* L, const char* api, const std::string& name) {
  at::ScalarType type = at::kDouble;
  Protect(L, api, [&] {
    type = DtypeFromName(name);
    return 0;
  });
  return type;
}

void PushScalarValue(lua_State* L, const at::Tensor& t) {
  if (t.scalar_type() == at::kBool) {
    lua_pushboolean(L, t.item<bool>());
  } else if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) {
    lua_pushnumber(L, static_cast<lua_Number>(t.item<int64_t>()));
  } else {
    lua_pushnumber(L, t.item<double>());
  }
}

void PushTensor(lua_State* L, at::Tensor t) {
  PushUserdata<at::Tensor>(L, std::move(t), kTensorMeta);
}

at::Tensor& CheckTensor(lua_State* L, int idx) {
  return CheckUserdata<at::Tensor>(L, idx, kTensorMeta, "vt.Tensor");
}

at::Tensor* TestTensor(lua_State* L, int idx) {
  return static_cast<at::Tensor*>(luaL_testudata(L, idx, kTensorMeta));
}

void OpenTensor(lua_State* L) {
  // The metatable keeps methods in a "methods" field; __index looks there for string keys
  // and treats numbers and tables as indices.
  luaL_newmetatable(L, kTensorMeta);
  AddIndexMetamethods(L);
  AddValueMetamethods(L);
  AddMathMetamethods(L);
  const luaL_Reg gc[] = {{"__gc", DestroyUserdata<at::Tensor>}, {nullptr, nullptr}};
  SetFuncs(L, gc);
  lua_newtable(L);
  AddShapeMethods(L);
  AddMathMethods(L);
  AddValueMethods(L);
  lua_setfield(L, -2, "methods");
  lua_pushstring(L, kTensorMeta);
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);

  lua_newtable(L);  // vt.tensor
  AddMakeFunctions(L);
  lua_newtable(L);  // its metatable: vt.tensor(data, opts)
  lua_pushstring(L, "tensor");
  lua_pushcclosure(L, TensorNew, 1);
  lua_setfield(L, -2, "__call");
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "tensor");
}

}  // namespace vt::lua
