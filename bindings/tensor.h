// Tensor userdata shared by every binding that takes or returns tensors (vt.tensor, vt.round,
// the trainer...). A tensor userdata holds an at::Tensor (a reference-counted handle).
#pragma once

#include <ATen/core/Tensor.h>

#include <lua.hpp>

namespace vt::lua {

constexpr const char* kTensorMeta = "vt.Tensor";

// Pushes `t` as a vt.Tensor userdata.
void PushTensor(lua_State* L, at::Tensor t);

// The tensor at `idx`, or raises "bad argument #idx to 'fn' (vt.Tensor expected, got X)".
at::Tensor& CheckTensor(lua_State* L, int idx);

// The tensor at `idx`, or nullptr if the value is not a tensor.
at::Tensor* TestTensor(lua_State* L, int idx);

// Pushes the `vt.tensor` table (constructor and functions); called by the module opener.
void OpenTensor(lua_State* L);

}  // namespace vt::lua
