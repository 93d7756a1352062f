// vt.store's pure functions: the checkpoint codec (checkpoint_encode, checkpoint_decode,
// checkpoint_digest) and the hashes a leaf commits to (sha256, leaf, step_digest,
// log_digest); also the reader of checkpoint entries from Lua that run:put_checkpoint
// shares. docs/api/store.md is the reference.
#include <ATen/ATen.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/records.h"
#include "bindings/store_support.h"
#include "bindings/tensor.h"
#include "runtime/train/checkpoint_entry.h"
#include "store/checkpoint_digest.h"
#include "store/log_digest.h"
#include "store/sha256.h"

namespace vt::lua {

using store::Digest;

LuaEntries CheckEntries(lua_State* L, int arg, const char* api) {
  CheckTable(L, arg);
  LuaEntries out;
  int n = static_cast<int>(lua_objlen(L, arg));
  out.entries.reserve(n);
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, arg, i);
    int e = lua_gettop(L);
    if (!lua_istable(L, e))
      Fail(L, api, "entry " + std::to_string(i) + " must be a table, got " + luaL_typename(L, e));
    CheckOptions(L, e, api, {"name", "dtype", "shape", "data", "tensor"});
    store::StateEntry entry;
    std::optional<std::string> name = OptString(L, e, api, "name");
    if (!name) Fail(L, api, "entry " + std::to_string(i) + " needs a name (string)");
    entry.name = *name;
    lua_getfield(L, e, "tensor");
    at::Tensor* t = TestTensor(L, -1);
    if (!lua_isnil(L, -1) && t == nullptr)
      Fail(L, api, "entry '" + entry.name + "': tensor must be a vt.Tensor");
    lua_pop(L, 1);
    lua_getfield(L, e, "data");
    bool has_data = !lua_isnil(L, -1);
    if (has_data && lua_type(L, -1) != LUA_TSTRING) {
      Fail(L, api,
           "entry '" + entry.name + "': data must be a string of little-endian element bytes");
    }
    if (has_data == (t != nullptr))
      Fail(L, api, "entry '" + entry.name + "' needs exactly one of data and tensor");
    std::optional<std::string> dtype = OptString(L, e, api, "dtype");
    if (t != nullptr) {
      if (t->device().type() != at::kCPU)
        Fail(L, api, "entry '" + entry.name + "': tensor must be on the CPU");
      if (train::CheckpointDType(t->scalar_type()) == 0) {
        Fail(L, api,
             "entry '" + entry.name +
                 "': tensor dtype must be float32, float64, int64, int32, uint8 or bool");
      }
      at::Tensor c;
      entry = train::CheckpointEntry(entry.name, *t, &c);
      out.keep.push_back(c);
      lua_pop(L, 1);  // data (nil)
    } else {
      size_t len = 0;
      entry.data = lua_tolstring(L, -1, &len);
      entry.bytes = len;
      lua_pop(L, 1);
      entry.dtype = store::DTypeFromName(dtype.value_or("float32"));
      if (entry.dtype == 0) {
        Fail(L, api,
             "entry '" + entry.name + "': unknown dtype '" + *dtype +
                 "' (valid: float32, float64, int64, int32, uint8)");
      }
      lua_getfield(L, e, "shape");
      if (lua_isnil(L, -1)) {
        size_t elem = store::DTypeSize(entry.dtype);
        if (len % elem != 0) {
          Fail(L, api,
               "entry '" + entry.name + "': " + std::to_string(len) +
                   " data bytes are not a whole number of " + store::DTypeName(entry.dtype) +
                   " elements");
        }
        entry.shape = {static_cast<int64_t>(len / elem)};
      } else if (lua_istable(L, -1)) {
        int dims = static_cast<int>(lua_objlen(L, -1));
        for (int d = 1; d <= dims; ++d) {
          lua_rawgeti(L, -1, d);
          double v = lua_tonumber(L, -1);
          if (lua_type(L, -1) != LUA_TNUMBER || v < 0 || v != std::floor(v) ||
              v > kMaxExactInteger) {
            Fail(L, api, "entry '" + entry.name + "': shape must hold non-negative integers");
          }
          entry.shape.push_back(static_cast<int64_t>(v));
          lua_pop(L, 1);
        }
      } else {
        Fail(L, api, "entry '" + entry.name + "': shape must be a table of integers");
      }
      lua_pop(L, 1);
    }
    out.entries.push_back(std::move(entry));
    lua_pop(L, 1);  // the entry table
  }
  return out;
}

namespace {

int Sha256Fn(lua_State* L) {
  std::string_view bytes = CheckView(L, 1);
  return Protect(L, "vt.store.sha256", [&] {
    PushHex(L, store::Sha256Of(bytes));
    return 1;
  });
}

int CheckpointEncode(lua_State* L) {
  const char* api = "vt.store.checkpoint_encode";
  LuaEntries entries = CheckEntries(L, 1, api);
  return Protect(L, api, [&] {
    std::string bytes = store::SerializeCheckpoint(entries.entries);
    PushBytes(L, bytes);
    return 1;
  });
}

int CheckpointDecode(lua_State* L) {
  std::string_view bytes = CheckView(L, 1);
  return Protect(L, "vt.store.checkpoint_decode", [&] {
    std::vector<store::StateEntry> entries = store::ParseCheckpoint(bytes);
    lua_createtable(L, static_cast<int>(entries.size()), 0);
    for (size_t i = 0; i < entries.size(); ++i) {
      const store::StateEntry& e = entries[i];
      lua_createtable(L, 0, 4);
      SetString(L, "name", e.name);
      lua_pushstring(L, store::DTypeName(e.dtype));
      lua_setfield(L, -2, "dtype");
      PushIntArray(L, e.shape);
      lua_setfield(L, -2, "shape");
      SetString(L, "data", std::string_view(static_cast<const char*>(e.data), e.bytes));
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    return 1;
  });
}

int CheckpointDigestFn(lua_State* L) {
  const char* api = "vt.store.checkpoint_digest";
  if (lua_type(L, 1) == LUA_TSTRING) {
    std::string_view bytes = CheckView(L, 1);
    return Protect(L, api, [&] {
      store::ParseCheckpoint(bytes);
      PushHex(L, store::Sha256Of(bytes));
      return 1;
    });
  }
  LuaEntries entries = CheckEntries(L, 1, api);
  return Protect(L, api, [&] {
    PushHex(L, store::CheckpointDigest(entries.entries));
    return 1;
  });
}

int LeafFn(lua_State* L) {
  Digest spec = CheckDigest(L, 1, "spec hash");
  uint64_t index = CheckIndex(L, 2, "leaf index");
  Digest state = CheckDigest(L, 3, "state digest");
  Digest log = CheckDigest(L, 4, "log digest");
  return Protect(L, "vt.store.leaf", [&] {
    PushHex(L, store::ComputeLeaf(spec, index, state, log));
    return 1;
  });
}

int StepDigestFn(lua_State* L) {
  const char* api = "vt.store.step_digest";
  uint64_t step = CheckIndex(L, 1, "step");
  CheckTable(L, 2);
  std::vector<store::LogRecordView> records = CheckRecordViews(L, 2, api);
  return Protect(L, api, [&] {
    PushHex(L, store::StepDigest(step, std::move(records)));
    return 1;
  });
}

int LogDigestFn(lua_State* L) {
  CheckTable(L, 1);
  std::vector<Digest> steps = CheckProof(L, 1);
  return Protect(L, "vt.store.log_digest", [&] {
    store::LogDigestChain chain;
    for (const Digest& d : steps) chain.AddStep(d);
    PushHex(L, chain.value());
    return 1;
  });
}

}  // namespace

void AddStoreCodec(lua_State* L) {
  const luaL_Reg funcs[] = {
      {"sha256", Sha256Fn},
      {"checkpoint_encode", CheckpointEncode},
      {"checkpoint_decode", CheckpointDecode},
      {"checkpoint_digest", CheckpointDigestFn},
      {"leaf", LeafFn},
      {"step_digest", StepDigestFn},
      {"log_digest", LogDigestFn},
      {nullptr, nullptr},
  };
  SetFuncs(L, funcs);
}

}  // namespace vt::lua
