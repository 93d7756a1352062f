// vt.trainer, vt.auditor: runs of the rounded engine.
//
// vt.trainer and vt.auditor run a spec (vt.spec, train.cc) on a device profile against a
// store and return a vt.Runner (step, steps, run, evaluate, checkpoint, root, ...). Steps
// count from 1, leaves from 0. What this file shares with train.cc is in train_support.h.
#include "runtime/train/runner.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings/dist.h"
#include "bindings/host.h"
#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "bindings/progress.h"
#include "bindings/records.h"
#include "bindings/store_support.h"
#include "bindings/tensor.h"
#include "bindings/train_support.h"
#include "runtime/common/error.h"
#include "runtime/tensor/safetensors.h"
#include "runtime/train/deviation.h"
#include "runtime/train/spec_check.h"
#include "store/store.h"

namespace vt::lua {

RunnerPtr& CheckRunner(lua_State* L, int idx) {
  return CheckUserdata<RunnerPtr>(L, idx, kRunnerMeta, "vt.Runner");
}

namespace {

// Reads the options shared by trainers and auditors (table at 1).
train::RunnerOptions ReadRunnerOptions(lua_State* L, const char* api, SpecPtr* spec,
                                       bool store_required = true) {
  lua_getfield(L, 1, "spec");
  SpecPtr* s = static_cast<SpecPtr*>(luaL_testudata(L, -1, kSpecMeta));
  if (s == nullptr) Fail(L, api, "option 'spec' is required: a vt.Spec");
  *spec = *s;
  lua_pop(L, 1);
  train::RunnerOptions o;
  lua_getfield(L, 1, "data");
  DatasetPtr* d = static_cast<DatasetPtr*>(luaL_testudata(L, -1, kDatasetMeta));
  if (d == nullptr) Fail(L, api, "option 'data' is required: the spec's data set (vt.data.*)");
  o.data = *d;
  lua_pop(L, 1);
  lua_getfield(L, 1, "store");
  StorePtr* st = static_cast<StorePtr*>(luaL_testudata(L, -1, kStoreMeta));
  if (st != nullptr)
    o.store = *st;
  else if (store_required)
    Fail(L, api, "option 'store' is required: this party's vt.store.open(path)");
  lua_pop(L, 1);
  // In a data-parallel group (vtrun --nproc/--world) every runner is one rank of it; only
  // rank 0 keeps a store (runtime/train/runner.h).
  o.group = DefaultGroup();
  o.run = OptString(L, 1, api, "run").value_or(o.run);
  o.profile = OptString(L, 1, api, "profile").value_or(o.profile);
  o.metadata = OptString(L, 1, api, "metadata").value_or("");
  o.init_path = OptString(L, 1, api, "init").value_or("");
  // capture = true (every boundary) or a list of kinds {"fwd", "bwd", "grad", "update"}.
  lua_getfield(L, 1, "capture");
  if (lua_isboolean(L, -1)) {
    o.capture_kinds = lua_toboolean(L, -1) ? 0xFu : 0u;
  } else if (lua_istable(L, -1)) {
    for (int i = 1; i <= static_cast<int>(lua_objlen(L, -1)); ++i) {
      lua_rawgeti(L, -1, i);
      const char* kind = lua_tostring(L, -1);
      const std::string k = kind ? kind : "";
      int bit = k == "fwd" ? 0 : k == "bwd" ? 1 : k == "grad" ? 2 : k == "update" ? 3 : -1;
      if (bit < 0)
        Fail(L, api,
             "option 'capture' lists boundary kinds: fwd, bwd, grad, update (got '" + k + "')");
      o.capture_kinds |= 1u << bit;
      lua_pop(L, 1);
    }
  } else if (!lua_isnil(L, -1)) {
    Fail(L, api, "option 'capture' must be true or a list of boundary kinds");
  }
  lua_pop(L, 1);
  return o;
}

int TrainerNew(lua_State* L) {
  const char* api = "vt.trainer";
  CheckTable(L, 1);
  CheckOptions(L, 1, api,
               {"spec", "data", "store", "run", "profile", "metadata", "mode", "init", "deviate",
                "capture"});
  std::string mode_name = OptString(L, 1, api, "mode").value_or("log");
  nn::Mode mode = nn::Mode::kLog;
  Protect(L, api, [&] {
    mode = nn::ParseMode(mode_name);
    if (mode == nn::Mode::kReplay) throw Error("mode 'replay' is the auditor's; use vt.auditor");
    return 0;
  });
  SpecPtr spec;
  // Ranks other than 0 of a group keep no store (rank 0 commits the run).
  const bool other_rank = DefaultGroup() && DefaultGroup()->rank() != 0;
  train::RunnerOptions o = ReadRunnerOptions(L, api, &spec, mode == nn::Mode::kLog && !other_rank);
  lua_getfield(L, 1, "deviate");
  if (!lua_isnil(L, -1)) {
    const int t = lua_gettop(L);
    if (!lua_istable(L, t))
      Fail(L, api,
           "option 'deviate' must be a table {kind=, from_step=, to_step=, amount=, target=}");
    CheckOptions(L, t, "vt.trainer deviate", {"kind", "from_step", "to_step", "amount", "target"});
    std::string kind = OptString(L, t, api, "kind").value_or("none");
    Protect(L, api, [&] {
      o.deviation.kind = train::Deviation::ParseKind(kind);
      return 0;
    });
    o.deviation.from_step = OptInteger(L, t, api, "from_step").value_or(1);
    o.deviation.to_step = OptInteger(L, t, api, "to_step").value_or(0);
    o.deviation.amount = OptNumber(L, t, api, "amount").value_or(0.0);
    o.deviation.target = OptInteger(L, t, api, "target").value_or(0);
  }
  lua_pop(L, 1);
  return Protect(L, api, [&] {
    PushUserdata<RunnerPtr>(L, std::make_shared<train::Trainer>(*spec, o, mode), kRunnerMeta);
    return 1;
  });
}

// Records handed to an auditor step by step (logs = "given"): runner:step(records) puts them
// here and the auditor's record source takes them.
struct GivenRecords {
  std::map<int64_t, std::vector<store::LogRecord>> pending;
};
std::map<const train::Runner*, std::shared_ptr<GivenRecords>>& GivenSources() {
  static std::map<const train::Runner*, std::shared_ptr<GivenRecords>> sources;
  return sources;
}

int AuditorNew(lua_State* L) {
  const char* api = "vt.auditor";
  CheckTable(L, 1);
  CheckOptions(L, 1, api,
               {"spec", "data", "store", "run", "profile", "metadata", "logs", "logs_run", "init",
                "start", "capture", "near_limit"});
  SpecPtr spec;
  train::RunnerOptions o = ReadRunnerOptions(L, api, &spec, false);
  o.count_near_limit = OptBoolean(L, 1, api, "near_limit").value_or(false);
  // logs: the trainer (its store and run), a store holding the trainer's run `logs_run`, or
  // "given" (records passed to each runner:step(records) call).
  lua_getfield(L, 1, "logs");
  StorePtr logs;
  std::shared_ptr<GivenRecords> given;
  std::string logs_run = OptString(L, 1, api, "logs_run").value_or("run");
  if (RunnerPtr* r = static_cast<RunnerPtr*>(luaL_testudata(L, -1, kRunnerMeta))) {
    logs = (*r)->options().store;
    logs_run = (*r)->run();
  } else if (StorePtr* s = static_cast<StorePtr*>(luaL_testudata(L, -1, kStoreMeta))) {
    logs = *s;
  } else if (lua_type(L, -1) == LUA_TSTRING && std::string(lua_tostring(L, -1)) == "given") {
    given = std::make_shared<GivenRecords>();
  } else if (!(DefaultGroup() && DefaultGroup()->rank() != 0 && lua_isnil(L, -1))) {
    // (Ranks other than 0 of a group get their records from rank 0.)
    Fail(L, api,
         "option 'logs' is required: the trainer, a store holding its run (with logs_run=), or "
         "\"given\"");
  }
  lua_pop(L, 1);
  // start = {step=, checkpoint=}: a judge's starting point (no store).
  lua_getfield(L, 1, "start");
  if (!lua_isnil(L, -1)) {
    const int t = lua_gettop(L);
    if (!lua_istable(L, t)) Fail(L, api, "option 'start' must be a table {step=, checkpoint=}");
    CheckOptions(L, t, "vt.auditor start", {"step", "checkpoint"});
    o.start_step = OptInteger(L, t, api, "step").value_or(0);
    o.start_checkpoint = OptString(L, t, api, "checkpoint").value_or("");
  }
  lua_pop(L, 1);
  train::RecordSource source;
  if (given) {
    source = [given](int64_t step) {
      auto it = given->pending.find(step);
      if (it == given->pending.end()) {
        throw Error("this auditor replays given records: pass step " + std::to_string(step) +
                    "'s records to step(records)");
      }
      std::vector<store::LogRecord> records = std::move(it->second);
      given->pending.erase(it);
      return records;
    };
  } else if (logs) {
    source = train::StoreRecords(logs, logs_run);
    o.read_ahead = train::RunnerOptions::Background::kAuto;  // a store's may be read early
  } else {
    source = [](int64_t) -> std::vector<store::LogRecord> {
      throw Error("this rank reads no logs (rank 0 does)");
    };
  }
  return Protect(L, api, [&] {
    if (logs) train::CheckLogsSpec(*logs, logs_run, *spec);
    auto auditor = std::make_shared<train::Auditor>(*spec, o, std::move(source));
    if (given) GivenSources()[auditor.get()] = given;
    PushUserdata<RunnerPtr>(L, auditor, kRunnerMeta);
    return 1;
  });
}

// The records at `idx` as owned copies (for an auditor's record source).
std::vector<store::LogRecord> ReadRecords(lua_State* L, int idx, const char* api) {
  std::vector<store::LogRecord> records;
  for (const store::LogRecordView& v : CheckRecordViews(L, idx, api)) {
    store::LogRecord r;
    r.boundary = std::string(v.boundary);
    r.call = v.call;
    r.value = std::string(v.value);
    records.push_back(std::move(r));
  }
  return records;
}

// Sets the counters a step report and a boundary's statistics share on the table on top.
template <class Counts>
void SetCounts(lua_State* L, const Counts& c) {
  SetNumbers(L, {{"elements", static_cast<double>(c.elements)},
                 {"logged", static_cast<double>(c.logged)},
                 {"exact", static_cast<double>(c.exact)},
                 {"steerable", static_cast<double>(c.steerable)},
                 {"steered", static_cast<double>(c.steered)},
                 {"steered_unlogged", static_cast<double>(c.steered_unlogged)},
                 {"corrections", static_cast<double>(c.corrections)},
                 {"illegitimate", static_cast<double>(c.illegitimate)},
                 {"near_misses", static_cast<double>(c.near_misses)},
                 {"near_limit", static_cast<double>(c.near_limit)}});
}

void PushReport(lua_State* L, const train::StepReport& r, bool boundaries) {
  lua_newtable(L);
  auto set = [&](const char* k, double v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
  };
  set("step", static_cast<double>(r.step));
  set("loss", r.loss);
  SetCounts(L, r);
  set("log_bytes", static_cast<double>(r.log_bytes));
  set("seconds", r.seconds);
  lua_newtable(L);  // times: where the seconds went (StepReport::Times)
  SetNumbers(L, {{"prepare", r.times.prepare},
                 {"boundaries", r.times.boundaries},
                 {"encode", r.times.encode},
                 {"commit", r.times.commit},
                 {"checkpoint", r.times.checkpoint},
                 {"compute", r.times.compute}});
  lua_setfield(L, -2, "times");
  set("log_mismatches", static_cast<double>(r.log_mismatches));
  if (!r.log_mismatch.empty()) {
    lua_pushstring(L, r.log_mismatch.c_str());
    lua_setfield(L, -2, "log_mismatch");
  }
  lua_pushboolean(L, r.checkpoint);
  lua_setfield(L, -2, "checkpoint");
  if (!r.divergence.empty()) {
    lua_pushstring(L, r.divergence.c_str());
    lua_setfield(L, -2, "divergence");
  }
  if (!r.captured.empty()) {
    // captured["boundary#call"] = the FP64 input of that boundary call.
    lua_newtable(L);
    for (const auto& [key, t] : r.captured) {
      PushTensor(L, t);
      lua_setfield(L, -2, (key.first + "#" + std::to_string(key.second)).c_str());
    }
    lua_setfield(L, -2, "captured");
  }
  if (!r.divergence_stats.empty()) {
    lua_newtable(L);
    for (const auto& [name, d] : r.divergence_stats) {
      lua_newtable(L);
      SetNumbers(L, {{"calls", static_cast<double>(d.calls)},
                     {"elements", static_cast<double>(d.elements)},
                     {"differ", static_cast<double>(d.differ)},
                     {"straddles", static_cast<double>(d.straddles)},
                     {"missing", static_cast<double>(d.missing)},
                     {"max_rel", d.max_rel}});
      lua_setfield(L, -2, name.c_str());
    }
    lua_setfield(L, -2, "divergence_stats");
  }
  if (!boundaries) return;
  lua_newtable(L);
  for (const auto& [name, s] : r.boundaries) {
    lua_newtable(L);
    set("calls", static_cast<double>(s.calls));
    set("magnitudes", static_cast<double>(s.magnitudes));
    set("seconds", s.seconds);
    SetCounts(L, s);
    lua_setfield(L, -2, name.c_str());
  }
  lua_setfield(L, -2, "boundaries");
}

// runner:step([records [, {compare = captured}]]): records are for an auditor made with
// logs = "given"; compare (a reference's report.captured) measures this step's divergence
// from it, boundary by boundary, without keeping this runner's values.
int RunnerStep(lua_State* L) {
  const char* api = "vt.runner.step";
  RunnerPtr& r = CheckRunner(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    auto it = GivenSources().find(r.get());
    if (it == GivenSources().end())
      Fail(L, api, "records are only for an auditor made with logs = \"given\"");
    it->second->pending[r->step() + 1] = ReadRecords(L, 2, api);
  }
  CheckOptions(L, 3, api, {"compare"});
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "compare");
    if (lua_istable(L, -1)) {
      std::map<nn::RecordKey, at::Tensor> reference;
      const int t = lua_gettop(L);
      lua_pushnil(L);
      while (lua_next(L, t) != 0) {
        const char* key = lua_tostring(L, -2);
        const char* hash = key ? std::strrchr(key, '#') : nullptr;
        if (hash == nullptr)
          Fail(L, api, "compare keys are \"boundary#call\" (a report's captured table)");
        reference[{std::string(key, hash), std::atoi(hash + 1)}] = CheckTensor(L, -1);
        lua_pop(L, 1);
      }
      r->CompareNextStep(std::move(reference));
    }
    lua_pop(L, 1);
  }
  return Protect(L, "vt.runner.step", [&] {
    PushReport(L, r->Step(), true);
    return 1;
  });
}

// for step, report in runner:steps() do ... end
int StepsIterator(lua_State* L) {
  RunnerPtr& r = CheckRunner(L, 1);
  if (r->done()) return 0;
  return Protect(L, "vt.runner.steps", [&] {
    train::StepReport report = r->Step();
    lua_pushnumber(L, static_cast<lua_Number>(report.step));
    PushReport(L, report, true);
    return 2;
  });
}

int RunnerSteps(lua_State* L) {
  CheckRunner(L, 1);
  lua_pushcfunction(L, StepsIterator);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

// The root of the run so far, in hex, or nullopt for a runner without a store. In a group,
// every rank gets rank 0's (a collective call: every rank must make it).
std::optional<std::string> RootHex(train::Runner& r) {
  const std::shared_ptr<dist::Group>& group = r.options().group;
  if (!group) {
    if (!r.options().store) return std::nullopt;
    return store::ToHex(r.Root());
  }
  std::string root = group->rank() == 0 && r.options().store ? "+" + store::ToHex(r.Root()) : "-";
  group->BroadcastBytes(&root, 0);
  if (root == "-") return std::nullopt;
  return root.substr(1);
}

// Progress bar on stderr when it is a terminal: rate, ETA, loss, logged entries.
// runner:run{progress=, metrics=} runs to the end; returns totals. progress: true (a bar on a
// terminal, a line per tenth of the run otherwise; the default), "bar", "lines" or false.
// metrics: a file to append one JSON line per step to.
int RunnerRun(lua_State* L) {
  const char* api = "vt.runner.run";
  RunnerPtr& r = CheckRunner(L, 1);
  CheckOptions(L, 2, api, {"progress", "metrics"});
  RunProgress::Mode mode = RunProgress::Default();
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "progress");
    if (lua_isboolean(L, -1)) {
      if (!lua_toboolean(L, -1)) mode = RunProgress::Mode::kNone;
    } else if (lua_type(L, -1) == LUA_TSTRING && std::string(lua_tostring(L, -1)) == "bar") {
      mode = RunProgress::Mode::kBar;
    } else if (lua_type(L, -1) == LUA_TSTRING && std::string(lua_tostring(L, -1)) == "lines") {
      mode = RunProgress::Mode::kLines;
    } else if (!lua_isnil(L, -1)) {
      Fail(L, api, "option 'progress' must be true, false, \"bar\" or \"lines\"");
    }
    lua_pop(L, 1);
  }
  const std::string metrics = OptString(L, 2, api, "metrics").value_or("");
  // In a group, rank 0 speaks for the run (its reports hold every rank's counts).
  if (r->options().group && r->options().group->rank() != 0) mode = RunProgress::Mode::kNone;
  return Protect(L, api, [&] {
    RunProgress progress(*r, mode, metrics);
    InterruptChecks
        checks;  // Ctrl-C stops the loop after a step; a second one does not kill the process
    train::StepReport total;
    double loss = 0;
    int64_t steps = 0;
    // A runner opened on a store that held part of its run resumes there: its totals cover
    // only the steps this call runs (the store keeps no counts), which `from_step` says.
    const int64_t from_step = r->step() + 1;
    const auto start = std::chrono::steady_clock::now();
    bool interrupted = false;
    while (!r->done()) {
      train::StepReport rep = r->Step();
      ++steps;
      loss = rep.loss;
      total.AddCounts(rep);
      progress.Step(rep, steps);
      // Ctrl-C: stop after the step in progress; every finished step is committed. In a
      // group the ranks decide together (one may see the signal a step later than another,
      // and a rank that went on alone would wait in the next step's all-reduce).
      bool stop = ConsumeInterrupt(L);
      if (const auto& group = r->options().group) {
        at::Tensor flag = at::full({1}, stop ? 1 : 0, at::kLong);
        group->AllReduceSum(flag);
        stop = flag.item<int64_t>() > 0;
      }
      if (stop) {
        interrupted = true;
        break;
      }
    }
    // One Ctrl-C reaches every rank, not at the same instant: a rank that stopped because
    // another saw it first may get its own signal after its check. That is the Ctrl-C the
    // loop has just honoured, not a second one for the Lua code that follows.
    if (interrupted) ConsumeInterrupt(L);
    progress.Finish();
    if (from_step > 1 && steps > 0 && mode != RunProgress::Mode::kNone) {
      std::fprintf(stderr,
                   "resumed after step %lld: the totals cover steps %lld-%lld; the counts of "
                   "the steps before were reported by the run that took them\n",
                   static_cast<long long>(from_step - 1), static_cast<long long>(from_step),
                   static_cast<long long>(r->step()));
    }
    if (interrupted && (!r->options().group || r->options().group->rank() == 0)) {
      std::fprintf(stderr, "interrupted after step %lld of %lld%s\n",
                   static_cast<long long>(r->step()), static_cast<long long>(r->last_step()),
                   r->options().store ? "; the steps done are stored, run() again resumes" : "");
    }
    total.step = r->step();
    total.loss = loss;
    total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    PushReport(L, total, false);
    if (std::optional<std::string> root = RootHex(*r)) {
      lua_pushstring(L, root->c_str());
      lua_setfield(L, -2, "root");
    }
    lua_pushnumber(L, static_cast<lua_Number>(steps));
    lua_setfield(L, -2, "steps_run");
    lua_pushnumber(L, static_cast<lua_Number>(from_step));
    lua_setfield(L, -2, "from_step");
    lua_pushboolean(L, interrupted);
    lua_setfield(L, -2, "interrupted");
    return 1;
  });
}

// runner:checkpoint() -> the current state (model and optimizer) in its canonical encoding:
// the bytes whose SHA-256 is the state digest of a leaf.
int RunnerCheckpoint(lua_State* L) {
  RunnerPtr& r = CheckRunner(L, 1);
  return Protect(L, "vt.runner.checkpoint", [&] {
    std::string bytes = r->StateBytes();
    lua_pushlstring(L, bytes.data(), bytes.size());
    return 1;
  });
}

int RunnerRoot(lua_State* L) {
  RunnerPtr& r = CheckRunner(L, 1);
  return Protect(L, "vt.runner.root", [&] {
    std::optional<std::string> root = RootHex(*r);
    if (!root)
      throw Error("a " + std::string(r->options().store ? "" : "store-less ") +
                  "runner keeps no store and has no root");
    lua_pushstring(L, root->c_str());
    return 1;
  });
}

int RunnerDone(lua_State* L) {
  lua_pushboolean(L, CheckRunner(L, 1)->done());
  return 1;
}

int RunnerStepCount(lua_State* L) {
  lua_pushnumber(L, static_cast<lua_Number>(CheckRunner(L, 1)->step()));
  return 1;
}

int RunnerSpec(lua_State* L) {
  RunnerPtr& r = CheckRunner(L, 1);
  PushUserdata<SpecPtr>(L, std::make_shared<train::Spec>(r->spec()), kSpecMeta);
  return 1;
}

int RunnerStore(lua_State* L) {
  PushUserdata<StorePtr>(L, CheckRunner(L, 1)->options().store, kStoreMeta);
  return 1;
}

int RunnerRunId(lua_State* L) {
  lua_pushstring(L, CheckRunner(L, 1)->run().c_str());
  return 1;
}

// runner:state() -> {name = tensor}: the current model state (copies).
int RunnerState(lua_State* L) {
  RunnerPtr& r = CheckRunner(L, 1);
  return Protect(L, "vt.runner.state", [&] {
    lua_newtable(L);
    for (auto& [name, t] : r->model().NamedState()) {
      PushTensor(L, t->detach().clone());
      lua_setfield(L, -2, name.c_str());
    }
    return 1;
  });
}

// runner:export(path): the current state as FP32 safetensors, with the run's identity as
// metadata (spec_hash, run, step, profile).
int RunnerExport(lua_State* L) {
  RunnerPtr& r = CheckRunner(L, 1);
  std::string path = CheckString(L, 2);
  return Protect(L, "vt.runner.export", [&] {
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (auto& [name, t] : r->model().NamedState())
      tensors.emplace_back(name, t->detach().to(at::kFloat));
    SaveSafetensors(path, tensors,
                    {{"spec_hash", r->spec().HashHex()},
                     {"run", r->run()},
                     {"step", std::to_string(r->step())},
                     {"profile", r->options().profile},
                     {"format", "vtrun"}});
    return 0;
  });
}

int RunnerGc(lua_State* L) {
  RunnerPtr* r = static_cast<RunnerPtr*>(luaL_checkudata(L, 1, kRunnerMeta));
  if (*r) GivenSources().erase(r->get());
  return DestroyUserdata<RunnerPtr>(L);
}

int RunnerToString(lua_State* L) {
  RunnerPtr& r = CheckRunner(L, 1);
  lua_pushfstring(L, "vt.Runner(run '%s' on profile %s: step %d of %d)", r->run().c_str(),
                  r->options().profile.c_str(), static_cast<int>(r->step()),
                  static_cast<int>(r->spec().steps()));
  return 1;
}

}  // namespace

// Registers vt.Runner and sets vt.trainer and vt.auditor.
void OpenRunner(lua_State* L) {
  const luaL_Reg runner_methods[] = {
      {"step", RunnerStep},         {"steps", RunnerSteps},   {"run", RunnerRun},
      {"root", RunnerRoot},         {"done", RunnerDone},     {"step_count", RunnerStepCount},
      {"spec", RunnerSpec},         {"store", RunnerStore},   {"run_id", RunnerRunId},
      {"state", RunnerState},       {"export", RunnerExport}, {"checkpoint", RunnerCheckpoint},
      {"evaluate", RunnerEvaluate}, {nullptr, nullptr},
  };
  const luaL_Reg runner_meta[] = {
      {"__gc", RunnerGc}, {"__tostring", RunnerToString}, {nullptr, nullptr}};
  RegisterClass(L, kRunnerMeta, runner_methods, runner_meta);

  const luaL_Reg funcs[] = {{"trainer", TrainerNew}, {"auditor", AuditorNew}, {nullptr, nullptr}};
  SetFuncs(L, funcs);
}

}  // namespace vt::lua
