-- vt.calibrate: logging windows measured per boundary (ROUNDING.md, "Calibration").
--
--   local cal = vt.calibrate{spec = spec, data = data, profiles = {"native", "splitk4", "nofma"}, steps = 10}
--   local calibrated = vt.spec{..., round = cal.round}        -- the windows go into the spec
--   vt.trainer{spec = calibrated, ..., metadata = cal:json()} -- the measurements into the store
--
-- A trainer runs the spec's first `steps` steps on the first profile, logging in the replay
-- window (`replay_window`, default band 0.25 plus alpha 2^-40 against per-element magnitudes
-- for every boundary; "spec": the spec's own windows) and keeping every boundary call's FP64
-- input for the step. On each other profile an auditor replays those steps with the
-- trainer's logs (so every boundary sees the same upstream values: the replay window's
-- absolute term covers the cancelled sums a band alone misses, ROUNDING.md "Calibration")
-- and compares its own inputs with the trainer's as they happen. Per boundary, the largest
-- divergence max|x - x'| / m over calls, steps and profiles (m the value's magnitude, ROUNDING.md
-- "Magnitudes") sets
--   alpha = max(floor, safety * divergence), band = `band` (default 0).
-- A replay window with an absolute term holds the magnitudes of a step in memory; for the
-- largest models (GPT-2 small) replay_window = {band = 0.25, alpha = 0} needs less, and the
-- result's replay_divergence (with a warning) says if that replay left the trainer's values.
-- An update-kind boundary gets the exact window (band 0, alpha 0: values rounded to nearest,
-- nothing logged) only when it is exact by construction (M.exact_by_construction below: the
-- optimizer's new parameters and state, elementwise IEEE arithmetic on values already
-- rounded at earlier boundaries, the same bits on every machine) and its measured divergence
-- is exactly zero, unless `exact_updates = false`. Without this, a learning rate such as 0.05
-- puts about 1% of new weights within 1e-7 spacings of a midpoint (p - lr*m lands on a
-- lattice of 1/80 spacings), and the floor would log them for nothing. Every other boundary
-- gets at least the floor, measured divergence or not: batch-norm running statistics are
-- update-kind too, but they come from batch statistics summed in a profile's order, so a few
-- steps without divergence prove nothing about the next ones. Each measured boundary says
-- why it got its window (`exact_by_construction`, `reason`).
-- Pairs of non-reference profiles are covered too: their divergence is at most the sum of
-- two measured ones, which the safety factor (default 8) covers. Process-level profiles
-- (nofma, refblas) run in a vtrun subprocess under `--profile`; `data` must then be a recipe
-- table ({kind = "fashion_mnist", limit = 4096}, see vt.game.data).
local M = {}

local VALID = {"spec", "data", "profiles", "steps", "safety", "floor", "band", "progress", "dir", "exact_updates", "passes",
               "replay_window"}

local function check_options(options)
  if type(options) ~= "table" then error("vt.calibrate: options must be a table {spec=, data=, profiles=, steps=}", 3) end
  require("vt.util").check_options("vt.calibrate", options, VALID)
  if options.spec == nil then error("vt.calibrate: option 'spec' is required", 3) end
  if options.data == nil then error("vt.calibrate: option 'data' is required (a data set, or a recipe for process-level profiles)", 3) end
  local profiles = options.profiles or {"native", "splitk4", "blocked"}
  if type(profiles) ~= "table" or #profiles < 2 then error("vt.calibrate: option 'profiles' needs two or more profile names", 3) end
  local known = {}
  for _, p in ipairs(vt.profiles()) do known[p.name] = p end
  for _, p in ipairs(profiles) do
    if known[p] == nil then error("vt.calibrate: unknown profile '" .. tostring(p) .. "'", 3) end
  end
  local steps = options.steps or 10
  if type(steps) ~= "number" or steps < 1 or steps ~= math.floor(steps) then
    error("vt.calibrate: option 'steps' must be an integer >= 1", 3)
  end
  local safety, floor, band = options.safety or 8, options.floor or 2 ^ -48, options.band or 0
  local passes = options.passes or 1
  if passes ~= 1 and passes ~= 2 then error("vt.calibrate: option 'passes' must be 1 or 2, got " .. tostring(passes), 3) end
  if not (safety >= 1) then error("vt.calibrate: option 'safety' must be >= 1, got " .. tostring(safety), 3) end
  if not (floor > 0) then error("vt.calibrate: option 'floor' must be > 0, got " .. tostring(floor), 3) end
  if not (band >= 0 and band <= 0.25) then error("vt.calibrate: option 'band' must be in [0, 0.25], got " .. tostring(band), 3) end
  return profiles, known, steps, safety, floor, band, passes
end

-- The b of a boundary: update-kind boundaries round at 32 bits, others at the spec's bits.
local function kind_of(boundary)
  local kind = boundary:match(":([%w_]+)$") or ""
  if kind == "fwd" or kind == "bwd" or kind == "grad" then return kind end
  return "update"
end

-- Exact by construction: what Optimizer::Step (runtime/optim/optimizer.cc) writes for a
-- parameter P, given that P's gradient passed its "P:grad" boundary before the step
-- (runtime/train/engine.cc):
--   P:momentum   buf = momentum * buf + d, d = g (+ weight_decay * p)          (sgd)
--   P:exp_avg    m = beta1 * m + (1 - beta1) * g                               (adamw)
--   P:exp_avg_sq v = beta2 * v + (1 - beta2) * g * g                           (adamw)
--   P:update     p - lr * d (d: the momentum buffer, or g, or Nesterov's d + momentum * buf),
--                or p' - lr * (m / c1) / (sqrt(v / c2) + eps)                  (adamw)
-- Every input is a rounded value (g at P:grad, p at the last P:update or the initial state,
-- the state at its own boundary last step) or a scalar computed the same way everywhere
-- (the schedule with PortableCos, c1/c2 with PowInt), and IEEE +, -, *, /, sqrt are correctly
-- rounded, one ATen operation each (no contraction), so every honest machine sees the same bits. Nothing else is
-- exact by construction: batch-norm running statistics ("bn1.running_mean:update",
-- "bn1.running_var:update") are update-kind but come from profile-ordered sums, and a
-- boundary this rule does not know (a buffer without a gradient, a new kind of state) floors.
local OPTIMIZER_OUTPUTS = {update = true, momentum = true, exp_avg = true, exp_avg_sq = true}

-- True when `boundary` is an optimizer output of a parameter in `parameters` (a set of
-- parameter names: those with a "name:grad" boundary).
function M.exact_by_construction(boundary, parameters)
  local owner, suffix = boundary:match("^(.+):([%w_]+)$")
  return owner ~= nil and OPTIMIZER_OUTPUTS[suffix] == true and parameters[owner] == true
end

-- Adds a step report's divergence_stats (this machine against the reference) to `acc`.
local function add_stats(acc, stats)
  for boundary, d in pairs(stats or {}) do
    local a = acc[boundary]
    if a == nil then
      a = {kind = kind_of(boundary), max_rel = 0, straddles = 0, differ = 0, elements = 0, calls = 0, missing = 0}
      acc[boundary] = a
    end
    if d.max_rel > a.max_rel then a.max_rel = d.max_rel end
    for _, k in ipairs{"straddles", "differ", "elements", "calls", "missing"} do a[k] = a[k] + d[k] end
  end
end

-- A subprocess worker for a process-level profile: replays the reference's steps and
-- compares its own captured inputs with the reference's (read from a safetensors file).
function M.worker()
  local json = vt.json
  local config = json.decode(io.stdin:read("*l"))
  local spec = vt.spec.parse(config.spec)
  local data = require("vt.game").data(config.data)
  local auditor = vt.auditor{spec = spec, data = data, logs = "given", profile = config.profile}
  io.stdout:write(json.encode{ready = true}, "\n")
  io.stdout:flush()
  for line in io.stdin:lines() do
    local request = json.decode(line)
    local ok, result = pcall(function()
      local report = auditor:step(request.records, {compare = vt.safetensors.load(request.capture)})
      local acc = {}
      add_stats(acc, report.divergence_stats)
      return {boundaries = acc, corrections = report.corrections, illegitimate = report.illegitimate + report.log_mismatches,
              divergence = report.divergence}
    end)
    collectgarbage("collect")
    io.stdout:write(json.encode(ok and result or {error = tostring(result)}), "\n")
    io.stdout:flush()
  end
end

local Calibration = {}
Calibration.__index = Calibration

-- The measurements and windows as JSON (for a run's metadata).
function Calibration:json()
  return vt.json.encode{profiles = self.profiles, steps = self.steps, safety = self.safety, floor = self.floor,
                        band = self.band, exact_updates = self.exact_updates, boundaries = self.boundaries,
                        round = self.round}
end

-- The spec with every boundary's window set to `window` ({band =, alpha =}): what the
-- calibration's own runs log and replay under (the measured windows replace it).
local function with_window(spec, window)
  local function num(v) return string.format("%.17g", v) end
  local fields = {}
  for k, v in pairs(spec:fields()) do
    if not k:match("^round%.boundary%.") then fields[k] = v end
  end
  for _, kind in ipairs{"fwd", "bwd", "grad", "update"} do
    fields["round." .. kind .. ".band"] = num(window.band)
    fields["round." .. kind .. ".alpha"] = num(window.alpha)
  end
  local keys = {}
  for k in pairs(fields) do keys[#keys + 1] = k end
  table.sort(keys)
  local lines = {}
  for _, k in ipairs(keys) do lines[#lines + 1] = k .. "=" .. fields[k] .. "\n" end
  return vt.spec.parse(table.concat(lines))
end

local DEFAULT_REPLAY_WINDOW = {band = 0.25, alpha = 2 ^ -40}

function M.calibrate(options)
  local profiles, known, steps, safety, floor, band, passes = check_options(options)
  local window = options.replay_window
  if window == nil then window = DEFAULT_REPLAY_WINDOW end
  if window ~= "spec" and (type(window) ~= "table" or type(window.band) ~= "number" or
                           type(window.alpha) ~= "number" or window.band < 0 or window.band > 0.25 or
                           window.alpha < 0 or window.alpha >= 1) then
    error("vt.calibrate: option 'replay_window' must be \"spec\" or {band = [0, 0.25], alpha = [0, 1)}", 2)
  end
  local spec = window == "spec" and options.spec or with_window(options.spec, window)
  local bits = tonumber(spec:get("round.bits"))
  local active = vt.profile().name
  local function is_local(p) return not known[p].process_level or p == active end
  local reference = profiles[1]
  if not is_local(reference) then
    error("vt.calibrate: the first profile ('" .. reference .. "') is process-level; run under vtrun --profile " ..
          reference .. " or put an in-process profile first", 2)
  end
  local data = options.data
  local dataset = type(data) == "table" and require("vt.game").data(data) or data
  -- Its own fresh directory (inside options.dir when given): it removes only that.
  local dir = vt.fs.tmpdir("calibrate", options.dir)

  local t0 = vt.clock()
  local acc = {}
  local replay_problems = 0
  -- The first boundary where an in-process auditor's rounded values left the trainer's: the
  -- spec's windows did not cover the divergence there, so later boundaries were measured on
  -- other upstream values (overstating them, and refusing exact windows that would hold).
  local replay_divergence
  -- One pass per group of boundary kinds: the reference keeps the FP64 inputs of one step
  -- of those kinds only (passes = 2 keeps update-kind boundaries, as large as the model
  -- several times over, apart from the others).
  local function pass(index, kinds)
    local wanted = {}
    for _, k in ipairs(kinds) do wanted[k] = true end
    local function keep(stats)
      local out = {}
      for name, d in pairs(stats or {}) do
        if wanted[kind_of(name)] then out[name] = d end
      end
      return out
    end
    local store = vt.store.open(dir .. "/reference-" .. index)
    local trainer = vt.trainer{spec = spec, data = dataset, store = store, profile = reference, capture = kinds}
    local run = store:run("run")
    local others = {}
    for i = 2, #profiles do
      local p = profiles[i]
      if is_local(p) then
        others[#others + 1] = {name = p, auditor = vt.auditor{spec = spec, data = dataset, logs = "given", profile = p}}
      else
        if type(data) ~= "table" then
          error("vt.calibrate: profile '" .. p .. "' runs in another process; pass data as a recipe table (see vt.game.data)", 3)
        end
        local child = vt.process.spawn{vt.executable(), "--profile", p, "-e", "require('vt.calibrate').worker()"}
        child:send(vt.json.encode{spec = spec:canonical(), data = data, profile = p, bits = bits})
        local ready, why = child:receive(300)
        if ready == nil then error("vt.calibrate: the worker for profile '" .. p .. "' did not start (" .. why .. ")", 3) end
        others[#others + 1] = {name = p, child = child}
      end
    end
    for step = 1, math.min(steps, tonumber(spec:get("steps"))) do
      local rt = trainer:step()
      local records = run:step(step)
      local capture_path
      for _, o in ipairs(others) do
        if o.auditor then
          local ra = o.auditor:step(records, {compare = rt.captured})
          replay_problems = replay_problems + ra.illegitimate + ra.log_mismatches
          if ra.divergence and replay_divergence == nil then
            replay_divergence = "profile '" .. o.name .. "': " .. ra.divergence
          end
          add_stats(acc, keep(ra.divergence_stats))
        else
          if capture_path == nil then
            capture_path = dir .. "/capture.safetensors"
            vt.safetensors.save(capture_path, rt.captured)
          end
          o.child:send(vt.json.encode{records = records, capture = capture_path})
          local line, why = o.child:receive(3600)
          if line == nil then error("vt.calibrate: the worker for profile '" .. o.name .. "' stopped (" .. why .. ")", 3) end
          local result = vt.json.decode(line)
          if result.error then error("vt.calibrate: worker for profile '" .. o.name .. "': " .. result.error, 3) end
          replay_problems = replay_problems + result.illegitimate
          if result.divergence and replay_divergence == nil then
            replay_divergence = "profile '" .. o.name .. "': " .. result.divergence
          end
          add_stats(acc, keep(result.boundaries))
        end
      end
      -- The captured tensors are large but look small to Lua's collector: free them now.
      rt.captured, rt = nil, nil
      collectgarbage("collect")
      if options.progress then io.stderr:write(string.format("\rcalibrate: pass %d, step %d/%d", index, step, steps)) end
    end
    for _, o in ipairs(others) do
      if o.child then o.child:close_input() o.child:wait(30) end
    end
    store:close()
    trainer, others = nil, nil
    collectgarbage("collect")
  end
  local groups = passes == 2 and {{"fwd", "bwd", "grad"}, {"update"}} or {{"fwd", "bwd", "grad", "update"}}
  local ok, err = pcall(function()
    for i, kinds in ipairs(groups) do pass(i, kinds) end
  end)
  if not ok then
    collectgarbage("collect")  -- close the stores before their directory goes
    vt.fs.remove(dir)
    error(err, 0)
  end
  if options.progress then io.stderr:write("\n") end

  -- Windows: per boundary, and per kind the widest of its boundaries, at least the floor
  -- (for boundaries that did not appear in the calibration steps: never exact).
  local round = {bits = bits, boundaries = {}}
  local by_kind = {}
  local exact_updates = options.exact_updates ~= false
  local parameters = {}  -- parameters with a gradient boundary: the optimizer's inputs
  for boundary in pairs(acc) do
    local owner = boundary:match("^(.+):grad$")
    if owner then parameters[owner] = true end
  end
  for boundary, a in pairs(acc) do
    if a.max_rel == math.huge then
      error("vt.calibrate: boundary '" .. boundary .. "' has values that differ between profiles where " ..
            "its magnitude is 0 (ROUNDING.md \"Magnitudes\"): the op that makes them must offer a " ..
            "magnitude, or they cancel to an exact zero on one profile only", 2)
    end
    a.exact_by_construction = M.exact_by_construction(boundary, parameters)
    a.band = band
    if exact_updates and a.exact_by_construction and a.differ == 0 and a.missing == 0 then
      a.alpha, a.band, a.reason = 0, 0, "exact"
    elseif safety * a.max_rel > floor then
      a.alpha, a.reason = safety * a.max_rel, "measured"
    else
      a.alpha, a.reason = floor, "floor"
    end
    round.boundaries[boundary] = {band = a.band, alpha = a.alpha}
    by_kind[a.kind] = math.max(by_kind[a.kind] or 0, a.alpha)
  end
  for _, kind in ipairs{"fwd", "bwd", "grad", "update"} do
    round[kind] = {band = band, alpha = math.max(floor, by_kind[kind] or 0)}
  end

  vt.fs.remove(dir)
  local self = setmetatable({round = round, boundaries = acc, profiles = profiles, steps = steps, safety = safety,
                             floor = floor, band = band, exact_updates = exact_updates, seconds = vt.clock() - t0,
                             replay_problems = replay_problems, replay_divergence = replay_divergence},
                            Calibration)
  if replay_divergence then
    io.stderr:write("vt.calibrate: warning: the replay left the trainer's values at " .. replay_divergence ..
                    "; calibrate a spec whose windows have an absolute term (e.g. round = {bits = 32, " ..
                    "band = 0.25, alpha = 2^-40}) so that every profile measures the same upstream values\n")
  end
  return self
end

return setmetatable(M, {__call = function(_, options) return M.calibrate(options) end})
