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
--   window      "tight" (band 1/16, the default) or "paper" (band 0.25): the logging window
--               of the spec. Under the paper's window every logged direction is legitimate
--               (|x' - mid| <= spacing/2 = 2w always), so steering cannot be caught; the
--               scenario "steer_paper_window" shows it.
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

-- Each scenario: how the trainer deviates from the spec (vt.trainer's `deviate`), protocol
-- behaviours of the trainer and auditor parties, deadlines, and what the game must decide.
-- `localised`: the disputed interval must contain the step s the cheating starts.
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
  {name = "steer", what = "trainer flips logged directions far from any midpoint from step s",
   deviate = {kind = "steer", amount = 4}, expect = "trainer_at_fault", localised = true},
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
}

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

-- Replaces the placeholder "s" in behaviour tables with the cheating step (or its leaf).
local function bind(behaviour, s, k)
  if behaviour == nil then return nil end
  local b = copy(behaviour)
  if b.rewrite_logs == "s" then b.rewrite_logs = {step = s} end
  if b.lie_from_leaf == "s" then b.lie_from_leaf = math.ceil(s / k) end
  return b
end

local function fresh_dir()
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p '" .. dir .. "'")
  return dir
end

-- Trainer runs are shared by scenarios with the same deviation (cache in the directory).
M.windows = {
  tight = {bits = 32, band = 1 / 16},
  paper = {bits = 32, band = 0.25},
}

local function spec_for(ctx, window)
  if ctx.specs[window] then return ctx.specs[window] end
  local setup = ctx.setup
  if M.windows[window] == nil then error("unknown window '" .. tostring(window) .. "' (valid: tight, paper)", 3) end
  ctx.specs[window] = vt.spec{model = vt.models.mlp(copy(setup.model)), data = ctx.data, optim = vt.optim.sgd(copy(setup.optim)),
                              batch = setup.batch, steps = ctx.steps, seed = 1, checkpoint_every = ctx.k,
                              round = copy(M.windows[window])}
  return ctx.specs[window]
end

local function train(ctx, deviate, window)
  local key = window .. "-" .. (deviate and (deviate.kind .. "-" .. ctx.from_step) or "honest")
  if ctx.trained[key] then return ctx.trained[key] end
  local store = vt.store.open(ctx.dir .. "/trainer-" .. key)
  local t0 = vt.clock()
  local options = {spec = spec_for(ctx, window), data = ctx.data, store = store, profile = ctx.profiles.trainer, run = "run"}
  if deviate then
    options.deviate = copy(deviate)
    options.deviate.from_step = ctx.from_step
  end
  local runner = vt.trainer(options)
  local totals = runner:run{progress = false}
  local entry = {runner = runner, store = store, seconds = vt.clock() - t0, totals = totals}
  ctx.trained[key] = entry
  return entry
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
  -- A given directory starts empty: stores left by an earlier run would be resumed.
  if options.dir then os.execute("rm -rf '" .. options.dir .. "' && mkdir -p '" .. options.dir .. "'") end
  return {setup = setup, data = data, data_recipe = setup.data, specs = {}, window = options.window or "tight",
          steps = steps, k = k, owns_dir = options.dir == nil,
          from_step = options.from_step or math.max(2, math.floor(0.6 * steps) + 1),
          profiles = profiles, remote = options.remote, quiet = options.quiet,
          dir = options.dir or fresh_dir(), trained = {}, games = 0}
end

-- Runs one scenario in `ctx` (or in a fresh context made from `options`). Returns
-- {scenario, verdict, ok, problems, train_seconds, logged_per_step, summary}.
function M.run(name, ctx_or_options)
  local scenario = M.find(name)
  local ctx = ctx_or_options
  if ctx == nil or ctx.trained == nil then ctx = M.context(ctx_or_options) end
  local window = scenario.window or ctx.window
  local trained = train(ctx, scenario.deviate, window)
  ctx.games = ctx.games + 1
  local id = string.format("%s-%d", scenario.name, ctx.games)
  local s = ctx.from_step
  local net = game.network{game = "game", deadlines = scenario.deadlines}
  net:add(game.trainer{runner = trained.runner, behaviour = bind(scenario.trainer, s, ctx.k)})
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
  if verdict.outcome ~= scenario.expect then
    problems[#problems + 1] = string.format("outcome %s, expected %s", verdict.outcome, scenario.expect)
  end
  if scenario.localised then
    local iv = verdict.interval
    if iv == nil or iv.first_step == nil or not (iv.first_step <= s and s <= iv.last_step) then
      problems[#problems + 1] = string.format("interval %s does not contain step %d",
        iv and string.format("%s..%s", tostring(iv.first_step), tostring(iv.last_step)) or "none", s)
    end
  end
  if scenario.name == "honest" and verdict.audit and verdict.audit.totals.illegitimate ~= 0 then
    problems[#problems + 1] = "illegitimate entries in an honest run"
  end
  return {scenario = scenario, verdict = verdict, ok = #problems == 0, problems = problems, from_step = s, window = window,
          train_seconds = trained.seconds, logged_per_step = trained.totals.logged / ctx.steps,
          elements_per_step = trained.totals.elements / ctx.steps, summary = game.summary(verdict, net)}
end

-- One row of the scenario table (README, EXPERIMENTS E9).
function M.row(r)
  local v = r.verdict
  local iv = v.interval
  return {
    scenario = r.scenario.name,
    window = r.window,
    outcome = v.outcome,
    expected = r.scenario.expect,
    ok = r.ok,
    interval = iv and iv.first_step and string.format("%d-%d", iv.first_step, iv.last_step) or "-",
    cheat_from = (r.scenario.deviate or r.scenario.trainer or r.scenario.auditor) and r.scenario.localised and r.from_step or nil,
    rounds = v.rounds or 0,
    judge_seconds = v.judge_seconds,
    train_seconds = r.train_seconds,
    judge_over_train = v.judge_seconds and v.judge_seconds / r.train_seconds or nil,
    logged_per_step = r.logged_per_step,
    logged_fraction = r.logged_per_step / r.elements_per_step,
    reason = v.reason,
  }
end

-- Command line of the scenario scripts: parses arg into context options.
--   --setup mnist|tiny  --window tight|paper  --steps N  --k N  --from S  --dir PATH
--   --trainer P  --auditor P  --judge P (profiles)  --remote  --json PATH
function M.parse_args(args)
  local options, i = {profiles = {}}, 1
  local function value()
    i = i + 1
    if args[i] == nil then error("option " .. args[i - 1] .. " needs a value", 0) end
    return args[i]
  end
  while args[i] do
    local a = args[i]
    if a == "--setup" then options.setup = value()
    elseif a == "--window" then options.window = value()
    elseif a == "--steps" then options.steps = tonumber(value())
    elseif a == "--k" then options.k = tonumber(value())
    elseif a == "--from" then options.from_step = tonumber(value())
    elseif a == "--dir" then options.dir = value()
    elseif a == "--trainer" or a == "--auditor" or a == "--judge" then options.profiles[a:sub(3)] = value()
    elseif a == "--remote" then options.remote = true
    elseif a == "--json" then options.json = value()
    else
      error("unknown argument '" .. a .. "' (valid: --setup, --window, --steps, --k, --from, --dir, --trainer, " ..
            "--auditor, --judge, --remote, --json)", 0)
    end
    i = i + 1
  end
  return options
end

local function fmt_seconds(v) return v and string.format("%.2f", v) or "-" end

-- Runs the named scenarios (all when `names` is nil), prints a summary of each and a table;
-- returns true if every verdict is the expected one.
function M.main(names, args)
  local ok_args, options = pcall(M.parse_args, args or {})
  if not ok_args then
    io.stderr:write("vtrun: ", options, "\n")
    os.exit(2)
  end
  local ctx = M.context(options)
  local list = {}
  for _, s in ipairs(M.list) do
    if names == nil then list[#list + 1] = s.name end
  end
  for _, n in ipairs(names or {}) do list[#list + 1] = M.find(n).name end
  print(string.format("setup %s, %d steps, checkpoint every %d, cheating from step %d; profiles: trainer %s, auditor %s, judge %s%s",
                      options.setup or "mnist", ctx.steps, ctx.k, ctx.from_step, ctx.profiles.trainer, ctx.profiles.auditor,
                      ctx.profiles.judge, ctx.remote and " (auditor and judge in their own processes)" or ""))
  local rows, all_ok = {}, true
  for _, name in ipairs(list) do
    local r = M.run(name, ctx)
    print(string.format("\n== %s: %s", name, r.scenario.what))
    print(r.summary)
    print(r.ok and "as expected" or ("NOT AS EXPECTED: " .. table.concat(r.problems, "; ")))
    rows[#rows + 1] = M.row(r)
    all_ok = all_ok and r.ok
  end
  print(string.format("\n%-20s %-7s %-17s %-9s %6s %8s %9s %8s %13s", "scenario", "window", "outcome", "interval", "rounds",
                      "judge s", "train s", "judge/tr", "logged/step"))
  for _, row in ipairs(rows) do
    print(string.format("%-20s %-7s %-17s %-9s %6d %8s %9s %8s %13.1f%s", row.scenario, row.window, row.outcome, row.interval,
                        row.rounds, fmt_seconds(row.judge_seconds), fmt_seconds(row.train_seconds),
                        row.judge_over_train and string.format("%.3f", row.judge_over_train) or "-", row.logged_per_step,
                        row.ok and "" or "  <-- expected " .. row.expected))
  end
  if options.json then
    local f = assert(io.open(options.json, "w"))
    f:write(vt.json.encode(rows, {indent = 1}), "\n")
    f:close()
  end
  print(vt.json.encode({scenarios = #rows, as_expected = all_ok}))
  if ctx.owns_dir then
    ctx.trained = nil
    collectgarbage("collect")  -- close the stores first
    os.execute("rm -rf '" .. ctx.dir .. "'")
  end
  return all_ok
end

return M
