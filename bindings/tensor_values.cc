// vt.Tensor values: into Lua (item, totable, tostring, #t), comparisons of whole tensors
// (equal: bitwise; allclose; ==; and the refusal of < and <=), in-place writes (fill, zero,
// copy), and .npy files (save).
#include <ATen/ATen.h>

#include <cstring>
#include <string>

#include "bindings/lua_support.h"
#include "bindings/tensor.h"
#include "bindings/tensor_support.h"
#include "runtime/common/error.h"
#include "runtime/tensor/format.h"
#include "runtime/tensor/npy.h"

namespace vt::lua {
namespace {

int MItem(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  return Protect(L, "vt.tensor.item", [&] {
    if (t.numel() != 1)
      throw Error("item() needs exactly one element, tensor has " + std::to_string(t.numel()));
    PushScalarValue(L, t.reshape({}));
    return 1;
  });
}

void PushTable(lua_State* L, const at::Tensor& t) {
  if (t.dim() == 0) {
    PushScalarValue(L, t);
    return;
  }
  lua_createtable(L, static_cast<int>(t.size(0)), 0);
  if (t.dim() == 1) {
    at::Tensor v = t.scalar_type() == at::kBool ? t : t.to(at::kDouble).contiguous();
    for (int64_t i = 0; i < t.size(0); ++i) {
      if (t.scalar_type() == at::kBool) {
        lua_pushboolean(L, v[i].item<bool>());
      } else {
        lua_pushnumber(L, v.data_ptr<double>()[i]);
      }
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    return;
  }
  for (int64_t i = 0; i < t.size(0); ++i) {
    PushTable(L, t[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

int MTotable(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  return Protect(L, "vt.tensor.totable", [&] {
    PushTable(L, t.to(at::kCPU));
    return 1;
  });
}

// Bitwise equality: same dtype, same shape, same bytes (so -0 != +0 and NaN == same NaN).
bool BitwiseEqual(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || !a.sizes().equals(b.sizes())) return false;
  at::Tensor ca = a.to(at::kCPU).contiguous(), cb = b.to(at::kCPU).contiguous();
  size_t n = ca.numel() * ca.element_size();
  return n == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), n) == 0;
}

int MEqual(lua_State* L) {
  at::Tensor& a = CheckTensor(L, 1);
  at::Tensor& b = CheckTensor(L, 2);
  return Protect(L, "vt.tensor.equal", [&] {
    lua_pushboolean(L, BitwiseEqual(a, b));
    return 1;
  });
}

int MEqMeta(lua_State* L) {
  at::Tensor* a = TestTensor(L, 1);
  at::Tensor* b = TestTensor(L, 2);
  if (a == nullptr || b == nullptr) {
    lua_pushboolean(L, 0);
    return 1;
  }
  return Protect(L, "vt.tensor.__eq", [&] {
    lua_pushboolean(L, BitwiseEqual(*a, *b));
    return 1;
  });
}

int MOrderMeta(lua_State* L) {
  return luaL_error(L,
                    "vt.tensor: '<' and '<=' cannot compare tensors elementwise in Lua 5.1; "
                    "use a:lt(b), a:le(b), a:gt(b) or a:ge(b)");
}

int MAllclose(lua_State* L) {
  at::Tensor& a = CheckTensor(L, 1);
  at::Tensor& b = CheckTensor(L, 2);
  double rtol = lua_isnoneornil(L, 3) ? 1e-5 : CheckNumber(L, 3);
  double atol = lua_isnoneornil(L, 4) ? 1e-8 : CheckNumber(L, 4);
  return Protect(L, "vt.tensor.allclose", [&] {
    lua_pushboolean(L, at::allclose(a, b, rtol, atol));
    return 1;
  });
}

int MSave(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  std::string path = CheckString(L, 2);
  return Protect(L, "vt.tensor.save", [&] {
    SaveNpy(t, path);
    lua_settop(L, 1);
    return 1;
  });
}

int MFill(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  at::Scalar v = CheckScalar(L, 2);
  return Protect(L, "vt.tensor.fill", [&] {
    t.fill_(v);
    lua_settop(L, 1);
    return 1;
  });
}

int MZero(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  return Protect(L, "vt.tensor.zero", [&] {
    t.zero_();
    lua_settop(L, 1);
    return 1;
  });
}

int MCopy(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  at::Tensor& src = CheckTensor(L, 2);
  return Protect(L, "vt.tensor.copy", [&] {
    t.copy_(src);
    lua_settop(L, 1);
    return 1;
  });
}

int MIsContiguous(lua_State* L) {
  lua_pushboolean(L, CheckTensor(L, 1).is_contiguous());
  return 1;
}

int MToString(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  return Protect(L, "vt.tensor.__tostring", [&] {
    std::string s = FormatTensor(t);
    lua_pushlstring(L, s.data(), s.size());
    return 1;
  });
}

int MLen(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  lua_pushnumber(L, t.dim() == 0 ? 0 : static_cast<lua_Number>(t.size(0)));
  return 1;
}

}  // namespace

void AddValueMethods(lua_State* L) {
  const luaL_Reg methods[] = {
      {"item", MItem},         {"totable", MTotable}, {"equal", MEqual},
      {"allclose", MAllclose}, {"save", MSave},       {"fill", MFill},
      {"zero", MZero},         {"copy", MCopy},       {"is_contiguous", MIsContiguous},
      {nullptr, nullptr},
  };
  SetFuncs(L, methods);
}

void AddValueMetamethods(lua_State* L) {
  const luaL_Reg metamethods[] = {
      {"__tostring", MToString}, {"__len", MLen},      {"__eq", MEqMeta},
      {"__lt", MOrderMeta},      {"__le", MOrderMeta}, {nullptr, nullptr},
  };
  SetFuncs(L, metamethods);
}

}  // namespace vt::lua
