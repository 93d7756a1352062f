// vt.store.open and vt.Store: the RocksDB store in Lua (its runs, transcripts and full
// check), and OpenStore, which registers vt.store and vt.merkle. The other store bindings:
// store_run.cc (vt.Run), merkle.cc (vt.merkle), store_codec.cc (vt.store's checkpoint codec
// and hashes); conventions in store_support.h. docs/api/store.md is the reference.
#include "store/store.h"

#include <optional>
#include <string>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "bindings/store_support.h"

namespace vt::lua {
namespace {

StorePtr& CheckStore(lua_State* L, int idx) {
  return CheckUserdata<StorePtr>(L, idx, kStoreMeta, "vt.Store");
}

int StoreOpen(lua_State* L) {
  const char* api = "vt.store.open";
  std::string path = CheckBytes(L, 1);
  CheckOptions(
      L, 2, api,
      {"read_only", "create", "sync", "compression", "cache_bytes", "unlogged_step_bytes"});
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
  std::optional<int64_t> unlogged = OptInteger(L, 2, api, "unlogged_step_bytes");
  if (unlogged) {
    if (*unlogged < 0) Fail(L, api, "option 'unlogged_step_bytes' must be >= 0");
    options.unlogged_step_bytes = static_cast<uint64_t>(*unlogged);
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
  RegisterRun(L);  // vt.Run, vt.LogCursor

  const luaL_Reg store_funcs[] = {
      {"open", StoreOpen},
      {nullptr, nullptr},
  };
  lua_newtable(L);
  SetFuncs(L, store_funcs);
  AddStoreCodec(L);  // sha256, checkpoint_encode, ..., log_digest
  lua_setfield(L, -2, "store");

  OpenMerkle(L);
}

}  // namespace vt::lua
