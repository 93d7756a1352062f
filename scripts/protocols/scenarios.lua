-- The scenarios of PROTOCOL.md, each a short description of who cheats and how, and one
-- function that trains, audits and plays the game for any of them.
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
--               window every logged direction is legitimate (|x' - mid| <= spacing/2 = 2w
--               always), so steering cannot be caught; "steer" under it shows it.
--   seed        picks the step of the scenarios that cheat at one random step (default 1)
--   quiet       true: no progress lines
local M = {}

local game = require "vt.game"

M.setups = {
  mnist = {
    data = {kind = "fashion_mnist", limit = 4096},
    model = {input_shape = {1, 28, 28}, hidden = {128, 64}, classes = 10},
    optim = {lr = 0.05, momentum = 0.9}, batch = 64, steps = 60, k = 5,
  },
  tiny = {
    data = {kind = "synthetic", size = 512, input_shape = {1, 8, 8}, classes = 4, seed = 3},
    model = {input_shape = {1, 8, 8}, hidden = {32}, classes = 4},
    optim = {lr = 0.05, momentum = 0.9}, batch = 16, steps = 20, k = 4,
  },
}

-- Each scenario: how the trainer deviates from the spec (vt.trainer's `deviate`; "s" in
-- from_step/to_step is the cheating step), protocol behaviours of the trainer and auditor
-- parties, deadlines, and what the game must decide: `expect` is an outcome, or a table of
-- outcomes by window with a `default`. Checks beyond the outcome:
--   localised     the disputed interval must contain the cheating step (when not accepted)
--   at = "random" the cheating step is drawn (seeded) from the whole run, not s
--   evidence      "illegitimate": the judge's evidence must hold illegitimate entries
--   reason        a string the verdict's reason must contain
--   decided_by_judge  windows under which the evidence must be empty (no illegitimate entry,
--                 no mismatched record) and the judge's replay must give the auditor's leaf,
--                 not the trainer's: the judge's digest decides
--   steering      the trainer's tampered values must reach every boundary kind the window
--                 logs (true) or those listed, and never exceed the auditor's `steerable`
--                 count, step by step
--   window        a fixed window (the scenario runs only under it)
M.list = {
  {name = "honest", what = "honest trainer, honest auditor on another profile",
   expect = "accepted"},
  {name = "poison_labels", what = "data poisoning from step s: every label y becomes y+1",
   deviate = {kind = "labels"}, expect = "trainer_at_fault", localised = true},
  {name = "poison_trigger", what = "data poisoning from step s: a trigger patch on every other image, labelled 0",
   deviate = {kind = "trigger", target = 0}, expect = "trainer_at_fault", localised = true},
  {name = "lazy", what = "lazy trainer: skips the updates from step s",
   deviate = {kind = "lazy"}, expect = "trainer_at_fault", localised = true},
  {name = "wrong_lr", what = "wrong hyperparameter from step s: learning rate x10",
   deviate = {kind = "lr", amount = 10}, expect = "trainer_at_fault", localised = true},
  {name = "wrong_weight_decay", what = "wrong hyperparameter from step s: weight decay 0.1",
   deviate = {kind = "weight_decay", amount = 0.1}, expect = "trainer_at_fault", localised = true},
  {name = "steer", what = "trainer flips 4 values per update call far from any midpoint from step s, logged as directions",
   deviate = {kind = "steer", amount = 4}, expect = {default = "trainer_at_fault", paper = "accepted"}, localised = true},
  {name = "steer_paper_window", what = "the same steering under the paper's window (band 0.25): undetectable",
   window = "paper", deviate = {kind = "steer", amount = 4}, expect = "accepted", limit = true},
  {name = "rewrite_logs", what = "trainer rewrites the logs of step s after committing",
   trainer = {rewrite_logs = "s"}, expect = "trainer_at_fault", localised = true},
  {name = "lying_auditor", what = "auditor lies about the leaves from the one holding step s",
   auditor = {lie_from_leaf = "s"}, expect = "auditor_at_fault", localised = true},
  {name = "trainer_refuses", what = "trainer refuses to disclose its logs",
   trainer = {refuse = {logs = true}}, expect = "trainer_at_fault"},
  {name = "trainer_late", what = "trainer answers the commitment request after the deadline",
   trainer = {delay = {commit = 1.5}}, deadlines = {commit = 1.0}, expect = "trainer_at_fault"},
  {name = "auditor_refuses", what = "auditor refuses the judge's leaf query in a dispute",
   deviate = {kind = "labels"}, auditor = {refuse = {leaf = true}}, expect = "auditor_at_fault"},
  {name = "wrong_weights", what = "weights returned to the client do not match the last leaf",
   trainer = {substitute_weights = true}, expect = "trainer_at_fault"},
  -- The adaptive attacks (issue 13): cheats aimed at the logging rules and the protocol.
  {name = "forge_exact", what = "from step s, one value per boundary call (every kind) far from any midpoint rounded the other way, logged EXACT",
   deviate = {kind = "forge_exact", amount = 1}, expect = "trainer_at_fault", localised = true, evidence = "illegitimate"},
  {name = "flip_within", what = "from step s, every value that a legitimate entry can round the other way is (logged ones, and unlogged ones with w < |x - mid| <= 1.5w), at every boundary",
   deviate = {kind = "flip_within"}, expect = "accepted", steering = true, limit = true},
  {name = "steer_toward", what = "from step s, a greedy backdoor: every value of the gradient and update boundaries that a legitimate entry can round the way that lowers a trigger loss (class 0) is",
   deviate = {kind = "steer_toward", target = 0}, expect = "accepted", steering = {"grad", "update"}, limit = true},
  {name = "withhold_record", what = "trainer discloses step s without one of its log records",
   trainer = {withhold_record = "s"}, expect = "trainer_at_fault", localised = true, reason = "log digest"},
  {name = "replay_record", what = "trainer discloses step s with one record replaced by step s-1's (same boundary and call)",
   trainer = {replay_record = "s"}, expect = "trainer_at_fault", localised = true, reason = "log digest"},
  {name = "replace_example", what = "one training example of the batch replaced at one random step r",
   deviate = {kind = "replace_example", from_step = "s", to_step = "s"}, at = "random", expect = "trainer_at_fault",
   localised = true},
  {name = "inconsistent_bisection", what = "poisoning trainer answers bisection queries with the honest run's leaves and proofs",
   deviate = {kind = "labels"}, trainer = {leaves_from = "honest"}, expect = "trainer_at_fault",
   reason = "answer in bisection did not verify"},
  {name = "judge_decides", what = "learning rate x1.001 at step s only: under the paper's window only the judge's replay decides",
   deviate = {kind = "lr", amount = 1.001, from_step = "s", to_step = "s"}, expect = "trainer_at_fault", localised = true,
   decided_by_judge = {paper = true}},
}

-- The outcome `scenario` must have under `window`.
function M.expected(scenario, window)
  local e = scenario.expect
  if type(e) == "table" then return e[window] or e.default end
  return e
end

function M.find(name)
  for _, s in ipairs(M.list) do
    if s.name == name then return s end
  end
  local names = {}
  for _, s in ipairs(M.list) do names[#names + 1] = s.name end
  error("unknown scenario '" .. tostring(name) .. "' (valid: " .. table.concat(names, ", ") .. ")", 2)
end

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
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p '" .. dir .. "'")
  return dir
end

-- The windows a context can run under; "calibrated" is measured per context (spec_for).
M.windows = {
  tight = {bits = 32, band = 1 / 16},
  paper = {bits = 32, band = 0.25},
  calibrated = "measured",
}
M.window_names = {"paper", "tight", "calibrated"}

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
  -- A given directory starts empty: stores left by an earlier run would be resumed.
  if options.dir then os.execute("rm -rf '" .. options.dir .. "' && mkdir -p '" .. options.dir .. "'") end
  return {setup = setup, data = data, data_recipe = setup.data, specs = {}, window = window,
          steps = steps, k = k, owns_dir = options.dir == nil,
          from_step = options.from_step or math.max(2, math.floor(0.6 * steps) + 1),
          random_step = random_step(options.seed or 1, steps),
          profiles = profiles, remote = options.remote, quiet = options.quiet,
          dir = options.dir or fresh_dir(), trained = {}, games = 0}
end

-- The scenario's deviation with its placeholders bound to the cheating step `s`.
local function bind_deviation(deviate, s)
  if deviate == nil then return nil end
  local d = copy(deviate)
  d.from_step = (d.from_step == nil or d.from_step == "s") and s or d.from_step
  if d.to_step == "s" then d.to_step = s end
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
  local trained = train(ctx, bind_deviation(scenario.deviate, s), window)
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
  local client = game.client{store = vt.store.open(ctx.dir .. "/" .. id .. "-client")}
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
    -- steps) is steered. (Calibrated update boundaries are exact: no room.)
    local room = 0
    for _, kind in ipairs(type(scenario.steering) == "table" and scenario.steering or {"fwd", "bwd", "grad", "update"}) do
      room = room + trained.steerable_by_kind[kind]
      if trained.steerable_by_kind[kind] > 0 and trained.steered_by_kind[kind] == 0 then
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

-- Command line of the scenario scripts: parses arg into context options.
--   --setup mnist|tiny  --window W  --windows W1,W2,...|all  --steps N  --k N  --from S
--   --seed N  --dir PATH  --trainer P  --auditor P  --judge P (profiles)  --remote  --json PATH
-- Windows: paper, tight, calibrated.
function M.parse_args(args)
  local options, i = {profiles = {}}, 1
  local function value()
    i = i + 1
    if args[i] == nil then error("option " .. args[i - 1] .. " needs a value", 0) end
    return args[i]
  end
  local function window_name(w)
    if M.windows[w] == nil then error("unknown window '" .. w .. "' (valid: paper, tight, calibrated)", 0) end
    return w
  end
  while args[i] do
    local a = args[i]
    if a == "--setup" then options.setup = value()
    elseif a == "--window" then options.window = window_name(value())
    elseif a == "--windows" then
      local list = value()
      if list == "all" then list = table.concat(M.window_names, ",") end
      options.windows = {}
      for w in list:gmatch("[^,]+") do options.windows[#options.windows + 1] = window_name(w) end
    elseif a == "--steps" then options.steps = tonumber(value())
    elseif a == "--k" then options.k = tonumber(value())
    elseif a == "--from" then options.from_step = tonumber(value())
    elseif a == "--seed" then options.seed = tonumber(value())
    elseif a == "--dir" then options.dir = value()
    elseif a == "--trainer" or a == "--auditor" or a == "--judge" then options.profiles[a:sub(3)] = value()
    elseif a == "--remote" then options.remote = true
    elseif a == "--json" then options.json = value()
    else
      error("unknown argument '" .. a .. "' (valid: --setup, --window, --windows, --steps, --k, --from, --seed, --dir, " ..
            "--trainer, --auditor, --judge, --remote, --json)", 0)
    end
    i = i + 1
  end
  return options
end

local function fmt_seconds(v) return v and string.format("%.2f", v) or "-" end
local function fmt_count(v) return v and string.format("%.1f", v) or "-" end

-- Runs the named scenarios (all when `names` is nil) under each window of --windows (or the
-- one of --window), prints a summary of each and a table; returns true if every verdict is
-- the expected one. A scenario with a fixed window runs only in that window's pass when
-- several windows are played.
function M.main(names, args)
  local ok_args, options = pcall(M.parse_args, args or {})
  if not ok_args then
    io.stderr:write("vtrun: ", options, "\n")
    os.exit(2)
  end
  local windows = options.windows or {options.window or "tight"}
  options.window = windows[1]
  local ctx = M.context(options)
  local list = {}
  for _, s in ipairs(M.list) do
    if names == nil then list[#list + 1] = s.name end
  end
  for _, n in ipairs(names or {}) do list[#list + 1] = M.find(n).name end
  print(string.format("setup %s, %d steps, checkpoint every %d, cheating from step %d (random step %d); profiles: trainer %s, " ..
                      "auditor %s, judge %s%s; windows %s",
                      options.setup or "mnist", ctx.steps, ctx.k, ctx.from_step, ctx.random_step, ctx.profiles.trainer,
                      ctx.profiles.auditor, ctx.profiles.judge,
                      ctx.remote and " (auditor and judge in their own processes)" or "", table.concat(windows, ", ")))
  local rows, all_ok = {}, true
  for _, window in ipairs(windows) do
    ctx.window = window
    for _, name in ipairs(list) do
      local scenario = M.find(name)
      if #windows == 1 or scenario.window == nil or scenario.window == window then
        local r = M.run(name, ctx)
        print(string.format("\n== %s [%s]: %s", name, r.window, scenario.what))
        print(r.summary)
        if scenario.steering then
          local k, e = r.steered_by_kind, r.steerable_by_kind
          print(string.format("steered %d values (%d unlogged by an honest trainer): fwd %d/%d, bwd %d/%d, grad %d/%d, " ..
                              "update %d/%d of the trainer's steerable estimate in the deviating steps; the auditor's " ..
                              "steerable per step %.1f", r.steered, r.steered_unlogged, k.fwd, e.fwd, k.bwd, e.bwd,
                              k.grad, e.grad, k.update, e.update, r.steerable_per_step or 0))
        end
        print(r.ok and "as expected" or ("NOT AS EXPECTED: " .. table.concat(r.problems, "; ")))
        rows[#rows + 1] = M.row(r)
        all_ok = all_ok and r.ok
      end
    end
  end
  print(string.format("\n%-10s %-22s %-16s %-16s %-9s %6s %11s %9s %7s %11s %8s %8s", "window", "scenario", "expected",
                      "outcome", "interval", "rounds", "steerable/s", "steered/s", "illegit", "logged/step", "judge s",
                      "train s"))
  for _, row in ipairs(rows) do
    print(string.format("%-10s %-22s %-16s %-16s %-9s %6d %11s %9s %7s %11.1f %8s %8s%s", row.window, row.scenario,
                        row.expected, row.outcome, row.interval, row.rounds, fmt_count(row.steerable_per_step),
                        fmt_count(row.steered_per_step), row.illegitimate and tostring(row.illegitimate) or "-",
                        row.logged_per_step, fmt_seconds(row.judge_seconds), fmt_seconds(row.train_seconds),
                        row.ok and "" or "  <-- NOT AS EXPECTED"))
  end
  if options.json then
    local f = assert(io.open(options.json, "w"))
    f:write(vt.json.encode(rows, {indent = 1}), "\n")
    f:close()
  end
  print(vt.json.encode({scenarios = #rows, as_expected = all_ok, windows = windows}))
  if ctx.owns_dir then
    ctx.trained = nil
    collectgarbage("collect")  -- close the stores first
    os.execute("rm -rf '" .. ctx.dir .. "'")
  end
  return all_ok
end

return M
