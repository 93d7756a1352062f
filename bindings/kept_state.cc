// KeptState: what a Lua model keeps between forward calls (kept_state.h).
#include "bindings/kept_state.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <utility>

#include "bindings/tensor.h"
#include "runtime/common/error.h"

namespace vt::lua {
namespace {

// Slot keys that are not a table's own keys (outside Lua's type numbers).
constexpr int kMetatableKey = 100;
constexpr int kEnvironmentKey = 101;
constexpr int kUpvalueKey = 102;  // bits: the upvalue's number
constexpr int kAsKey = 103;       // (how a walk reached an object that is a table's key)
constexpr int kLengthKey = 104;   // a table's length (#): its layout, which the contents alone
                                  // do not fix (a rehash moves keys into the array part)

int Absolute(lua_State* L, int idx) { return idx < 0 ? lua_gettop(L) + idx + 1 : idx; }

bool IsObject(int type) {
  return type == LUA_TTABLE || type == LUA_TFUNCTION || type == LUA_TUSERDATA ||
         type == LUA_TTHREAD || type > LUA_TTHREAD;  // (LuaJIT's cdata)
}

// Whether the walk reads the object's upvalues and environment: a Lua function's, and a
// userdata's environment. A C function's are the host's own: no Lua code reads them.
bool IsLuaFunction(lua_State* L, int idx) {
  return lua_type(L, idx) == LUA_TFUNCTION && !lua_iscfunction(L, idx);
}

// A tensor's identity, layout and autograd state: dtype, storage, offset, sizes, strides,
// whether it requires a gradient or carries a graph, and its version (bumped by every write,
// so a write that put the bytes back shows too).
std::vector<int64_t> LayoutOf(const at::Tensor& t) {
  if (!t.defined()) return {-1};
  std::vector<int64_t> out = {static_cast<int64_t>(t.scalar_type()),
                              static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr())),
                              t.storage_offset(),
                              t.dim(),
                              t.requires_grad(),
                              t.grad_fn() != nullptr,
                              t.is_inference() ? -1 : t._version()};
  for (int64_t s : t.sizes()) out.push_back(s);
  for (int64_t s : t.strides()) out.push_back(s);
  return out;
}

// The whole storage under a tensor, as bytes (views of one storage share one copy).
const void* StorageOf(const at::Tensor& t) { return t.defined() ? t.storage().data() : nullptr; }
size_t StorageBytes(const at::Tensor& t) { return t.defined() ? t.storage().nbytes() : 0; }
at::Tensor StorageCopy(const at::Tensor& t) {
  const int64_t n = static_cast<int64_t>(StorageBytes(t));
  if (t.is_cpu()) {
    at::Tensor all = at::empty({n}, at::TensorOptions().dtype(at::kByte));
    if (n > 0) std::memcpy(all.data_ptr(), StorageOf(t), n);
    return all;
  }
  // (a tensor a source moved to a device: compared in host memory)
  return at::empty({0}, t.options().dtype(at::kByte)).set_(t.storage(), 0, {n}, {1}).cpu();
}
bool SameStorage(const at::Tensor& t, const at::Tensor& copy) {
  if (static_cast<size_t>(copy.numel()) != StorageBytes(t)) return false;
  if (copy.numel() == 0) return true;
  const at::Tensor now = t.is_cpu() ? at::Tensor() : StorageCopy(t);
  const void* bytes = t.is_cpu() ? StorageOf(t) : now.data_ptr();
  return std::memcmp(bytes, copy.data_ptr(), StorageBytes(t)) == 0;
}

// What the model's own tensors may hold in all (the check keeps a copy of it).
constexpr size_t kMaxKeptBytes = size_t{1} << 30;

}  // namespace

KeptState::Value KeptState::ValueAt(lua_State* L, int idx) {
  Value v;
  v.type = lua_type(L, idx);
  if (v.type == LUA_TBOOLEAN) {
    v.bits = lua_toboolean(L, idx);
  } else if (v.type == LUA_TNUMBER) {
    const double d = lua_tonumber(L, idx);
    std::memcpy(&v.bits, &d, sizeof d);  // bits: -0 is not 0, and a NaN equals itself
  } else if (v.type == LUA_TSTRING) {
    v.bits = reinterpret_cast<uintptr_t>(lua_tostring(L, idx));  // interned
  } else if (v.type != LUA_TNIL) {
    v.bits = reinterpret_cast<uintptr_t>(lua_topointer(L, idx));
  }
  return v;
}

void KeptState::Take(lua_State* L, std::vector<Root> roots) {
  roots_ = std::move(roots);
  objects_.clear();
  slots_.clear();
  by_key_.clear();
  storages_.clear();
  kept_bytes_ = 0;
  index_.clear();
  const int top = lua_gettop(L);
  lua_checkstack(L, 16);
  lua_newtable(L);  // every object in walk order: keeps each at hand while it is read
  const int queue = lua_gettop(L);
  auto reach = [&](int idx, int parent, Value via, const char* via_name) -> int {
    idx = Absolute(L, idx);
    if (!IsObject(lua_type(L, idx))) return -1;
    const void* address = lua_topointer(L, idx);
    auto [it, added] = index_.emplace(address, objects_.size());
    if (!added) return static_cast<int>(it->second);
    Object o;
    o.address = address;
    o.type = lua_type(L, idx);
    o.link = Link{parent, via, via_name};
    objects_.push_back(std::move(o));
    lua_pushvalue(L, idx);
    lua_rawseti(L, queue, static_cast<int>(objects_.size()));
    return static_cast<int>(objects_.size() - 1);
  };
  auto link_of = [&](int i) -> const Link& { return objects_[i].link; };
  for (const Root& root : roots_) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, root.ref);
    reach(-1, -1, Value{}, root.name.c_str());
    lua_pop(L, 1);
  }
  for (size_t i = 0; i < objects_.size(); ++i) {
    lua_rawgeti(L, queue, static_cast<int>(i + 1));
    const int obj = lua_gettop(L);
    const int type = objects_[i].type;
    const int self = static_cast<int>(i);
    const size_t first = slots_.size();
    if ((type == LUA_TTABLE || type == LUA_TUSERDATA) && lua_getmetatable(L, obj)) {
      const Value key{kMetatableKey, 0};
      const size_t slot = slots_.size();
      slots_.push_back({key, ValueAt(L, -1)});
      if (type == LUA_TTABLE) {
        lua_pushliteral(L, "__mode");
        lua_rawget(L, -2);
        const bool weak = !lua_isnil(L, -1);
        lua_pop(L, 1);
        if (weak) {
          lua_settop(L, top);
          throw Error("the model keeps a weak table (a metatable with __mode) at " +
                      PathOf(link_of, self) + ": its entries vanish when the garbage " +
                      "collector runs, which differs between processes; keep plain tables");
        }
      }
      slots_[slot].value_object = reach(-1, self, key, nullptr);
      lua_pop(L, 1);
    }
    if (type == LUA_TTABLE) {
      lua_pushnil(L);
      while (lua_next(L, obj) != 0) {
        const Value key = ValueAt(L, -2);
        Slot s{key, ValueAt(L, -1)};
        s.key_object = reach(-2, self, Value{kAsKey, 0}, nullptr);
        s.value_object = reach(-1, self, key, nullptr);
        slots_.push_back(s);
        lua_pop(L, 1);
      }
    } else if (IsLuaFunction(L, obj)) {
      for (int n = 1;; ++n) {
        const char* name = lua_getupvalue(L, obj, n);
        if (name == nullptr) break;
        const Value key{kUpvalueKey, static_cast<uint64_t>(n)};
        Slot s{key, ValueAt(L, -1)};
        objects_[i].upvalue_names.push_back(name);
        s.value_object = reach(-1, self, key, name);
        slots_.push_back(s);
        lua_pop(L, 1);
      }
    }
    if (IsLuaFunction(L, obj) || type == LUA_TUSERDATA) {
      lua_getfenv(L, obj);
      const Value key{kEnvironmentKey, 0};
      Slot s{key, ValueAt(L, -1)};
      s.value_object = reach(-1, self, key, nullptr);
      slots_.push_back(s);
      lua_pop(L, 1);
    }
    if (type == LUA_TTABLE) {
      slots_.push_back(
          {Value{kLengthKey, 0}, Value{LUA_TNUMBER, static_cast<uint64_t>(lua_objlen(L, obj))}});
    }
    if (type == LUA_TUSERDATA) {
      if (at::Tensor* t = TestTensor(L, obj)) {
        objects_[i].is_tensor = true;
        objects_[i].layout = LayoutOf(*t);
        objects_[i].storage = StorageOf(*t);
        if (t->defined() && storages_.count(objects_[i].storage) == 0) {
          kept_bytes_ += StorageBytes(*t);
          if (kept_bytes_ > kMaxKeptBytes) {
            lua_settop(L, top);
            throw Error("the model keeps more than 1 GiB in tensors of its own (made while " +
                        std::string("building, at ") + PathOf(link_of, self) +
                        " and elsewhere); a model source may keep at most that");
          }
          storages_.emplace(objects_[i].storage, StorageCopy(*t));
        }
      }
    }
    objects_[i].first = first;
    objects_[i].count = slots_.size() - first;
    for (size_t k = first; k < slots_.size(); ++k) by_key_.push_back(static_cast<uint32_t>(k));
    std::sort(by_key_.begin() + first, by_key_.end(),
              [&](uint32_t a, uint32_t b) { return slots_[a].key < slots_[b].key; });
    lua_pop(L, 1);
  }
  lua_settop(L, top);
  seen_.assign(objects_.size(), 0);
}

const KeptState::Slot* KeptState::Find(const Object& o, const Value& key) const {
  const uint32_t* begin = by_key_.data() + o.first;
  const uint32_t* end = begin + o.count;
  const uint32_t* s = std::lower_bound(
      begin, end, key, [&](uint32_t a, const Value& k) { return slots_[a].key < k; });
  return s != end && slots_[*s].key == key ? &slots_[*s] : nullptr;
}

void KeptState::Check(lua_State* L, const std::string& what) {
  ++checks_;
  reached_.clear();
  const int top = lua_gettop(L);
  lua_checkstack(L, 16);
  lua_createtable(L, static_cast<int>(objects_.size()), 0);
  const int queue = lua_gettop(L);
  auto link_of = [&](int i) -> const Link& { return reached_[i].link; };
  auto fail = [&](int at, const std::string& detail) {
    std::string where = at < 0 ? detail : PathOf(link_of, at) + detail;
    lua_settop(L, top);
    throw Error(what + ": the forward changed what the model keeps between calls: " + where +
                ". A model's forward must depend only on its input, its parameters and what "
                "building made: each party calls it a different number of times (a trainer "
                "evaluates, a judge starts from a checkpoint), and a checkpoint holds tensors "
                "only. Compute such values in the forward from its input instead");
  };
  // An object whose address equals the one Take saw in the same slot: Take's object `object`.
  auto known = [&](int idx, int object, int parent, Value via, const char* via_name) {
    if (object < 0 || seen_[object] == checks_) return;
    seen_[object] = checks_;
    reached_.push_back({static_cast<size_t>(object), Link{parent, via, via_name}});
    lua_pushvalue(L, idx);
    lua_rawseti(L, queue, static_cast<int>(reached_.size()));
  };
  auto reach = [&](int idx, int parent, Value via, const char* via_name) {
    idx = Absolute(L, idx);
    if (!IsObject(lua_type(L, idx))) return;
    auto it = index_.find(lua_topointer(L, idx));
    if (it == index_.end()) {
      // (Its parent's slot differs too; this names the new value where it was stored.)
      fail(parent, (parent < 0 ? std::string(via_name ? via_name : "a root")
                    : via.type == kUpvalueKey
                        ? std::string(" (its upvalue '") + (via_name ? via_name : "?") + "')"
                        : Describe(via)) +
                       " (a value the forward stored)");
    }
    known(idx, static_cast<int>(it->second), parent, via, via_name);
  };
  for (const Root& root : roots_) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, root.ref);
    reach(-1, -1, Value{}, root.name.c_str());
    lua_pop(L, 1);
  }
  for (size_t r = 0; r < reached_.size(); ++r) {
    lua_rawgeti(L, queue, static_cast<int>(r + 1));
    const int obj = lua_gettop(L);
    const Object& before = objects_[reached_[r].object];
    const int self = static_cast<int>(r);
    // The slot of `key` holds the value at `idx` as it did at Take: reach it as Take's.
    auto expect = [&](const Value& key, int idx, const std::string& name, const char* via_name) {
      const Slot* s = Find(before, key);
      if (s == nullptr || s->value != ValueAt(L, idx)) fail(self, name);
      known(Absolute(L, idx), s->value_object, self, key, via_name);
    };
    size_t count = 0;
    if (before.type == LUA_TTABLE || before.type == LUA_TUSERDATA) {
      const Value key{kMetatableKey, 0};
      if (lua_getmetatable(L, obj)) {
        expect(key, -1, " (its metatable)", nullptr);
        lua_pop(L, 1);
        ++count;
      } else if (Find(before, key) != nullptr) {
        fail(self, " (its metatable)");
      }
    }
    if (before.type == LUA_TTABLE) {
      // (lua_next gives an untouched table's entries in Take's order: the slot at the same
      // place is the one, or else Find's.)
      size_t at = before.first + (count ? 1 : 0);
      lua_pushnil(L);
      while (lua_next(L, obj) != 0) {
        const Value key = ValueAt(L, -2);
        const Slot* s = at < before.first + before.count && slots_[at].key == key
                            ? &slots_[at]
                            : Find(before, key);
        ++at;
        if (s == nullptr) fail(self, Describe(key) + " (added)");
        if (s->value != ValueAt(L, -1)) fail(self, Describe(key));
        known(Absolute(L, -2), s->key_object, self, Value{kAsKey, 0}, nullptr);
        known(Absolute(L, -1), s->value_object, self, key, nullptr);
        lua_pop(L, 1);
        ++count;
      }
      ++count;  // (the length slot)
      {
        const Value length{LUA_TNUMBER, static_cast<uint64_t>(lua_objlen(L, obj))};
        const Slot* s = Find(before, Value{kLengthKey, 0});
        if (s == nullptr || s->value != length) fail(self, " (its length, #)");
      }
      if (count != before.count) {
        // An entry is gone: name the first one.
        for (size_t k = before.first; k < before.first + before.count; ++k) {
          const Value& key = slots_[k].key;
          if (key.type == kMetatableKey || key.type == kLengthKey) continue;
          bool present = false;
          lua_pushnil(L);
          while (!present && lua_next(L, obj) != 0) {
            present = ValueAt(L, -2) == key;
            lua_pop(L, present ? 2 : 1);
          }
          if (!present) fail(self, Describe(key) + " (removed)");
        }
        fail(self, " (its entries)");
      }
    } else if (IsLuaFunction(L, obj)) {
      for (int n = 1;; ++n) {
        const char* name = lua_getupvalue(L, obj, n);
        if (name == nullptr) break;
        const Value key{kUpvalueKey, static_cast<uint64_t>(n)};
        expect(key, -1, std::string(" (its upvalue '") + name + "')", name);
        lua_pop(L, 1);
      }
    }
    if (IsLuaFunction(L, obj) || before.type == LUA_TUSERDATA) {
      lua_getfenv(L, obj);
      const Value key{kEnvironmentKey, 0};
      expect(key, -1, " (its environment)", nullptr);
      lua_pop(L, 1);
    }
    if (before.is_tensor) {
      at::Tensor* t = TestTensor(L, obj);
      if (t == nullptr || LayoutOf(*t) != before.layout)
        fail(self, " (a tensor's layout, version or graph)");
      if (t->defined()) {
        uint64_t& checked = storage_checks_[before.storage];
        if (checked != checks_) {  // (each storage once, however many views of it)
          checked = checks_;
          if (!SameStorage(*t, storages_.at(before.storage))) fail(self, " (a tensor's values)");
        }
      }
    }
    lua_pop(L, 1);
  }
  if (reached_.size() != objects_.size()) fail(-1, "an object it held is gone");
  lua_settop(L, top);
}

std::string KeptState::Describe(const Value& key) {
  switch (key.type) {
    case LUA_TSTRING: {
      const char* s = reinterpret_cast<const char*>(key.bits);
      bool name = std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_';
      for (const char* c = s; *c && name; ++c)
        name = std::isalnum(static_cast<unsigned char>(*c)) || *c == '_';
      return name ? std::string(".") + s : "[\"" + std::string(s).substr(0, 40) + "\"]";
    }
    case LUA_TNUMBER: {
      double d;
      std::memcpy(&d, &key.bits, sizeof d);
      char buf[40];
      std::snprintf(buf, sizeof buf, "[%.17g]", d);
      return buf;
    }
    case LUA_TBOOLEAN:
      return key.bits ? "[true]" : "[false]";
    case kMetatableKey:
      return " (its metatable)";
    case kEnvironmentKey:
      return " (its environment)";
    case kAsKey:
      return " (a key)";
    default:
      return std::string("[a ") + (key.type == LUA_TTABLE ? "table" : "value") + " key]";
  }
}

template <typename LinkOf>
std::string KeptState::PathOf(LinkOf link_of, int i) {
  std::vector<std::string> parts;
  for (int at = i; at >= 0;) {
    const Link& l = link_of(at);
    if (l.parent < 0) {
      parts.push_back(l.via_name ? l.via_name : "a root");
    } else if (l.via.type == kUpvalueKey) {
      parts.push_back(std::string(" (its upvalue '") + (l.via_name ? l.via_name : "?") + "')");
    } else {
      parts.push_back(Describe(l.via));
    }
    at = l.parent;
  }
  std::string out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) out += *it;
  return out;
}

}  // namespace vt::lua
