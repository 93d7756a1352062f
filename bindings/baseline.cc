// vt.torch_baseline{spec =, data =, dtype = "float64"}: a spec's model in plain LibTorch
// (runtime/train/baseline.h), the reference scripts/bench/training.lua measures vtrun against.
// Methods: b:step() -> loss (the next step), b:steps_run().
#include "runtime/train/baseline.h"

#include <ATen/ATen.h>

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "bindings/train_support.h"

namespace vt::lua {
namespace {

constexpr const char* kBaselineMeta = "vt.TorchBaseline";
using BaselinePtr = std::shared_ptr<train::TorchBaseline>;

int BaselineNew(lua_State* L) {
  const char* api = "vt.torch_baseline";
  CheckTable(L, 1);
  CheckOptions(L, 1, api, {"spec", "data", "dtype"});
  lua_getfield(L, 1, "spec");
  auto* spec = static_cast<SpecPtr*>(luaL_testudata(L, -1, kSpecMeta));
  if (spec == nullptr) Fail(L, api, "option 'spec' is required: a vt.spec");
  lua_getfield(L, 1, "data");
  auto* data = static_cast<DatasetPtr*>(luaL_testudata(L, -1, kDatasetMeta));
  if (data == nullptr) Fail(L, api, "option 'data' is required: the spec's data set");
  const std::string dtype = OptString(L, 1, api, "dtype").value_or("float64");
  if (dtype != "float32" && dtype != "float64")
    Fail(L, api, "option 'dtype' must be float32 or float64, got '" + dtype + "'");
  SpecPtr s = *spec;
  DatasetPtr d = *data;
  return Protect(L, api, [&] {
    PushUserdata<BaselinePtr>(L,
                              std::make_shared<train::TorchBaseline>(
                                  *s, d, dtype == "float32" ? at::kFloat : at::kDouble),
                              kBaselineMeta);
    return 1;
  });
}

BaselinePtr& CheckBaseline(lua_State* L, int idx) {
  return CheckUserdata<BaselinePtr>(L, idx, kBaselineMeta, "vt.TorchBaseline");
}

int BaselineStep(lua_State* L) {
  BaselinePtr& b = CheckBaseline(L, 1);
  return Protect(L, "vt.TorchBaseline.step", [&] {
    lua_pushnumber(L, b->Step());
    return 1;
  });
}

int BaselineStepsRun(lua_State* L) {
  lua_pushnumber(L, static_cast<lua_Number>(CheckBaseline(L, 1)->steps_run()));
  return 1;
}

}  // namespace

void OpenBaseline(lua_State* L) {
  const luaL_Reg methods[] = {
      {"step", BaselineStep}, {"steps_run", BaselineStepsRun}, {nullptr, nullptr}};
  const luaL_Reg meta[] = {{"__gc", DestroyUserdata<BaselinePtr>}, {nullptr, nullptr}};
  RegisterClass(L, kBaselineMeta, methods, meta);
  const luaL_Reg funcs[] = {{"torch_baseline", BaselineNew}, {nullptr, nullptr}};
  SetFuncs(L, funcs);
}

}  // namespace vt::lua
