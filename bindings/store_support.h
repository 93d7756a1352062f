// Shared by the files that bind the store into Lua: store.cc (vt.store.open, vt.Store),
// store_run.cc (vt.Run and its log cursor), merkle.cc (vt.merkle, vt.MerkleTree) and
// store_codec.cc (vt.store's checkpoint codec and hashes). The userdata they hold, the
// argument checks and pushers they share, and the pieces OpenStore registers.
//
// Digests cross into Lua as 64 lowercase hex characters (either case accepted on input);
// byte strings (spec, metadata, checkpoints, log values, transcript entries) are Lua
// strings. Steps count from 1 (step 0 is the initial state); leaf and Merkle indices count
// from 0, as in PROTOCOL.md and RFC 6962. Lookups that can miss return nil; everything
// else that fails raises "api: message". docs/api/store.md is the reference.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <lua.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/checkpoint_digest.h"
#include "store/sha256.h"
#include "store/store.h"

namespace vt::lua {

constexpr const char* kStoreMeta = "vt.Store";
constexpr const char* kRunMeta = "vt.Run";
constexpr const char* kTreeMeta = "vt.MerkleTree";
constexpr const char* kCursorMeta = "vt.LogCursor";
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

using StorePtr = std::shared_ptr<store::Store>;

// A vt.Run: a run of a store, by id.
struct LuaRun {
  StorePtr store;
  std::string id;
};

// Arguments ------------------------------------------------------------------------------

// The string argument at `idx` (copied, or viewed while it stays on the stack).
std::string CheckBytes(lua_State* L, int idx);
std::string_view CheckView(lua_State* L, int idx);

// A non-negative integer argument (<= 2^53) naming `what` in the error; OptIndex gives `def`
// for none or nil.
uint64_t CheckIndex(lua_State* L, int arg, const char* what);
uint64_t OptIndex(lua_State* L, int arg, const char* what, uint64_t def);

// A digest argument in hex, naming `what` in the error.
store::Digest CheckDigest(lua_State* L, int arg, const char* what);

// A proof: a Lua array of digests in hex.
std::vector<store::Digest> CheckProof(lua_State* L, int arg);

// Checkpoint entries parsed from a Lua array of {name=, dtype=, shape=, data=} or
// {name=, tensor=}. Views point into Lua strings (kept alive by the caller's table) or into
// `keep`. Defined in store_codec.cc.
struct LuaEntries {
  std::vector<store::StateEntry> entries;
  std::vector<at::Tensor> keep;
};
LuaEntries CheckEntries(lua_State* L, int arg, const char* api);

// Results --------------------------------------------------------------------------------

void PushHex(lua_State* L, const store::Digest& d);
void PushBytes(lua_State* L, std::string_view s);
void PushProof(lua_State* L, const std::vector<store::Digest>& proof);

// t[key] = value on the table at the top of the stack.
void SetNumber(lua_State* L, const char* key, double v);
void SetString(lua_State* L, const char* key, std::string_view v);
void SetHex(lua_State* L, const char* key, const store::Digest& d);

// Pushes run `id` of `s` as a vt.Run (store_run.cc).
void PushRun(lua_State* L, const StorePtr& s, const std::string& id);

// Registration, called by OpenStore (store.cc) ---------------------------------------------

// Registers the vt.Run and vt.LogCursor metatables (store_run.cc).
void RegisterRun(lua_State* L);

// Adds vt.store's codec and hash functions (sha256, checkpoint_encode, checkpoint_decode,
// checkpoint_digest, leaf, step_digest, log_digest) to the table on top (store_codec.cc).
void AddStoreCodec(lua_State* L);

// Registers the vt.MerkleTree metatable and sets field "merkle" (vt.merkle) of the table on
// top (merkle.cc).
void OpenMerkle(lua_State* L);

}  // namespace vt::lua
