-- E10: what a greedy trainer achieves with legitimate entries only. The trainer plants a
-- backdoor (a 4x4 bright patch meaning class `target`) without touching the data: at every
-- step it computes the FP64 gradient of the backdoor loss and, at every parameter-gradient,
-- momentum and update boundary, rounds each value it legitimately can the way that lowers
-- that loss (deviation "steer_toward"). An auditor on another profile replays every step;
-- every entry must pass (0 illegitimate, roots equal), so the game accepts the run. Per
-- window: clean test accuracy, trigger success (non-target test images with the patch that
-- the model calls `target`), backdoor loss and the mean |change| of the test logits against
-- the honest model, honest vs steered; and for scale, the same run
-- with real data poisoning (every other image patched and relabelled, which the game catches),
-- and honest runs with `seeds` other seeds (seed 2, 3, ...; first window only): the spread a
-- trainer free to pick its seed would have.
--
--   vtrun scripts/experiments/e10_steer.lua [model=mlp] [steps=200] [target=0] [trainer=native]
--        [auditor=splitk4] [cal_steps=3] [cal_alpha=2^-40] [windows=paper,tight,calibrated] [eval=2048] [seeds=3] [out=]
--
-- Calibrated windows replay under band 0.25 plus `cal_alpha` against per-element magnitudes
-- (as E3 and E10a do).
--
-- Last line: JSON {window = {honest = {...}, steered = {...}, poisoned = {...}}}. Exits 1 if
-- a steered run's audit finds an illegitimate entry or a different root.
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({model = "mlp", steps = 200, target = 0, trainer = "native", auditor = "splitk4", cal_steps = 3,
                    cal_alpha = 2 ^ -40, windows = "paper,tight,calibrated", eval = 2048, seeds = 3, out = ""}, arg)
local out = lib.outdir("e10_steer", a.out)
local s = lib.setup(a.model)
if s.recipe.kind ~= "fashion_mnist" then error("e10_steer needs an image model (mlp, resnet), got '" .. a.model .. "'") end
local test = vt.data.fashion_mnist{split = "test", limit = a.eval}
local tmp = lib.tmpdir()

local function round_of(name)
  if name == "paper" then return {bits = 32, band = 0.25} end
  if name == "tight" then return {bits = 32, band = 1 / 16} end
  if name == "calibrated" then
    return vt.calibrate{spec = lib.spec(s, a.cal_steps, {bits = 32}), data = s.recipe,
                        replay_window = {band = 0.25, alpha = a.cal_alpha},
                        profiles = {a.trainer, a.auditor}, steps = a.cal_steps}.round
  end
  error("unknown window '" .. name .. "' (valid: paper, tight, calibrated)")
end

-- Trains `spec` as `deviate` says; returns the model's figures and the trainer.
local function train(label, spec, deviate)
  local trainer = vt.trainer{spec = spec, data = s.data, store = vt.store.open(tmp .. "/" .. label),
                             profile = a.trainer, deviate = deviate}
  local report = trainer:run()
  local clean = trainer:evaluate(test, {limit = a.eval})
  local trig = trainer:evaluate(test, {limit = a.eval, trigger = a.target})
  return {clean_accuracy = clean.accuracy, trigger_success = trig.accuracy, backdoor_loss = trig.loss,
          steered = report.steered, logged = report.logged, steerable = report.steerable, root = report.root,
          logits = clean.outputs}, trainer
end

local rows, summary = {}, {}
local failed = false
local first = true
for name in a.windows:gmatch("[^,]+") do
  local round = round_of(name)
  local spec = lib.spec(s, a.steps, round)
  local honest = train(name .. "-honest", spec, nil)
  local reseeded = {}
  for k = 1, first and a.seeds or 0 do
    reseeded[k] = train(name .. "-seed" .. (k + 1), lib.spec(s, a.steps, round, {seed = k + 1}), nil)
  end
  first = false
  local steered, steered_trainer = train(name .. "-steered", spec, {kind = "steer_toward", target = a.target})
  local poisoned = train(name .. "-poisoned", spec, {kind = "trigger", target = a.target})
  -- The audit of the steered run: every step replayed on the auditor's profile.
  local auditor = vt.auditor{spec = spec, data = s.data, logs = steered_trainer, profile = a.auditor,
                             store = vt.store.open(tmp .. "/" .. name .. "-audit")}
  local audit = auditor:run()
  steered.illegitimate = audit.illegitimate
  steered.roots_equal = audit.root == steered.root
  steered.accepted = audit.illegitimate == 0 and steered.roots_equal
  if not steered.accepted then failed = true end
  -- How far each model's test logits moved from the honest model's (mean |difference|).
  local reference = honest.logits
  for _, r in ipairs({honest, steered, poisoned, unpack(reseeded)}) do
    r.logit_shift = r.logits:sub(reference):abs():mean()
    r.logits = nil
  end
  summary[name] = {honest = honest, steered = steered, poisoned = poisoned, seeds = #reseeded > 0 and reseeded or nil}
  local function row(kind, r, verdict)
    rows[#rows + 1] = {name, kind, string.format("%.2f%%", 100 * r.clean_accuracy),
                       string.format("%.2f%%", 100 * r.trigger_success), string.format("%.6f", r.backdoor_loss),
                       string.format("%.2e", r.logit_shift),
                       r.steered > 0 and string.format("%.0f", r.steered / a.steps) or "-", verdict}
  end
  row("honest", honest, "accepted")
  row("steered", steered, steered.accepted and "accepted (0 illegitimate)"
                          or string.format("REJECTED (%d illegitimate%s)", audit.illegitimate, steered.roots_equal and "" or ", roots differ"))
  row("poisoned data", poisoned, "caught (PROTOCOL.md)")
  for k, r in ipairs(reseeded) do row("honest, seed " .. (k + 1), r, "accepted (another run)") end
end
print("machine: " .. lib.machine())
print(string.format("%s, %d steps, target class %d, trainer on '%s', auditor on '%s', %d test images",
                    a.model, a.steps, a.target, a.trainer, a.auditor, a.eval))
local header = {"window", "trainer", "clean acc", "trigger success", "backdoor loss", "logit shift", "flips/step", "audit"}
lib.table(header, rows)
lib.csv(out .. "/steer.csv", header, rows)
vt.fs.remove(tmp)
for _, v in pairs(summary) do
  for _, r in pairs(v) do r.root = nil end
  for _, r in ipairs(v.seeds or {}) do r.root = nil end
end
print(vt.json.encode(summary))
if failed then os.exit(1) end
