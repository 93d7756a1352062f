// Shared by the files that bind vt.tensor: tensor.cc (the userdata, and OpenTensor, which
// builds vt.tensor and the vt.Tensor metatable from the parts below), tensor_make.cc (making
// tensors), tensor_shape.cc (sizes and views), tensor_index.cc (t[i], t[{...}] and
// assignment), tensor_math.cc (elementwise operations, reductions, dtype conversions) and
// tensor_values.cc (values into Lua, comparisons, in-place writes, .npy files).
// Dimensions and indices are 1-based as in Torch7 (negative values count from the end);
// ranges in slices are inclusive.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <lua.hpp>
#include <string>

namespace vt::lua {

// at::Scalar from a Lua number or boolean at idx.
at::Scalar CheckScalar(lua_State* L, int idx);

// Converts a 1-based (or negative) dimension argument to a 0-based one.
int64_t CheckDim(lua_State* L, int arg, const at::Tensor& t);

// Converts a 1-based (or negative) index into a 0-based position along a dimension of `size`.
int64_t ResolveIndex(lua_State* L, const char* api, int64_t index, int64_t size, int64_t dim);

// t as `type`; throws vt::Error for a floating value with no integer of that type (NaN, an
// infinity, out of range), whose conversion C++ leaves undefined (CPUs and GPUs differ).
at::Tensor ConvertChecked(const at::Tensor& t, at::ScalarType type);

// The dtype named `name`, or a Lua error "api: ...".
at::ScalarType ParseDtype(lua_State* L, const char* api, const std::string& name);

// Pushes a 0-d tensor's value as a Lua number or boolean.
void PushScalarValue(lua_State* L, const at::Tensor& t);

// The parts of vt.tensor and vt.Tensor, each added to the table on top of the stack.
int TensorNew(lua_State* L);             // vt.tensor(data, opts), the __call of vt.tensor
void AddMakeFunctions(lua_State* L);     // vt.tensor.zeros, ones, full, arange, randn, rand, ...
void AddShapeMethods(lua_State* L);      // t:dim(), size, view, transpose, narrow, squeeze...
void AddIndexMetamethods(lua_State* L);  // __index, __newindex
void AddMathMethods(lua_State* L);       // t:add(), t:sum(), t:float(), t:to()...
void AddMathMetamethods(lua_State* L);   // __add, __sub, __mul, __div, __pow, __unm
void AddValueMethods(lua_State* L);      // t:item(), totable, equal, fill, save...
void AddValueMetamethods(lua_State* L);  // __tostring, __len, __eq, __lt, __le

}  // namespace vt::lua
