// vt.Tensor's sizes and views: dim, numel, size, shape, dtype, view, reshape, transpose, t,
// permute, narrow, select, squeeze and unsqueeze (views share the tensor's storage).
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/tensor.h"
#include "bindings/tensor_support.h"
#include "runtime/tensor/dtype.h"

namespace vt::lua {
namespace {

int MDim(lua_State* L) {
  lua_pushnumber(L, static_cast<lua_Number>(CheckTensor(L, 1).dim()));
  return 1;
}

int MNumel(lua_State* L) {
  lua_pushnumber(L, static_cast<lua_Number>(CheckTensor(L, 1).numel()));
  return 1;
}

int MSize(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  if (lua_isnoneornil(L, 2)) {
    PushIntArray(L, t.sizes().vec());
    return 1;
  }
  if (t.dim() == 0) ArgError(L, 2, "a 0-d tensor has no dimensions");
  lua_pushnumber(L, static_cast<lua_Number>(t.size(CheckDim(L, 2, t))));
  return 1;
}

int MShape(lua_State* L) {
  PushIntArray(L, CheckTensor(L, 1).sizes().vec());
  return 1;
}

int MDtype(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  return Protect(L, "vt.tensor.dtype", [&] {
    lua_pushstring(L, DtypeName(t.scalar_type()).c_str());
    return 1;
  });
}

int MView(lua_State* L, const char* api, bool reshape) {
  at::Tensor& t = CheckTensor(L, 1);
  std::vector<int64_t> shape;
  // -1 is allowed once, as in torch.
  if (lua_istable(L, 2)) {
    int n = static_cast<int>(lua_objlen(L, 2));
    for (int i = 1; i <= n; ++i) {
      lua_rawgeti(L, 2, i);
      shape.push_back(static_cast<int64_t>(lua_tonumber(L, -1)));
      lua_pop(L, 1);
    }
  } else {
    for (int i = 2; i <= lua_gettop(L); ++i) shape.push_back(CheckInteger(L, i));
  }
  return Protect(L, api, [&] {
    PushTensor(L, reshape ? t.reshape(shape) : t.view(shape));
    return 1;
  });
}
int MViewFn(lua_State* L) { return MView(L, "vt.tensor.view", false); }
int MReshape(lua_State* L) { return MView(L, "vt.tensor.reshape", true); }

int MTranspose(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  int64_t a = CheckDim(L, 2, t), b = CheckDim(L, 3, t);
  return Protect(L, "vt.tensor.transpose", [&] {
    PushTensor(L, t.transpose(a, b));
    return 1;
  });
}

int MT(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  return Protect(L, "vt.tensor.t", [&] {
    PushTensor(L, t.t());
    return 1;
  });
}

int MPermute(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  std::vector<int64_t> dims;
  for (int i = 2; i <= lua_gettop(L); ++i) dims.push_back(CheckDim(L, i, t));
  return Protect(L, "vt.tensor.permute", [&] {
    PushTensor(L, t.permute(dims));
    return 1;
  });
}

int MNarrow(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  int64_t dim = CheckDim(L, 2, t);
  int64_t start = CheckInteger(L, 3);
  int64_t length = CheckInteger(L, 4);
  const char* api = "vt.tensor.narrow";
  int64_t pos = ResolveIndex(L, api, start, t.size(dim), dim);
  return Protect(L, api, [&] {
    PushTensor(L, t.narrow(dim, pos, length));
    return 1;
  });
}

int MSelect(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  int64_t dim = CheckDim(L, 2, t);
  const char* api = "vt.tensor.select";
  int64_t pos = ResolveIndex(L, api, CheckInteger(L, 3), t.size(dim), dim);
  return Protect(L, api, [&] {
    PushTensor(L, t.select(dim, pos));
    return 1;
  });
}

int MSqueeze(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  bool all = lua_isnoneornil(L, 2);
  int64_t dim = all ? 0 : CheckDim(L, 2, t);
  return Protect(L, "vt.tensor.squeeze", [&] {
    PushTensor(L, all ? t.squeeze() : t.squeeze(dim));
    return 1;
  });
}

int MUnsqueeze(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  int64_t d = CheckInteger(L, 2);
  int64_t n = t.dim() + 1;
  if (d == 0 || d > n || d < -n) ArgError(L, 2, "dimension out of range");
  int64_t dim = d > 0 ? d - 1 : d + n;
  return Protect(L, "vt.tensor.unsqueeze", [&] {
    PushTensor(L, t.unsqueeze(dim));
    return 1;
  });
}

}  // namespace

void AddShapeMethods(lua_State* L) {
  const luaL_Reg methods[] = {
      {"dim", MDim},         {"numel", MNumel},         {"size", MSize},
      {"shape", MShape},     {"dtype", MDtype},         {"view", MViewFn},
      {"reshape", MReshape}, {"transpose", MTranspose}, {"t", MT},
      {"permute", MPermute}, {"narrow", MNarrow},       {"select", MSelect},
      {"squeeze", MSqueeze}, {"unsqueeze", MUnsqueeze}, {nullptr, nullptr},
  };
  SetFuncs(L, methods);
}

}  // namespace vt::lua
