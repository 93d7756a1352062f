// vt.data: data sets (Fashion-MNIST, text corpora, synthetic, tensors a user brings) and their
// deterministic batches.
// Example indices and steps are 1-based in Lua.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <new>

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "bindings/tensor.h"
#include "runtime/common/error.h"
#include "runtime/data/sources.h"
#include "runtime/data/tensors.h"

namespace vt::lua {
namespace {

constexpr const char* kDatasetMeta = "vt.Dataset";
using DatasetPtr = std::shared_ptr<data::Dataset>;

DatasetPtr& CheckDataset(lua_State* L, int idx) {
  return CheckUserdata<DatasetPtr>(L, idx, kDatasetMeta, "vt.Dataset");
}

int PushDataset(lua_State* L, DatasetPtr d) {
  PushUserdata<DatasetPtr>(L, std::move(d), kDatasetMeta);
  return 1;
}

int FashionMnistFn(lua_State* L) {
  const char* api = "vt.data.fashion_mnist";
  CheckOptions(L, 1, api, {"dir", "split", "limit", "crop_padding", "flip", "normalize"});
  data::ImageOptions o;
  o.dir = OptString(L, 1, api, "dir").value_or(o.dir);
  o.split = OptString(L, 1, api, "split").value_or(o.split);
  o.limit = OptInteger(L, 1, api, "limit").value_or(o.limit);
  o.crop_padding = OptInteger(L, 1, api, "crop_padding").value_or(o.crop_padding);
  o.flip = OptBoolean(L, 1, api, "flip").value_or(o.flip);
  o.normalize = OptBoolean(L, 1, api, "normalize").value_or(o.normalize);
  return Protect(L, api, [&] { return PushDataset(L, data::FashionMnist(o)); });
}

int TextFn(lua_State* L) {
  const char* api = "vt.data.text";
  CheckOptions(L, 1, api, {"path", "context"});
  data::TextOptions o;
  auto path = OptString(L, 1, api, "path");
  if (!path) Fail(L, api, "option 'path' is required (a text file)");
  o.path = *path;
  o.context = OptInteger(L, 1, api, "context").value_or(o.context);
  return Protect(L, api, [&] { return PushDataset(L, data::TextCorpus(o)); });
}

int SyntheticFn(lua_State* L) {
  const char* api = "vt.data.synthetic";
  CheckOptions(L, 1, api, {"size", "input_shape", "classes", "seed"});
  data::SyntheticOptions o;
  o.size = OptInteger(L, 1, api, "size").value_or(o.size);
  o.classes = OptInteger(L, 1, api, "classes").value_or(o.classes);
  auto seed = OptInteger(L, 1, api, "seed").value_or(0);
  if (seed < 0) Fail(L, api, "option 'seed' must be >= 0");
  o.seed = static_cast<uint64_t>(seed);
  if (!lua_isnoneornil(L, 1)) {
    lua_getfield(L, 1, "input_shape");
    if (!lua_isnil(L, -1)) {
      if (!lua_istable(L, -1)) Fail(L, api, "option 'input_shape' must be a table of sizes");
      o.input_shape.clear();
      for (int i = 1; i <= static_cast<int>(lua_objlen(L, -1)); ++i) {
        lua_rawgeti(L, -1, i);
        o.input_shape.push_back(static_cast<int64_t>(lua_tonumber(L, -1)));
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  return Protect(L, api, [&] { return PushDataset(L, data::Synthetic(o)); });
}

// inputs = / targets = of vt.data.tensors: a vt.Tensor, or a file reference ("x.npy",
// "d.safetensors#inputs").
at::Tensor TensorOption(lua_State* L, const char* api, const char* key) {
  lua_getfield(L, 1, key);
  at::Tensor out;
  if (lua_type(L, -1) == LUA_TSTRING) {
    const std::string reference = lua_tostring(L, -1);
    lua_pop(L, 1);
    Protect(L, api, [&] {
      out = data::LoadTensorFile(reference);
      return 0;
    });
    return out;
  }
  if (lua_isnil(L, -1)) {
    Fail(L, api,
         std::string("option '") + key +
             "' is required: a tensor, a .npy file or FILE.safetensors#NAME");
  }
  out = CheckTensor(L, lua_gettop(L));
  lua_pop(L, 1);
  return out;
}

int TensorsFn(lua_State* L) {
  const char* api = "vt.data.tensors";
  CheckTable(L, 1);
  CheckOptions(L, 1, api, {"inputs", "targets", "classes", "name"});
  data::TensorSetOptions o;
  o.inputs = TensorOption(L, api, "inputs");
  o.targets = TensorOption(L, api, "targets");
  o.classes = OptInteger(L, 1, api, "classes").value_or(0);
  o.name = OptString(L, 1, api, "name").value_or("");
  return Protect(L, api, [&] { return PushDataset(L, data::Tensors(o)); });
}

int MSize(lua_State* L) {
  lua_pushnumber(L, static_cast<lua_Number>(CheckDataset(L, 1)->size()));
  return 1;
}
int MLen(lua_State* L) { return MSize(L); }

int MName(lua_State* L) {
  lua_pushstring(L, CheckDataset(L, 1)->name().c_str());
  return 1;
}

int MDigest(lua_State* L) {
  lua_pushstring(L, CheckDataset(L, 1)->digest().c_str());
  return 1;
}

int MClasses(lua_State* L) {
  lua_pushnumber(L, static_cast<lua_Number>(CheckDataset(L, 1)->classes()));
  return 1;
}

int MInputShape(lua_State* L) {
  PushIntArray(L, CheckDataset(L, 1)->input_shape());
  return 1;
}

int MSettings(lua_State* L) {
  lua_newtable(L);
  for (const auto& [k, v] : CheckDataset(L, 1)->settings()) {
    lua_pushstring(L, v.c_str());
    lua_setfield(L, -2, k.c_str());
  }
  return 1;
}

// A batch's tensors are allocated by ATen; a size that memory cannot hold surfaces as
// "[enforce fail at alloc_cpu.cpp:75] ..." or std::bad_alloc. This says what was asked for.
data::Batch GetBatch(const DatasetPtr& d, const std::vector<int64_t>& indices, uint64_t seed,
                     int64_t epoch) {
  auto fail = [&] {
    int64_t per = 1;
    for (int64_t s : d->input_shape()) per *= s;
    return vt::Error("cannot allocate memory for " + std::to_string(indices.size()) +
                     " examples of " + std::to_string(per) + " values each from '" + d->name() +
                     "'");
  };
  try {
    return d->Get(indices, seed, epoch);
  } catch (const std::bad_alloc&) {
    throw fail();
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    if (what.find("alloc") != std::string::npos && what.find("memory") != std::string::npos)
      throw fail();
    throw;
  }
}

// d:get(indices, {seed=, epoch=}) with 1-based indices (a table or an int64 tensor).
int MGet(lua_State* L) {
  const char* api = "vt.data.get";
  DatasetPtr& d = CheckDataset(L, 1);
  const int64_t size = d->size();
  std::vector<int64_t> indices;
  // Checked here, 1-based as the caller wrote them (the data set checks 0-based ones).
  auto check = [&](double v, int64_t item) {
    if (v != std::floor(v) || v < 1 || v > static_cast<double>(size)) {
      char text[64];
      std::snprintf(text, sizeof text, "%.17g", v);
      Fail(L, api,
           "index " + std::to_string(item) + " is " + text + ", must be an integer in [1, " +
               std::to_string(size) + "] (indices are 1-based)");
    }
    indices.push_back(static_cast<int64_t>(v) - 1);
  };
  if (at::Tensor* t = TestTensor(L, 2)) {
    if (t->is_floating_point() || t->is_complex())
      Fail(L, api, "an index tensor must have an integer dtype");
    at::Tensor flat = t->to(at::kLong).flatten().contiguous();
    for (int64_t i = 0; i < flat.numel(); ++i)
      check(static_cast<double>(flat.data_ptr<int64_t>()[i]), i + 1);
  } else {
    CheckTable(L, 2);
    for (int i = 1; i <= static_cast<int>(lua_objlen(L, 2)); ++i) {
      lua_rawgeti(L, 2, i);
      if (lua_type(L, -1) != LUA_TNUMBER) {
        Fail(L, api,
             "index " + std::to_string(i) + " must be a number, got " + luaL_typename(L, -1));
      }
      check(lua_tonumber(L, -1), i);
      lua_pop(L, 1);
    }
  }
  CheckOptions(L, 3, api, {"seed", "epoch"});
  int64_t seed = OptInteger(L, 3, api, "seed").value_or(0);
  int64_t epoch = OptInteger(L, 3, api, "epoch").value_or(0);
  if (seed < 0) Fail(L, api, "option 'seed' must be >= 0");
  if (epoch < 0) Fail(L, api, "option 'epoch' must be >= 0");
  return Protect(L, api, [&] {
    data::Batch b = GetBatch(d, indices, static_cast<uint64_t>(seed), epoch);
    PushTensor(L, b.inputs);
    PushTensor(L, b.targets);
    return 2;
  });
}

// d:batch(step, batch_size, {seed=}): the training batch of `step` (1-based), and its
// 1-based example indices.
int MBatch(lua_State* L) {
  const char* api = "vt.data.batch";
  DatasetPtr& d = CheckDataset(L, 1);
  int64_t step = CheckInteger(L, 2);
  int64_t batch = CheckInteger(L, 3);
  CheckOptions(L, 4, api, {"seed"});
  int64_t seed = OptInteger(L, 4, api, "seed").value_or(0);
  if (seed < 0) Fail(L, api, "option 'seed' must be >= 0");
  return Protect(L, api, [&] {
    int64_t epoch = 0;
    auto indices = data::BatchIndices(static_cast<uint64_t>(seed), d->size(), batch, step, &epoch);
    data::Batch b = GetBatch(d, indices, static_cast<uint64_t>(seed), epoch);
    PushTensor(L, b.inputs);
    PushTensor(L, b.targets);
    for (auto& i : indices) ++i;
    PushIntArray(L, indices);
    return 3;
  });
}

int MToString(lua_State* L) {
  DatasetPtr& d = CheckDataset(L, 1);
  std::string shape;
  for (int64_t s : d->input_shape()) shape += (shape.empty() ? "" : "x") + std::to_string(s);
  lua_pushfstring(L, "vt.Dataset(%s: %d examples of %s, %d classes, digest %s...)",
                  d->name().c_str(), static_cast<int>(d->size()), shape.c_str(),
                  static_cast<int>(d->classes()), d->digest().substr(0, 12).c_str());
  return 1;
}

}  // namespace

void OpenData(lua_State* L) {
  const luaL_Reg methods[] = {
      {"size", MSize},
      {"name", MName},
      {"digest", MDigest},
      {"classes", MClasses},
      {"input_shape", MInputShape},
      {"settings", MSettings},
      {"get", MGet},
      {"batch", MBatch},
      {nullptr, nullptr},
  };
  const luaL_Reg meta[] = {
      {"__gc", DestroyUserdata<DatasetPtr>},
      {"__tostring", MToString},
      {"__len", MLen},
      {nullptr, nullptr},
  };
  RegisterClass(L, kDatasetMeta, methods, meta);
  const luaL_Reg funcs[] = {
      {"fashion_mnist", FashionMnistFn},
      {"text", TextFn},
      {"synthetic", SyntheticFn},
      {"tensors", TensorsFn},
      {nullptr, nullptr},
  };
  lua_newtable(L);
  SetFuncs(L, funcs);
  lua_setfield(L, -2, "data");
}

}  // namespace vt::lua
