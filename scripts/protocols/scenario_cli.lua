-- The command line of the scenario scripts (scripts/protocols/*.lua): parses their
-- arguments, runs the scenarios under each window asked for, and prints a summary of each
-- game and a table of all. protocols/scenarios.lua exposes it as parse_args and main.
local scenarios = require "protocols.scenarios"

local M = {}

-- Command line of the scenario scripts, key=value through vt.args: parses arg into context
-- options. Keys: setup=mnist|tiny, window=W, windows=W1,W2,...|all, steps=N, k=N, from=S,
-- seed=N, dir=PATH, trainer=P, auditor=P, judge=P (profiles), remote=true, json=PATH.
-- steps, k and from default (0) to the setup's, dir to a fresh temporary directory.
-- Windows: paper, tight (the default), calibrated. An unknown key is an error naming the
-- valid ones.
local defaults = {setup = "mnist", window = "tight", windows = {}, steps = 0, k = 0, from = 0, seed = 1, dir = "",
                  trainer = "", auditor = "", judge = "", remote = false, json = ""}

function M.parse_args(args)
  local a = vt.args(defaults, args)
  local function window_name(w)
    if scenarios.windows[w] == nil then error("unknown window '" .. w .. "' (valid: paper, tight, calibrated)", 0) end
    return w
  end
  local function count(key)
    local v = a[key]
    if v ~= math.floor(v) or v < 0 then error("argument " .. key .. "=" .. v .. ": " .. key .. " must be a whole number (0: the setup's)", 0) end
    return v > 0 and v or nil
  end
  if scenarios.setups[a.setup] == nil then error("unknown setup '" .. a.setup .. "' (valid: mnist, tiny)", 0) end
  local options = {setup = a.setup, window = window_name(a.window), seed = a.seed, remote = a.remote, profiles = {},
                   steps = count("steps"), k = count("k"), from_step = count("from")}
  if #a.windows > 0 then
    local list = a.windows
    if #list == 1 and list[1] == "all" then list = scenarios.window_names end
    options.windows = {}
    for _, w in ipairs(list) do options.windows[#options.windows + 1] = window_name(w) end
  end
  for _, role in ipairs{"trainer", "auditor", "judge"} do
    if a[role] ~= "" then options.profiles[role] = a[role] end
  end
  if a.dir ~= "" then options.dir = a.dir end
  if a.json ~= "" then options.json = a.json end
  return options
end

local function fmt_seconds(v) return v and string.format("%.2f", v) or "-" end
local function fmt_count(v) return v and string.format("%.1f", v) or "-" end

-- Runs the named scenarios (all when `names` is nil) under each window of windows= (or the
-- one of window=), prints a summary of each and a table; returns true if every verdict is
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
  local ctx = scenarios.context(options)
  local list = {}
  for _, s in ipairs(scenarios.list) do
    if names == nil then list[#list + 1] = s.name end
  end
  for _, n in ipairs(names or {}) do list[#list + 1] = scenarios.find(n).name end
  print(string.format("setup %s, %d steps, checkpoint every %d, cheating from step %d (random step %d); profiles: trainer %s, " ..
                      "auditor %s, judge %s%s; windows %s",
                      options.setup or "mnist", ctx.steps, ctx.k, ctx.from_step, ctx.random_step, ctx.profiles.trainer,
                      ctx.profiles.auditor, ctx.profiles.judge,
                      ctx.remote and " (auditor and judge in their own processes)" or "", table.concat(windows, ", ")))
  local rows, all_ok = {}, true
  for _, window in ipairs(windows) do
    ctx.window = window
    for _, name in ipairs(list) do
      local scenario = scenarios.find(name)
      if #windows == 1 or scenario.window == nil or scenario.window == window then
        local r = scenarios.run(name, ctx)
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
        rows[#rows + 1] = scenarios.row(r)
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
    vt.fs.remove(ctx.dir)
  end
  return all_ok
end

return M
