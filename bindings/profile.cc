// vt.profiles, vt.profile, vt.set_profile and vt.ops: device profiles and the kernels whose
// summation order they choose.
#include "runtime/profile/profile.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include <functional>

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "bindings/tensor.h"
#include "runtime/common/error.h"
#include "runtime/nn/reduce.h"

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
  const std::string why = p.Unavailable();
  lua_pushboolean(L, why.empty());
  lua_setfield(L, -2, "available");
  if (!why.empty()) {
    lua_pushstring(L, why.c_str());
    lua_setfield(L, -2, "unavailable");
  }
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
    lua_pushstring(L, AtenCpuCapability().c_str());
    lua_setfield(L, -2, "aten_capability");
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

// The optional {grad = g} table at `idx`: the gradient of the op's output to propagate.
at::Tensor OptGrad(lua_State* L, int idx, const char* api) {
  at::Tensor grad;
  if (!CheckOptions(L, idx, api, {"grad"})) return grad;
  lua_getfield(L, idx, "grad");
  if (!lua_isnil(L, -1)) grad = CheckTensor(L, lua_gettop(L));
  lua_pop(L, 1);
  return grad;
}

// Pushes op(inputs) and, when `grad` is defined, the gradients of the floating-point inputs
// (in order) for that output gradient, all computed under the current profile.
int PushOpWithGrads(lua_State* L, const char* api, std::vector<at::Tensor> inputs,
                    const at::Tensor& grad,
                    const std::function<at::Tensor(const std::vector<at::Tensor>&)>& op) {
  return Protect(L, api, [&] {
    at::AutoGradMode enable(grad.defined());
    std::vector<at::Tensor> wrt;
    for (auto& t : inputs) {
      if (grad.defined() && at::isFloatingType(t.scalar_type())) {
        t = t.detach().clone().requires_grad_(true);
        wrt.push_back(t);
      }
    }
    at::Tensor y = op(inputs);
    if (!grad.defined()) {
      PushTensor(L, y.detach());
      return 1;
    }
    if (!grad.sizes().equals(y.sizes())) {
      throw Error("option 'grad' must have the output's shape " + c10::str(y.sizes()) + ", got " +
                  c10::str(grad.sizes()));
    }
    auto grads = torch::autograd::grad({y}, wrt, {grad.to(y.scalar_type())});
    PushTensor(L, y.detach());
    for (const auto& g : grads) PushTensor(L, g);
    return 1 + static_cast<int>(grads.size());
  });
}

int OpsSoftmax(lua_State* L) {
  at::Tensor& x = CheckTensor(L, 1);
  at::Tensor grad = OptGrad(L, 2, "vt.ops.softmax");
  return PushOpWithGrads(L, "vt.ops.softmax", {x}, grad,
                         [](const auto& in) { return nn::SoftmaxOp(in[0], "softmax"); });
}

int OpsLogSoftmax(lua_State* L) {
  at::Tensor& x = CheckTensor(L, 1);
  at::Tensor grad = OptGrad(L, 2, "vt.ops.log_softmax");
  return PushOpWithGrads(L, "vt.ops.log_softmax", {x}, grad,
                         [](const auto& in) { return nn::LogSoftmaxOp(in[0], "log_softmax"); });
}

int OpsLayerNorm(lua_State* L) {
  at::Tensor& x = CheckTensor(L, 1);
  at::Tensor& w = CheckTensor(L, 2);
  at::Tensor& b = CheckTensor(L, 3);
  at::Tensor grad = OptGrad(L, 4, "vt.ops.layer_norm");
  return PushOpWithGrads(L, "vt.ops.layer_norm", {x, w, b}, grad, [](const auto& in) {
    return nn::LayerNormOp(in[0], in[1], in[2], 1e-5, "layer_norm");
  });
}

int OpsBatchNorm(lua_State* L) {
  at::Tensor& x = CheckTensor(L, 1);
  at::Tensor& w = CheckTensor(L, 2);
  at::Tensor& b = CheckTensor(L, 3);
  at::Tensor grad = OptGrad(L, 4, "vt.ops.batch_norm");
  return PushOpWithGrads(L, "vt.ops.batch_norm", {x, w, b}, grad, [](const auto& in) {
    return nn::BatchNormTrainOp(in[0], in[1], in[2], 1e-5, "batch_norm").y;
  });
}

int OpsEmbedding(lua_State* L) {
  at::Tensor& w = CheckTensor(L, 1);
  at::Tensor& indices = CheckTensor(L, 2);
  at::Tensor grad = OptGrad(L, 3, "vt.ops.embedding");
  if (indices.scalar_type() != at::kLong)
    Fail(L, "vt.ops.embedding", "indices must be an int64 tensor");
  if (w.dim() != 2) Fail(L, "vt.ops.embedding", "weight must be [rows, dim]");
  if (indices.numel() > 0 &&
      (indices.min().item<int64_t>() < 0 || indices.max().item<int64_t>() >= w.size(0))) {
    Fail(L, "vt.ops.embedding",
         ("indices must be in [0, " + std::to_string(w.size(0)) + ")").c_str());
  }
  return PushOpWithGrads(L, "vt.ops.embedding", {w, indices}, grad,
                         [](const auto& in) { return nn::EmbeddingOp(in[0], in[1]); });
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
      {"softmax", OpsSoftmax},
      {"log_softmax", OpsLogSoftmax},
      {"layer_norm", OpsLayerNorm},
      {"batch_norm", OpsBatchNorm},
      {"embedding", OpsEmbedding},
      {nullptr, nullptr},
  };
  lua_newtable(L);
  SetFuncs(L, ops);
  lua_setfield(L, -2, "ops");
}

}  // namespace vt::lua
