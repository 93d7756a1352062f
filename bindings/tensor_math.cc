// vt.Tensor arithmetic: elementwise unary and binary operations (tensor or number on either
// side, with Python's promotion of numbers), dtype conversions (double, float, ..., to),
// reductions (sum, mean, all, any, norm) and max/min, and the arithmetic metamethods.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "bindings/lua_support.h"
#include "bindings/tensor.h"
#include "bindings/tensor_support.h"
#include "runtime/common/error.h"
#include "runtime/tensor/dtype.h"

namespace vt::lua {

// ConvertChecked (tensor_support.h): C++ leaves converting a float with no integer of the
// target type undefined, and x86 CPUs, ARM CPUs and GPUs give different integers for it, so
// two parties computing alike would part there.
at::Tensor ConvertChecked(const at::Tensor& t, at::ScalarType type) {
  if (at::isFloatingType(t.scalar_type()) && at::isIntegralType(type, /*includeBool=*/false) &&
      t.numel() > 0) {
    double lo = 0, hi = 0;  // the open range whose values truncate to a value of `type`
    switch (type) {
      case at::kByte:
        lo = -1.0, hi = 256.0;
        break;
      case at::kChar:
        lo = -129.0, hi = 128.0;
        break;
      case at::kShort:
        lo = -32769.0, hi = 32768.0;
        break;
      case at::kInt:
        lo = -2147483649.0, hi = 2147483648.0;
        break;
      default:
        lo = -0x1p63, hi = 0x1p63;
        break;  // (-2^63 - 1 rounds to -2^63 in a double)
    }
    const at::Tensor d = t.to(at::kDouble);
    const double mn = d.min().item<double>(), mx = d.max().item<double>();
    const bool low_ok = type == at::kLong ? mn >= lo : mn > lo;
    if (!(low_ok && mx < hi)) {
      const double bad = !(mn == mn) || !(mx == mx) ? NAN : !low_ok ? mn : mx;
      char value[32];
      std::snprintf(value, sizeof value, "%.17g", bad);
      throw Error("a value with no " + DtypeName(type) + " (NaN, an infinity or out of " +
                  "range) cannot be converted: C++ leaves it undefined, and CPUs and GPUs give " +
                  "different integers; got " + value);
    }
  }
  return t.to(type);
}

namespace {

// A Lua number as a 0-d "wrapped number" tensor, which promotes like a Python scalar
// (int64 tensor + 2.5 gives float64; float32 tensor * 2 stays float32).
at::Tensor WrappedNumber(lua_State* L, int idx) {
  at::Tensor t = at::scalar_tensor(CheckScalar(L, idx), at::kDouble);
  if (lua_type(L, idx) == LUA_TBOOLEAN) t = at::scalar_tensor(CheckScalar(L, idx), at::kBool);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// A tensor or a number operand.
at::Tensor Operand(lua_State* L, int idx) {
  if (at::Tensor* t = TestTensor(L, idx)) return *t;
  if (lua_type(L, idx) == LUA_TNUMBER || lua_type(L, idx) == LUA_TBOOLEAN)
    return WrappedNumber(L, idx);
  ArgError(L, idx, std::string("vt.Tensor or number expected, got ") + luaL_typename(L, idx));
  return {};
}

// Unary tensor -> tensor methods that take no arguments.
#define VT_UNARY(NAME, EXPR)                    \
  int M_##NAME(lua_State* L) {                  \
    at::Tensor& t = CheckTensor(L, 1);          \
    return Protect(L, "vt.tensor." #NAME, [&] { \
      PushTensor(L, EXPR);                      \
      return 1;                                 \
    });                                         \
  }
VT_UNARY(contiguous, t.contiguous())
VT_UNARY(clone, t.clone())
VT_UNARY(flatten, t.flatten())
VT_UNARY(neg, t.neg())
VT_UNARY(abs, t.abs())
VT_UNARY(sqrt, t.sqrt())
VT_UNARY(exp, t.exp())
VT_UNARY(log, t.log())
VT_UNARY(tanh, t.tanh())
VT_UNARY(sigmoid, t.sigmoid())
VT_UNARY(relu, t.relu())
VT_UNARY(floor, t.floor())
VT_UNARY(ceil, t.ceil())
VT_UNARY(double, t.to(at::kDouble))
VT_UNARY(float, t.to(at::kFloat))
VT_UNARY(long, ConvertChecked(t, at::kLong))
VT_UNARY(byte, ConvertChecked(t, at::kByte))
VT_UNARY(bool, t.to(at::kBool))
#undef VT_UNARY

// Binary elementwise methods and metamethods (tensor or number on either side).
#define VT_BINARY(NAME, OP)                                    \
  int M_##NAME(lua_State* L) {                                 \
    if (lua_gettop(L) < 2) ArgError(L, 2, "operand expected"); \
    at::Tensor a = Operand(L, 1), b = Operand(L, 2);           \
    return Protect(L, "vt.tensor." #NAME, [&] {                \
      PushTensor(L, OP(a, b));                                 \
      return 1;                                                \
    });                                                        \
  }
VT_BINARY(add, at::add)
VT_BINARY(sub, at::sub)
VT_BINARY(mul, at::mul)
VT_BINARY(div, at::div)
VT_BINARY(pow, at::pow)
VT_BINARY(eq, at::eq)
VT_BINARY(ne, at::ne)
VT_BINARY(lt, at::lt)
VT_BINARY(le, at::le)
VT_BINARY(gt, at::gt)
VT_BINARY(ge, at::ge)
VT_BINARY(matmul, at::matmul)
VT_BINARY(maximum, at::maximum)
VT_BINARY(minimum, at::minimum)
#undef VT_BINARY

int MUnm(lua_State* L) { return M_neg(L); }

// Reductions: no dimension -> a Lua number; with a dimension -> a tensor.
int Reduce(lua_State* L, const char* api, at::Tensor (*all)(const at::Tensor&),
           at::Tensor (*along)(const at::Tensor&, int64_t, bool)) {
  at::Tensor& t = CheckTensor(L, 1);
  if (lua_isnoneornil(L, 2)) {
    return Protect(L, api, [&] {
      PushScalarValue(L, all(t));
      return 1;
    });
  }
  int64_t dim = CheckDim(L, 2, t);
  bool keepdim = lua_toboolean(L, 3);
  return Protect(L, api, [&] {
    PushTensor(L, along(t, dim, keepdim));
    return 1;
  });
}

at::Tensor SumAll(const at::Tensor& t) { return t.sum(); }
at::Tensor SumDim(const at::Tensor& t, int64_t d, bool k) { return t.sum(d, k); }
at::Tensor MeanAll(const at::Tensor& t) { return t.mean(); }
at::Tensor MeanDim(const at::Tensor& t, int64_t d, bool k) { return t.mean(d, k); }
at::Tensor AllAll(const at::Tensor& t) { return t.all(); }
at::Tensor AllDim(const at::Tensor& t, int64_t d, bool k) { return t.all(d, k); }
at::Tensor AnyAll(const at::Tensor& t) { return t.any(); }
at::Tensor AnyDim(const at::Tensor& t, int64_t d, bool k) { return t.any(d, k); }
at::Tensor NormAll(const at::Tensor& t) { return t.norm(); }
at::Tensor NormDim(const at::Tensor& t, int64_t d, bool k) { return at::norm(t, 2, {d}, k); }
int MSum(lua_State* L) { return Reduce(L, "vt.tensor.sum", SumAll, SumDim); }
int MMean(lua_State* L) { return Reduce(L, "vt.tensor.mean", MeanAll, MeanDim); }
int MAll(lua_State* L) { return Reduce(L, "vt.tensor.all", AllAll, AllDim); }
int MAny(lua_State* L) { return Reduce(L, "vt.tensor.any", AnyAll, AnyDim); }
int MNorm(lua_State* L) { return Reduce(L, "vt.tensor.norm", NormAll, NormDim); }

// max/min: no dimension -> a number; with one -> values and 1-based indices.
int Extreme(lua_State* L, const char* api, bool is_max) {
  at::Tensor& t = CheckTensor(L, 1);
  if (lua_isnoneornil(L, 2)) {
    return Protect(L, api, [&] {
      if (t.numel() == 0) throw Error("empty tensor has no " + std::string(is_max ? "max" : "min"));
      PushScalarValue(L, is_max ? t.max() : t.min());
      return 1;
    });
  }
  int64_t dim = CheckDim(L, 2, t);
  bool keepdim = lua_toboolean(L, 3);
  return Protect(L, api, [&] {
    auto [values, indices] = is_max ? t.max(dim, keepdim) : t.min(dim, keepdim);
    PushTensor(L, values);
    PushTensor(L, indices + 1);
    return 2;
  });
}
int MMax(lua_State* L) { return Extreme(L, "vt.tensor.max", true); }
int MMin(lua_State* L) { return Extreme(L, "vt.tensor.min", false); }

int MTo(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  const char* api = "vt.tensor.to";
  at::ScalarType type = ParseDtype(L, api, CheckString(L, 2));
  return Protect(L, api, [&] {
    PushTensor(L, ConvertChecked(t, type));
    return 1;
  });
}
}  // namespace

void AddMathMethods(lua_State* L) {
  const luaL_Reg methods[] = {
      {"contiguous", M_contiguous},
      {"clone", M_clone},
      {"flatten", M_flatten},
      {"neg", M_neg},
      {"abs", M_abs},
      {"sqrt", M_sqrt},
      {"exp", M_exp},
      {"log", M_log},
      {"tanh", M_tanh},
      {"sigmoid", M_sigmoid},
      {"relu", M_relu},
      {"floor", M_floor},
      {"ceil", M_ceil},
      {"double", M_double},
      {"float", M_float},
      {"long", M_long},
      {"byte", M_byte},
      {"bool", M_bool},
      {"to", MTo},
      {"add", M_add},
      {"sub", M_sub},
      {"mul", M_mul},
      {"div", M_div},
      {"pow", M_pow},
      {"eq", M_eq},
      {"ne", M_ne},
      {"lt", M_lt},
      {"le", M_le},
      {"gt", M_gt},
      {"ge", M_ge},
      {"matmul", M_matmul},
      {"maximum", M_maximum},
      {"minimum", M_minimum},
      {"sum", MSum},
      {"mean", MMean},
      {"all", MAll},
      {"any", MAny},
      {"norm", MNorm},
      {"max", MMax},
      {"min", MMin},
      {nullptr, nullptr},
  };
  SetFuncs(L, methods);
}

void AddMathMetamethods(lua_State* L) {
  const luaL_Reg metamethods[] = {
      {"__add", M_add}, {"__sub", M_sub}, {"__mul", M_mul},   {"__div", M_div},
      {"__pow", M_pow}, {"__unm", MUnm},  {nullptr, nullptr},
  };
  SetFuncs(L, metamethods);
}

}  // namespace vt::lua
