// Models written in Lua with vt.nn (scripts/vt/nn.lua): the C++ half.
//
// A Lua-defined model is built from its spec alone (model.source, model.arg.*), so a trainer,
// an auditor, a judge and every process-level profile or data-parallel rank rebuild the same
// model: LuaModel runs the source in a Lua state of its own (JIT off, so an instruction
// budget stops a source that never returns), with a sandboxed environment (no files, no
// clocks, no random numbers but vt.tensor's seeded ones, no bytecode), and its layers are the
// engine's own (runtime/nn/layers.h): the same boundaries, initial values and magnitudes as
// the built-in models.
//
// vt.core functions used by nn.lua: nn_make (a layer of the model being built), nn_call (its
// forward), nn_relu, nn_add, nn_fork, nn_gelu, nn_tanh, nn_sigmoid, nn_avgpool, nn_maxpool,
// nn_dropout, nn_tied, nn_training.
#include "bindings/nn.h"

#include <ATen/ATen.h>
#include <luajit.h>

#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bindings/host.h"
#include "bindings/kept_state.h"
#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "bindings/tensor.h"
#include "runtime/common/error.h"
#include "runtime/nn/autograd.h"
#include "runtime/nn/layers.h"
#include "runtime/nn/models.h"
#include "runtime/nn/reduce.h"
#include "runtime/train/spec.h"

namespace vt::lua {
namespace {

constexpr const char* kLayerMeta = "vt.nn.Layer";
constexpr const char* kModelKey = "vt.nn.model";  // registry: the LuaModel of this state
// Instructions a source may run while building the model, and per forward call.
constexpr int64_t kBuildBudget = int64_t{1} << 26;
constexpr int64_t kForwardBudget = int64_t{1} << 26;
constexpr int kHookEvery = 1 << 16;
constexpr const char* kForwardWhat = "the model's forward (vt.nn)";

struct Layer {
  std::shared_ptr<nn::Module> module;
  std::function<at::Tensor(const at::Tensor&)> forward;
};
using LayerPtr = std::shared_ptr<Layer>;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Allocation budget: what a source may allocate in Lua (strings, tables, closures) in one build
// or forward call. The instruction budget alone let a loop of `s = s .. s` copy gigabytes, and
// the collector never runs inside a call (LuaModel::Collect). Counted by the state's
// allocator: each call starts from the same collected state and makes the same allocations
// in every party, but for LuaJIT's internal string buffer, which grows once and is then
// reused (THREAT_MODEL.md, "Work outside the instruction budget").
constexpr size_t kAllocBudget = size_t{1} << 30;
constexpr const char* kAllocExceeded =
    "it allocated more than 1 GiB of Lua memory (strings, tables) in one call; a model source "
    "may allocate at most that in one build or forward";
struct AllocBudget {
  bool counting = false;
  bool exceeded = false;
  size_t allocated = 0;  // bytes allocated (grown) in this call
};
void* BudgetAlloc(void* ud, void* ptr, size_t old_size, size_t new_size) {
  auto* b = static_cast<AllocBudget*>(ud);
  if (new_size == 0) {
    std::free(ptr);
    return nullptr;
  }
  if (b->counting && new_size > old_size) {  // (old_size is 0 for a new block, as in Lua 5.1)
    b->allocated += new_size - old_size;
    if (b->allocated > kAllocBudget) {
      // Refused once; then the error unwinds with what it needs (its message, a traceback).
      b->counting = false;
      b->exceeded = true;
      return nullptr;
    }
  }
  return std::realloc(ptr, new_size);
}

// Instruction budget: the hook runs every kHookEvery instructions (the JIT is off in a model's
// state, so it always runs) and raises an error once the budget is spent.
int64_t g_budget_left = 0;  // models are built and run by one thread at a time
const char* g_budget_what = "";
void BudgetHook(lua_State* L, lua_Debug*) {
  g_budget_left -= kHookEvery;
  if (g_budget_left < 0) {
    luaL_error(L, "%s ran past its budget of 2^26 Lua instructions (a loop that never ends?)",
               g_budget_what);
  }
}

class LuaModel : public nn::Model {
 public:
  LuaModel(const std::map<std::string, std::string>& fields, uint64_t seed, double max_values)
      : seed_(seed), max_values_(max_values) {
    L_ = NewHostState(BudgetAlloc, &alloc_);
    try {
      Build(fields);
    } catch (...) {
      lua_close(L_);
      throw;
    }
  }
  ~LuaModel() override { lua_close(L_); }

  at::Tensor Forward(const at::Tensor& inputs) override {
    if (!broken_.empty()) throw Error(broken_);
    lua_State* L = L_;
    const int top = lua_gettop(L);
    at::Tensor result;
    try {
      lua_pushcfunction(L, Traceback);
      lua_rawgeti(L, LUA_REGISTRYINDEX, forward_ref_);
      lua_rawgeti(L, LUA_REGISTRYINDEX, root_ref_);
      PushTensor(L, inputs);
      Call(L, 2, kForwardWhat, kForwardBudget);
      at::Tensor* out = TestTensor(L, -1);
      if (out == nullptr) {
        const std::string got = luaL_typename(L, -1);
        throw Error(std::string(kForwardWhat) + " returned a " + got + ", not a tensor");
      }
      result = *out;
    } catch (const std::exception& e) {
      lua_settop(L, top);
      CheckKept(std::string(" (in a forward that then failed: ") + e.what() + ")");
      throw;
    }
    lua_settop(L, top);
    CheckKept("");
    return result;
  }

  std::string type() const override { return "lua"; }
  std::map<std::string, std::string> config() const override { return config_; }

  // A layer of the model, registered at `path` (its full dotted name); `values` is the number
  // of parameter and buffer values it will allocate, checked before it is made.
  LayerPtr AddLayer(const std::string& path, double values, const std::function<LayerPtr()>& make) {
    if (path.empty())
      throw Error("a layer with parameters cannot be the model itself; put it in a container");
    // A module path as bind() gives them: names of letters, digits and '_' joined by dots,
    // each made once (a source's own `make` could name any text, or a path twice).
    bool valid = path.front() != '.' && path.back() != '.' && path.find("..") == std::string::npos;
    for (char c : path)
      valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.');
    if (!valid)
      throw Error("a layer's path is names of letters, digits and '_' joined by dots, got '" +
                  path + "'");
    if (!made_paths_.insert(path).second)
      throw Error("two layers made at '" + path + "'; a module is made once, at its place");
    values_ += values;
    if (values_ > max_values_)
      throw Error(std::string("the model would have more parameter and buffer values than ") +
                  "the spec's " + "model.state.* declare (or vtrun's limit): over " +
                  Num(max_values_) + " at layer '" + path + "'");
    LayerPtr layer = make();
    RegisterModule(path, layer->module);
    return layer;
  }
  uint64_t seed() const { return seed_; }
  // Layers are made while the model is built (a forward that made one would add parameters
  // the checkpoints of earlier steps lack).
  bool building() const { return building_; }

 private:
  // After a forward, whether it returned or failed: refuses what it changed of what the model
  // keeps, and then every later forward too. The next forward would start from the change
  // and could put it back before its own check: a trainer's evaluation, say, that the
  // auditor never runs, would steer the next step unseen.
  void CheckKept(const std::string& failed) {
    try {
      kept_.Check(L_, kForwardWhat);
    } catch (const std::exception& changed) {
      broken_ = std::string(changed.what()) + failed + "; this model runs no more forwards";
      Collect();
      if (failed.empty()) throw Error(broken_);
      return;  // (the caller rethrows the forward's own error)
    }
    Collect();
  }

  // The collector never runs inside a build or a forward, so a source cannot see when it
  // runs (a weak table's entries vanish then); the host collects after each (about 30 us for
  // a small model's state), which also frees the tensors a forward dropped at once: the
  // collector sees only their handles' few bytes, and would otherwise leave a step's
  // activations to wait for the Lua heap to double.
  void Collect() {
    lua_gc(L_, LUA_GCCOLLECT, 0);
    lua_gc(L_, LUA_GCSTOP, 0);
  }

  // Calls the function below `nargs` arguments (a traceback handler below it) under an
  // instruction budget; leaves one result, or throws vt::Error with the Lua message.
  void Call(lua_State* L, int nargs, const char* what, int64_t budget) {
    g_budget_left = budget;
    g_budget_what = what;
    alloc_ = AllocBudget{true, false, 0};
    lua_sethook(L, BudgetHook, LUA_MASKCOUNT, kHookEvery);
    const int status = lua_pcall(L, nargs, 1, -(nargs + 2));
    lua_sethook(L, nullptr, 0, 0);
    const bool exceeded = alloc_.exceeded;
    alloc_ = AllocBudget{};
    if (status != 0) {
      std::string msg =
          lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object is not a string)";
      lua_pop(L, 2);
      if (exceeded) msg = kAllocExceeded;
      throw Error(std::string(what) + ": " + msg);
    }
    lua_remove(L, -2);  // the traceback handler
  }

  void Build(const std::map<std::string, std::string>& fields) {
    lua_State* L = L_;
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    lua_gc(L, LUA_GCSTOP, 0);
    lua_pushlightuserdata(L, this);
    lua_setfield(L, LUA_REGISTRYINDEX, kModelKey);
    auto source = fields.find("source");
    if (source == fields.end()) throw Error("spec: a model of type lua needs model.source");
    config_["source"] = source->second;
    const std::string code = train::UnescapeSpecText(source->second, "model.source");
    // nn._build(source, args) -> root, forward function, {path = description}
    lua_pushcfunction(L, Traceback);
    lua_getglobal(L, "require");
    lua_pushstring(L, "vt.nn");
    if (lua_pcall(L, 1, 1, 0) != 0)
      throw Error(std::string("loading vt.nn: ") + lua_tostring(L, -1));
    lua_getfield(L, -1, "_build");
    lua_remove(L, -2);
    lua_pushlstring(L, code.data(), code.size());
    lua_newtable(L);
    for (auto it = fields.lower_bound("arg."); it != fields.end(); ++it) {
      if (it->first.rfind("arg.", 0) != 0) break;
      PushArg(L, it->first.substr(4), it->second);
      lua_setfield(L, -2, it->first.substr(4).c_str());
      config_[it->first] = it->second;
    }
    building_ = true;
    Call(L, 2, "building the model from model.source", kBuildBudget);
    building_ = false;
    // The result: {root = module, forward = function, modules = {path = description},
    // env = the source's globals}.
    const int result = lua_gettop(L);
    lua_getfield(L, result, "root");
    root_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_getfield(L, result, "forward");
    forward_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_getfield(L, result, "env");
    const int env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_getfield(L, result, "modules");
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
      // (lua_tostring would turn a number key into text under lua_next, and return null for
      // a table: nn._build checks both, this keeps the host safe whatever it returns.)
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING) {
        lua_settop(L, result - 1);
        throw Error(
            "building the model from model.source: a module's path and description "
            "must be text");
      }
      const std::string path = lua_tostring(L, -2);
      config_[path.empty() ? "module" : "module." + path] = lua_tostring(L, -1);
      lua_pop(L, 1);
    }
    lua_settop(L, result - 1);
    Collect();
    kept_.Take(L, {{root_ref_, "the model"},
                   {env_ref, "the source's globals"},
                   {forward_ref_, "the forward"}});
    for (const auto& [name, t] : NamedParameters()) config_["state." + name] = Shape(*t);
    for (const auto& [name, t] : NamedBuffers()) config_["state." + name] = Shape(*t);
  }

  // model.arg.<name>: "quoted text", true/false, or a number as printf("%.17g") spells it.
  static void PushArg(lua_State* L, const std::string& name, const std::string& value) {
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      const std::string text = train::UnescapeSpecText(
          std::string_view(value).substr(1, value.size() - 2), "model.arg." + name);
      lua_pushlstring(L, text.data(), text.size());
    } else if (value == "true" || value == "false") {
      lua_pushboolean(L, value == "true");
    } else {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(v) || Num(v) != value)
        throw Error("spec: model.arg." + name + " must be \"text\", true, false or a number " +
                    "spelled as printf(\"%.17g\") spells it, got '" + value + "'");
      lua_pushnumber(L, v);
    }
  }

  static std::string Shape(const at::Tensor& t) {
    std::string out;
    for (int64_t d : t.sizes()) out += (out.empty() ? "" : ",") + std::to_string(d);
    return out;
  }

  lua_State* L_ = nullptr;
  uint64_t seed_;
  double max_values_;
  double values_ = 0;
  int root_ref_ = LUA_NOREF, forward_ref_ = LUA_NOREF;
  std::map<std::string, std::string> config_;
  bool building_ = false;
  std::set<std::string> made_paths_;  // the paths of the layers made (AddLayer)
  AllocBudget alloc_;                 // the state's allocator counts into it (BudgetAlloc)
  std::string broken_;  // why this model runs no more forwards (a failed one changed its state)
  KeptState kept_;      // what the model keeps between forward calls, checked after each
};

LuaModel* BuildingModel(lua_State* L, const char* api) {
  lua_getfield(L, LUA_REGISTRYINDEX, kModelKey);
  auto* model = static_cast<LuaModel*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  if (model == nullptr)
    Fail(L, api,
         "vt.nn layers get their parameters when a spec builds the model: describe it with "
         "vt.nn.model{file = ...} and train it through vt.spec");
  return model;
}

int64_t Size(lua_State* L, int arg, int64_t min) {
  const int64_t v = CheckInteger(L, arg);
  if (v < min || v > (int64_t{1} << 31))
    ArgError(L, arg,
             "must be an integer in [" + std::to_string(min) + ", 2^31], got " + std::to_string(v));
  return v;
}

// nn_make(kind, path, ...) -> layer
int NnMake(lua_State* L) {
  const char* api = "vt.nn";
  const std::string kind = CheckString(L, 1);
  const std::string path = CheckString(L, 2);
  LuaModel* model = BuildingModel(L, api);
  if (!model->building())
    Fail(L, api, "a layer is made while the model is built, not in a forward");
  const uint64_t seed = model->seed();
  auto wrap = [](auto m) {
    auto layer = std::make_shared<Layer>();
    layer->module = m;
    layer->forward = [m](const at::Tensor& x) { return m->Forward(x); };
    return layer;
  };
  std::function<LayerPtr()> make;
  double values = 0;
  if (kind == "Linear") {
    const int64_t in = Size(L, 3, 1), out = Size(L, 4, 1);
    const bool bias = lua_toboolean(L, 5);
    const double std = CheckNumber(L, 6);
    values = static_cast<double>(in) * out + (bias ? out : 0);
    make = [=] { return wrap(std::make_shared<nn::Linear>(in, out, bias, seed, path, std)); };
  } else if (kind == "Conv2d") {
    const int64_t in = Size(L, 3, 1), out = Size(L, 4, 1), k = Size(L, 5, 1);
    const int64_t stride = Size(L, 6, 1), padding = Size(L, 7, 0);
    const bool bias = lua_toboolean(L, 8);
    values = static_cast<double>(out) * in * k * k + (bias ? out : 0);
    make = [=] {
      return wrap(std::make_shared<nn::Conv2d>(in, out, k, stride, padding, bias, seed, path));
    };
  } else if (kind == "BatchNorm2d") {
    const int64_t c = Size(L, 3, 1);
    values = 4.0 * c;
    make = [=] { return wrap(std::make_shared<nn::BatchNorm2d>(c, path)); };
  } else if (kind == "LayerNorm") {
    const int64_t d = Size(L, 3, 1);
    values = 2.0 * d;
    make = [=] { return wrap(std::make_shared<nn::LayerNorm>(d, path)); };
  } else if (kind == "Embedding") {
    const int64_t n = Size(L, 3, 1), d = Size(L, 4, 1);
    const double std = CheckNumber(L, 5);
    values = static_cast<double>(n) * d;
    make = [=] { return wrap(std::make_shared<nn::Embedding>(n, d, seed, path, std)); };
  } else if (kind == "CausalSelfAttention") {
    const int64_t d = Size(L, 3, 1), heads = Size(L, 4, 1);
    const double dropout = CheckNumber(L, 5), proj_std = CheckNumber(L, 6);
    values = 4.0 * d * d + 4.0 * d;
    make = [=] {
      return wrap(
          std::make_shared<nn::CausalSelfAttention>(d, heads, dropout, seed, path, proj_std));
    };
  } else {
    ArgError(L, 1, "unknown layer kind '" + kind + "'");
  }
  return Protect(L, api, [&] {
    PushUserdata<LayerPtr>(L, model->AddLayer(path, values, make), kLayerMeta);
    return 1;
  });
}

int NnCall(lua_State* L) {
  LayerPtr& layer = CheckUserdata<LayerPtr>(L, 1, kLayerMeta, "vt.nn layer");
  at::Tensor x = CheckTensor(L, 2);
  return Protect(L, "vt.nn", [&] {
    PushTensor(L, layer->forward(x));
    return 1;
  });
}

template <at::Tensor (*Op)(const at::Tensor&)>
int Unary(lua_State* L) {
  at::Tensor x = CheckTensor(L, 1);
  return Protect(L, "vt.nn", [&] {
    PushTensor(L, Op(x));
    return 1;
  });
}

// Ops whose result passes boundary `name` (argument 2).
template <at::Tensor (*Op)(const at::Tensor&, const std::string&)>
int Named(lua_State* L) {
  at::Tensor x = CheckTensor(L, 1);
  const std::string name = CheckString(L, 2);
  return Protect(L, "vt.nn", [&] {
    PushTensor(L, Op(x, name));
    return 1;
  });
}

at::Tensor TanhBoundary(const at::Tensor& x, const std::string& name) {
  return nn::Boundary(at::tanh(x), name);
}
at::Tensor SigmoidBoundary(const at::Tensor& x, const std::string& name) {
  return nn::Boundary(at::sigmoid(x), name);
}

int NnAdd(lua_State* L) {
  at::Tensor a = CheckTensor(L, 1), b = CheckTensor(L, 2);
  return Protect(L, "vt.nn.F.add", [&] {
    if (a.sizes() == b.sizes()) {
      PushTensor(L, nn::AddOp(a, b));
    } else {
      // b broadcast over a's leading dimensions; its gradient sums in the profile's order.
      if (b.dim() > a.dim() || a.sizes().slice(a.dim() - b.dim()) != b.sizes())
        throw Error("shapes " + std::string(c10::str(a.sizes())) + " and " +
                    std::string(c10::str(b.sizes())) +
                    " do not add (b must equal a or a's trailing dimensions)");
      PushTensor(L, nn::AddBroadcastOp(a, b));
    }
    return 1;
  });
}

int NnFork(lua_State* L) {
  at::Tensor x = CheckTensor(L, 1);
  return Protect(L, "vt.nn.F.fork", [&] {
    auto [a, b] = nn::ForkOp(x);
    PushTensor(L, a);
    PushTensor(L, b);
    return 2;
  });
}

// Max pooling over non-overlapping k x k windows: pure selection (each input receives at most
// one gradient, so the backward pass sums nothing and needs no boundary).
int NnMaxPool(lua_State* L) {
  at::Tensor x = CheckTensor(L, 1);
  const int64_t k = Size(L, 2, 1);
  return Protect(L, "vt.nn.MaxPool2d", [&] {
    if (x.dim() != 4) throw Error("expected inputs [N, C, H, W], got " + c10::str(x.sizes()));
    PushTensor(L, at::max_pool2d(x, {k, k}, {k, k}));
    return 1;
  });
}

// x @ E^T with E the weight of embedding layer `layer` (GPT-2's language-model head shares the
// token embedding's weight), through boundary `name`; its input gradient is rounded at
// "name.dx" as a Linear's is.
int NnTied(lua_State* L) {
  at::Tensor x = CheckTensor(L, 1);
  LayerPtr& layer = CheckUserdata<LayerPtr>(L, 2, kLayerMeta, "vt.nn layer");
  const std::string name = CheckString(L, 3);
  auto embedding = std::dynamic_pointer_cast<nn::Embedding>(layer->module);
  if (!embedding) ArgError(L, 2, "TiedLinear shares the weight of an Embedding");
  return Protect(L, "vt.nn.TiedLinear", [&] {
    PushTensor(L, nn::Boundary(nn::LinearOp(nn::InputGrad(x, name + ".dx"), embedding->weight(),
                                            at::Tensor()),
                               name));
    return 1;
  });
}

int NnDropout(lua_State* L) {
  at::Tensor x = CheckTensor(L, 1);
  const double p = CheckNumber(L, 2);
  const std::string name = CheckString(L, 3);
  LuaModel* model = BuildingModel(L, "vt.nn.Dropout");
  return Protect(L, "vt.nn.Dropout", [&] {
    PushTensor(L, nn::Dropout(x, p, model->training(), name));
    return 1;
  });
}

int NnTraining(lua_State* L) {
  lua_pushboolean(L, BuildingModel(L, "vt.nn")->training());
  return 1;
}

// vt.core.nn_preview(source, args, chunkname) -> text, parameters: vt.nn.model's look at a
// source (its printed tree and parameter count), from nn._preview run in a Lua state of its
// own: sandboxed, locked and under the build budget as a spec's model state is, so that a
// source never runs in the caller's state (where the host's string library and tensor
// methods are within its reach and no budget stops it). `args` holds names to numbers, text
// or booleans (vt.nn.model checks them).
int NnPreview(lua_State* L) {
  size_t len = 0;
  const char* source = luaL_checklstring(L, 1, &len);
  luaL_checktype(L, 2, LUA_TTABLE);
  const std::string chunkname = luaL_optstring(L, 3, "=model.source");
  std::vector<std::pair<std::string, std::string>> text_args;
  std::vector<std::pair<std::string, double>> number_args;
  std::vector<std::pair<std::string, bool>> bool_args;
  lua_pushnil(L);
  while (lua_next(L, 2) != 0) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      const std::string key = lua_tostring(L, -2);
      if (lua_type(L, -1) == LUA_TSTRING) {
        text_args.emplace_back(key, lua_tostring(L, -1));
      } else if (lua_type(L, -1) == LUA_TNUMBER) {
        number_args.emplace_back(key, lua_tonumber(L, -1));
      } else if (lua_type(L, -1) == LUA_TBOOLEAN) {
        bool_args.emplace_back(key, lua_toboolean(L, -1) != 0);
      }
    }
    lua_pop(L, 1);
  }
  const std::string code(source, len);
  return Protect(L, "vt.nn.model", [&] {
    AllocBudget alloc;  // (outlives M: closed below)
    lua_State* M = NewHostState(BudgetAlloc, &alloc);
    std::string error, text;
    double parameters = 0;
    luaJIT_setmode(M, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    lua_gc(M, LUA_GCSTOP, 0);  // as in a spec's model state
    lua_pushcfunction(M, Traceback);
    lua_getglobal(M, "require");
    lua_pushstring(M, "vt.nn");
    if (lua_pcall(M, 1, 1, 0) != 0) {
      error = std::string("loading vt.nn: ") + lua_tostring(M, -1);
    } else {
      lua_getfield(M, -1, "_preview");
      lua_remove(M, -2);
      lua_pushlstring(M, code.data(), code.size());
      lua_newtable(M);
      for (const auto& [k, v] : text_args) {
        lua_pushlstring(M, v.data(), v.size());
        lua_setfield(M, -2, k.c_str());
      }
      for (const auto& [k, v] : number_args) {
        lua_pushnumber(M, v);
        lua_setfield(M, -2, k.c_str());
      }
      for (const auto& [k, v] : bool_args) {
        lua_pushboolean(M, v);
        lua_setfield(M, -2, k.c_str());
      }
      lua_pushlstring(M, chunkname.data(), chunkname.size());
      g_budget_left = kBuildBudget;
      g_budget_what = "building the model from its source";
      lua_sethook(M, BudgetHook, LUA_MASKCOUNT, kHookEvery);
      alloc = AllocBudget{true, false, 0};
      const int status = lua_pcall(M, 3, 1, -5);
      lua_sethook(M, nullptr, 0, 0);
      const bool exceeded = alloc.exceeded;
      alloc = AllocBudget{};
      if (status != 0) {
        error = exceeded ? std::string("building the model from its source: ") + kAllocExceeded
                : lua_type(M, -1) == LUA_TSTRING ? lua_tostring(M, -1)
                                                 : "(error object is not text)";
      } else {
        lua_getfield(M, -1, "text");
        if (lua_type(M, -1) == LUA_TSTRING) text = lua_tostring(M, -1);
        lua_pop(M, 1);
        lua_getfield(M, -1, "parameters");
        parameters = lua_tonumber(M, -1);
        lua_pop(M, 1);
      }
    }
    lua_close(M);
    if (!error.empty()) throw Error(error);
    lua_pushlstring(L, text.data(), text.size());
    lua_pushnumber(L, parameters);
    return 2;
  });
}

std::shared_ptr<nn::Model> BuildLuaModel(const std::map<std::string, std::string>& fields,
                                         uint64_t seed, double max_values) {
  return std::make_shared<LuaModel>(fields, seed, max_values);
}

}  // namespace

void OpenNn(lua_State* L) {
  static const bool registered = [] {
    train::RegisterModelType("lua", BuildLuaModel);
    return true;
  }();
  (void)registered;
  const luaL_Reg gc[] = {{"__gc", DestroyUserdata<LayerPtr>}, {nullptr, nullptr}};
  const luaL_Reg none[] = {{nullptr, nullptr}};
  RegisterClass(L, kLayerMeta, none, gc);
  const luaL_Reg funcs[] = {
      {"nn_make", NnMake},
      {"nn_call", NnCall},
      {"nn_relu", Unary<nn::ReluOp>},
      {"nn_fork", NnFork},
      {"nn_add", NnAdd},
      {"nn_gelu", Named<nn::Gelu>},
      {"nn_tanh", Named<TanhBoundary>},
      {"nn_sigmoid", Named<SigmoidBoundary>},
      {"nn_avgpool", Named<nn::GlobalAvgPool>},
      {"nn_maxpool", NnMaxPool},
      {"nn_dropout", NnDropout},
      {"nn_tied", NnTied},
      {"nn_training", NnTraining},
      {"nn_preview", NnPreview},
      {nullptr, nullptr},
  };
  SetFuncs(L, funcs);
}

}  // namespace vt::lua
