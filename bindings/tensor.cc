// vt.tensor: LibTorch tensors in Lua. Dimensions and indices are 1-based as in Torch7
// (negative values count from the end); ranges in slices are inclusive.
#include "bindings/tensor.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "bindings/lua_support.h"
#include "runtime/common/error.h"
#include "runtime/random/philox.h"
#include "runtime/tensor/dtype.h"
#include "runtime/tensor/format.h"
#include "runtime/tensor/npy.h"

namespace vt::lua {
namespace {

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

// at::Scalar from a Lua number or boolean at idx.
at::Scalar CheckScalar(lua_State* L, int idx) {
  if (lua_type(L, idx) == LUA_TBOOLEAN) return at::Scalar(static_cast<bool>(lua_toboolean(L, idx)));
  return at::Scalar(CheckNumber(L, idx));
}

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
  if (lua_type(L, idx) == LUA_TNUMBER || lua_type(L, idx) == LUA_TBOOLEAN) return WrappedNumber(L, idx);
  ArgError(L, idx, std::string("vt.Tensor or number expected, got ") + luaL_typename(L, idx));
  return {};
}

// Converts a 1-based (or negative) dimension argument to a 0-based one.
int64_t CheckDim(lua_State* L, int arg, const at::Tensor& t) {
  int64_t d = CheckInteger(L, arg);
  int64_t n = std::max<int64_t>(t.dim(), 1);
  if (d == 0 || d > n || d < -n) {
    ArgError(L, arg, "dimension " + std::to_string(d) + " out of range for a " + std::to_string(t.dim()) +
                         "-d tensor (use 1.." + std::to_string(n) + " or -1..-" + std::to_string(n) + ")");
  }
  return d > 0 ? d - 1 : d + n;
}

// Converts a 1-based (or negative) index into a 0-based position along a dimension of `size`.
int64_t ResolveIndex(lua_State* L, const char* api, int64_t index, int64_t size, int64_t dim) {
  int64_t pos = index > 0 ? index - 1 : size + index;
  if (index == 0 || pos < 0 || pos >= size) {
    Fail(L, api, "index " + std::to_string(index) + " out of range for dimension " +
                     std::to_string(dim + 1) + " of size " + std::to_string(size));
  }
  return pos;
}

// Shape from varargs numbers starting at `first`, or from one table at `first`. Returns the
// index of the first argument after the shape.
int CheckShape(lua_State* L, int first, std::vector<int64_t>* shape) {
  if (lua_istable(L, first)) {
    int n = static_cast<int>(lua_objlen(L, first));
    for (int i = 1; i <= n; ++i) {
      lua_rawgeti(L, first, i);
      double v = lua_tonumber(L, -1);
      if (lua_type(L, -1) != LUA_TNUMBER || v < 0 || v != std::floor(v) || v > kMaxExactInteger) {
        ArgError(L, first, "shape must hold non-negative integers");
      }
      shape->push_back(static_cast<int64_t>(v));
      lua_pop(L, 1);
    }
    return first + 1;
  }
  int i = first;
  while (lua_type(L, i) == LUA_TNUMBER) {
    int64_t v = CheckInteger(L, i);
    if (v < 0) ArgError(L, i, "sizes must be non-negative");
    shape->push_back(v);
    ++i;
  }
  if (i == first) ArgError(L, first, "shape expected (numbers or a table of numbers)");
  return i;
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

at::ScalarType OptDtype(lua_State* L, int opts, const char* api, at::ScalarType fallback) {
  auto name = OptString(L, opts, api, "dtype");
  return name ? ParseDtype(L, api, *name) : fallback;
}

// Pushes a 0-d tensor's value as a Lua number or boolean.
void PushScalarValue(lua_State* L, const at::Tensor& t) {
  if (t.scalar_type() == at::kBool) {
    lua_pushboolean(L, t.item<bool>());
  } else if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) {
    lua_pushnumber(L, static_cast<lua_Number>(t.item<int64_t>()));
  } else {
    lua_pushnumber(L, t.item<double>());
  }
}

// Pushes a tensor, or its value if it has no dimensions (as element access does).
void PushTensorOrValue(lua_State* L, const at::Tensor& t) {
  if (t.dim() == 0) {
    PushScalarValue(L, t);
  } else {
    PushTensor(L, t);
  }
}

// ---- construction from nested tables ----

struct Flattener {
  lua_State* L;
  const std::vector<int64_t>& shape;
  std::vector<double> values;
  bool saw_float = false;
  bool saw_bool = false;
  bool saw_number = false;

  void Walk(int depth, const std::string& path) {
    // Table at the top of the stack.
    int64_t n = static_cast<int64_t>(lua_objlen(L, -1));
    if (n != shape[depth]) {
      throw Error("ragged nested table: " + (path.empty() ? std::string("top level") : "element " + path) +
                  " has " + std::to_string(n) + " entries, expected " + std::to_string(shape[depth]));
    }
    for (int64_t i = 1; i <= n; ++i) {
      lua_rawgeti(L, -1, static_cast<int>(i));
      std::string here = path + "[" + std::to_string(i) + "]";
      if (depth + 1 < static_cast<int64_t>(shape.size())) {
        if (!lua_istable(L, -1)) throw Error("element " + here + " is a " + luaL_typename(L, -1) + ", expected a table");
        Walk(depth + 1, here);
      } else if (lua_type(L, -1) == LUA_TNUMBER) {
        double v = lua_tonumber(L, -1);
        saw_number = true;
        if (v != std::floor(v)) saw_float = true;
        values.push_back(v);
      } else if (lua_type(L, -1) == LUA_TBOOLEAN) {
        saw_bool = true;
        values.push_back(lua_toboolean(L, -1) ? 1.0 : 0.0);
      } else {
        throw Error("element " + here + " is a " + std::string(luaL_typename(L, -1)) +
                    ", expected a number or boolean");
      }
      lua_pop(L, 1);
    }
  }
};

at::Tensor FromTable(lua_State* L, int idx, std::optional<at::ScalarType> dtype) {
  std::vector<int64_t> shape;
  lua_pushvalue(L, idx);
  int depth = 0;
  while (lua_istable(L, -1)) {
    int n = static_cast<int>(lua_objlen(L, -1));
    shape.push_back(n);
    if (n == 0) break;
    lua_rawgeti(L, -1, 1);
    ++depth;
  }
  lua_pop(L, depth + 1);
  Flattener f{L, shape, {}};
  lua_pushvalue(L, idx);
  f.Walk(0, "");
  lua_pop(L, 1);
  if (f.saw_bool && f.saw_number) throw Error("cannot mix booleans and numbers in one tensor");
  at::ScalarType type = dtype ? *dtype : (f.saw_bool ? at::kBool : at::kDouble);
  at::Tensor values = at::from_blob(f.values.data(), {static_cast<int64_t>(f.values.size())},
                                    at::TensorOptions().dtype(at::kDouble));
  return values.to(type).reshape(shape).clone();
}

// ---- vt.tensor functions ----

int TensorNew(lua_State* L) {
  // Called as vt.tensor(data, opts): argument 1 is the vt.tensor table itself (__call).
  const char* api = "vt.tensor";
  CheckOptions(L, 3, api, {"dtype"});
  std::optional<at::ScalarType> dtype;
  if (auto name = OptString(L, 3, api, "dtype")) dtype = ParseDtype(L, api, *name);
  return Protect(L, api, [&] {
    if (at::Tensor* src = TestTensor(L, 2)) {
      PushTensor(L, src->to(dtype ? *dtype : src->scalar_type()).clone());
    } else if (lua_type(L, 2) == LUA_TNUMBER || lua_type(L, 2) == LUA_TBOOLEAN) {
      at::Tensor t = at::scalar_tensor(CheckScalar(L, 2), lua_type(L, 2) == LUA_TBOOLEAN ? at::kBool : at::kDouble);
      PushTensor(L, dtype ? t.to(*dtype) : t);
    } else if (lua_istable(L, 2)) {
      PushTensor(L, FromTable(L, 2, dtype));
    } else {
      ArgError(L, 1, std::string("table, number or vt.Tensor expected, got ") + luaL_typename(L, 2));
    }
    return 1;
  });
}

template <at::Tensor (*Make)(at::IntArrayRef, at::TensorOptions)>
int Factory(lua_State* L, const char* api) {
  std::vector<int64_t> shape;
  int opts = CheckShape(L, 1, &shape);
  CheckOptions(L, opts, api, {"dtype"});
  at::ScalarType type = OptDtype(L, opts, api, at::kDouble);
  return Protect(L, api, [&] {
    PushTensor(L, Make(shape, at::TensorOptions().dtype(type)));
    return 1;
  });
}

at::Tensor MakeZeros(at::IntArrayRef s, at::TensorOptions o) { return at::zeros(s, o); }
at::Tensor MakeOnes(at::IntArrayRef s, at::TensorOptions o) { return at::ones(s, o); }
int TensorZeros(lua_State* L) { return Factory<MakeZeros>(L, "vt.tensor.zeros"); }
int TensorOnes(lua_State* L) { return Factory<MakeOnes>(L, "vt.tensor.ones"); }

int TensorFull(lua_State* L) {
  const char* api = "vt.tensor.full";
  std::vector<int64_t> shape;
  CheckTable(L, 1);
  CheckShape(L, 1, &shape);
  at::Scalar value = CheckScalar(L, 2);
  CheckOptions(L, 3, api, {"dtype"});
  at::ScalarType type = OptDtype(L, 3, api, lua_type(L, 2) == LUA_TBOOLEAN ? at::kBool : at::kDouble);
  return Protect(L, api, [&] {
    PushTensor(L, at::full(shape, value, at::TensorOptions().dtype(type)));
    return 1;
  });
}

int TensorArange(lua_State* L) {
  const char* api = "vt.tensor.arange";
  int nums = 0;
  while (lua_type(L, nums + 1) == LUA_TNUMBER) ++nums;
  if (nums < 1 || nums > 3) ArgError(L, 1, "expected arange(stop), arange(start, stop) or arange(start, stop, step)");
  double start = 0, stop = 0, step = 1;
  if (nums == 1) {
    stop = lua_tonumber(L, 1);
  } else {
    start = lua_tonumber(L, 1);
    stop = lua_tonumber(L, 2);
    if (nums == 3) step = lua_tonumber(L, 3);
  }
  if (step == 0) ArgError(L, 3, "step must not be zero");
  bool integral = start == std::floor(start) && stop == std::floor(stop) && step == std::floor(step);
  CheckOptions(L, nums + 1, api, {"dtype"});
  at::ScalarType type = OptDtype(L, nums + 1, api, integral ? at::kLong : at::kDouble);
  return Protect(L, api, [&] {
    at::Tensor t = integral ? at::arange(static_cast<int64_t>(start), static_cast<int64_t>(stop),
                                         static_cast<int64_t>(step), at::TensorOptions().dtype(at::kLong))
                            : at::arange(start, stop, step, at::TensorOptions().dtype(at::kDouble));
    PushTensor(L, t.to(type));
    return 1;
  });
}

template <bool kNormal>
int RandomFactory(lua_State* L, const char* api) {
  std::vector<int64_t> shape;
  int opts = CheckShape(L, 1, &shape);
  CheckOptions(L, opts, api, {"dtype", "seed"});
  auto seed = OptInteger(L, opts, api, "seed");
  if (!seed || *seed < 0) {
    Fail(L, api, "option 'seed' is required: an integer >= 0 (random values are a pure function of it)");
  }
  at::ScalarType type = OptDtype(L, opts, api, at::kDouble);
  return Protect(L, api, [&] {
    uint64_t s = static_cast<uint64_t>(*seed);
    uint32_t stream = static_cast<uint32_t>(RandomStream::kUser);
    PushTensor(L, kNormal ? NormalTensor(shape, type, s, stream) : UniformTensor(shape, type, s, stream));
    return 1;
  });
}
int TensorRandn(lua_State* L) { return RandomFactory<true>(L, "vt.tensor.randn"); }
int TensorRand(lua_State* L) { return RandomFactory<false>(L, "vt.tensor.rand"); }

int TensorLoad(lua_State* L) {
  std::string path = CheckString(L, 1);
  return Protect(L, "vt.tensor.load", [&] {
    PushTensor(L, LoadNpy(path));
    return 1;
  });
}

int TensorIsTensor(lua_State* L) {
  lua_pushboolean(L, TestTensor(L, 1) != nullptr);
  return 1;
}

// ---- methods ----

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

// Unary tensor -> tensor methods that take no arguments.
#define VT_UNARY(NAME, EXPR)                         \
  int M_##NAME(lua_State* L) {                       \
    at::Tensor& t = CheckTensor(L, 1);               \
    return Protect(L, "vt.tensor." #NAME, [&] {      \
      PushTensor(L, EXPR);                           \
      return 1;                                      \
    });                                              \
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
VT_UNARY(long, t.to(at::kLong))
VT_UNARY(byte, t.to(at::kByte))
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

int MItem(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  return Protect(L, "vt.tensor.item", [&] {
    if (t.numel() != 1) throw Error("item() needs exactly one element, tensor has " + std::to_string(t.numel()));
    PushScalarValue(L, t.reshape({}));
    return 1;
  });
}

int MTo(lua_State* L) {
  at::Tensor& t = CheckTensor(L, 1);
  const char* api = "vt.tensor.to";
  at::ScalarType type = ParseDtype(L, api, CheckString(L, 2));
  return Protect(L, api, [&] {
    PushTensor(L, t.to(type));
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
  return luaL_error(L, "vt.tensor: '<' and '<=' cannot compare tensors elementwise in Lua 5.1; "
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

// ---- indexing: t[i], t[{i, {a, b}, {}}], and assignment ----

// Applies a key (number or table of per-dimension selectors) to `t`. Returns the view.
at::Tensor ApplyIndex(lua_State* L, const char* api, const at::Tensor& t, int key) {
  if (lua_type(L, key) == LUA_TNUMBER) {
    if (t.dim() == 0) Fail(L, api, "cannot index a 0-d tensor");
    double raw = lua_tonumber(L, key);
    if (raw != std::floor(raw)) Fail(L, api, "index must be an integer");
    return t.select(0, ResolveIndex(L, api, static_cast<int64_t>(raw), t.size(0), 0));
  }
  int n = static_cast<int>(lua_objlen(L, key));
  if (n > t.dim()) {
    Fail(L, api, "too many indices (" + std::to_string(n) + ") for a " + std::to_string(t.dim()) + "-d tensor");
  }
  at::Tensor view = t;
  int64_t dim = 0;  // current dimension in `view`
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, key, i);
    int64_t original_dim = i - 1;
    if (lua_type(L, -1) == LUA_TNUMBER) {
      double raw = lua_tonumber(L, -1);
      if (raw != std::floor(raw)) Fail(L, api, "index must be an integer");
      view = view.select(dim, ResolveIndex(L, api, static_cast<int64_t>(raw), view.size(dim), original_dim));
    } else if (lua_istable(L, -1)) {
      int parts = static_cast<int>(lua_objlen(L, -1));
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
      if (last < first) Fail(L, api, "empty range {" + std::to_string(first + 1) + ", " + std::to_string(last + 1) + "}");
      view = view.narrow(dim, first, last - first + 1);
      ++dim;
    } else {
      Fail(L, api, std::string("index entries must be numbers or {first, last} ranges, got ") + luaL_typename(L, -1));
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

const luaL_Reg kMethods[] = {
    {"dim", MDim},          {"numel", MNumel},       {"size", MSize},
    {"shape", MShape},      {"dtype", MDtype},       {"view", MViewFn},
    {"reshape", MReshape},  {"transpose", MTranspose}, {"t", MT},
    {"permute", MPermute},  {"narrow", MNarrow},     {"select", MSelect},
    {"squeeze", MSqueeze},  {"unsqueeze", MUnsqueeze}, {"contiguous", M_contiguous},
    {"clone", M_clone},     {"flatten", M_flatten},  {"neg", M_neg},
    {"abs", M_abs},         {"sqrt", M_sqrt},        {"exp", M_exp},
    {"log", M_log},         {"tanh", M_tanh},        {"sigmoid", M_sigmoid},
    {"relu", M_relu},       {"floor", M_floor},      {"ceil", M_ceil},
    {"double", M_double},   {"float", M_float},      {"long", M_long},
    {"byte", M_byte},       {"bool", M_bool},        {"to", MTo},
    {"add", M_add},         {"sub", M_sub},          {"mul", M_mul},
    {"div", M_div},         {"pow", M_pow},          {"eq", M_eq},
    {"ne", M_ne},           {"lt", M_lt},            {"le", M_le},
    {"gt", M_gt},           {"ge", M_ge},            {"matmul", M_matmul},
    {"maximum", M_maximum}, {"minimum", M_minimum},  {"sum", MSum},
    {"mean", MMean},        {"all", MAll},           {"any", MAny},
    {"norm", MNorm},        {"max", MMax},           {"min", MMin},
    {"item", MItem},        {"totable", MTotable},   {"equal", MEqual},
    {"allclose", MAllclose}, {"save", MSave},        {"fill", MFill},
    {"zero", MZero},        {"copy", MCopy},         {"is_contiguous", MIsContiguous},
    {nullptr, nullptr},
};

const luaL_Reg kMetamethods[] = {
    {"__index", MIndex},   {"__newindex", MNewIndex}, {"__tostring", MToString},
    {"__len", MLen},       {"__add", M_add},          {"__sub", M_sub},
    {"__mul", M_mul},      {"__div", M_div},          {"__pow", M_pow},
    {"__unm", MUnm},       {"__eq", MEqMeta},         {"__lt", MOrderMeta},
    {"__le", MOrderMeta},  {"__gc", DestroyUserdata<at::Tensor>},
    {nullptr, nullptr},
};

const luaL_Reg kFunctions[] = {
    {"zeros", TensorZeros}, {"ones", TensorOnes},   {"full", TensorFull},
    {"arange", TensorArange}, {"randn", TensorRandn}, {"rand", TensorRand},
    {"load", TensorLoad},   {"is_tensor", TensorIsTensor},
    {nullptr, nullptr},
};

}  // namespace

void PushTensor(lua_State* L, at::Tensor t) { PushUserdata<at::Tensor>(L, std::move(t), kTensorMeta); }

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
  SetFuncs(L, kMetamethods);
  lua_newtable(L);
  SetFuncs(L, kMethods);
  lua_setfield(L, -2, "methods");
  lua_pushstring(L, kTensorMeta);
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);

  lua_newtable(L);  // vt.tensor
  SetFuncs(L, kFunctions);
  lua_newtable(L);  // its metatable: vt.tensor(data, opts)
  lua_pushstring(L, "tensor");
  lua_pushcclosure(L, TensorNew, 1);
  lua_setfield(L, -2, "__call");
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "tensor");
}

}  // namespace vt::lua
