// vt.Run: one run of a store in Lua (its spec, steps, log records, checkpoints, leaves and
// Merkle tree), and the run:records{} iterator over its log records a step at a time.
// Conventions in store_support.h; docs/api/store.md is the reference.
#include <optional>
#include <string>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/records.h"
#include "bindings/store_support.h"
#include "store/error.h"
#include "store/log_pager.h"
#include "store/store.h"

namespace vt::lua {
namespace {

// State of a run:records{} iteration: the records of one step at a time.
struct LogCursor {
  store::LogPager pager;
  std::vector<store::LogRecord> buffer;
  size_t pos = 0;
};

LuaRun& CheckRun(lua_State* L, int idx) {
  return CheckUserdata<LuaRun>(L, idx, kRunMeta, "vt.Run");
}

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
    if (c.pos >= c.buffer.size()) {
      c.buffer = c.pager.NextStep();
      c.pos = 0;
      if (c.buffer.empty()) {
        lua_pushnil(L);
        return 1;
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
  store::LogQuery query;
  std::optional<int64_t> first = OptInteger(L, 2, api, "first_step");
  std::optional<int64_t> last = OptInteger(L, 2, api, "last_step");
  if ((first && *first < 0) || (last && *last < 0))
    Fail(L, api, "first_step and last_step must be >= 0");
  query.first_step = first ? static_cast<uint64_t>(*first) : 1;
  query.last_step = last ? static_cast<uint64_t>(*last) : UINT64_MAX;
  query.boundary = OptString(L, 2, api, "boundary");
  return Protect(L, api, [&] {
    PushUserdata(L, LogCursor{store::LogPager(r.store, r.id, query), {}, 0}, kCursorMeta);
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

}  // namespace

void PushRun(lua_State* L, const StorePtr& s, const std::string& id) {
  PushUserdata(L, LuaRun{s, id}, kRunMeta);
}

void RegisterRun(lua_State* L) {
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

  const luaL_Reg no_methods[] = {{nullptr, nullptr}};
  const luaL_Reg cursor_meta[] = {
      {"__gc", DestroyUserdata<LogCursor>},
      {nullptr, nullptr},
  };
  RegisterClass(L, kCursorMeta, no_methods, cursor_meta);
}

}  // namespace vt::lua
