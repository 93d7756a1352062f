-- E6 (paper Table 5): time per training step of plain FP32, plain FP64, the trainer (FP64,
-- rounding, logging, commits) and the auditor (replay), with a checkpoint hashed and stored
-- every k = 5 steps, and the checkpointing cost on its own; the trainer's and auditor's steps
-- that end in a checkpoint (a leaf) are also timed apart from the others, and a second table
-- shows where the trainer's and auditor's step time goes (runner report.times).
--
--   vtrun scripts/experiments/e6_time.lua [models=resnet,gpt] [steps=10] [profile=native] [out=]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({models = "resnet,gpt", steps = 10, profile = "native", out = ""}, arg)
local out = lib.outdir("e6_time", a.out)

-- Where a runner's step time goes (report.times, summed over the timed steps).
local PHASES = {"compute", "boundaries", "prepare", "encode", "commit", "checkpoint"}

-- Mean seconds per step over n timed steps after a warm-up, the means of the steps that
-- end in a checkpoint (step a multiple of k) and of the others, and the summed phases.
local function per_step(runner, n, k)
  runner:step()  -- warm-up
  local total, at_leaf, leaf_steps, other, other_steps = 0, 0, 0, 0, 0
  local phases = {}
  for _, p in ipairs(PHASES) do phases[p] = 0 end
  for _ = 1, n do
    local t0 = vt.clock()
    local r = runner:step()
    local dt = vt.clock() - t0
    for _, p in ipairs(PHASES) do phases[p] = phases[p] + r.times[p] end
    total = total + dt
    if k and r.step % k == 0 then
      at_leaf, leaf_steps = at_leaf + dt, leaf_steps + 1
    else
      other, other_steps = other + dt, other_steps + 1
    end
  end
  return total / n, leaf_steps > 0 and at_leaf / leaf_steps or 0, other_steps > 0 and other / other_steps or 0, phases
end

local header = {"model", "fp32 s", "fp64 s", "trainer s (k=5)", "auditor s (k=5)", "trainer/fp64", "auditor/fp64",
                "trainer/fp32", "checkpoint s", "checkpoint share of trainer", "trainer s, leaf steps",
                "trainer s, other steps", "auditor s, leaf steps", "auditor s, other steps"}
local rows, results, breakdown = {}, {}, {}
local breakdown_header = {"model", "runner", "step s"}
for _, p in ipairs(PHASES) do breakdown_header[#breakdown_header + 1] = p .. " %" end
-- One row of the breakdown: each phase's share of the runner's step time.
local function shares(model, role, seconds, phases)
  local total = 0
  for _, p in ipairs(PHASES) do total = total + phases[p] end
  local row = {model, role, seconds}
  for _, p in ipairs(PHASES) do row[#row + 1] = string.format("%.1f", 100 * phases[p] / total) end
  breakdown[#breakdown + 1] = row
end
for model in a.models:gmatch("[^,]+") do
  local s = lib.setup(model)
  local tmp = lib.tmpdir()
  local n = a.steps
  local spec = lib.spec(s, n + 1, {bits = 32, band = 0.25}, {checkpoint_every = 5})
  local fp32 = per_step(vt.trainer{spec = spec, data = s.data, mode = "fp32", profile = a.profile}, n)
  local fp64 = per_step(vt.trainer{spec = spec, data = s.data, mode = "fp64", profile = a.profile}, n)
  local t = vt.trainer{spec = spec, data = s.data, store = vt.store.open(tmp .. "/t"), profile = a.profile}
  local trainer, trainer_leaf, trainer_other, trainer_phases = per_step(t, n, 5)
  local u = vt.auditor{spec = spec, data = s.data, logs = t, store = vt.store.open(tmp .. "/u"), profile = a.profile}
  local auditor, auditor_leaf, auditor_other, auditor_phases = per_step(u, n, 5)
  shares(model, "trainer", trainer, trainer_phases)
  shares(model, "auditor", auditor, auditor_phases)
  -- Checkpointing alone: canonical encoding, SHA-256 and one store batch, as at every leaf.
  local store = vt.store.open(tmp .. "/c")
  local run = store:create_run("c", {spec = spec:canonical(), checkpoint_every = 1, steps = 6})
  local bytes = t:checkpoint()
  run:put_checkpoint(0, bytes)
  local t0 = vt.clock()
  for i = 1, 5 do
    run:write_step(i, {})
    run:put_checkpoint(i, bytes)
  end
  local checkpoint = (vt.clock() - t0) / 5
  rows[#rows + 1] = {model, fp32, fp64, trainer, auditor, trainer / fp64, auditor / fp64, trainer / fp32, checkpoint,
                     (checkpoint / 5) / trainer, trainer_leaf, trainer_other, auditor_leaf, auditor_other}
  results[model] = {trainer_over_fp64 = trainer / fp64, auditor_over_fp64 = auditor / fp64, checkpoint_bytes = #bytes}
  vt.fs.remove(tmp)
end
print("machine: " .. lib.machine())
print(string.format("E6: seconds per step (%d timed steps after a warm-up), profile %s, %d threads", a.steps, a.profile, vt.threads()))
lib.table(header, rows)
lib.csv(out .. "/e6_time.csv", header, rows)
print("E6: where the verified step's time goes (report.times; compute = the model's arithmetic, magnitudes, the optimizer;")
print("boundaries = rounding or replay, classification, log records, trace; prepare = reading and decoding the records to")
print("replay; encode = the step's records; commit = the store write; checkpoint = encode, hash, store at leaf steps)")
lib.table(breakdown_header, breakdown)
lib.csv(out .. "/e6_breakdown.csv", breakdown_header, breakdown)
print(vt.json.encode{experiment = "E6", results = results})
