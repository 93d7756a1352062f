// vt.store and vt.merkle: the RocksDB store, checkpoint encoding and Merkle trees in Lua.
//
// Digests cross into Lua as 64 lowercase hex characters (either case accepted on input);
// byte strings (spec, metadata, checkpoints, log values, transcript entries) are Lua
// strings. Steps count from 1 (step 0 is the initial state); leaf and Merkle indices count
// from 0, as in PROTOCOL.md and RFC 6962. Lookups that can miss return nil; everything
// else that fails raises "api: message". docs/api/store.md is the reference.
#include "store/store.h"

#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/records.h"
#include "bindings/module.h"
#include "bindings/tensor.h"
#include "store/checkpoint_digest.h"
#include "store/error.h"
#include "store/log_digest.h"
#include "store/merkle.h"
#include "store/sha256.h"

namespace vt::lua {
namespace {

using store::Digest;

constexpr const char* kStoreMeta = "vt.Store";
constexpr const char* kRunMeta = "vt.Run";
constexpr const char* kTreeMeta = "vt.MerkleTree";
constexpr const char* kCursorMeta = "vt.LogCursor";
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

using StorePtr = std::shared_ptr<store::Store>;

struct LuaRun {
  StorePtr store;
  std::string id;
};

using TreePtr = std::shared_ptr<store::MemoryMerkleTree>;

// State of a run:records{} iteration: the records of one step at a time.
struct LogCursor {
  StorePtr store;
  std::string run;
  uint64_t next_step = 1;
  uint64_t last_step = UINT64_MAX;
  std::optional<std::string> boundary;
  std::vector<store::LogRecord> buffer;
  size_t pos = 0;
  bool done = false;
};

// Arguments ------------------------------------------------------------------------------

std::string CheckBytes(lua_State* L, int idx) {
  size_t len = 0;
  const char* s = CheckStringArg(L, idx, &len);
  return std::string(s, len);
}

std::string_view CheckView(lua_State* L, int idx) {
  size_t len = 0;
  const char* s = CheckStringArg(L, idx, &len);
  return std::string_view(s, len);
}

// A non-negative integer argument (<= 2^53) naming `what` in the error.
uint64_t CheckIndex(lua_State* L, int arg, const char* what) {
  double v = CheckNumber(L, arg);
  if (!(v >= 0) || v != std::floor(v) || v > kMaxExactInteger) {
    ArgError(L, arg, lua_pushfstring(L, "%s must be an integer in [0, 2^53], got %s", what,
                                  lua_tostring(L, arg)));
  }
  return static_cast<uint64_t>(v);
}

uint64_t OptIndex(lua_State* L, int arg, const char* what, uint64_t def) {
  if (lua_isnoneornil(L, arg)) return def;
  return CheckIndex(L, arg, what);
}

Digest CheckDigest(lua_State* L, int arg, const char* what) {
  size_t len = 0;
  const char* s = CheckStringArg(L, arg, &len);
  std::optional<Digest> d = store::DigestFromHex(std::string_view(s, len));
  if (!d) {
    ArgError(L, arg, lua_pushfstring(L, "%s must be 64 hex characters (a SHA-256 digest)", what));
  }
  return *d;
}

std::string CheckHexBytes(lua_State* L, int arg, const char* what) {
  size_t len = 0;
  const char* s = CheckStringArg(L, arg, &len);
  std::optional<std::string> b = store::FromHex(std::string_view(s, len));
  if (!b)
    ArgError(L, arg, lua_pushfstring(L, "%s must be hex (an even number of 0-9a-f characters)", what));
  return *b;
}

// A proof: a Lua array of digests in hex.
std::vector<Digest> CheckProof(lua_State* L, int arg) {
  CheckTable(L, arg);
  std::vector<Digest> proof;
  int n = static_cast<int>(lua_objlen(L, arg));
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, arg, i);
    size_t len = 0;
    const char* s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : nullptr;
    std::optional<Digest> d = s ? store::DigestFromHex(std::string_view(s, len)) : std::nullopt;
    if (!d) {
      ArgError(L, arg, lua_pushfstring(L, "proof element %d must be 64 hex characters, got %s", i,
                                    luaL_typename(L, -1)));
    }
    proof.push_back(*d);
    lua_pop(L, 1);
  }
  return proof;
}

void PushHex(lua_State* L, const Digest& d) {
  std::string hex = store::ToHex(d);
  lua_pushlstring(L, hex.data(), hex.size());
}

void PushBytes(lua_State* L, std::string_view s) { lua_pushlstring(L, s.data(), s.size()); }

void PushProof(lua_State* L, const std::vector<Digest>& proof) {
  lua_createtable(L, static_cast<int>(proof.size()), 0);
  for (size_t i = 0; i < proof.size(); ++i) {
    PushHex(L, proof[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

void SetNumber(lua_State* L, const char* key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}

void SetString(lua_State* L, const char* key, std::string_view v) {
  PushBytes(L, v);
  lua_setfield(L, -2, key);
}

void SetHex(lua_State* L, const char* key, const Digest& d) {
  PushHex(L, d);
  lua_setfield(L, -2, key);
}

// Checkpoint entries from Lua --------------------------------------------------------------

// Entries parsed from a Lua array of {name=, dtype=, shape=, data=} or {name=, tensor=}.
// Views point into Lua strings (kept alive by the caller's table) or into `keep`.
struct LuaEntries {
  std::vector<store::StateEntry> entries;
  std::vector<at::Tensor> keep;
};

uint8_t TensorDType(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return static_cast<uint8_t>(store::DType::kFloat32);
    case at::kDouble:
      return static_cast<uint8_t>(store::DType::kFloat64);
    case at::kLong:
      return static_cast<uint8_t>(store::DType::kInt64);
    case at::kInt:
      return static_cast<uint8_t>(store::DType::kInt32);
    case at::kByte:
    case at::kBool:
      return static_cast<uint8_t>(store::DType::kUInt8);
    default:
      return 0;
  }
}

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
      entry.dtype = TensorDType(*t);
      if (entry.dtype == 0) {
        Fail(L, api,
             "entry '" + entry.name +
                 "': tensor dtype must be float32, float64, int64, int32, uint8 or bool");
      }
      at::Tensor c = t->contiguous();
      entry.shape.assign(c.sizes().begin(), c.sizes().end());
      entry.data = c.data_ptr();
      entry.bytes = static_cast<size_t>(c.numel()) * c.element_size();
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

// Userdata access --------------------------------------------------------------------------

StorePtr& CheckStore(lua_State* L, int idx) {
  return CheckUserdata<StorePtr>(L, idx, kStoreMeta, "vt.Store");
}
LuaRun& CheckRun(lua_State* L, int idx) {
  return CheckUserdata<LuaRun>(L, idx, kRunMeta, "vt.Run");
}
TreePtr& CheckTree(lua_State* L, int idx) {
  return CheckUserdata<TreePtr>(L, idx, kTreeMeta, "vt.MerkleTree");
}

void PushRun(lua_State* L, const StorePtr& s, const std::string& id) {
  PushUserdata(L, LuaRun{s, id}, kRunMeta);
}

// vt.store.open and vt.Store ------------------------------------------------------------------

int StoreOpen(lua_State* L) {
  const char* api = "vt.store.open";
  std::string path = CheckBytes(L, 1);
  CheckOptions(L, 2, api, {"read_only", "create", "sync", "compression", "cache_bytes"});
  store::StoreOptions options;
  options.read_only = OptBoolean(L, 2, api, "read_only").value_or(false);
  options.create_if_missing = OptBoolean(L, 2, api, "create").value_or(true);
  options.sync = OptBoolean(L, 2, api, "sync").value_or(false);
  std::string compression = OptString(L, 2, api, "compression").value_or("zstd");
  if (compression == "zstd") {
    options.log_compression = store::Compression::kZstd;
  } else if (compression == "lz4") {
    options.log_compression = store::Compression::kLz4;
  } else if (compression == "none") {
    options.log_compression = store::Compression::kNone;
  } else {
    Fail(L, api,
         "option 'compression' must be \"zstd\", \"lz4\" or \"none\", got \"" + compression + "\"");
  }
  std::optional<int64_t> cache = OptInteger(L, 2, api, "cache_bytes");
  if (cache) {
    if (*cache < 0) Fail(L, api, "option 'cache_bytes' must be >= 0");
    options.block_cache_bytes = static_cast<size_t>(*cache);
  }
  return Protect(L, api, [&] {
    StorePtr s = store::Store::Open(path, options);
    PushUserdata(L, std::move(s), kStoreMeta);
    return 1;
  });
}

int StorePath(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  PushBytes(L, s->path());
  return 1;
}

int StoreReadOnly(lua_State* L) {
  lua_pushboolean(L, CheckStore(L, 1)->read_only());
  return 1;
}

int StoreCompression(lua_State* L) {
  lua_pushstring(L, store::CompressionName(CheckStore(L, 1)->log_compression()));
  return 1;
}

int StoreIsClosed(lua_State* L) {
  lua_pushboolean(L, CheckStore(L, 1)->closed());
  return 1;
}

int StoreClose(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  return Protect(L, "store:close", [&] {
    s->Close();
    return 0;
  });
}

int StoreFlush(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  return Protect(L, "store:flush", [&] {
    s->Flush();
    lua_pushvalue(L, 1);
    return 1;
  });
}

int StoreRefresh(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  return Protect(L, "store:refresh", [&] {
    s->Refresh();
    lua_pushvalue(L, 1);
    return 1;
  });
}

void PushStringArray(lua_State* L, const std::vector<std::string>& v) {
  lua_createtable(L, static_cast<int>(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    PushBytes(L, v[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

int StoreRuns(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  return Protect(L, "store:runs", [&] {
    PushStringArray(L, s->Runs());
    return 1;
  });
}

int StoreRun(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  std::string id = CheckBytes(L, 2);
  return Protect(L, "store:run", [&] {
    if (!s->GetRun(id)) {
      lua_pushnil(L);
    } else {
      PushRun(L, s, id);
    }
    return 1;
  });
}

int StoreCreateRun(lua_State* L) {
  const char* api = "store:create_run";
  StorePtr& s = CheckStore(L, 1);
  std::string id = CheckBytes(L, 2);
  CheckTable(L, 3);
  CheckOptions(L, 3, api, {"spec", "checkpoint_every", "steps", "metadata"});
  store::RunConfig config;
  std::optional<std::string> spec = OptString(L, 3, api, "spec");
  std::optional<int64_t> every = OptInteger(L, 3, api, "checkpoint_every");
  std::optional<int64_t> steps = OptInteger(L, 3, api, "steps");
  if (!spec) Fail(L, api, "option 'spec' (the spec bytes, a string) is required");
  if (!every || *every < 1) Fail(L, api, "option 'checkpoint_every' (an integer >= 1) is required");
  if (!steps || *steps < 0) Fail(L, api, "option 'steps' (an integer >= 0) is required");
  config.spec = *spec;
  config.checkpoint_every = static_cast<uint64_t>(*every);
  config.steps = static_cast<uint64_t>(*steps);
  config.metadata = OptString(L, 3, api, "metadata").value_or("");
  return Protect(L, api, [&] {
    s->CreateRun(id, config);
    PushRun(L, s, id);
    return 1;
  });
}

int StoreVerify(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  return Protect(L, "store:verify", [&] {
    store::VerifyReport report = s->Verify();
    lua_createtable(L, 0, 3);
    lua_pushboolean(L, report.ok());
    lua_setfield(L, -2, "ok");
    SetNumber(L, "records", static_cast<double>(report.records));
    lua_createtable(L, static_cast<int>(report.problems.size()), 0);
    for (size_t i = 0; i < report.problems.size(); ++i) {
      const store::Problem& p = report.problems[i];
      lua_createtable(L, 0, 4);
      SetString(L, "family", p.family);
      SetString(L, "key", p.key);
      SetString(L, "key_hex", p.key_hex);
      SetString(L, "message", p.message);
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    lua_setfield(L, -2, "problems");
    return 1;
  });
}

int StoreAppendTranscript(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  std::string game = CheckBytes(L, 2);
  std::string_view entry = CheckView(L, 3);
  return Protect(L, "store:append_transcript", [&] {
    lua_pushnumber(L, static_cast<double>(s->AppendTranscript(game, entry)));
    return 1;
  });
}

int StoreTranscript(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  std::string game = CheckBytes(L, 2);
  return Protect(L, "store:transcript", [&] {
    PushStringArray(L, s->Transcript(game));
    return 1;
  });
}

int StoreTranscriptEntry(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  std::string game = CheckBytes(L, 2);
  uint64_t seq = CheckIndex(L, 3, "sequence number");
  return Protect(L, "store:transcript_entry", [&] {
    std::optional<std::string> e = s->GetTranscriptEntry(game, seq);
    if (e) {
      PushBytes(L, *e);
    } else {
      lua_pushnil(L);
    }
    return 1;
  });
}

int StoreGames(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  return Protect(L, "store:games", [&] {
    PushStringArray(L, s->Games());
    return 1;
  });
}

int StoreToString(lua_State* L) {
  StorePtr& s = CheckStore(L, 1);
  std::string text = "vt.Store('" + s->path() + "', ";
  if (s->closed()) {
    text += "closed)";
  } else {
    text += std::string(s->read_only() ? "reader" : "writer") + ", logs " +
            store::CompressionName(s->log_compression()) + ")";
  }
  PushBytes(L, text);
  return 1;
}

// vt.Run -------------------------------------------------------------------------------------

int RunId(lua_State* L) {
  PushBytes(L, CheckRun(L, 1).id);
  return 1;
}

store::RunInfo Info(const LuaRun& r) {
  std::optional<store::RunInfo> info = r.store->GetRun(r.id);
  if (!info)
    throw store::Error("run '" + r.id + "' no longer exists in store '" + r.store->path() + "'");
  return *info;
}

int RunInfoFn(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  return Protect(L, "run:info", [&] {
    store::RunInfo info = Info(r);
    lua_createtable(L, 0, 9);
    SetString(L, "id", info.id);
    SetHex(L, "spec_hash", info.spec_hash);
    SetNumber(L, "checkpoint_every", static_cast<double>(info.checkpoint_every));
    SetNumber(L, "steps", static_cast<double>(info.steps));
    SetNumber(L, "steps_written", static_cast<double>(info.steps_written));
    SetNumber(L, "leaves", static_cast<double>(info.leaves));
    SetNumber(L, "total_leaves", static_cast<double>(info.total_leaves()));
    lua_pushboolean(L, info.complete());
    lua_setfield(L, -2, "complete");
    SetString(L, "metadata", info.metadata);
    return 1;
  });
}

int RunSpec(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  return Protect(L, "run:spec", [&] {
    PushBytes(L, Info(r).spec);
    return 1;
  });
}

int RunSpecHash(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  return Protect(L, "run:spec_hash", [&] {
    PushHex(L, Info(r).spec_hash);
    return 1;
  });
}

int RunMetadata(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  return Protect(L, "run:metadata", [&] {
    PushBytes(L, Info(r).metadata);
    return 1;
  });
}

int RunSetMetadata(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  std::string_view m = CheckView(L, 2);
  return Protect(L, "run:set_metadata", [&] {
    r.store->SetMetadata(r.id, m);
    lua_pushvalue(L, 1);
    return 1;
  });
}

int RunWriteStep(lua_State* L) {
  const char* api = "run:write_step";
  LuaRun& r = CheckRun(L, 1);
  uint64_t step = CheckIndex(L, 2, "step");
  CheckTable(L, 3);
  std::vector<store::LogRecordView> records = CheckRecordViews(L, 3, api);
  return Protect(L, api, [&] {
    PushHex(L, r.store->WriteStep(r.id, step, std::move(records)));
    return 1;
  });
}

int RunPutCheckpoint(lua_State* L) {
  const char* api = "run:put_checkpoint";
  LuaRun& r = CheckRun(L, 1);
  uint64_t leaf = CheckIndex(L, 2, "leaf index");
  std::string_view bytes;
  LuaEntries entries;
  bool from_entries = lua_istable(L, 3);
  if (from_entries) {
    entries = CheckEntries(L, 3, api);
  } else if (lua_type(L, 3) == LUA_TSTRING) {
    bytes = CheckView(L, 3);
  } else {
    ArgError(L, 3, "checkpoint bytes (string) or a table of entries expected");
  }
  CheckOptions(L, 4, api, {"state_digest", "metadata"});
  store::PutCheckpointOptions options;
  std::optional<std::string> expected = OptString(L, 4, api, "state_digest");
  if (expected) {
    options.expected_state_digest = store::DigestFromHex(*expected);
    if (!options.expected_state_digest)
      Fail(L, api, "option 'state_digest' must be 64 hex characters");
  }
  options.metadata = OptString(L, 4, api, "metadata");
  return Protect(L, api, [&] {
    std::string encoded;
    if (from_entries) {
      encoded = store::SerializeCheckpoint(entries.entries);
      bytes = encoded;
    }
    store::LeafRecord rec = r.store->PutCheckpoint(r.id, leaf, bytes, options);
    PushHex(L, rec.leaf);
    return 1;
  });
}

int RunRollback(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  return Protect(L, "run:rollback", [&] {
    std::optional<store::LeafRecord> last = r.store->Rollback(r.id);
    if (!last) {
      lua_pushnil(L);
      lua_pushnumber(L, 0);
    } else {
      lua_pushnumber(L, static_cast<double>(last->index));
      lua_pushnumber(L, static_cast<double>(last->step));
    }
    return 2;
  });
}

int RunCheckpoint(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  uint64_t leaf = CheckIndex(L, 2, "leaf index");
  return Protect(L, "run:checkpoint", [&] {
    std::optional<std::string> c = r.store->GetCheckpoint(r.id, leaf);
    if (c) {
      PushBytes(L, *c);
    } else {
      lua_pushnil(L);
    }
    return 1;
  });
}

int RunLeaf(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  uint64_t leaf = CheckIndex(L, 2, "leaf index");
  return Protect(L, "run:leaf", [&] {
    std::optional<store::LeafRecord> rec = r.store->GetLeaf(r.id, leaf);
    if (rec) {
      PushHex(L, rec->leaf);
    } else {
      lua_pushnil(L);
    }
    return 1;
  });
}

int RunLeafInfo(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  uint64_t leaf = CheckIndex(L, 2, "leaf index");
  return Protect(L, "run:leaf_info", [&] {
    std::optional<store::LeafRecord> rec = r.store->GetLeaf(r.id, leaf);
    if (!rec) {
      lua_pushnil(L);
      return 1;
    }
    lua_createtable(L, 0, 6);
    SetNumber(L, "index", static_cast<double>(rec->index));
    SetNumber(L, "step", static_cast<double>(rec->step));
    SetHex(L, "leaf", rec->leaf);
    SetHex(L, "state_digest", rec->state_digest);
    SetHex(L, "log_digest", rec->log_digest);
    SetNumber(L, "checkpoint_bytes", static_cast<double>(rec->checkpoint_bytes));
    return 1;
  });
}

int RunSize(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  return Protect(L, "run:size", [&] {
    lua_pushnumber(L, static_cast<double>(r.store->TreeSize(r.id)));
    return 1;
  });
}

int RunRoot(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  bool at = !lua_isnoneornil(L, 2);
  uint64_t size = at ? CheckIndex(L, 2, "tree size") : 0;
  return Protect(L, "run:root", [&] {
    PushHex(L, at ? r.store->RootAt(r.id, size) : r.store->Root(r.id));
    return 1;
  });
}

int RunProve(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  uint64_t leaf = CheckIndex(L, 2, "leaf index");
  bool at = !lua_isnoneornil(L, 3);
  uint64_t size = at ? CheckIndex(L, 3, "tree size") : 0;
  return Protect(L, "run:prove", [&] {
    if (!at) size = r.store->TreeSize(r.id);
    PushProof(L, r.store->InclusionProof(r.id, leaf, size));
    return 1;
  });
}

int RunConsistency(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  uint64_t m = CheckIndex(L, 2, "old tree size");
  bool at = !lua_isnoneornil(L, 3);
  uint64_t n = at ? CheckIndex(L, 3, "new tree size") : 0;
  return Protect(L, "run:consistency", [&] {
    if (!at) n = r.store->TreeSize(r.id);
    PushProof(L, r.store->ConsistencyProof(r.id, m, n));
    return 1;
  });
}

void PushRecord(lua_State* L, const store::LogRecord& rec) {
  lua_createtable(L, 0, 3);
  SetString(L, "boundary", rec.boundary);
  SetNumber(L, "call", rec.call);
  SetString(L, "value", rec.value);
}

int RunStep(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  uint64_t step = CheckIndex(L, 2, "step");
  return Protect(L, "run:step", [&] {
    std::optional<std::vector<store::LogRecord>> recs = r.store->GetStepRecords(r.id, step);
    if (!recs) {
      lua_pushnil(L);
      return 1;
    }
    lua_createtable(L, static_cast<int>(recs->size()), 0);
    for (size_t i = 0; i < recs->size(); ++i) {
      PushRecord(L, (*recs)[i]);
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    return 1;
  });
}

int RunStepInfo(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  uint64_t step = CheckIndex(L, 2, "step");
  return Protect(L, "run:step_info", [&] {
    std::optional<store::StepInfo> s = r.store->GetStep(r.id, step);
    if (!s) {
      lua_pushnil(L);
      return 1;
    }
    lua_createtable(L, 0, 4);
    SetNumber(L, "step", static_cast<double>(s->step));
    SetNumber(L, "records", s->records);
    SetNumber(L, "bytes", static_cast<double>(s->value_bytes));
    SetHex(L, "digest", s->digest);
    return 1;
  });
}

int RunRecord(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  uint64_t step = CheckIndex(L, 2, "step");
  std::string boundary = CheckBytes(L, 3);
  uint64_t call = OptIndex(L, 4, "call", 0);
  if (call > UINT32_MAX) ArgError(L, 4, "call must be in [0, 2^32 - 1]");
  return Protect(L, "run:record", [&] {
    std::optional<std::string> v =
        r.store->GetLogRecord(r.id, step, boundary, static_cast<uint32_t>(call));
    if (v) {
      PushBytes(L, *v);
    } else {
      lua_pushnil(L);
    }
    return 1;
  });
}

int RunLogDigest(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  uint64_t leaf = CheckIndex(L, 2, "leaf index");
  return Protect(L, "run:log_digest", [&] {
    PushHex(L, r.store->RecomputeLogDigest(r.id, leaf));
    return 1;
  });
}

// run:records{} iterator: refills with the records of the next step that has any.
int RecordsNext(lua_State* L) {
  LogCursor& c = *static_cast<LogCursor*>(lua_touserdata(L, lua_upvalueindex(1)));
  return Protect(L, "run:records", [&] {
    while (c.pos >= c.buffer.size()) {
      if (c.done || c.next_step > c.last_step) {
        lua_pushnil(L);
        return 1;
      }
      c.buffer.clear();
      c.pos = 0;
      store::LogQuery q;
      q.first_step = c.next_step;
      q.last_step = c.last_step;
      q.boundary = c.boundary;
      uint64_t step = 0;
      c.store->ScanLogs(
          c.run, q, [&](uint64_t s, std::string_view b, uint32_t call, std::string_view v) {
            if (!c.buffer.empty() && s != step) return false;
            step = s;
            c.buffer.push_back(store::LogRecord{s, std::string(b), call, std::string(v)});
            return true;
          });
      if (c.buffer.empty()) {
        c.done = true;
      } else if (step == UINT64_MAX) {
        c.done = true;
      } else {
        c.next_step = step + 1;
      }
    }
    const store::LogRecord& rec = c.buffer[c.pos++];
    lua_pushnumber(L, static_cast<double>(rec.step));
    PushBytes(L, rec.boundary);
    lua_pushnumber(L, rec.call);
    PushBytes(L, rec.value);
    return 4;
  });
}

int RunRecords(lua_State* L) {
  const char* api = "run:records";
  LuaRun& r = CheckRun(L, 1);
  CheckOptions(L, 2, api, {"first_step", "last_step", "boundary"});
  LogCursor cursor;
  cursor.store = r.store;
  cursor.run = r.id;
  std::optional<int64_t> first = OptInteger(L, 2, api, "first_step");
  std::optional<int64_t> last = OptInteger(L, 2, api, "last_step");
  if ((first && *first < 0) || (last && *last < 0))
    Fail(L, api, "first_step and last_step must be >= 0");
  cursor.next_step = first ? static_cast<uint64_t>(*first) : 1;
  cursor.last_step = last ? static_cast<uint64_t>(*last) : UINT64_MAX;
  cursor.boundary = OptString(L, 2, api, "boundary");
  return Protect(L, api, [&] {
    store::ValidateId(cursor.run, "run id");
    if (cursor.boundary) store::ValidateBoundary(*cursor.boundary);
    if (r.store->closed()) throw store::Error("store '" + r.store->path() + "' is closed");
    PushUserdata(L, std::move(cursor), kCursorMeta);
    lua_pushcclosure(L, RecordsNext, 1);
    return 1;
  });
}

int RunToString(lua_State* L) {
  LuaRun& r = CheckRun(L, 1);
  std::string text = "vt.Run('" + r.id + "'";
  if (r.store->closed()) {
    text += ", store closed)";
  } else {
    std::optional<store::RunInfo> info;
    try {
      info = r.store->GetRun(r.id);
    } catch (const std::exception& e) {
      text += std::string(", ") + e.what() + ")";
      PushBytes(L, text);
      return 1;
    }
    if (!info) {
      text += ", missing)";
    } else {
      text += ", step " + std::to_string(info->steps_written) + "/" + std::to_string(info->steps) +
              ", leaves " + std::to_string(info->leaves) + "/" +
              std::to_string(info->total_leaves()) + ", k " +
              std::to_string(info->checkpoint_every) + ")";
    }
  }
  PushBytes(L, text);
  return 1;
}

// vt.merkle ----------------------------------------------------------------------------------

int MerkleVerify(lua_State* L) {
  std::string leaf = CheckHexBytes(L, 1, "leaf");
  uint64_t index = CheckIndex(L, 2, "leaf index");
  uint64_t size = CheckIndex(L, 3, "tree size");
  std::vector<Digest> proof = CheckProof(L, 4);
  Digest root = CheckDigest(L, 5, "root");
  return Protect(L, "vt.merkle.verify", [&] {
    lua_pushboolean(L,
                    store::VerifyInclusion(store::MerkleLeafHash(leaf), index, size, proof, root));
    return 1;
  });
}

int MerkleVerifyConsistency(lua_State* L) {
  Digest root_m = CheckDigest(L, 1, "old root");
  uint64_t m = CheckIndex(L, 2, "old tree size");
  uint64_t n = CheckIndex(L, 3, "new tree size");
  std::vector<Digest> proof = CheckProof(L, 4);
  Digest root_n = CheckDigest(L, 5, "new root");
  return Protect(L, "vt.merkle.verify_consistency", [&] {
    lua_pushboolean(L, store::VerifyConsistency(m, n, root_m, root_n, proof));
    return 1;
  });
}

int MerkleLeafHashFn(lua_State* L) {
  std::string leaf = CheckHexBytes(L, 1, "leaf");
  return Protect(L, "vt.merkle.leaf_hash", [&] {
    PushHex(L, store::MerkleLeafHash(leaf));
    return 1;
  });
}

int MerkleNodeHashFn(lua_State* L) {
  Digest l = CheckDigest(L, 1, "left");
  Digest r = CheckDigest(L, 2, "right");
  return Protect(L, "vt.merkle.node_hash", [&] {
    PushHex(L, store::MerkleNodeHash(l, r));
    return 1;
  });
}

int MerkleEmptyRootFn(lua_State* L) {
  return Protect(L, "vt.merkle.empty_root", [&] {
    PushHex(L, store::MerkleEmptyRoot());
    return 1;
  });
}

std::vector<std::string> CheckHexArray(lua_State* L, int arg, const char* what) {
  CheckTable(L, arg);
  std::vector<std::string> out;
  int n = static_cast<int>(lua_objlen(L, arg));
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, arg, i);
    size_t len = 0;
    const char* s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : nullptr;
    std::optional<std::string> b = s ? store::FromHex(std::string_view(s, len)) : std::nullopt;
    if (!b) ArgError(L, arg, lua_pushfstring(L, "%s %d must be a hex string", what, i));
    out.push_back(*b);
    lua_pop(L, 1);
  }
  return out;
}

int MerkleRootFn(lua_State* L) {
  std::vector<std::string> leaves = CheckHexArray(L, 1, "leaf");
  return Protect(L, "vt.merkle.root", [&] {
    store::MemoryMerkleTree tree;
    for (const std::string& l : leaves) tree.Append(l);
    PushHex(L, tree.Root());
    return 1;
  });
}

int MerkleTreeNew(lua_State* L) {
  return Protect(L, "vt.merkle.tree", [&] {
    PushUserdata(L, std::make_shared<store::MemoryMerkleTree>(), kTreeMeta);
    return 1;
  });
}

int TreeAppend(lua_State* L) {
  TreePtr& t = CheckTree(L, 1);
  std::string leaf = CheckHexBytes(L, 2, "leaf");
  return Protect(L, "tree:append", [&] {
    lua_pushnumber(L, static_cast<double>(t->Append(leaf)));
    return 1;
  });
}

int TreeSize(lua_State* L) {
  lua_pushnumber(L, static_cast<double>(CheckTree(L, 1)->size()));
  return 1;
}

int TreeRoot(lua_State* L) {
  TreePtr& t = CheckTree(L, 1);
  uint64_t size = OptIndex(L, 2, "tree size", t->size());
  return Protect(L, "tree:root", [&] {
    PushHex(L, t->RootAt(size));
    return 1;
  });
}

int TreeProve(lua_State* L) {
  TreePtr& t = CheckTree(L, 1);
  uint64_t index = CheckIndex(L, 2, "leaf index");
  uint64_t size = OptIndex(L, 3, "tree size", t->size());
  return Protect(L, "tree:prove", [&] {
    PushProof(L, t->InclusionProof(index, size));
    return 1;
  });
}

int TreeConsistency(lua_State* L) {
  TreePtr& t = CheckTree(L, 1);
  uint64_t m = CheckIndex(L, 2, "old tree size");
  uint64_t n = OptIndex(L, 3, "new tree size", t->size());
  return Protect(L, "tree:consistency", [&] {
    PushProof(L, t->ConsistencyProof(m, n));
    return 1;
  });
}

int TreeToString(lua_State* L) {
  TreePtr& t = CheckTree(L, 1);
  std::string text = "vt.MerkleTree(" + std::to_string(t->size()) + " leaves, root " +
                     store::ToHex(t->Root()).substr(0, 16) + "...)";
  PushBytes(L, text);
  return 1;
}

// vt.store helpers ---------------------------------------------------------------------------

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

void OpenStore(lua_State* L) {
  const luaL_Reg store_methods[] = {
      {"path", StorePath},
      {"read_only", StoreReadOnly},
      {"compression", StoreCompression},
      {"is_closed", StoreIsClosed},
      {"close", StoreClose},
      {"flush", StoreFlush},
      {"refresh", StoreRefresh},
      {"runs", StoreRuns},
      {"run", StoreRun},
      {"create_run", StoreCreateRun},
      {"verify", StoreVerify},
      {"append_transcript", StoreAppendTranscript},
      {"transcript", StoreTranscript},
      {"transcript_entry", StoreTranscriptEntry},
      {"games", StoreGames},
      {nullptr, nullptr},
  };
  const luaL_Reg store_meta[] = {
      {"__gc", DestroyUserdata<StorePtr>},
      {"__tostring", StoreToString},
      {nullptr, nullptr},
  };
  RegisterClass(L, kStoreMeta, store_methods, store_meta);

  const luaL_Reg run_methods[] = {
      {"id", RunId},
      {"info", RunInfoFn},
      {"spec", RunSpec},
      {"spec_hash", RunSpecHash},
      {"metadata", RunMetadata},
      {"set_metadata", RunSetMetadata},
      {"write_step", RunWriteStep},
      {"put_checkpoint", RunPutCheckpoint},
      {"rollback", RunRollback},
      {"checkpoint", RunCheckpoint},
      {"leaf", RunLeaf},
      {"leaf_info", RunLeafInfo},
      {"size", RunSize},
      {"root", RunRoot},
      {"prove", RunProve},
      {"consistency", RunConsistency},
      {"step", RunStep},
      {"step_info", RunStepInfo},
      {"record", RunRecord},
      {"records", RunRecords},
      {"log_digest", RunLogDigest},
      {nullptr, nullptr},
  };
  const luaL_Reg run_meta[] = {
      {"__gc", DestroyUserdata<LuaRun>},
      {"__tostring", RunToString},
      {nullptr, nullptr},
  };
  RegisterClass(L, kRunMeta, run_methods, run_meta);

  const luaL_Reg tree_methods[] = {
      {"append", TreeAppend},
      {"size", TreeSize},
      {"root", TreeRoot},
      {"prove", TreeProve},
      {"consistency", TreeConsistency},
      {nullptr, nullptr},
  };
  const luaL_Reg tree_meta[] = {
      {"__gc", DestroyUserdata<TreePtr>},
      {"__tostring", TreeToString},
      {nullptr, nullptr},
  };
  RegisterClass(L, kTreeMeta, tree_methods, tree_meta);

  const luaL_Reg no_methods[] = {{nullptr, nullptr}};
  const luaL_Reg cursor_meta[] = {
      {"__gc", DestroyUserdata<LogCursor>},
      {nullptr, nullptr},
  };
  RegisterClass(L, kCursorMeta, no_methods, cursor_meta);

  const luaL_Reg store_funcs[] = {
      {"open", StoreOpen},
      {"sha256", Sha256Fn},
      {"checkpoint_encode", CheckpointEncode},
      {"checkpoint_decode", CheckpointDecode},
      {"checkpoint_digest", CheckpointDigestFn},
      {"leaf", LeafFn},
      {"step_digest", StepDigestFn},
      {"log_digest", LogDigestFn},
      {nullptr, nullptr},
  };
  lua_newtable(L);
  SetFuncs(L, store_funcs);
  lua_setfield(L, -2, "store");

  const luaL_Reg merkle_funcs[] = {
      {"verify", MerkleVerify},          {"verify_consistency", MerkleVerifyConsistency},
      {"leaf_hash", MerkleLeafHashFn},   {"node_hash", MerkleNodeHashFn},
      {"empty_root", MerkleEmptyRootFn}, {"root", MerkleRootFn},
      {"tree", MerkleTreeNew},           {nullptr, nullptr},
  };
  lua_newtable(L);
  SetFuncs(L, merkle_funcs);
  lua_setfield(L, -2, "merkle");
}

}  // namespace vt::lua
