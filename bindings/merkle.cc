// vt.merkle and vt.MerkleTree: RFC 6962 Merkle trees in Lua (roots, inclusion and
// consistency proofs, and their checks), the trees a run's leaves form. Conventions in
// store_support.h; docs/api/store.md is the reference.
#include "store/merkle.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/store_support.h"
#include "store/sha256.h"

namespace vt::lua {
namespace {

using store::Digest;

using TreePtr = std::shared_ptr<store::MemoryMerkleTree>;

TreePtr& CheckTree(lua_State* L, int idx) {
  return CheckUserdata<TreePtr>(L, idx, kTreeMeta, "vt.MerkleTree");
}

std::string CheckHexBytes(lua_State* L, int arg, const char* what) {
  size_t len = 0;
  const char* s = CheckStringArg(L, arg, &len);
  std::optional<std::string> b = store::FromHex(std::string_view(s, len));
  if (!b)
    ArgError(L, arg,
             lua_pushfstring(L, "%s must be hex (an even number of 0-9a-f characters)", what));
  return *b;
}

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

}  // namespace

void OpenMerkle(lua_State* L) {
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
