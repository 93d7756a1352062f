-- Calibration: windows measured across profiles (one of them in its own process) replay
-- exactly on every pair and log far fewer values than the paper's window.
local T = require "vt.test"

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p '" .. tmp .. "'")

local recipe = {kind = "synthetic", size = 512, input_shape = {1, 8, 8}, classes = 4, seed = 3}
local data = vt.game.data(recipe)
local function spec(round, steps)
  return vt.spec{model = vt.models.mlp{input_shape = {1, 8, 8}, hidden = {32, 16}, classes = 4}, data = data,
                 optim = vt.optim.sgd{lr = 0.05, momentum = 0.9}, batch = 16, steps = steps or 30, seed = 1,
                 checkpoint_every = 5, round = round}
end

local s = T.suite("calibrate")
local cal
s:test("windows per boundary from the divergence of three profiles", function()
  -- The floor sits far below FP64 rounding error (2^-56 against 2^-53), so a boundary where
  -- profiles differ is measured on any CPU, not only where the divergence happens to be large.
  local floor = 2 ^ -56
  cal = vt.calibrate{spec = spec{bits = 32, band = 0.25}, data = recipe, profiles = {"native", "splitk4", "nofma"},
                     steps = 4, floor = floor}
  T.assert_eq(cal.replay_problems, 0)
  local fwd = cal.boundaries["fc0:fwd"]
  T.assert_eq(fwd.kind, "fwd")
  T.assert_true(fwd.calls == 2 * 4, "two other profiles, four steps: " .. fwd.calls)
  T.assert_true(fwd.differ > 0, "profiles differ on fc0:fwd")
  T.assert_true(fwd.max_rel > 0, "a measured relative divergence")
  T.assert_eq(fwd.alpha, 8 * fwd.max_rel)
  T.assert_eq(cal.round.boundaries["fc0:fwd"].alpha, fwd.alpha)
  T.assert_eq(cal.round.boundaries["fc0:fwd"].band, 0)
  T.assert_eq(fwd.reason, "measured")
  T.assert_false(fwd.exact_by_construction)
  -- The optimizer's outputs are the same everywhere by construction: exact windows.
  for _, name in ipairs{"fc0.weight:update", "fc0.weight:momentum", "fc0.bias:update"} do
    local upd = cal.boundaries[name]
    T.assert_eq(upd.differ, 0, name)
    T.assert_true(upd.exact_by_construction, name)
    T.assert_eq(upd.reason, "exact", name)
    T.assert_eq(cal.round.boundaries[name], {band = 0, alpha = 0})
  end
  -- The per-kind default (boundaries calibration never saw) is never exact.
  T.assert_eq(cal.round.update, {band = 0, alpha = floor})
  -- The measurements travel as JSON (for a run's metadata).
  local j = vt.json.decode(cal:json())
  T.assert_eq(j.boundaries["fc0:fwd"].alpha, fwd.alpha)
end)

s:test("only the optimizer's outputs of parameters with a gradient boundary are exact by construction", function()
  local exact = require("vt.calibrate").exact_by_construction
  local params = {["fc.weight"] = true, ["bn1.weight"] = true}
  for _, name in ipairs{"fc.weight:update", "fc.weight:momentum", "fc.weight:exp_avg", "fc.weight:exp_avg_sq",
                        "bn1.weight:update"} do
    T.assert_true(exact(name, params), name)
  end
  for _, name in ipairs{"bn1.running_mean:update", "bn1.running_var:update", "bn1.num_batches_tracked:update",
                        "fc.weight:grad", "fc:fwd", "fc:bwd", "fc.weight:state", "fc.weight", "loss", "other.weight:update"} do
    T.assert_false(exact(name, params), name)
  end
end)

s:test("batch-norm running statistics get at least the floor, even with no divergence measured", function()
  -- ResNet-18 at width 4: 20 batch norms, 40 running-statistics boundaries. In 3 steps over
  -- two profiles most of them show no divergence at all (an exact window before issue 13),
  -- yet their batch statistics are sums in each profile's order.
  local rrecipe = {kind = "synthetic", size = 256, input_shape = {1, 8, 8}, classes = 4, seed = 3}
  local rdata = vt.game.data(rrecipe)
  local function rspec(round, steps)
    return vt.spec{model = vt.models.resnet{depth = 18, width = 4, in_channels = 1, classes = 4}, data = rdata,
                   optim = vt.optim.sgd{lr = 0.05, momentum = 0.9}, batch = 8, steps = steps, seed = 1,
                   checkpoint_every = 3, round = round}
  end
  local c = vt.calibrate{spec = rspec({bits = 32, band = 0.25}, 3), data = rdata, profiles = {"native", "splitk4"}, steps = 3}
  T.assert_eq(c.replay_problems, 0)
  -- The windows first (what the trainer logs), then why each boundary got its window.
  local running, quiet, optimizer = 0, 0, 0
  for name, b in pairs(c.boundaries) do
    local w = c.round.boundaries[name]
    if name:match("%.running_%a+:update$") then
      running = running + 1
      T.assert_true(w.alpha >= 2 ^ -48, name .. ": alpha " .. w.alpha)
      if b.differ == 0 then quiet = quiet + 1 end
    elseif b.kind == "update" then
      -- Parameter updates and momentum (batch-norm weights and biases included) stay exact.
      optimizer = optimizer + 1
      T.assert_eq(w, {band = 0, alpha = 0}, name)
    end
  end
  for name, b in pairs(c.boundaries) do
    local w = c.round.boundaries[name]
    if name:match("%.running_%a+:update$") then
      T.assert_eq(b.kind, "update")
      T.assert_false(b.exact_by_construction, name)
      if b.differ == 0 then
        T.assert_eq(b.reason, "floor", name)
        T.assert_eq(w, {band = 0, alpha = 2 ^ -48})
      end
    elseif b.kind == "update" then
      T.assert_true(b.exact_by_construction, name)
      T.assert_eq(b.reason, "exact", name)
    end
  end
  T.assert_eq(running, 40)
  T.assert_true(quiet > 0, "some running statistics showed no divergence (the case under test)")
  T.assert_eq(optimizer, 2 * 62)  -- 62 parameters: update and momentum
  T.assert_true(c.boundaries["bn1.weight:update"].exact_by_construction)
  -- The windows are valid ones: an auditor on the other profile replays to the same root.
  local calibrated = rspec(c.round, 6)
  local t = vt.trainer{spec = calibrated, data = rdata, store = vt.store.open(tmp .. "/bn-t")}
  local r = t:run{progress = false}
  local a = vt.auditor{spec = calibrated, data = rdata, logs = t, profile = "splitk4", store = vt.store.open(tmp .. "/bn-a")}
  local ra = a:run{progress = false}
  T.assert_eq(ra.root, r.root)
  T.assert_eq(ra.illegitimate, 0)
end)

s:test("two passes (update-kind boundaries apart) measure the same windows", function()
  local two = vt.calibrate{spec = spec{bits = 32, band = 0.25}, data = recipe, profiles = {"native", "splitk4", "nofma"},
                           steps = 4, passes = 2, floor = cal.floor}
  T.assert_eq(two.round, cal.round)
  T.assert_error(function() vt.calibrate{spec = spec{bits = 32}, data = data, passes = 3} end, "'passes' must be 1 or 2, got 3")
end)

s:test("calibrated windows replay exactly on every pair and log a small fraction of what the paper's window logs", function()
  local calibrated = spec(cal.round)
  local paper = spec{bits = 32, band = 0.25}
  local roots, logged = {}, {}
  for _, p in ipairs{"native", "splitk4", "blocked"} do
    local t = vt.trainer{spec = calibrated, data = data, store = vt.store.open(tmp .. "/t-" .. p), profile = p,
                         metadata = cal:json()}
    local r = t:run{progress = false}
    roots[p], logged[p] = r.root, r.logged / r.elements
    T.assert_eq(vt.json.decode(t:store():run("run"):metadata()).safety, 8)
    for _, q in ipairs{"native", "splitk4", "blocked"} do
      if q ~= p then
        local a = vt.auditor{spec = calibrated, data = data, logs = t, profile = q, store = vt.store.open(tmp .. "/a-" .. p .. "-" .. q)}
        local ra = a:run{progress = false}
        T.assert_eq(ra.root, r.root, p .. " -> " .. q)
        T.assert_eq(ra.illegitimate, 0)
      end
    end
  end
  local pr = vt.trainer{spec = paper, data = data, store = vt.store.open(tmp .. "/paper")}:run{progress = false}
  T.assert_true(logged.native < 0.01 * (pr.logged / pr.elements),
                string.format("calibrated %.3g vs paper %.3g", logged.native, pr.logged / pr.elements))
end)

s:test("calibration replays under its own window, whatever windows the spec has", function()
  -- The measured windows replace the spec's, so the spec's windows must not change them: a
  -- spec with the exact window everywhere (which replays nothing) measures what the paper's
  -- window measures, under the default replay window.
  local exact = vt.calibrate{spec = spec{bits = 32, band = 0, alpha = 0}, data = data, profiles = {"native", "splitk4"},
                             steps = 3, floor = cal.floor}
  local paper = vt.calibrate{spec = spec{bits = 32, band = 0.25}, data = data, profiles = {"native", "splitk4"},
                             steps = 3, floor = cal.floor}
  T.assert_eq(exact.round, paper.round)
  T.assert_eq(exact.replay_problems, 0)
  local sp = spec{bits = 32}
  for _, w in ipairs{"paper", {band = 0.5, alpha = 0}, {band = 0.25, alpha = -1}, {band = 0.25}} do
    T.assert_error(function() vt.calibrate{spec = sp, data = data, replay_window = w} end,
                   "'replay_window' must be \"spec\" or {band")
  end
end)

s:test("bad options name what is wrong", function()
  local sp = spec{bits = 32}
  T.assert_error(function() vt.calibrate{spec = sp, data = data, profiles = {"native"}} end, "needs two or more profile names")
  T.assert_error(function() vt.calibrate{spec = sp, data = data, profiles = {"native", "gpu9"}} end, "unknown profile 'gpu9'")
  T.assert_error(function() vt.calibrate{spec = sp, data = data, steps = 0} end, "'steps' must be an integer >= 1")
  T.assert_error(function() vt.calibrate{spec = sp, data = data, saftey = 8} end, "unknown option 'saftey'")
  T.assert_error(function() vt.calibrate{spec = sp, data = data, profiles = {"native", "nofma"}} end,
                 "runs in another process; pass data as a recipe table")
  T.assert_error(function() vt.calibrate{spec = sp, data = data, profiles = {"refblas", "native"}} end,
                 "the first profile ('refblas') is process-level", true)
end)

s:test("an exact window (band 0, alpha 0) logs nothing, ties included", function()
  local exact = spec({bits = 32, band = 0, alpha = 0}, 3)
  local t = vt.trainer{spec = exact, data = data, store = vt.store.open(tmp .. "/exact")}
  local r = t:run{progress = false}
  T.assert_eq(r.logged, 0)
  local a = vt.auditor{spec = exact, data = data, logs = t, profile = "native", store = vt.store.open(tmp .. "/exact-a")}
  T.assert_eq(a:run{progress = false}.root, r.root)
end)

local _, failed = T.run({exit = false})
os.execute("rm -rf '" .. tmp .. "'")
os.exit(failed == 0 and 0 or 1)
