// vt.models, vt.optim, vt.spec, vt.train: the description of a run of the rounded engine.
//
// vt.models.* and vt.optim.* return plain tables (checked when a spec is made); vt.spec
// turns them, a data set and the run settings into a Spec. Trainers and auditors that run a
// spec are in runner.cc; what the two files share is in train_support.h. vt.train compares
// two runs' stores.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "bindings/store_support.h"
#include "bindings/train_support.h"
#include "runtime/common/error.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/runner.h"
#include "runtime/train/spec_check.h"

namespace vt::lua {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// ---- vt.models.* and vt.optim.*: tagged option tables ----

// Copies the options table at 1 into a new table with `tag_key = tag`, after checking keys.
int TaggedTable(lua_State* L, const char* api, const char* tag_key, const char* tag,
                std::initializer_list<const char*> valid) {
  CheckOptions(L, 1, api, valid);
  lua_newtable(L);
  if (!lua_isnoneornil(L, 1)) {
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_settable(L, -4);
    }
  }
  lua_pushstring(L, tag);
  lua_setfield(L, -2, tag_key);
  return 1;
}

int ModelMlp(lua_State* L) {
  return TaggedTable(L, "vt.models.mlp", "type", "mlp",
                     {"input_shape", "hidden", "classes", "dropout"});
}
int ModelResNet(lua_State* L) {
  return TaggedTable(L, "vt.models.resnet", "type", "resnet",
                     {"depth", "width", "in_channels", "classes"});
}
int ModelGpt2(lua_State* L) {
  return TaggedTable(L, "vt.models.gpt2", "type", "gpt2",
                     {"layers", "d_model", "heads", "vocab", "context", "dropout"});
}
int OptimSgd(lua_State* L) {
  return TaggedTable(
      L, "vt.optim.sgd", "kind", "sgd",
      {"lr", "momentum", "nesterov", "weight_decay", "schedule", "warmup", "min_factor"});
}
int OptimAdamW(lua_State* L) {
  return TaggedTable(
      L, "vt.optim.adamw", "kind", "adamw",
      {"lr", "beta1", "beta2", "eps", "weight_decay", "schedule", "warmup", "min_factor"});
}

// ---- vt.spec ----

// Field `key` of the table at `idx` as a canonical string (numbers as %.17g, integers plain,
// booleans true/false, arrays of integers comma-separated); nullopt if absent.
std::optional<std::string> FieldString(lua_State* L, int idx, const char* api, const char* key) {
  lua_getfield(L, idx, key);
  std::optional<std::string> out;
  switch (lua_type(L, -1)) {
    case LUA_TNIL:
      break;
    case LUA_TNUMBER: {
      double v = lua_tonumber(L, -1);
      out = v == std::floor(v) && std::fabs(v) < 9007199254740992.0
                ? std::to_string(static_cast<int64_t>(v))
                : Num(v);
      break;
    }
    case LUA_TBOOLEAN:
      out = lua_toboolean(L, -1) ? "true" : "false";
      break;
    case LUA_TSTRING:
      out = lua_tostring(L, -1);
      break;
    case LUA_TTABLE: {
      std::string list;
      for (int i = 1; i <= static_cast<int>(lua_objlen(L, -1)); ++i) {
        lua_rawgeti(L, -1, i);
        if (lua_type(L, -1) != LUA_TNUMBER)
          Fail(L, api, std::string("field '") + key + "' must be a list of integers");
        list += (i > 1 ? "," : "") + std::to_string(static_cast<int64_t>(lua_tonumber(L, -1)));
        lua_pop(L, 1);
      }
      out = list;
      break;
    }
    default:
      Fail(L, api,
           std::string("field '") + key + "' has an unsupported type " + luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return out;
}

// vt.nn.model{...}: {type = "lua", source = text, args = {name = number | string | boolean}}.
// The source and arguments enter the spec as model.source and model.arg.<name>.
void ReadLuaModel(lua_State* L, int model, std::map<std::string, std::string>* f) {
  const char* api = "vt.spec";
  lua_getfield(L, model, "source");
  if (lua_type(L, -1) != LUA_TSTRING)
    Fail(L, api, "option 'model' of type lua must come from vt.nn.model (it has no source)");
  size_t len = 0;
  const char* source = lua_tolstring(L, -1, &len);
  if (len > (size_t{1} << 20)) Fail(L, api, "a model's source may have at most 1 MiB");
  (*f)["model.source"] = train::EscapeSpecText(std::string_view(source, len));
  lua_pop(L, 1);
  lua_getfield(L, model, "args");
  if (lua_istable(L, -1)) {
    const int args = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, args) != 0) {
      if (lua_type(L, -2) != LUA_TSTRING) Fail(L, api, "model args must have names as keys");
      const std::string key = std::string("model.arg.") + lua_tostring(L, -2);
      switch (lua_type(L, -1)) {
        case LUA_TNUMBER:
          (*f)[key] = Num(lua_tonumber(L, -1));
          break;
        case LUA_TBOOLEAN:
          (*f)[key] = lua_toboolean(L, -1) ? "true" : "false";
          break;
        case LUA_TSTRING: {
          size_t n = 0;
          const char* text = lua_tolstring(L, -1, &n);
          (*f)[key] = "\"" + train::EscapeSpecText(std::string_view(text, n)) + "\"";
          break;
        }
        default:
          Fail(L, api, key + " must be a number, string or boolean");
      }
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

void ReadWindow(lua_State* L, int idx, const char* api, const std::string& prefix,
                std::map<std::string, std::string>* f) {
  CheckOptions(L, idx, api, {"band", "alpha"});
  if (auto band = FieldString(L, idx, api, "band")) (*f)[prefix + ".band"] = *band;
  if (auto alpha = FieldString(L, idx, api, "alpha")) (*f)[prefix + ".alpha"] = *alpha;
}

int SpecNew(lua_State* L) {
  const char* api = "vt.spec";
  CheckTable(L, 1);
  CheckOptions(L, 1, api,
               {"model", "data", "optim", "batch", "steps", "seed", "round", "checkpoint_every",
                "init", "shards"});
  std::string init_path = OptString(L, 1, api, "init").value_or("");
  std::map<std::string, std::string> f;
  // Model.
  lua_getfield(L, 1, "model");
  if (!lua_istable(L, -1))
    Fail(L, api, "option 'model' is required: a table from vt.models.mlp/resnet/gpt2");
  int model = lua_gettop(L);
  lua_getfield(L, model, "type");
  const std::string type = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
  lua_pop(L, 1);
  if (type != "mlp" && type != "resnet" && type != "gpt2" && type != "lua") {
    Fail(L, api,
         "option 'model' must come from vt.models.mlp, vt.models.resnet, vt.models.gpt2 or "
         "vt.nn.model");
  }
  f["model.type"] = type;
  if (type == "lua") {
    ReadLuaModel(L, model, &f);
  } else {
    // Fields the script leaves out take the model's own defaults (runtime/nn/models.h), so a
    // spec made from vt.models.gpt2{layers = 4} names every field.
    for (const auto& [key, value] : nn::DefaultModelFields(type)) {
      f["model." + key] = FieldString(L, model, api, key.c_str()).value_or(value);
    }
  }
  // Data.
  lua_getfield(L, 1, "data");
  DatasetPtr* data = static_cast<DatasetPtr*>(luaL_testudata(L, -1, kDatasetMeta));
  if (data == nullptr) Fail(L, api, "option 'data' is required: a data set from vt.data.*");
  // Optimizer.
  lua_getfield(L, 1, "optim");
  int optim = lua_gettop(L);
  // Fields the script leaves out take the optimizer's own defaults (OptimizerConfig, the one
  // home of them), spelled as its Canonical() spells them.
  std::string kind = "sgd";
  if (lua_istable(L, optim)) {
    kind = FieldString(L, optim, api, "kind").value_or("sgd");
  } else if (!lua_isnil(L, optim)) {
    Fail(L, api, "option 'optim' must be a table from vt.optim.sgd or vt.optim.adamw");
  }
  if (kind != "sgd" && kind != "adamw")
    Fail(L, api, "optim.kind must be sgd or adamw, got '" + kind + "'");
  optim::OptimizerConfig defaults;
  defaults.kind = kind;
  std::map<std::string, std::string> o = defaults.Canonical();
  if (lua_istable(L, optim)) {
    for (const char* key : {"lr", "momentum", "nesterov", "weight_decay", "schedule", "warmup",
                            "min_factor", "beta1", "beta2", "eps"}) {
      auto v = FieldString(L, optim, api, key);
      if (!v) continue;
      if (!o.count(key)) Fail(L, api, std::string("optim.") + key + " is not an option of " + kind);
      o[key] = *v;
    }
  }
  for (const auto& [k, v] : o) f["optim." + k] = v;
  // Run settings.
  f["batch"] = FieldString(L, 1, api, "batch").value_or("32");
  auto steps = FieldString(L, 1, api, "steps");
  if (!steps) Fail(L, api, "option 'steps' is required");
  f["steps"] = *steps;
  f["seed"] = FieldString(L, 1, api, "seed").value_or("0");
  f["checkpoint_every"] = FieldString(L, 1, api, "checkpoint_every").value_or("10");
  // Data-parallel shards of each batch (runtime/train/engine.h); 1, the default, is not written.
  if (auto shards = FieldString(L, 1, api, "shards"); shards && *shards != "1")
    f["shards"] = *shards;
  // Rounding: bits, a default window, per-kind windows, per-boundary windows.
  const nn::WindowTable default_windows;  // the engine's defaults: b = 32, the paper's window
  f["round.bits"] = std::to_string(default_windows.bits);
  for (int k = 0; k < 4; ++k) {
    const std::string prefix =
        std::string("round.") + nn::KindName(static_cast<nn::BoundaryKind>(k));
    f[prefix + ".band"] = Num(default_windows.by_kind[k].band);
    f[prefix + ".alpha"] = Num(default_windows.by_kind[k].alpha);
  }
  lua_getfield(L, 1, "round");
  int round = lua_gettop(L);
  if (lua_istable(L, round)) {
    CheckOptions(L, round, "vt.spec round",
                 {"bits", "band", "alpha", "fwd", "bwd", "grad", "update", "boundaries"});
    if (auto bits = FieldString(L, round, api, "bits")) f["round.bits"] = *bits;
    for (const char* kind : {"fwd", "bwd", "grad", "update"}) {
      if (auto band = FieldString(L, round, api, "band"))
        f[std::string("round.") + kind + ".band"] = *band;
      if (auto alpha = FieldString(L, round, api, "alpha"))
        f[std::string("round.") + kind + ".alpha"] = *alpha;
    }
    for (const char* kind : {"fwd", "bwd", "grad", "update"}) {
      lua_getfield(L, round, kind);
      if (lua_istable(L, -1))
        ReadWindow(L, lua_gettop(L), "vt.spec round", std::string("round.") + kind, &f);
      lua_pop(L, 1);
    }
    lua_getfield(L, round, "boundaries");
    if (lua_istable(L, -1)) {
      int table = lua_gettop(L);
      lua_pushnil(L);
      while (lua_next(L, table) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING || !lua_istable(L, -1))
          Fail(L, api, "round.boundaries maps boundary names to {band=, alpha=}");
        ReadWindow(L, lua_gettop(L), "vt.spec round.boundaries",
                   std::string("round.boundary.") + lua_tostring(L, -2), &f);
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  } else if (!lua_isnil(L, round)) {
    Fail(L, api,
         "option 'round' must be a table {bits=, band=, alpha=, fwd=, bwd=, grad=, update=, "
         "boundaries=}");
  }
  DatasetPtr d = *data;
  return Protect(L, api, [&] {
    const std::string name = d->name();
    f["data.kind"] = name.substr(0, name.find(':'));
    f["data.name"] = name;
    f["data.digest"] = d->digest();
    for (const auto& [k, v] : d->settings()) f["data." + k] = v;
    if (type == "lua") {
      // The module tree and state the source builds enter the spec with it.
      std::map<std::string, std::string> model_fields;
      for (const auto& [k, v] : f)
        if (k.rfind("model.", 0) == 0) model_fields[k.substr(6)] = v;
      const uint64_t seed = std::stoull(f["seed"]);
      auto built = train::ModelBuilderFor("lua")(model_fields, seed, train::kMaxModelValues);
      for (const auto& [k, v] : built->config()) f["model." + k] = v;
    }
    if (!init_path.empty()) {
      // Imported initial weights: the spec commits to their digest (model.init).
      auto model = train::Spec::FromFields(f).BuildModel();
      train::LoadSafetensorsInto(init_path, model->NamedState());
      f["model.init"] = train::StateDigestHex(model->NamedState());
    }
    auto spec = std::make_shared<train::Spec>(train::Spec::FromFields(f));
    const std::string misfit = train::ModelDataMisfit(*spec, *d);
    if (!misfit.empty()) throw Error("the model does not fit the data: " + misfit);
    PushUserdata<SpecPtr>(L, spec, kSpecMeta);
    return 1;
  });
}

SpecPtr& CheckSpec(lua_State* L, int idx) {
  return CheckUserdata<SpecPtr>(L, idx, kSpecMeta, "vt.Spec");
}

int SpecParse(lua_State* L) {
  std::string bytes = CheckString(L, 1);
  return Protect(L, "vt.spec.parse", [&] {
    PushUserdata<SpecPtr>(L, std::make_shared<train::Spec>(train::Spec::Parse(bytes)), kSpecMeta);
    return 1;
  });
}

int SpecHash(lua_State* L) {
  lua_pushstring(L, CheckSpec(L, 1)->HashHex().c_str());
  return 1;
}

int SpecCanonical(lua_State* L) {
  std::string s = CheckSpec(L, 1)->Canonical();
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

int SpecFields(lua_State* L) {
  lua_newtable(L);
  for (const auto& [k, v] : CheckSpec(L, 1)->fields()) {
    lua_pushstring(L, v.c_str());
    lua_setfield(L, -2, k.c_str());
  }
  return 1;
}

int SpecGet(lua_State* L) {
  SpecPtr& s = CheckSpec(L, 1);
  std::string key = CheckString(L, 2);
  auto it = s->fields().find(key);
  if (it == s->fields().end()) {
    lua_pushnil(L);
  } else {
    lua_pushstring(L, it->second.c_str());
  }
  return 1;
}

int SpecParameters(lua_State* L) {
  SpecPtr& s = CheckSpec(L, 1);
  return Protect(L, "vt.spec.parameters", [&] {
    lua_pushnumber(L, static_cast<lua_Number>(s->BuildModel()->ParameterCount()));
    return 1;
  });
}

int SpecToString(lua_State* L) {
  SpecPtr& s = CheckSpec(L, 1);
  const auto& f = s->fields();
  lua_pushfstring(L, "vt.Spec(%s on %s, %s steps of %s, seed %s, b=%s, hash %s...)",
                  f.at("model.type").c_str(), f.at("data.name").c_str(), f.at("steps").c_str(),
                  f.at("batch").c_str(), f.at("seed").c_str(), f.at("round.bits").c_str(),
                  s->HashHex().substr(0, 12).c_str());
  return 1;
}

// vt.train.first_differing_leaf(store_a, run_a, store_b, run_b) -> leaf index or nil
int FirstDifferingLeafFn(lua_State* L) {
  StorePtr& a = CheckUserdata<StorePtr>(L, 1, kStoreMeta, "vt.Store");
  std::string run_a = CheckString(L, 2);
  StorePtr& b = CheckUserdata<StorePtr>(L, 3, kStoreMeta, "vt.Store");
  std::string run_b = CheckString(L, 4);
  return Protect(L, "vt.train.first_differing_leaf", [&] {
    auto leaf = train::FirstDifferingLeaf(*a, run_a, *b, run_b);
    if (leaf) {
      lua_pushnumber(L, static_cast<lua_Number>(*leaf));
    } else {
      lua_pushnil(L);
    }
    return 1;
  });
}

}  // namespace

// Registers vt.Spec and sets vt.models, vt.optim, vt.spec and vt.train (runner.cc adds the
// runners).
void OpenTrain(lua_State* L) {
  const luaL_Reg spec_methods[] = {
      {"hash", SpecHash}, {"canonical", SpecCanonical},   {"fields", SpecFields},
      {"get", SpecGet},   {"parameters", SpecParameters}, {nullptr, nullptr},
  };
  const luaL_Reg spec_meta[] = {
      {"__gc", DestroyUserdata<SpecPtr>}, {"__tostring", SpecToString}, {nullptr, nullptr}};
  RegisterClass(L, kSpecMeta, spec_methods, spec_meta);

  const luaL_Reg models[] = {
      {"mlp", ModelMlp}, {"resnet", ModelResNet}, {"gpt2", ModelGpt2}, {nullptr, nullptr}};
  lua_newtable(L);
  SetFuncs(L, models);
  lua_setfield(L, -2, "models");
  const luaL_Reg optim[] = {{"sgd", OptimSgd}, {"adamw", OptimAdamW}, {nullptr, nullptr}};
  lua_newtable(L);
  SetFuncs(L, optim);
  lua_setfield(L, -2, "optim");
  // vt.spec{...} and vt.spec.parse(bytes)
  lua_newtable(L);
  const luaL_Reg spec_funcs[] = {{"parse", SpecParse}, {nullptr, nullptr}};
  SetFuncs(L, spec_funcs);
  lua_newtable(L);
  lua_pushstring(L, "spec");
  lua_pushcclosure(
      L,
      [](lua_State* L) -> int {
        lua_remove(L, 1);  // the vt.spec table itself (__call)
        return SpecNew(L);
      },
      1);
  lua_setfield(L, -2, "__call");
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "spec");
  const luaL_Reg train_funcs[] = {{"first_differing_leaf", FirstDifferingLeafFn},
                                  {nullptr, nullptr}};
  lua_newtable(L);
  SetFuncs(L, train_funcs);
  lua_setfield(L, -2, "train");
}

}  // namespace vt::lua
