// vt.round, vt.replay, vt.grid, vt.log and the vt.LogRecord class: the precision core in
// Lua (docs/api/precision.md). Also vt.bench_rounding, the C++ half of
// scripts/bench/rounding.lua.
#include <ATen/ATen.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "bindings/tensor.h"
#include "runtime/common/error.h"
#include "runtime/optim/bench.h"
#include "runtime/precision/bench.h"
#include "runtime/precision/codec.h"
#include "runtime/precision/divergence.h"
#include "runtime/precision/kernels.h"
#include "runtime/precision/log_record.h"
#include "runtime/precision/round.h"

namespace vt::lua {
namespace {

namespace prec = vt::precision;

constexpr const char* kLogRecordMeta = "vt.LogRecord";
using RecordPtr = std::shared_ptr<prec::LogRecord>;

prec::LogRecord& CheckRecord(lua_State* L, int idx) {
  return *CheckUserdata<RecordPtr>(L, idx, kLogRecordMeta, "vt.LogRecord");
}

void PushRecord(lua_State* L, RecordPtr record) {
  PushUserdata<RecordPtr>(L, std::move(record), kLogRecordMeta);
}

// bits/band/alpha from an options table (validated later by RoundOptions::Validate).
prec::RoundOptions ReadRoundOptions(lua_State* L, int idx, const char* api) {
  prec::RoundOptions options;
  if (auto bits = OptInteger(L, idx, api, "bits")) {
    if (*bits < prec::kMinBits || *bits > prec::kMaxBits) {
      Fail(L, api, "bits must be an integer in [10, 32], got " + std::to_string(*bits));
    }
    options.bits = static_cast<int>(*bits);
  }
  if (auto band = OptNumber(L, idx, api, "band")) options.band = *band;
  if (auto alpha = OptNumber(L, idx, api, "alpha")) options.alpha = *alpha;
  return options;
}

// The `magnitude` option (ROUNDING.md "Magnitudes"): a tensor with one magnitude per element
// (returned), or "own" (each value its own; sets options->own_magnitude). Absent: the tensor's
// largest |x| is the magnitude of every element.
at::Tensor ReadMagnitude(lua_State* L, int idx, const char* api, prec::RoundOptions* options) {
  if (lua_isnoneornil(L, idx)) return at::Tensor();
  lua_getfield(L, idx, "magnitude");
  at::Tensor magnitude;
  if (at::Tensor* t = TestTensor(L, -1)) {
    magnitude = *t;
  } else if (lua_type(L, -1) == LUA_TSTRING && std::string(lua_tostring(L, -1)) == "own") {
    options->own_magnitude = true;
  } else if (!lua_isnil(L, -1)) {
    Fail(L, api,
         "option 'magnitude' must be a float64 tensor with one value per element, or \"own\"");
  }
  lua_pop(L, 1);
  return magnitude;
}

// name/step options; `name` is copied into `*name_storage`, which must outlive the context.
prec::BoundaryContext ReadContext(lua_State* L, int idx, const char* api,
                                  std::string* name_storage) {
  prec::BoundaryContext context;
  if (auto name = OptString(L, idx, api, "name")) {
    *name_storage = *name;
    context.boundary = *name_storage;
  }
  if (auto step = OptInteger(L, idx, api, "step")) {
    if (*step < 0) Fail(L, api, "option 'step' must be >= 0, got " + std::to_string(*step));
    context.step = *step;
  }
  return context;
}

// A tensor argument that must be a vt.Tensor (dtype/device are checked by the runtime).
at::Tensor CheckInputTensor(lua_State* L, int idx) { return CheckTensor(L, idx); }

// vt.round(t [, {bits=32, band=0.25, alpha=0, magnitude=, log=true, name=, step=}])
//   -> rounded, record|nil
int RoundFn(lua_State* L) {
  const char* api = "vt.round";
  at::Tensor t = CheckInputTensor(L, 1);
  CheckOptions(L, 2, api, {"bits", "band", "alpha", "magnitude", "log", "name", "step"});
  prec::RoundOptions options = ReadRoundOptions(L, 2, api);
  const at::Tensor magnitude = ReadMagnitude(L, 2, api, &options);
  const bool log = OptBoolean(L, 2, api, "log").value_or(true);
  std::string name;
  const prec::BoundaryContext context = ReadContext(L, 2, api, &name);
  return Protect(L, api, [&] {
    RecordPtr record = log ? std::make_shared<prec::LogRecord>() : nullptr;
    prec::RoundResult result = prec::Round(t, options, record.get(), context, magnitude);
    PushTensor(L, result.rounded);
    if (record) {
      PushRecord(L, std::move(record));
    } else {
      lua_pushnil(L);
    }
    return 2;
  });
}

// vt.replay(t, record_or_bytes [, {bits=, band=, alpha=, magnitude=, name=, step=}])
//   -> rounded, report
int ReplayFn(lua_State* L) {
  const char* api = "vt.replay";
  at::Tensor t = CheckInputTensor(L, 1);
  RecordPtr record;
  std::string bytes;
  if (lua_type(L, 2) == LUA_TSTRING) {
    size_t len = 0;
    const char* s = lua_tolstring(L, 2, &len);
    bytes.assign(s, len);
  } else {
    record = CheckUserdata<RecordPtr>(L, 2, kLogRecordMeta, "vt.LogRecord or encoded string");
  }
  CheckOptions(L, 3, api, {"bits", "band", "alpha", "magnitude", "name", "step"});
  prec::RoundOptions options = ReadRoundOptions(L, 3, api);
  const at::Tensor magnitude = ReadMagnitude(L, 3, api, &options);
  std::string name;
  const prec::BoundaryContext context = ReadContext(L, 3, api, &name);
  return Protect(L, api, [&] {
    if (!record) {
      // Check the declared size first (the usual message), then decode with it as the
      // limit so that a hostile record cannot make the decoder allocate more.
      const prec::LogHeader header = prec::DecodeLogHeader(bytes);
      if (header.elements != t.numel()) {
        throw Error("log record has " + std::to_string(header.elements) +
                    " elements but the tensor has " + std::to_string(t.numel()));
      }
      prec::DecodeLimits limits;
      limits.max_elements = t.numel();
      record = std::make_shared<prec::LogRecord>(prec::DecodeLog(bytes, limits));
    }
    prec::ReplayResult result = prec::Replay(t, *record, options, context, magnitude);
    PushTensor(L, result.rounded);
    const prec::ReplayReport& r = result.report;
    lua_createtable(L, 0, 7);
    SetNumbers(L, {{"elements", static_cast<double>(r.elements)},
                   {"logged", static_cast<double>(r.logged)},
                   {"steerable", static_cast<double>(r.steerable)},
                   {"corrections", static_cast<double>(r.corrections)},
                   {"illegitimate", static_cast<double>(r.illegitimate)},
                   {"near_misses", static_cast<double>(r.near_misses)},
                   {"scale", r.scale}});
    return 2;
  });
}

// vt.grid(t [, bits=32]) -> lo, hi
int GridFn(lua_State* L) {
  const char* api = "vt.grid";
  at::Tensor t = CheckInputTensor(L, 1);
  int bits = 32;
  if (!lua_isnoneornil(L, 2)) {
    const int64_t b = CheckInteger(L, 2);
    if (b < prec::kMinBits || b > prec::kMaxBits) {
      Fail(L, api, "bits must be an integer in [10, 32], got " + std::to_string(b));
    }
    bits = static_cast<int>(b);
  }
  return Protect(L, api, [&] {
    prec::GridResult g = prec::Grid(t, bits);
    PushTensor(L, g.lo);
    PushTensor(L, g.hi);
    return 2;
  });
}

// vt.divergence(x, y [, bits=32]) -> {elements, differ, max_abs, scale, max_rel, straddles}:
// how far two machines' FP64 values of one boundary call are apart (calibration, E2, E7).
// scale is max |x|; max_rel = max_abs / scale (0 when scale is 0); straddles counts the
// elements that round to different b-grid values.
int DivergenceFn(lua_State* L) {
  const char* api = "vt.divergence";
  at::Tensor x = CheckInputTensor(L, 1);
  at::Tensor y = CheckInputTensor(L, 2);
  int bits = 32;
  if (!lua_isnoneornil(L, 3)) {
    const int64_t b = CheckInteger(L, 3);
    if (b < prec::kMinBits || b > prec::kMaxBits)
      Fail(L, api, "bits must be an integer in [10, 32], got " + std::to_string(b));
    bits = static_cast<int>(b);
  }
  if (!x.sizes().equals(y.sizes())) Fail(L, api, "the tensors have different shapes");
  return Protect(L, api, [&] {
    const prec::Divergence d = prec::MeasureDivergence(x, y, bits);
    lua_newtable(L);
    SetNumbers(L, {{"elements", static_cast<double>(d.elements)},
                   {"differ", static_cast<double>(d.differ)},
                   {"max_abs", d.max_abs},
                   {"scale", d.scale},
                   {"max_rel", d.max_rel()},
                   {"straddles", static_cast<double>(d.straddles)}});
    return 1;
  });
}

// vt.log.decode(bytes [, {max_elements=}]) -> record
int DecodeFn(lua_State* L) {
  const char* api = "vt.log.decode";
  size_t len = 0;
  const char* s = CheckStringArg(L, 1, &len);
  CheckOptions(L, 2, api, {"max_elements"});
  prec::DecodeLimits limits;
  if (auto m = OptInteger(L, 2, api, "max_elements")) {
    if (*m < 0) Fail(L, api, "option 'max_elements' must be >= 0, got " + std::to_string(*m));
    limits.max_elements = *m;
  }
  return Protect(L, api, [&] {
    auto record =
        std::make_shared<prec::LogRecord>(prec::DecodeLog(std::string_view(s, len), limits));
    PushRecord(L, std::move(record));
    return 1;
  });
}

prec::LogEncoding OptEncoding(lua_State* L, int idx, const char* api) {
  if (lua_isnoneornil(L, idx)) return prec::LogEncoding::kAuto;
  const char* name = CheckStringArg(L, idx, nullptr);
  prec::LogEncoding encoding = prec::LogEncoding::kAuto;
  Protect(L, api, [&] {
    encoding = prec::ParseLogEncoding(name);
    return 0;
  });
  return encoding;
}

int RecordCounts(lua_State* L) {
  const prec::StateCounts& c = CheckRecord(L, 1).counts();
  lua_createtable(L, 0, 4);
  SetNumbers(L, {{"none", static_cast<double>(c.none)},
                 {"down", static_cast<double>(c.down)},
                 {"up", static_cast<double>(c.up)},
                 {"exact", static_cast<double>(c.exact)}});
  return 1;
}

int RecordStates(lua_State* L) {
  const prec::LogRecord& r = CheckRecord(L, 1);
  return Protect(L, "vt.LogRecord:states", [&] {
    at::Tensor t = at::empty({r.size()}, at::TensorOptions().dtype(at::kByte));
    if (r.size() > 0) std::memcpy(t.data_ptr<uint8_t>(), r.states(), static_cast<size_t>(r.size()));
    PushTensor(L, t);
    return 1;
  });
}

int RecordEncode(lua_State* L) {
  const char* api = "vt.LogRecord:encode";
  const prec::LogRecord& r = CheckRecord(L, 1);
  const prec::LogEncoding encoding = OptEncoding(L, 2, api);
  return Protect(L, api, [&] {
    const std::string bytes = prec::EncodeLog(r, encoding);
    lua_pushlstring(L, bytes.data(), bytes.size());
    return 1;
  });
}

int RecordBitsPerElement(lua_State* L) {
  const char* api = "vt.LogRecord:bits_per_element";
  const prec::LogRecord& r = CheckRecord(L, 1);
  const prec::LogEncoding encoding = OptEncoding(L, 2, api);
  return Protect(L, api, [&] {
    lua_pushnumber(L, prec::BitsPerElement(r, encoding));
    return 1;
  });
}

int RecordEntropyBits(lua_State* L) {
  lua_pushnumber(L, CheckRecord(L, 1).EntropyBits());
  return 1;
}

// record:flipped([position]) -> a new record with the DOWN/UP entry at `position` (0-based;
// default: the first DOWN or UP entry) turned the other way, or nil if there is none. For
// tests and the game's log-rewriting scenario.
int RecordFlipped(lua_State* L) {
  const prec::LogRecord& r = CheckRecord(L, 1);
  int64_t position = -1;
  if (!lua_isnoneornil(L, 2)) {
    position = CheckInteger(L, 2);
    if (position < 0 || position >= r.size()) {
      ArgError(L, 2,
               "position " + std::to_string(position) + " is outside [0, " +
                   std::to_string(r.size()) + ")");
    }
    const auto state = r.state(position);
    if (state != prec::LogState::kDown && state != prec::LogState::kUp) {
      ArgError(L, 2, "the entry at position " + std::to_string(position) + " is not DOWN or UP");
    }
  } else {
    for (int64_t i = 0; i < r.size() && position < 0; ++i) {
      if (r.state(i) == prec::LogState::kDown || r.state(i) == prec::LogState::kUp) position = i;
    }
    if (position < 0) {
      lua_pushnil(L);
      return 1;
    }
  }
  return Protect(L, "vt.LogRecord:flipped", [&] {
    std::vector<uint8_t> states(r.states(), r.states() + r.size());
    states[static_cast<size_t>(position)] = static_cast<uint8_t>(
        r.state(position) == prec::LogState::kDown ? prec::LogState::kUp : prec::LogState::kDown);
    PushRecord(L, std::make_shared<prec::LogRecord>(
                      prec::LogRecord::FromStates(std::move(states), r.exact())));
    return 1;
  });
}

int RecordLen(lua_State* L) {
  lua_pushnumber(L, static_cast<lua_Number>(CheckRecord(L, 1).size()));
  return 1;
}

int RecordToString(lua_State* L) {
  const std::string s = "vt." + CheckRecord(L, 1).Summary();
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

// A vector of ints from a Lua array option (or the default).
std::vector<int> OptIntList(lua_State* L, int idx, const char* api, const char* name,
                            std::vector<int> fallback) {
  if (lua_isnoneornil(L, idx)) return fallback;
  lua_getfield(L, idx, name);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return fallback;
  }
  if (!lua_istable(L, -1))
    Fail(L, api, std::string("option '") + name + "' must be an array of integers");
  std::vector<int> values;
  const int len = static_cast<int>(lua_objlen(L, -1));
  for (int i = 1; i <= len; ++i) {
    lua_rawgeti(L, -1, i);
    const double v = lua_tonumber(L, -1);
    if (lua_type(L, -1) != LUA_TNUMBER || v != static_cast<int>(v)) {
      Fail(L, api, std::string("option '") + name + "' must be an array of integers");
    }
    values.push_back(static_cast<int>(v));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return values;
}

// vt.bench_optimizer{elements=8M, threads={1,2}, repeats=5}: a list of {kind, threads, fp64,
// trainer_fused, trainer_unfused, auditor_fused, auditor_unfused} (seconds a step).
int BenchOptimizerFn(lua_State* L) {
  const char* api = "vt.bench_optimizer";
  CheckOptions(L, 1, api, {"elements", "threads", "repeats"});
  vt::optim::OptimizerBenchOptions o;
  if (auto v = OptInteger(L, 1, api, "elements")) o.elements = *v;
  if (auto v = OptInteger(L, 1, api, "repeats")) o.repeats = static_cast<int>(*v);
  o.threads = OptIntList(L, 1, api, "threads", o.threads);
  return Protect(L, api, [&] {
    const std::vector<vt::optim::OptimizerTiming> r = vt::optim::RunOptimizerBench(o);
    lua_createtable(L, static_cast<int>(r.size()), 0);
    for (size_t i = 0; i < r.size(); ++i) {
      const vt::optim::OptimizerTiming& t = r[i];
      lua_createtable(L, 0, 7);
      lua_pushstring(L, t.kind.c_str());
      lua_setfield(L, -2, "kind");
      lua_pushnumber(L, t.threads);
      lua_setfield(L, -2, "threads");
      const std::pair<const char*, double> fields[] = {{"fp64", t.fp64},
                                                       {"trainer_fused", t.trainer_fused},
                                                       {"trainer_unfused", t.trainer_unfused},
                                                       {"auditor_fused", t.auditor_fused},
                                                       {"auditor_unfused", t.auditor_unfused}};
      for (const auto& [name, value] : fields) {
        lua_pushnumber(L, value);
        lua_setfield(L, -2, name);
      }
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    return 1;
  });
}

// vt.bench_rounding{elements=, threads={1,2}, bits={32,26}, repeats=5, seed=1, alpha=2^-44}
int BenchRoundingFn(lua_State* L) {
  const char* api = "vt.bench_rounding";
  CheckOptions(L, 1, api, {"elements", "threads", "bits", "repeats", "seed", "alpha"});
  prec::RoundingBenchOptions o;
  if (auto v = OptInteger(L, 1, api, "elements")) o.elements = *v;
  if (auto v = OptInteger(L, 1, api, "repeats")) o.repeats = static_cast<int>(*v);
  if (auto v = OptInteger(L, 1, api, "seed")) o.seed = static_cast<uint64_t>(*v);
  if (auto v = OptNumber(L, 1, api, "alpha")) o.calibrated_alpha = *v;
  o.threads = OptIntList(L, 1, api, "threads", o.threads);
  o.bits = OptIntList(L, 1, api, "bits", o.bits);
  return Protect(L, api, [&] {
    const prec::RoundingBenchResult r = prec::RunRoundingBench(o);
    lua_createtable(L, 0, 4);
    lua_pushstring(L, r.isa.c_str());
    lua_setfield(L, -2, "isa");
    lua_pushnumber(L, static_cast<lua_Number>(r.elements));
    lua_setfield(L, -2, "elements");
    lua_createtable(L, static_cast<int>(r.kernels.size()), 0);
    for (size_t i = 0; i < r.kernels.size(); ++i) {
      const prec::KernelTiming& k = r.kernels[i];
      lua_createtable(L, 0, 6);
      lua_pushstring(L, k.what.c_str());
      lua_setfield(L, -2, "what");
      lua_pushstring(L, k.mode.c_str());
      lua_setfield(L, -2, "mode");
      lua_pushnumber(L, k.threads);
      lua_setfield(L, -2, "threads");
      lua_pushnumber(L, k.bits);
      lua_setfield(L, -2, "bits");
      lua_pushnumber(L, k.seconds);
      lua_setfield(L, -2, "seconds");
      lua_pushnumber(L, k.elems_per_s);
      lua_setfield(L, -2, "elems_per_s");
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    lua_setfield(L, -2, "kernels");
    lua_createtable(L, static_cast<int>(r.encodings.size()), 0);
    for (size_t i = 0; i < r.encodings.size(); ++i) {
      const prec::EncodingTiming& e = r.encodings[i];
      lua_createtable(L, 0, 11);
      lua_pushstring(L, e.mode.c_str());
      lua_setfield(L, -2, "mode");
      lua_pushnumber(L, e.bits);
      lua_setfield(L, -2, "bits");
      lua_pushstring(L, e.encoding.c_str());
      lua_setfield(L, -2, "encoding");
      lua_pushstring(L, e.chosen.c_str());
      lua_setfield(L, -2, "chosen");
      lua_pushnumber(L, e.logged_fraction);
      lua_setfield(L, -2, "logged_fraction");
      lua_pushnumber(L, static_cast<lua_Number>(e.exact));
      lua_setfield(L, -2, "exact");
      lua_pushnumber(L, static_cast<lua_Number>(e.bytes));
      lua_setfield(L, -2, "bytes");
      lua_pushnumber(L, e.bits_per_element);
      lua_setfield(L, -2, "bits_per_element");
      lua_pushnumber(L, e.entropy_bits);
      lua_setfield(L, -2, "entropy_bits");
      lua_pushnumber(L, e.encode_elems_per_s);
      lua_setfield(L, -2, "encode_elems_per_s");
      lua_pushnumber(L, e.decode_elems_per_s);
      lua_setfield(L, -2, "decode_elems_per_s");
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    lua_setfield(L, -2, "encodings");
    return 1;
  });
}

}  // namespace

void OpenPrecision(lua_State* L) {
  const luaL_Reg methods[] = {
      {"counts", RecordCounts},
      {"states", RecordStates},
      {"encode", RecordEncode},
      {"bits_per_element", RecordBitsPerElement},
      {"entropy_bits", RecordEntropyBits},
      {"flipped", RecordFlipped},
      {nullptr, nullptr},
  };
  const luaL_Reg metamethods[] = {
      {"__gc", DestroyUserdata<RecordPtr>},
      {"__len", RecordLen},
      {"__tostring", RecordToString},
      {nullptr, nullptr},
  };
  RegisterClass(L, kLogRecordMeta, methods, metamethods);

  const luaL_Reg funcs[] = {
      {"round", RoundFn},
      {"replay", ReplayFn},
      {"grid", GridFn},
      {"bench_rounding", BenchRoundingFn},
      {"bench_optimizer", BenchOptimizerFn},
      {"divergence", DivergenceFn},
      {nullptr, nullptr},
  };
  SetFuncs(L, funcs);

  const luaL_Reg log_funcs[] = {
      {"decode", DecodeFn},
      {nullptr, nullptr},
  };
  lua_newtable(L);
  SetFuncs(L, log_funcs);
  lua_setfield(L, -2, "log");
}

}  // namespace vt::lua
