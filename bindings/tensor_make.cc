// vt.tensor's constructors: vt.tensor(data) from nested tables, numbers or tensors, and
// vt.tensor.zeros, ones, full, arange, randn and rand (pure functions of a seed), load (.npy)
// and is_tensor.
#include <ATen/ATen.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/tensor.h"
#include "bindings/tensor_support.h"
#include "runtime/common/error.h"
#include "runtime/random/philox.h"
#include "runtime/tensor/npy.h"

namespace vt::lua {
namespace {

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

// Shape from varargs numbers starting at `first`, or from one table at `first`. Returns the
// index of the first argument after the shape.
int CheckShape(lua_State* L, int first, std::vector<int64_t>* shape) {
  if (lua_istable(L, first)) {
    int n = ArrayLength(L, first);
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

at::ScalarType OptDtype(lua_State* L, int opts, const char* api, at::ScalarType fallback) {
  auto name = OptString(L, opts, api, "dtype");
  return name ? ParseDtype(L, api, *name) : fallback;
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
    int64_t n = static_cast<int64_t>(ArrayLength(L, -1));
    if (n != shape[depth]) {
      throw Error(
          "ragged nested table: " + (path.empty() ? std::string("top level") : "element " + path) +
          " has " + std::to_string(n) + " entries, expected " + std::to_string(shape[depth]));
    }
    for (int64_t i = 1; i <= n; ++i) {
      lua_rawgeti(L, -1, static_cast<int>(i));
      std::string here = path + "[" + std::to_string(i) + "]";
      if (depth + 1 < static_cast<int64_t>(shape.size())) {
        if (!lua_istable(L, -1))
          throw Error("element " + here + " is a " + luaL_typename(L, -1) + ", expected a table");
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
  // At most ATen's 64 dimensions: Walk recurses once per level (a table nested 60000 deep,
  // one element each, overflowed the stack).
  constexpr int kMaxDims = 64;
  while (lua_istable(L, -1)) {
    if (depth >= kMaxDims) {
      lua_pop(L, depth + 1);
      throw Error("a nested table of more than " + std::to_string(kMaxDims) +
                  " levels (a tensor has at most 64 dimensions)");
    }
    int n = ArrayLength(L, -1);
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
  return ConvertChecked(values, type).reshape(shape).clone();
}

// ---- vt.tensor functions ----

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
  at::ScalarType type =
      OptDtype(L, 3, api, lua_type(L, 2) == LUA_TBOOLEAN ? at::kBool : at::kDouble);
  return Protect(L, api, [&] {
    PushTensor(L, at::full(shape, value, at::TensorOptions().dtype(type)));
    return 1;
  });
}

int TensorArange(lua_State* L) {
  const char* api = "vt.tensor.arange";
  int nums = 0;
  while (lua_type(L, nums + 1) == LUA_TNUMBER) ++nums;
  if (nums < 1 || nums > 3)
    ArgError(L, 1, "expected arange(stop), arange(start, stop) or arange(start, stop, step)");
  double start = 0, stop = 0, step = 1;
  if (nums == 1) {
    stop = lua_tonumber(L, 1);
  } else {
    start = lua_tonumber(L, 1);
    stop = lua_tonumber(L, 2);
    if (nums == 3) step = lua_tonumber(L, 3);
  }
  if (step == 0) ArgError(L, 3, "step must not be zero");
  bool integral =
      start == std::floor(start) && stop == std::floor(stop) && step == std::floor(step);
  CheckOptions(L, nums + 1, api, {"dtype"});
  at::ScalarType type = OptDtype(L, nums + 1, api, integral ? at::kLong : at::kDouble);
  return Protect(L, api, [&] {
    at::Tensor t =
        integral ? at::arange(static_cast<int64_t>(start), static_cast<int64_t>(stop),
                              static_cast<int64_t>(step), at::TensorOptions().dtype(at::kLong))
                 : at::arange(start, stop, step, at::TensorOptions().dtype(at::kDouble));
    PushTensor(L, ConvertChecked(t, type));
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
    Fail(L, api,
         "option 'seed' is required: an integer >= 0 (random values are a pure function of it)");
  }
  at::ScalarType type = OptDtype(L, opts, api, at::kDouble);
  return Protect(L, api, [&] {
    uint64_t s = static_cast<uint64_t>(*seed);
    uint32_t stream = static_cast<uint32_t>(RandomStream::kUser);
    PushTensor(
        L, kNormal ? NormalTensor(shape, type, s, stream) : UniformTensor(shape, type, s, stream));
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
}  // namespace

int TensorNew(lua_State* L) {
  // Called as vt.tensor(data, opts): argument 1 is the vt.tensor table itself (__call).
  const char* api = "vt.tensor";
  CheckOptions(L, 3, api, {"dtype"});
  std::optional<at::ScalarType> dtype;
  if (auto name = OptString(L, 3, api, "dtype")) dtype = ParseDtype(L, api, *name);
  return Protect(L, api, [&] {
    if (at::Tensor* src = TestTensor(L, 2)) {
      PushTensor(L, ConvertChecked(*src, dtype ? *dtype : src->scalar_type()).clone());
    } else if (lua_type(L, 2) == LUA_TNUMBER || lua_type(L, 2) == LUA_TBOOLEAN) {
      at::Tensor t = at::scalar_tensor(CheckScalar(L, 2),
                                       lua_type(L, 2) == LUA_TBOOLEAN ? at::kBool : at::kDouble);
      PushTensor(L, dtype ? ConvertChecked(t, *dtype) : t);
    } else if (lua_istable(L, 2)) {
      PushTensor(L, FromTable(L, 2, dtype));
    } else {
      ArgError(L, 1,
               std::string("table, number or vt.Tensor expected, got ") + luaL_typename(L, 2));
    }
    return 1;
  });
}

void AddMakeFunctions(lua_State* L) {
  const luaL_Reg funcs[] = {
      {"zeros", TensorZeros},   {"ones", TensorOnes},          {"full", TensorFull},
      {"arange", TensorArange}, {"randn", TensorRandn},        {"rand", TensorRand},
      {"load", TensorLoad},     {"is_tensor", TensorIsTensor}, {nullptr, nullptr},
  };
  SetFuncs(L, funcs);
}

}  // namespace vt::lua
