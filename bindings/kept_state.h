// What a Lua model's state keeps between forward calls, and the check that a forward changed
// none of it (bindings/nn.cc).
//
// A checkpoint holds tensors only, and each party calls a model's forward a different number
// of times: the trainer evaluates, a judge starts from a checkpoint, a restarted trainer
// builds the model anew. A forward that counted its calls in an upvalue, a global or a
// module's field, or wrote into a tensor it kept from building, would compute differently in
// each of them (a trainer that restarted before the interval it wanted to change made the
// judge's replay agree with it, and the honest auditor was convicted). So a model's forward
// must be a function of its input, its parameters and what building made: KeptState takes
// everything reachable from the model's roots after building (tables with their keys, values
// and metatables; functions with their upvalues and environments; userdata with theirs;
// tensors with their bytes) and, after each forward, walks it again and names the first thing
// that differs. The comparison sorts each table's entries by key, so its verdict never
// depends on hash order (which differs between processes).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <lua.hpp>
#include <string>
#include <unordered_map>
#include <vector>

namespace vt::lua {

class KeptState {
 public:
  // A root: a registry reference to a value and what to call it in messages.
  struct Root {
    int ref;
    std::string name;
  };

  // Takes what is reachable from `roots` now. Throws vt::Error if a reachable table is weak
  // (a metatable with __mode): its entries would vanish whenever the collector ran, which
  // differs between processes.
  void Take(lua_State* L, std::vector<Root> roots);

  // Throws vt::Error naming the first value reachable from the roots that differs from what
  // Take saw (`what` begins the message). It makes one Lua table (the walk's queue) and
  // reuses its C++ scratch.
  void Check(lua_State* L, const std::string& what);

 private:
  // A Lua value as it compares: its type and its number's bits, its boolean, or the address
  // of its object (strings are interned, so equal addresses are equal strings).
  struct Value {
    int type = LUA_TNIL;
    uint64_t bits = 0;
    bool operator==(const Value& o) const { return type == o.type && bits == o.bits; }
    bool operator!=(const Value& o) const { return !(*this == o); }
    bool operator<(const Value& o) const { return type != o.type ? type < o.type : bits < o.bits; }
  };
  struct Slot {
    Value key, value;
    int key_object = -1, value_object = -1;  // objects_ index of an object key or value
  };
  // How a walk reached an object: from which earlier one (-1: a root), under which key.
  struct Link {
    int parent = -1;
    Value via;
    const char* via_name = nullptr;  // a root's name, or the upvalue's that holds it
  };
  // One object as Take saw it: its slots (a table's entries in the order lua_next gave them,
  // which an untouched table gives again, and sorted by key in by_key_; a function's upvalues in
  // order, a metatable and an environment under keys of their own, a table's length), and, for a
  // tensor, its layout and storage.
  struct Object {
    const void* address = nullptr;
    int type = LUA_TNIL;
    Link link;
    size_t first = 0, count = 0;  // its slots in slots_
    std::vector<const char*> upvalue_names;
    bool is_tensor = false;
    std::vector<int64_t> layout;
    const void* storage = nullptr;  // a tensor's storage, whose bytes storages_ holds
  };
  // An object a Check reached: which of Take's, and how.
  struct Reached {
    size_t object;
    Link link;
  };

  static Value ValueAt(lua_State* L, int idx);
  const Slot* Find(const Object& o, const Value& key) const;
  template <typename LinkOf>
  static std::string PathOf(LinkOf link_of, int i);
  static std::string Describe(const Value& key);

  std::vector<Root> roots_;
  std::vector<Object> objects_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> by_key_;  // per object, its slots' indices sorted by key
  std::unordered_map<const void*, size_t> index_;
  std::unordered_map<const void*, at::Tensor> storages_;  // each kept storage's bytes at Take
  size_t kept_bytes_ = 0;
  // Check's scratch, kept between calls.
  std::vector<Reached> reached_;
  std::vector<uint64_t> seen_;  // the Check that last reached each object
  std::unordered_map<const void*, uint64_t> storage_checks_;  // the Check that compared each
  uint64_t checks_ = 0;
};

}  // namespace vt::lua
