-- The scenarios of PROTOCOL.md: one function that trains, audits and plays the game for any
-- of them, and checks the verdict. The scenarios themselves (who cheats and how, what the
-- game must decide), the setups and the windows are in protocols/scenario_list.lua; the
-- command line of the scenario scripts is protocols/scenario_cli.lua. This module exposes
-- all of it.
--
--   local scenarios = require "protocols.scenarios"
--   local r = scenarios.run("poison_labels", {dir = "/tmp/g"})
--   print(r.verdict.outcome, r.ok)
--
-- Options of run (all optional):
--   dir         working directory for the parties' stores, emptied first (default: a fresh
--               temporary one)
--   setup       "mnist" (MLP on Fashion-MNIST, the default) or "tiny" (MLP on synthetic 8x8
--               images: seconds, for tests)
--   steps, k    run length and checkpoint interval (defaults per setup)
--   from_step   the step s from which the trainer cheats (default: 60% of the run)
--   profiles    {trainer=, auditor=, judge=} device profiles (default native, splitk4, blocked)
--   remote      true: the auditor and the judge run in their own vtrun processes, under their
--               profiles (so process-level profiles such as nofma and refblas work)
--   window      the logging window of the spec: "tight" (band 1/16, the default), "paper"
--               (band 0.25) or "calibrated" (vt.calibrate over the three parties' profiles,
--               10 steps: per-boundary alpha, exact optimizer outputs). Under the paper's
--               window a direction that moves nothing is always legitimate (|x' - mid| <=
--               spacing/2 = 2w), but one that moves a value needs |x' - mid| <= w: "steer"
--               under it, which flips values far from their midpoints, is caught.
--   seed        picks the step of the scenarios that cheat at one random step (default 1)
--   quiet       true: no progress lines
local M = {}

local game = require "vt.game"
local list = require "protocols.scenario_list"

M.setups = list.setups
M.list = list.list
M.expected = list.expected
M.find = list.find

local function copy(t)
  if type(t) ~= "table" then return t end
  local out = {}
  for k, v in pairs(t) do out[k] = copy(v) end
  return out
end

-- Replaces the placeholder "s" in behaviour tables with the cheating step (or its leaf), and
-- "honest" (leaves_from) with the honest run's store run.
local function bind(behaviour, s, k, honest_run)
  if behaviour == nil then return nil end
  local b = copy(behaviour)
  if b.rewrite_logs == "s" then b.rewrite_logs = {step = s} end
  if b.withhold_record == "s" then b.withhold_record = {step = s} end
  if b.replay_record == "s" then b.replay_record = {step = s, from = s - 1} end
  if b.lie_from_leaf == "s" then b.lie_from_leaf = math.ceil(s / k) end
  if b.leaves_from == "honest" then b.leaves_from = honest_run() end
  return b
end

local function fresh_dir()
  return vt.fs.tmpdir("vtrun-scenario")
end

M.windows = list.windows
M.window_names = list.window_names

local function make_spec(ctx, round)
  local setup = ctx.setup
  return vt.spec{model = vt.models.mlp(copy(setup.model)), data = ctx.data, optim = vt.optim.sgd(copy(setup.optim)),
                 batch = setup.batch, steps = ctx.steps, seed = 1, checkpoint_every = ctx.k, round = round}
end

-- The calibrated windows: vt.calibrate over the parties' profiles (trainer first), 10 steps
-- of the spec with the tight window.
local function calibrate(ctx)
  local profiles, seen = {}, {}
  for _, role in ipairs{"trainer", "auditor", "judge"} do
    local p = ctx.profiles[role]
    if not seen[p] then profiles[#profiles + 1], seen[p] = p, true end
  end
  if #profiles < 2 then profiles[#profiles + 1] = profiles[1] == "splitk4" and "native" or "splitk4" end
  local cal = vt.calibrate{spec = make_spec(ctx, copy(M.windows.tight)), data = ctx.remote and ctx.data_recipe or ctx.data,
                           profiles = profiles, steps = math.min(10, ctx.steps)}
  ctx.calibration = cal
  if not ctx.quiet then
    local parts = {}
    for _, kind in ipairs{"fwd", "bwd", "grad", "update"} do
      local w = cal.round[kind]
      parts[#parts + 1] = string.format("%s alpha<=%.3g", kind, w and w.alpha or 0)
    end
    local exact = 0
    for _, w in pairs(cal.round.boundaries) do
      if w.band == 0 and w.alpha == 0 then exact = exact + 1 end
    end
    print(string.format("calibrated windows over %s in %.1f s (%d steps): %s; %d exact boundaries, %d replay problems",
                        table.concat(profiles, ", "), cal.seconds, cal.steps, table.concat(parts, ", "), exact,
                        cal.replay_problems))
  end
  return cal.round
end

local function spec_for(ctx, window)
  if ctx.specs[window] then return ctx.specs[window] end
  if M.windows[window] == nil then error("unknown window '" .. tostring(window) .. "' (valid: paper, tight, calibrated)", 3) end
  local round = window == "calibrated" and calibrate(ctx) or copy(M.windows[window])
  ctx.specs[window] = make_spec(ctx, round)
  return ctx.specs[window]
end

-- The kind of a boundary name (nn::KindOf): fwd, bwd, grad, or update for anything else.
local function kind_of(boundary)
  local kind = boundary:match(":([%w_]+)$") or ""
  if kind == "fwd" or kind == "bwd" or kind == "grad" then return kind end
  return "update"
end
M.kind_of = kind_of

-- Trainer runs are shared by scenarios with the same deviation (cache in the directory).
-- `deviate` has its placeholders bound (from_step, to_step numbers).
local function train(ctx, deviate, window)
  local key = window .. "-honest"
  if deviate then
    key = window .. "-" .. deviate.kind .. "-" .. deviate.from_step
    if deviate.to_step then key = key .. "-" .. deviate.to_step end
    if deviate.amount then key = key .. "-x" .. deviate.amount end
  end
  if ctx.trained[key] then return ctx.trained[key] end
  local spec = spec_for(ctx, window)
  local store = vt.store.open(ctx.dir .. "/trainer-" .. key)
  local t0 = vt.clock()
  local options = {spec = spec, data = ctx.data, store = store, profile = ctx.profiles.trainer, run = "run",
                   deviate = copy(deviate)}
  local runner = vt.trainer(options)
  -- Step by step: the steps' own counts (steered values per step, and per boundary kind the
  -- steered values and the trainer's own steerable estimate in the deviating steps).
  local totals = {elements = 0, logged = 0, exact = 0, steerable = 0, steered = 0, steered_unlogged = 0}
  local by_step, steered_by_kind, steerable_by_kind = {}, {fwd = 0, bwd = 0, grad = 0, update = 0}, {fwd = 0, bwd = 0, grad = 0, update = 0}
  for step, report in runner:steps() do
    for name in pairs(totals) do totals[name] = totals[name] + report[name] end
    by_step[step] = {steered = report.steered, steerable = report.steerable}
    local deviating = deviate and step >= deviate.from_step and (deviate.to_step == nil or step <= deviate.to_step)
    for boundary, b in pairs(report.boundaries) do
      local kind = kind_of(boundary)
      steered_by_kind[kind] = steered_by_kind[kind] + b.steered
      if deviating then steerable_by_kind[kind] = steerable_by_kind[kind] + b.steerable end
    end
  end
  local entry = {runner = runner, store = store, seconds = vt.clock() - t0, totals = totals, by_step = by_step,
                 steered_by_kind = steered_by_kind, steerable_by_kind = steerable_by_kind, key = key}
  ctx.trained[key] = entry
  return entry
end

-- A small deterministic generator (Park-Miller) for the step of "random" scenarios: the same
-- seed gives the same step on every machine.
local function random_step(seed, steps)
  local x = (seed * 48271 + 11) % 2147483647
  for _ = 1, 3 do x = (x * 48271) % 2147483647 end
  return 1 + x % steps
end

-- A context shared by several scenario runs: the data, the spec, the trained runs.
function M.context(options)
  options = options or {}
  local setup = M.setups[options.setup or "mnist"]
  if setup == nil then error("unknown setup '" .. tostring(options.setup) .. "' (valid: mnist, tiny)", 2) end
  local steps = options.steps or setup.steps
  local k = options.k or setup.k
  local data = game.data(setup.data)
  local profiles = {trainer = "native", auditor = "splitk4", judge = "blocked"}
  for role, p in pairs(options.profiles or {}) do profiles[role] = p end
  local window = options.window or "tight"
  if M.windows[window] == nil then error("unknown window '" .. tostring(window) .. "' (valid: paper, tight, calibrated)", 2) end
  -- A given directory starts empty (stores left by an earlier run would be resumed), and
  -- only one an earlier scenario made (its marker file) is emptied: never a user's.
  if options.dir then
    local marker = options.dir .. "/.vtrun-scenario"
    if vt.fs.exists(marker) then
      vt.fs.remove(options.dir)
    elseif vt.fs.exists(options.dir) and #vt.fs.list(options.dir) > 0 then
      error("scenario directory '" .. options.dir .. "' is not empty and was not made by a scenario; give a new one", 2)
    end
    vt.fs.mkdir(options.dir)
    io.open(marker, "w"):close()
  end
  return {setup = setup, data = data, data_recipe = setup.data, specs = {}, window = window,
          steps = steps, k = k, owns_dir = options.dir == nil,
          from_step = options.from_step or math.max(2, math.floor(0.6 * steps) + 1),
          random_step = random_step(options.seed or 1, steps),
          profiles = profiles, remote = options.remote, quiet = options.quiet,
          dir = options.dir or fresh_dir(), trained = {}, games = 0}
end

-- The scenario's deviation with its placeholders bound to the cheating step `s` ("s") or
-- to the last step of the interval of `k` steps that holds it ("interval_end").
local function bind_deviation(deviate, s, k)
  if deviate == nil then return nil end
  local d = copy(deviate)
  local function bound(v)
    if v == "s" then return s end
    if v == "interval_end" then return k * math.ceil(s / k) end
    return v
  end
  d.from_step = d.from_step == nil and s or bound(d.from_step)
  d.to_step = bound(d.to_step)
  return d
end

-- Runs one scenario in `ctx` (or in a fresh context made from `options`), under the context's
-- window (or the scenario's own). Returns {scenario, window, expected, verdict, ok, problems,
-- from_step, train_seconds, logged_per_step, steerable_per_step, steered_per_step,
-- steered_by_kind, illegitimate, summary, trained_key}.
function M.run(name, ctx_or_options)
  local scenario = M.find(name)
  local ctx = ctx_or_options
  if ctx == nil or ctx.trained == nil then ctx = M.context(ctx_or_options) end
  local window = scenario.window or ctx.window
  local expected = M.expected(scenario, window)
  local s = scenario.at == "random" and ctx.random_step or ctx.from_step
  local trained = train(ctx, bind_deviation(scenario.deviate, s, ctx.k), window)
  local function honest_run()
    local h = train(ctx, nil, window)
    return h.store:run("run")
  end
  ctx.games = ctx.games + 1
  local id = string.format("%s-%d", scenario.name, ctx.games)
  local net = game.network{game = "game", deadlines = scenario.deadlines}
  net:add(game.trainer{runner = trained.runner, behaviour = bind(scenario.trainer, s, ctx.k, honest_run)})
  local auditor_behaviour = bind(scenario.auditor, s, ctx.k)
  if ctx.remote then
    net:add(game.remote{role = "auditor", profile = ctx.profiles.auditor, options = {
      store = ctx.dir .. "/" .. id .. "-auditor", data = ctx.data_recipe, behaviour = auditor_behaviour}})
    net:add(game.remote{role = "judge", profile = ctx.profiles.judge, options = {
      store = ctx.dir .. "/" .. id .. "-judge", data = ctx.data_recipe}})
  else
    net:add(game.auditor{store = vt.store.open(ctx.dir .. "/" .. id .. "-auditor"), data = ctx.data,
                         profile = ctx.profiles.auditor, behaviour = auditor_behaviour})
    net:add(game.judge{store = vt.store.open(ctx.dir .. "/" .. id .. "-judge"), data = ctx.data, profile = ctx.profiles.judge})
  end
  -- The client ordered the honest spec (a deviating trainer trains under it too).
  local client = game.client{store = vt.store.open(ctx.dir .. "/" .. id .. "-client"), spec = spec_for(ctx, window)}
  local verdict = game.play{network = net, client = client}
  for _, p in pairs(net.parties) do
    if p.close then p:close() end
  end

  local problems = {}
  local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end
  if verdict.outcome ~= expected then problem("outcome %s, expected %s", verdict.outcome, expected) end
  if scenario.localised and expected ~= "accepted" then
    local iv = verdict.interval
    if iv == nil or iv.first_step == nil or not (iv.first_step <= s and s <= iv.last_step) then
      problem("interval %s does not contain step %d",
              iv and string.format("%s..%s", tostring(iv.first_step), tostring(iv.last_step)) or "none", s)
    end
  end
  local audit = verdict.audit
  if scenario.name == "honest" and audit and audit.totals.illegitimate ~= 0 then
    problem("illegitimate entries in an honest run")
  end
  local evidence = verdict.evidence or {}
  if scenario.evidence == "illegitimate" and not ((evidence.illegitimate or 0) > 0) then
    problem("the judge's evidence holds no illegitimate entry (%s)", tostring(verdict.reason))
  end
  if scenario.reason and not (verdict.reason or ""):find(scenario.reason, 1, true) then
    problem("the reason does not say '%s': %s", scenario.reason, tostring(verdict.reason))
  end
  if scenario.decided_by_judge and scenario.decided_by_judge[window] then
    if (evidence.illegitimate or 0) ~= 0 or (evidence.log_mismatches or 0) ~= 0 then
      problem("the evidence decides (%s illegitimate, %s mismatched records), not the judge's replay",
              tostring(evidence.illegitimate), tostring(evidence.log_mismatches))
    end
    if not (verdict.judge_leaf and verdict.judge_leaf == verdict.auditor_leaf and verdict.judge_leaf ~= verdict.trainer_leaf) then
      problem("the judge's leaf is not the auditor's alone")
    end
  end
  if scenario.steering then
    -- Every boundary kind with room to steer (the trainer's own estimate, in the deviating
    -- steps) is steered. (Calibrated update boundaries are exact: no room. A kind with a
    -- handful of steerable values may have none within the steering's margin for the
    -- auditor's divergence, half the window: a calibrated MLP's forward had 1.)
    local room = 0
    for _, kind in ipairs(type(scenario.steering) == "table" and scenario.steering or {"fwd", "bwd", "grad", "update"}) do
      room = room + trained.steerable_by_kind[kind]
      if trained.steerable_by_kind[kind] >= 8 and trained.steered_by_kind[kind] == 0 then
        problem("no %s boundary was steered (%d steerable values)", kind, trained.steerable_by_kind[kind])
      end
    end
    if room > 0 and trained.totals.steered == 0 then problem("nothing was steered") end
    for _, st in ipairs(audit and audit.per_step or {}) do
      local steered = trained.by_step[st.step] and trained.by_step[st.step].steered or 0
      if steered > st.steerable then
        problem("step %d: %d values steered, but the auditor counts only %d steerable", st.step, steered, st.steerable)
      end
    end
    if audit == nil or audit.per_step == nil then problem("no per-step audit counts to bound the steering with") end
  end
  local audited_steps = audit and audit.totals.steps or 0
  return {scenario = scenario, window = window, expected = expected, verdict = verdict, ok = #problems == 0,
          problems = problems, from_step = s, train_seconds = trained.seconds,
          logged_per_step = trained.totals.logged / ctx.steps, elements_per_step = trained.totals.elements / ctx.steps,
          steered_per_step = trained.totals.steered / ctx.steps, steered_by_kind = trained.steered_by_kind,
          steered = trained.totals.steered, steered_unlogged = trained.totals.steered_unlogged,
          steerable_by_kind = trained.steerable_by_kind,
          steerable_per_step = audited_steps > 0 and audit.totals.steerable / audited_steps or nil,
          illegitimate = audit and audit.totals.illegitimate or nil, summary = game.summary(verdict, net),
          trained_key = trained.key}
end

-- One row of the scenario table (README, EXPERIMENTS E9).
function M.row(r)
  local v = r.verdict
  local iv = v.interval
  return {
    scenario = r.scenario.name,
    window = r.window,
    outcome = v.outcome,
    expected = r.expected,
    ok = r.ok,
    interval = iv and iv.first_step and string.format("%d-%d", iv.first_step, iv.last_step) or "-",
    cheat_from = (r.scenario.deviate or r.scenario.trainer or r.scenario.auditor) and r.scenario.localised and r.from_step or nil,
    rounds = v.rounds or 0,
    judge_seconds = v.judge_seconds,
    train_seconds = r.train_seconds,
    judge_over_train = v.judge_seconds and v.judge_seconds / r.train_seconds or nil,
    logged_per_step = r.logged_per_step,
    logged_fraction = r.logged_per_step / r.elements_per_step,
    steerable_per_step = r.steerable_per_step,
    steered_per_step = r.steered_per_step,
    steered_by_kind = r.steered_by_kind,
    illegitimate = r.illegitimate,
    judge_illegitimate = v.evidence and v.evidence.illegitimate or nil,
    reason = v.reason,
  }
end

-- The command line of the scenario scripts (protocols/scenario_cli.lua).
function M.parse_args(args) return require("protocols.scenario_cli").parse_args(args) end
function M.main(names, args) return require("protocols.scenario_cli").main(names, args) end

return M
